"""Griffe extension: render the package's reStructuredText roles as Markdown for mkdocstrings.

The docstrings write maths as Sphinx does (``:math:`x```, ``.. math::`` blocks) and refer to
names with ``:func:``/``:mod:``/``:class:`` roles. This turns maths into the ``\\( \\)`` and
``\\[ \\]`` spans that ``pymdownx.arithmatex`` hands to MathJax, and roles into code spans.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE_MATH = re.compile(r":math:`([^`]+)`")
_ROLE_NAME = re.compile(r":(?:mod|func|class|meth|attr|data|obj|exc):`(~?)([^`]+)`")


def _role_name(m: re.Match) -> str:
    """A role's target as a code span; ``~a.b.c`` shows ``c`` only, as Sphinx does."""
    target = m.group(2).split(".")[-1] if m.group(1) else m.group(2)
    return "`" + target + "`"


def _math_blocks(text: str) -> str:
    """``.. math::`` directives (inline argument and/or indented body) -> ``\\[ ... \\]``."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)\.\. math::\s*(.*)$", lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        indent, body = m.group(1), [m.group(2)] if m.group(2).strip() else []
        i += 1
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > len(indent)):
            body.append(lines[i].strip())
            i += 1
        expr = " ".join(b for b in body if b)
        out += [f"{indent}\\[", f"{indent}{expr}", f"{indent}\\]", ""]
    return "\n".join(out)


_EXAMPLE = re.compile(r"^(\s*)Example:[ \t]*$", re.M)
_PAIR = re.compile(r"^(\s+)(\w+), (\w+): (.*)$")


def _split_pairs(text: str) -> str:
    """``x, y: text`` in an ``Args:`` section -> one entry per name (the text for both)."""
    out, in_args = [], False
    for line in text.split("\n"):
        if re.match(r"^\s*(Args|Arguments|Parameters):\s*$", line):
            in_args = True
        elif line.strip() and not line.startswith(" "):
            in_args = False
        m = _PAIR.match(line) if in_args else None
        if m:
            out += [f"{m.group(1)}{m.group(2)}: {m.group(4)}", f"{m.group(1)}{m.group(3)}: {m.group(4)}"]
        else:
            out.append(line)
    return "\n".join(out)


def rst_to_markdown(text: str) -> str:
    """Convert the reStructuredText maths and roles of one docstring."""
    text = _EXAMPLE.sub(r"\1Examples:", _split_pairs(text))
    text = _math_blocks(text)
    text = _ROLE_MATH.sub(lambda m: "\\(" + m.group(1) + "\\)", text)
    return _ROLE_NAME.sub(_role_name, text)


class RstRoles(griffe.Extension):
    """Rewrite every docstring once it is loaded."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rst_to_markdown(obj.docstring.value)
