"""A value the callback refuses, shown first and last when another tool's error ends the program.

LightningCLI (through jsonargparse) builds the callback from a config file; when the callback refuses a value,
jsonargparse wraps the callback's one-line error into a longer one of its own (every type the ``callbacks``
entry could have had, the whole list of callbacks given), printed after a traceback of some 80 lines. When
such an error ends the program, :func:`excepthook` prints the callback's own line before the traceback and again
after it::

    PRDCallback: ValueError: Expected argument `every_n_epochs` to be a positive integer, but got 0
    Traceback (most recent call last):
      ...
    PRDCallback: ValueError: Expected argument `every_n_epochs` to be a positive integer, but got 0

The hook is put in place (once, chained to the hook before it) by the first refusal; it adds nothing to an
error that is the refusal itself (a plain ``PRDCallback(...)`` call: the traceback ends with its line) or that
has nothing to do with a refusal. A refusal caught by the program prints nothing.
"""

from __future__ import annotations

import functools
import sys
from collections import deque
from typing import Any, Callable, Deque, Optional, Tuple, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: the latest refusals: (the line shown, the exception's type, its message); no exception is kept alive
_REFUSED: Deque[Tuple[str, type, str]] = deque(maxlen=8)
_previous: Optional[Callable[..., Any]] = None


def reported(init: F) -> F:
    """Decorate an ``__init__`` whose ``ValueError``/``TypeError`` are refusals of its arguments: each is noted
    (:func:`note`) and raised on."""

    @functools.wraps(init)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *args, **kwargs)
        except (ValueError, TypeError) as err:
            note(type(self).__name__, err)
            raise

    return wrapper  # type: ignore[return-value]


def note(owner: str, err: BaseException) -> None:
    """Remember that ``owner`` refused its arguments with ``err``, and put :func:`excepthook` in place."""
    global _previous
    message = " ".join(str(err).split("\n"))
    _REFUSED.append((f"{owner}: {type(err).__name__}: {message}", type(err), str(err)))
    if _previous is None and sys.excepthook is not excepthook:
        _previous, sys.excepthook = sys.excepthook, excepthook


def refusal_line(exc: BaseException) -> Optional[str]:
    """The line of the refusal that ``exc`` was caused by (its ``__cause__``/``__context__`` chain) or whose
    message it quotes, or None (also when ``exc`` is the refusal itself)."""
    chain, seen = [], set()
    current: Optional[BaseException] = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or current.__context__
    for line, cls, message in reversed(_REFUSED):
        if isinstance(exc, cls) and str(exc) == message:
            return None
        if any(isinstance(e, cls) and str(e) == message for e in chain[1:]) or (message and message in str(exc)):
            return line
    return None


def excepthook(exc_type: type, exc: BaseException, tb: Any) -> None:
    """``sys.excepthook``: the refusal's line (:func:`refusal_line`), the hook before this one, the line again."""
    line = refusal_line(exc)
    if line is not None:
        print(line, file=sys.stderr, flush=True)
    (_previous or sys.__excepthook__)(exc_type, exc, tb)
    if line is not None:
        print(line, file=sys.stderr, flush=True)
