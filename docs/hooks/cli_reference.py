"""MkDocs hook: the command-line reference, generated from ``lightning_prd.cli.build_parser()``.

A page containing the marker ``<!-- cli-reference -->`` gets the top-level ``--help``, the
epilog the commands share, and for each subcommand a table of its options and its ``--help``
text, so the page cannot drift from the parser.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, List

MARKER = "<!-- cli-reference -->"


def _subparsers(parser: argparse.ArgumentParser) -> List[tuple]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            return [(name, sub, helps.get(name, "")) for name, sub in action.choices.items()]
    return []


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _options_table(parser: argparse.ArgumentParser) -> str:
    rows = ["| option | default | meaning |", "| --- | --- | --- |"]
    for action in parser._actions:
        if isinstance(action, (argparse._SubParsersAction, argparse._HelpAction)) or action.help == argparse.SUPPRESS:
            continue
        flags = ", ".join(action.option_strings) or action.dest
        if action.nargs != 0 and action.option_strings:
            metavar = action.metavar or action.dest.upper()
            metavar = " ".join(metavar) if isinstance(metavar, tuple) else metavar
            if action.nargs in ("+", "*"):
                metavar += " ..."
            flags += f" {metavar}"
        default = "" if action.default in (None, False, argparse.SUPPRESS) or action.required else f"`{action.default}`"
        if action.required:
            default = "required"
        rows.append(f"| `{_cell(flags)}` | {default} | {_cell(action.help or '')} |")
    return "\n".join(rows)


def _help(parser: argparse.ArgumentParser, epilog: bool = False) -> str:
    """``--help`` text as a code block; the epilog only when asked (the shared one is shown once)."""
    os.environ.setdefault("COLUMNS", "100")
    saved = parser.epilog
    if not epilog:
        parser.epilog = None
    try:
        return "```text\n" + parser.format_help().rstrip() + "\n```"
    finally:
        parser.epilog = saved


def reference() -> str:
    from lightning_prd.cli import build_parser

    parser = build_parser()
    parts = [f"## `{parser.prog}`", "", _help(parser), ""]
    if parser.epilog:
        parts += [
            "## Inputs, scores and extractors",
            "",
            "Shared by every command:",
            "",
            "```text\n" + parser.epilog.rstrip() + "\n```",
            "",
        ]
    for name, sub, summary in _subparsers(parser):
        parts += [f"## `{parser.prog} {name}`", "", f"{summary[:1].upper()}{summary[1:]}." if summary else "", ""]
        parts += [_options_table(sub), "", '??? note "Full `--help`"', ""]
        parts += ["    " + line if line else "" for line in _help(sub, epilog=sub.epilog != parser.epilog).split("\n")]
        parts.append("")
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, reference())
    return markdown
