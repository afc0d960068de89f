"""The command line's flags of the score families computed through their registry record (the rarity score,
families of installed packages): one flag per family, ``--<name with dashes> [KEY=VALUE ...]``.

Installed packages declare families in the entry-point group :data:`ENTRY_POINT_GROUP`; each entry point is a
callable that registers its families (:func:`lightning_prd.register_family`).
:func:`~lightning_prd.functional.engine.families.load_entry_points` calls each once, before the parser is built
(in Python, the first time an unknown family is asked for). A family's flag alone turns it on with its
defaults; ``KEY=VALUE`` words set its options (``--rarity k=5``), each value read as a Python literal (``5``,
``0.5``, ``True``, ``None``, ``"text"``) or else kept as text.

Example, in a package's ``pyproject.toml``::

    [project.entry-points."lightning_prd.families"]
    mean_gap = "my_package.scores:register"

then ``lightning-prd evaluate --real R --fake F --mean-gap power=2``.
"""

from __future__ import annotations

import argparse
import ast
import warnings
from typing import Any, Dict, Sequence

from lightning_prd.functional.engine.families import ENTRY_POINT_GROUP, Family, load_entry_points, switch_families

__all__ = ["ENTRY_POINT_GROUP", "add_family_flags", "family_switches", "load_entry_points", "parse_options"]


def _help(family: Family) -> str:
    scores = ", ".join(family.outputs) or "per-sample scores"
    options = ", ".join(f"{k}={v!r}" for k, v in family.defaults.items())
    what = family.meaning or family.name
    return f"add {what} ({scores})" + (f"; KEY=VALUE sets its options: {options}" if options else "")


def add_family_flags(p: argparse.ArgumentParser) -> None:
    """One flag per :func:`record_families` family; a family whose flag the command already has is named in a
    warning and gets none (it stays usable from Python)."""
    taken = {s for action in p._actions for s in action.option_strings}
    for family in switch_families():
        if family.builtin and family.flag in taken:
            continue
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
    """The switches of the families whose flag was given: ``True`` (its defaults) or its options dict, each
    checked by its family (``ValueError`` naming the flag)."""
    out: Dict[str, Any] = {}
    for family in switch_families():
        words = getattr(args, f"family:{family.name}", None)
        if words is not None:
            out[family.name] = parse_options(family.flag, words) if words else True
            try:
                family.options(out[family.name])
            except ValueError as err:
                raise ValueError(f"{family.flag}: {err}") from None
    return out
