"""The command line's flags of the score families computed through their registry record (the rarity score,
families of installed packages): one flag per family, ``--<name with dashes> [KEY=VALUE ...]``.

Installed packages declare families in the entry-point group :data:`ENTRY_POINT_GROUP`; each entry point is a
callable that registers its families (:func:`lightning_prd.register_family`). :func:`load_entry_points` calls
each once, before the parser is built. A family's flag alone turns it on with its defaults; ``KEY=VALUE``
words set its options (``--rarity k=5``), each value read as a Python literal (``5``, ``0.5``, ``True``,
``None``, ``"text"``) or else kept as text.

Example, in a package's ``pyproject.toml``::

    [project.entry-points."lightning_prd.families"]
    mean_gap = "my_package.scores:register"

then ``lightning-prd evaluate --real R --fake F --mean-gap power=2``.
"""

from __future__ import annotations

import argparse
import ast
import warnings
from typing import Any, Dict, List, Sequence

from lightning_prd.functional.engine.families import Family, record_families

#: the entry-point group of installed packages' score families
ENTRY_POINT_GROUP = "lightning_prd.families"

_loaded: Dict[str, bool] = {}


def load_entry_points() -> List[str]:
    """Call every entry point of :data:`ENTRY_POINT_GROUP` once (a failing one is named in a warning and
    skipped); returns the names called by this call."""
    from importlib.metadata import entry_points

    called = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        key = f"{point.name}={point.value}"
        if key in _loaded:
            continue
        _loaded[key] = True
        try:
            point.load()()
        except Exception as err:  # another package's bug must not stop the command
            warnings.warn(
                f"score family entry point {key!r} ({ENTRY_POINT_GROUP}) failed and is skipped: "
                f"{type(err).__name__}: {err}",
                stacklevel=2,
            )
            continue
        called.append(point.name)
    return called


def _help(family: Family) -> str:
    scores = ", ".join(family.outputs) or "per-sample scores"
    options = ", ".join(f"{k}={v!r}" for k, v in family.defaults.items())
    what = family.meaning or family.name
    return f"add {what} ({scores})" + (f"; KEY=VALUE sets its options: {options}" if options else "")


def add_family_flags(p: argparse.ArgumentParser) -> None:
    """One flag per :func:`record_families` family; a family whose flag the command already has is named in a
    warning and gets none (it stays usable from Python)."""
    taken = {s for action in p._actions for s in action.option_strings}
    for family in record_families():
        if family.flag in taken:
            warnings.warn(
                f"score family {family.name!r} gets no flag: {family.flag} is a flag of the command", stacklevel=2
            )
            continue
        p.add_argument(
            family.flag, nargs="*", default=None, metavar="KEY=VALUE", dest=f"family:{family.name}", help=_help(family)
        )


def _value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_options(flag: str, words: Sequence[str]) -> Dict[str, Any]:
    """``KEY=VALUE`` words as an options dict; ``ValueError`` naming the flag and the word otherwise."""
    options: Dict[str, Any] = {}
    for word in words:
        key, sep, text = word.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag}: expected KEY=VALUE, but got {word!r}")
        options[key.replace("-", "_")] = _value(text)
    return options


def family_switches(args: argparse.Namespace) -> Dict[str, Any]:
    """The switches of the families whose flag was given: ``True`` (its defaults) or its options dict."""
    out: Dict[str, Any] = {}
    for family in record_families():
        words = getattr(args, f"family:{family.name}", None)
        if words is not None:
            out[family.name] = parse_options(family.flag, words) if words else True
    return out
