"""The callables a pickle of plain data may name, each taking only the arguments plain data needs.

A pickle calls the globals it names with arguments of its own choosing, so allowing a name is not
enough: ``builtins.bytearray(700_000_000)`` is a 30-byte pickle that allocates 670 MiB, and
``numpy.ndarray((1048576, 8))`` one that returns 64 MiB of uninitialised memory as an array. Here
each allowed global is replaced by a stand-in that checks its arguments first and refuses with
:class:`RefusedCall` (naming the global and the arguments) before anything is allocated:

* ``numpy.ndarray`` is only an argument of NumPy's ``_reconstruct``; calling it is refused.
* ``multiarray._reconstruct`` builds only the empty array NumPy's own pickles start from; its
  values then come from the file's bytes through ``ndarray.__setstate__``, which checks that the
  bytes fill the declared shape (``numeric._frombuffer``, protocol 5, views the file's bytes too).
* ``builtins.bytearray`` copies bytes or latin-1 text, never allocates a size; ``set``,
  ``frozenset`` and ``collections.OrderedDict`` take a list, tuple, set or dict; ``numpy.dtype``
  takes a type string; ``multiarray.scalar`` a dtype and its bytes; ``builtins.bytes`` nothing
  (protocols 0 to 2 write the empty ``bytes`` as that call).

A call copies each value of the file at most once (:class:`Copies`), so a pickle that names one large
value many times through its memo cannot multiply it. Reading a file then costs memory in proportion
to its size.
"""

from __future__ import annotations

import collections
import math
import pickle
import reprlib
from typing import Any, Callable, Dict, NoReturn, Optional

import numpy as np

#: a value this long or shorter may be copied more than once (CPython shares short strings and bytes)
SMALL = 64

_short = reprlib.Repr()
_short.maxstring = _short.maxother = 40
_short.maxlist = _short.maxtuple = 4


class RefusedGlobal(pickle.UnpicklingError):
    """A pickle named a Python global that plain data does not need; its message is ``module.name``."""

    def __init__(self, qualname: str, message: str = "") -> None:
        super().__init__(message or qualname)
        self.qualname = qualname


class RefusedCall(RefusedGlobal):
    """A pickle called an allowed global with arguments plain data never passes; :attr:`why` says which."""

    def __init__(self, qualname: str, why: str) -> None:
        super().__init__(qualname, f"{qualname} {why}")
        self.why = why


def arguments(args: tuple) -> str:
    """``args`` as a short call, e.g. ``(700000000)``."""
    return "(" + ", ".join(_short.repr(a) for a in args) + ")"


class Copies:
    """What the calls of one pickle have copied, and the first call refused (:meth:`refuse`).

    A pickle of plain data copies each of its values once: a value longer than :data:`SMALL` that a
    second call would copy again (named twice through the memo) is refused, so the copies add up to
    at most what the file holds.
    """

    def __init__(self) -> None:
        self.copied: Dict[int, Any] = {}  # id -> the value, kept so that its id stays its own
        self.refused: Optional[RefusedCall] = None

    def refuse(self, qualname: str, why: str) -> NoReturn:
        """Raise :class:`RefusedCall`, kept in :attr:`refused` too (torch's loader replaces the exception)."""
        self.refused = self.refused or RefusedCall(qualname, why)
        raise self.refused

    def copy(self, qualname: str, value: Any) -> None:
        """Record that ``value`` is copied; refuse a second copy of a value longer than :data:`SMALL`."""
        if len(value) <= SMALL:
            return
        if id(value) in self.copied:
            self.refuse(
                qualname,
                f"called again on the same {type(value).__name__} of length {len(value):,}: a pickle of plain data "
                "copies each of its values once",
            )
        self.copied[id(value)] = value

    def check(self, ok: bool, qualname: str, args: tuple, needs: str) -> None:
        if not ok:
            self.refuse(qualname, f"called with {arguments(args)}; it takes {needs} only")


def _array_type(copies: Copies) -> type:
    class NumpyArrayType:
        """``numpy.ndarray`` as a pickle names it: an argument of ``_reconstruct``, never called or instantiated."""

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            copies.refuse(
                "numpy.ndarray",
                f"called with {arguments(args)}: an array of a plain-data pickle is built by NumPy's _reconstruct "
                "and __setstate__ from the file's bytes, never allocated by its shape",
            )

    return NumpyArrayType


class EasyDict(dict):
    """NVlabs' ``dnnlib.EasyDict`` (a dict with attribute access) read as a plain dict, filled item by item."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args or kwargs:
            why = f"called with {arguments(args)}: a pickled dict is filled item by item"
            raise RefusedCall("dnnlib.EasyDict", why)
        super().__init__()


def _is_bytes(value: Any) -> bool:
    return isinstance(value, (bytes, bytearray))


def _reconstruct(qualname: str, real: Callable[..., Any], copies: Copies, array_type: type) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        shape = args[1] if len(args) == 3 else None
        empty = isinstance(shape, tuple) and all(type(n) is int and n >= 0 for n in shape) and math.prod(shape) == 0
        copies.check(
            len(args) == 3 and args[0] is array_type and empty,
            qualname,
            args,
            "numpy.ndarray and an empty shape (NumPy pickles an array as an empty one and its bytes)",
        )
        return real(np.ndarray, shape, args[2])

    return call


def _scalar(qualname: str, real: Callable[..., Any], copies: Copies) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        dtype = args[0] if args else None
        ok = isinstance(dtype, np.dtype) and len(args) == 2
        ok = ok and (dtype.hasobject or (_is_bytes(args[1]) and len(args[1]) == dtype.itemsize))  # type: ignore[union-attr]
        copies.check(ok, qualname, args, "a dtype and the scalar's bytes")
        if not dtype.hasobject:  # type: ignore[union-attr]
            copies.copy(qualname, args[1])
        return real(*args)

    return call


def _dtype(qualname: str, copies: Copies) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        ok = 1 <= len(args) <= 3 and isinstance(args[0], str) and len(args[0]) <= 64
        copies.check(ok and all(isinstance(a, (bool, int)) for a in args[1:]), qualname, args, "a type string")
        return np.dtype(*args)

    return call


def _latin1_bytes(qualname: str, copies: Copies) -> Callable[..., Any]:
    """``_codecs.encode`` as protocol-2 pickles use it for ``bytes`` (latin-1 text); no other codec."""

    def call(*args: Any) -> Any:
        ok = len(args) in (1, 2) and isinstance(args[0], str) and args[1:] in ((), ("latin1",), ("latin-1",))
        copies.check(ok, qualname, args, "text and the codec 'latin1'")
        copies.copy(qualname, args[0])
        return args[0].encode("latin1")

    return call


def _bytearray(qualname: str, copies: Copies) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        text = len(args) == 2 and isinstance(args[0], str) and args[1] in ("latin1", "latin-1")
        copies.check(args == () or text or (len(args) == 1 and _is_bytes(args[0])), qualname, args, "bytes or text")
        if args:
            copies.copy(qualname, args[0])
        return bytearray(*args)

    return call


def _empty_bytes(qualname: str, copies: Copies) -> Callable[..., Any]:
    """``bytes()``: how protocols 0 to 2 pickle an empty ``bytes`` (an empty array's data); never a size."""

    def call(*args: Any) -> Any:
        copies.check(args == (), qualname, args, "no arguments (the empty bytes)")
        return b""

    return call


def _copy_of(qualname: str, kind: Callable[..., Any], copies: Copies) -> Callable[..., Any]:
    """``set``, ``frozenset`` or ``OrderedDict`` of a container the pickle holds, copied once."""

    def call(*args: Any) -> Any:
        ok = args == () or (len(args) == 1 and isinstance(args[0], (list, tuple, set, frozenset, dict)))
        copies.check(ok, qualname, args, "a list, tuple, set or dict")
        if args:
            copies.copy(qualname, args[0])
        return kind(*args)

    return call


def numpy_helpers() -> Dict[str, Any]:
    """NumPy's pickling helpers, taken from live objects (no import by name): ``_reconstruct``, ``scalar``,
    ``_frombuffer``."""
    return {
        "_reconstruct": np.zeros(1).__reduce__()[0],
        "scalar": np.float64(0).__reduce__()[0],
        "_frombuffer": np.zeros(1).__reduce_ex__(5)[0],  # protocol 5 stores an array's bytes as one buffer
    }


def checked_globals(copies: Copies, feature_stats: type) -> Dict[str, Any]:
    """Every global a pickle of plain data may name, ``"module.name"`` -> its checking stand-in.

    ``feature_stats`` stands in for NVlabs' ``metrics.metric_utils.FeatureStats``.
    """
    numpy = numpy_helpers()
    array_type = _array_type(copies)
    out: Dict[str, Any] = {"numpy.ndarray": array_type, "numpy.dtype": _dtype("numpy.dtype", copies)}
    for core in ("numpy.core", "numpy._core"):
        name = f"{core}.multiarray._reconstruct"
        out[name] = _reconstruct(name, numpy["_reconstruct"], copies, array_type)
        out[f"{core}.multiarray.scalar"] = _scalar(f"{core}.multiarray.scalar", numpy["scalar"], copies)
        out[f"{core}.numeric._frombuffer"] = numpy["_frombuffer"]  # a view of the file's bytes, checked by NumPy
    for module in ("builtins", "__builtin__"):
        out[f"{module}.bytearray"] = _bytearray(f"{module}.bytearray", copies)
        out[f"{module}.set"] = _copy_of(f"{module}.set", set, copies)
        out[f"{module}.frozenset"] = _copy_of(f"{module}.frozenset", frozenset, copies)
        out[f"{module}.complex"] = complex
        out[f"{module}.bytes"] = _empty_bytes(f"{module}.bytes", copies)
    out["_codecs.encode"] = _latin1_bytes("_codecs.encode", copies)
    out["collections.OrderedDict"] = _copy_of("collections.OrderedDict", collections.OrderedDict, copies)
    out["dnnlib.EasyDict"] = out["dnnlib.util.EasyDict"] = EasyDict
    out["metrics.metric_utils.FeatureStats"] = feature_stats
    return out
