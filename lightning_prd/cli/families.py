"""The command line's score-family flags, generated from the family registry: one loop over the records
(:func:`~lightning_prd.functional.engine.families.switch_families`) adds the flags, and one reads them back as the
switches of :class:`~lightning_prd.GenerativeMetrics`.

Each switchable family with a scalar score (:func:`flag_families`; its record's
:class:`~lightning_prd.functional.engine.family.CliSpec` ``cli``) gets:

* its flag, ``--<keyword with dashes>``: a valued family takes its value (``--k-precision-recall 3``), the others
  ``--<name> [KEY=VALUE ...]`` (the flag alone: its defaults; ``KEY=VALUE`` words set options, each value read as
  a Python literal, ``5``, ``0.5``, ``True``, ``None``, ``"text"``, or else kept as text);
* ``--no-<name>`` when it is on by default in ``evaluate`` (``cli.on``);
* one flag per option in ``cli.flags`` (``--prd-clusters``), checked by the record when parsed;
* ``--seed`` as its ``seed`` option when ``cli.seeded``, and the options of ``cli.linked`` from another flag's
  value (α-precision's ``k`` from ``--k-density-coverage``).

Every value is checked by the family's record; an error names the flag and the option. Each of these flags is
recorded when given (``args.given_flags``: the protocol and ``--only`` rules read them). A switch's state on the
Namespace (attribute: the family's keyword) is None (not given: on when ``cli.on``), ``False`` (``--no-<name>``),
the list of ``KEY=VALUE`` words (its flag given) or an options dict (set by a protocol); a valued family's is its
value (None: off).

Installed packages declare families in the entry-point group :data:`ENTRY_POINT_GROUP`; each entry point is a
callable that registers its families (:func:`lightning_prd.register_family`);
:func:`~lightning_prd.functional.engine.families.load_entry_points` calls each once, before the parser is built.

Example, in a package's ``pyproject.toml``::

    [project.entry-points."lightning_prd.families"]
    mean_gap = "my_package.scores:register"

then ``lightning-prd evaluate --real R --fake F --mean-gap power=2``.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import re
import textwrap
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

from lightning_prd.cli.recorded import Recorded, record
from lightning_prd.functional.engine.families import (
    ENTRY_POINT_GROUP,
    Family,
    families,
    load_entry_points,
    switch_families,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "add_family_flags",
    "brought_by",
    "family_flags",
    "flag_families",
    "flags_table",
    "family_switches",
    "given_family_flags",
    "held_out_flags",
    "load_entry_points",
    "no_flag",
    "parse_options",
    "resolve_switches",
    "scores_epilog",
]


def no_flag(family: Family) -> str:
    """``--no-<name with dashes>``: the flag that switches off a family on by default in ``evaluate``."""
    return "--no-" + family.name.replace("_", "-")


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def flag_families() -> List[Family]:
    """The families with flags: the switchable ones with a scalar score (the table and ``--json`` show scalar
    scores; a family of per-sample scores alone, the realism score, has nothing to show and gets no flag)."""
    return [family for family in switch_families() if family.outputs]


def family_flags(family: Family) -> List[str]:
    """Every flag of ``family``: its own, ``--no-<name>`` (when on by default) and its option flags."""
    return [family.flag, *([no_flag(family)] if family.cli.on else []), *family.cli.flags]


# ---------------------------------------------------------------------------- parsing values
def _value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


_EXPECTED = re.compile(r"Expected argument `[^`]*` to be (?P<what>.*?), but got ")


def _expected(err: ValueError, text: str) -> str:
    """A record's check error as argparse words: ``expected <what>, but got '<text>'`` (numbers unseparated)."""
    found = _EXPECTED.search(str(err))
    if found is None:
        return str(err)
    what = re.sub(r"(?<=\d),(?=\d{3})", "", found.group("what"))
    return f"expected {what}, but got {text!r}"


def _checked(family: Family, option: str):
    """An argparse ``type``: the text read as a literal, checked by ``family``'s record as its ``option``."""

    def parse(text: str) -> Any:
        value = _value(text)
        if value is None and family.value_option == option:  # None switches it off: its --no- flag says so
            raise argparse.ArgumentTypeError(f"expected a value of {option}, but got {text!r} (see {no_flag(family)})")
        try:
            family.options(value if family.value_option == option else {option: value})
        except ValueError as err:
            raise argparse.ArgumentTypeError(_expected(err, text)) from None
        return value

    return parse


class _Words(argparse.Action):
    """``--<name> [KEY=VALUE ...]``: the words stored (a list, empty for the flag alone), and recorded."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Optional[str] = None) -> None:
        setattr(namespace, self.dest, list(values))
        record(namespace, self.option_strings[0], list(values))


class _Off(argparse.Action):
    """``--no-<name>``: the family's off value stored, and the flag recorded."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["nargs"] = 0
        super().__init__(*args, **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Optional[str] = None) -> None:
        setattr(namespace, self.dest, self.const)
        record(namespace, self.option_strings[0], True)


def _help(family: Family) -> str:
    """The help of a family's own flag: its record's line, and its options for ``KEY=VALUE``."""
    what = family.cli.help or f"add {family.meaning or family.name} ({', '.join(family.outputs) or 'per sample'})"
    if family.value_option is not None or not family.defaults:
        return what
    options = ", ".join(f"{k}={v!r}" for k, v in family.defaults.items())
    return f"{what}; KEY=VALUE sets its options: {options}"


def add_family_flags(p: argparse.ArgumentParser) -> None:
    """The flags of every switchable family (module docstring); a family whose flag the command already has is
    named in a warning and gets none (it stays usable from Python)."""
    taken = {s for action in p._actions for s in action.option_strings}
    for family in flag_families():
        clash = [flag for flag in family_flags(family) if flag in taken]
        if clash:
            warnings.warn(
                f"score family {family.name!r} gets no flag: {clash[0]} is a flag of the command", stacklevel=2
            )
            continue
        taken.update(family_flags(family))
        if family.value_option is not None:
            default = family.defaults[family.value_option] if family.cli.on else None
            p.add_argument(
                family.flag,
                type=_checked(family, family.value_option),
                default=default,
                metavar=family.value_option.upper(),
                dest=family.keyword,
                action=Recorded,
                help=_help(family),
            )
        else:
            p.add_argument(
                family.flag, nargs="*", default=None, metavar="KEY=VALUE", dest=family.keyword, action=_Words,
                help=_help(family),
            )  # fmt: skip
        if family.cli.on:
            what = family.cli.help if family.value_option is None else ", ".join(family.outputs)
            p.add_argument(
                no_flag(family), dest=family.keyword, action=_Off, const=family.switch_off, help=f"skip {what}"
            )
        for flag, (option, text) in family.cli.flags.items():
            p.add_argument(
                flag,
                type=_checked(family, option),
                default=family.defaults[option],
                metavar=option.upper(),
                action=Recorded,
                help=text,
            )


# ---------------------------------------------------------------------------- reading them back
def parse_options(flag: str, words: Sequence[str]) -> Dict[str, Any]:
    """``KEY=VALUE`` words as an options dict; ``ValueError`` naming the flag and the word otherwise."""
    options: Dict[str, Any] = {}
    for word in words:
        key, sep, text = word.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag}: expected KEY=VALUE, but got {word!r}")
        options[key.replace("-", "_")] = _value(text)
    return options


def _state(args: argparse.Namespace, family: Family) -> Any:
    return getattr(args, family.keyword, None)


def _switch(args: argparse.Namespace, family: Family) -> Any:
    """The keyword value of ``family`` the flags ask for (before ``--only``)."""
    state = _state(args, family)
    if family.value_option is not None:
        return state
    if state is None:
        state = [] if family.cli.on else False
    if state is False:
        return False
    options: Dict[str, Any] = {"seed": args.seed} if family.cli.seeded else {}
    options.update({option: getattr(args, _dest(flag)) for flag, (option, _) in family.cli.flags.items()})
    linked = {option: getattr(args, dest, None) for option, dest in family.cli.linked.items()}
    options.update({option: value for option, value in linked.items() if value is not None})
    options.update(state if isinstance(state, dict) else parse_options(family.flag, state))
    return options or True


def resolve_switches(args: argparse.Namespace) -> List[Tuple[Family, Any, Optional[Dict[str, Any]]]]:
    """``(family, keyword value, checked options or None when off)`` of every switchable family, in table order.
    ``--only frechet`` keeps the families a statistics file serves (:attr:`Family.statistics`). ``ValueError``
    names the flag."""
    only_frechet = getattr(args, "only", None) == "frechet"
    out = []
    for family in switch_families():
        value = _switch(args, family)
        if only_frechet and not family.statistics:
            value = family.switch_off
        try:
            options = family.options(value)
        except ValueError as err:
            raise ValueError(f"{family.flag}: {err}") from None
        out.append((family, value, options))
    return out


def family_switches(args: argparse.Namespace) -> Dict[str, Any]:
    """The keyword arguments of :class:`~lightning_prd.GenerativeMetrics` that switch every family as the flags
    ask (:func:`resolve_switches`)."""
    return {family.keyword: value for family, value, _ in resolve_switches(args)}


def given_family_flags(args: argparse.Namespace) -> List[Tuple[Family, str, Any]]:
    """``(family, flag, value)`` of each family flag on the command line (``--no-<name>`` included), in table
    order."""
    given = getattr(args, "given_flags", None) or {}
    return [(family, flag, given[flag]) for family in flag_families() for flag in family_flags(family) if flag in given]


def held_out_flags() -> List[str]:
    """The flags of the families that score against the held-out set ``--test`` (:attr:`Family.needs_test`)."""
    return [family.flag for family in flag_families() if family.needs_test]


def scores_epilog() -> str:
    """The ``scores`` section of ``--help``: every scalar output of every family, with the flag that adds it
    and what its scores measure (the registry's records, in table order)."""
    lines = ["scores (the table, and --json; each family's scores, how they are asked for, what they measure):"]
    for family in families():
        if not family.outputs:
            continue
        values = [f"{family.value_option} = {family.flag}"] if family.value_option is not None else []
        values += [f"{option} = --{dest.replace('_', '-')}" for option, dest in family.cli.linked.items()]
        if not family.switchable:
            how = "from the network pass of a --protocol that reports it"
        elif family.cli.on:
            how = f"on by default{''.join(', ' + v for v in values)} ({no_flag(family)} skips it)"
        else:
            how = " or ".join([family.flag, *(other.flag for other in brought_by(family))])
            how = f"with {how}{''.join(', ' + v for v in values)}"
        text = f"{how}: {family.meaning or family.name}"
        names = textwrap.wrap(", ".join(family.outputs), 30)
        for name, line in itertools.zip_longest(names, textwrap.wrap(text, 76), fillvalue=""):
            lines.append(f"  {name:<32}{line}".rstrip())
    return "\n".join(lines)


#: the call options a family's ``link`` reads (the command line's: closed balls, no per-sample scores)
_CALL = {"ball": "closed", "per_sample": False, "error_bars": False}


def brought_by(family: Family) -> List[Family]:
    """The other switchable families whose switch alone turns ``family`` on too (its record's ``link``:
    authenticity comes with alpha/beta)."""
    if family.link is None:
        return []
    out = []
    for other in switch_families():
        if other is family:
            continue
        try:
            on = family.link(None, {other.name: dict(other.defaults)}, dict(_CALL)) is not None
        except Exception:  # noqa: BLE001 - a link that needs other families' options brings nothing alone
            on = False
        if on:
            out.append(other)
    return out


def flags_table() -> str:
    """The table of ``docs/cli.md`` that lists every family flag (Markdown, one row per switchable family, in
    table order): its flags, its columns with the way each is better, whether it is on by default, its options
    (``KEY=VALUE``) and its docs page."""
    from lightning_prd.runs.scores import label

    rows = ["| flags | columns (better) | default | options | page |", "| --- | --- | --- | --- | --- |"]
    for family in flag_families():
        own = f"`{family.flag} {family.value_option.upper()}`" if family.value_option else f"`{family.flag}`"
        flags = ", ".join([own, *(f"`{flag}`" for flag in family_flags(family)[1:])])
        if family.needs_test:
            flags += " (needs `--test`)"
        columns = ", ".join(f"`{key}` ({label(way)})" for key, way in family.outputs.items())
        if family.value_option is not None:
            default = f"on, {family.value_option.upper()} = {family.defaults[family.value_option]}"
        else:
            default = "on" if family.cli.on else "off"
        via = [*(other.flag for other in brought_by(family))]
        default += f" (on with {', '.join(via)})" if via else ""
        options = ", ".join(f"`{k}={v!r}`" for k, v in family.defaults.items()) if family.value_option is None else ""
        page = f"[{family.name}]({family.docs})" if family.docs else ""
        rows.append(f"| {flags} | {columns} | {default} | {options or '-'} | {page} |")
    return "\n".join(rows)
