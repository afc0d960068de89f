"""``main``: the entry point of the ``lightning-prd`` console script (exit status 0 ok, 1 bad input,
2 usage error, a flag that contradicts ``--protocol`` included; errors are reported as one line on stderr)."""

from __future__ import annotations

import sys
import warnings
from typing import Any, Optional, Sequence

from lightning_prd.cli.checks import reject_unknown_flags
from lightning_prd.cli.evaluate import run_evaluate
from lightning_prd.cli.features import run_features
from lightning_prd.cli.inputs import CLIError
from lightning_prd.cli.parser import PROG, build_parser
from lightning_prd.cli.protocol import UsageError


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of ``lightning-prd``; returns the exit status (0 ok, 1 bad input, 2 usage error).

    Example:
        >>> main(["--version"])  # doctest: +ELLIPSIS
        lightning-prd ...
        0
    """
    parser = build_parser()
    try:
        reject_unknown_flags(build_parser, sys.argv[1:] if argv is None else argv)
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, --version and usage errors
        return int(exit_.code or 0) if not isinstance(exit_.code, str) else 2
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    show = warnings.showwarning

    def _one_line_warning(message: Any, category: Any, *rest: Any, **kw: Any) -> None:
        print(f"{PROG}: warning: {' '.join(str(message).split())}", file=sys.stderr)

    warnings.showwarning = _one_line_warning
    try:
        handler = getattr(args, "handler", None) or (run_features if args.command == "features" else run_evaluate)
        return handler(args)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except UsageError as err:  # flags that contradict each other (--protocol): a usage error
        if args.debug:
            raise
        print(f"{PROG} {args.command}: error: {' '.join(str(err).split())} (see --help)", file=sys.stderr)
        return 2
    except Exception as err:  # noqa: BLE001 - bad input is reported as one line, not a traceback
        if args.debug:
            raise
        message = " ".join(str(err).split()) or type(err).__name__
        if not isinstance(err, (CLIError, ValueError, TypeError, FileNotFoundError, ImportError)):
            message = f"{type(err).__name__}: {message} (rerun with --debug for the traceback)"
        print(f"{PROG} {args.command}: error: {message}", file=sys.stderr)
        return 1
    finally:
        warnings.showwarning = show
