"""Flags recorded when given: ``args.given_flags`` (``{flag: value}``) holds each recorded flag on the command
line, whatever its value (a value equal to the default is given too); the ``--protocol`` and ``--only`` rules
read it."""

from __future__ import annotations

import argparse
from typing import Any, Optional


def record(namespace: argparse.Namespace, option: str, value: Any) -> None:
    """Record ``option`` as given with ``value``."""
    given = dict(getattr(namespace, "given_flags", None) or {})
    given[option] = value
    namespace.given_flags = given


class Recorded(argparse._StoreAction):
    """``store``, and the flag recorded in ``namespace.given_flags``."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Optional[str] = None) -> None:
        super().__call__(parser, namespace, values, option_string)
        record(namespace, self.option_strings[0], values)
