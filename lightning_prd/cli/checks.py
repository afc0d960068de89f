"""Checks the ``lightning-prd`` command runs before any work: unknown flags and output paths.

* :func:`reject_unknown_flags`: an unknown flag is named, with the closest known one
  (``unrecognized argument --fakes; did you mean --fake?``), before argparse would report the
  missing required flag it was probably meant to be; a flag of an option's old name
  (:data:`RENAMED_FLAGS`, e.g. ``--k-pr``) is refused with its one spelling.
* :func:`check_outputs`: ``--json`` / ``--plot`` never overwrite an input. Files are compared by
  identity (device and inode, as :func:`os.path.samefile`), so a hard link, a symbolic link or
  another spelling of an input file is refused as the input itself; the images of an input
  folder are inputs too, and a new file with an image extension inside an input folder is
  refused because it would be read as a sample of that set next time. A command may name
  folders no output goes into at any depth, whatever the file's name (``runs``: the run
  directories it compares), and files that would be read as input next time.
"""

from __future__ import annotations

import argparse
import difflib
import os
from pathlib import Path
from typing import Any, Callable, Dict, List, NoReturn, Optional, Sequence, Tuple

from lightning_prd.cli.inputs import CLIError
from lightning_prd.features.image_folder import IMAGE_SUFFIXES, image_files
from lightning_prd.functional.engine.vocabulary import RENAMED

#: old flag -> its one spelling (the option's name with dashes)
RENAMED_FLAGS: Dict[str, str] = {
    "--" + old.replace("_", "-"): "--" + new.replace("_", "-") for old, new in RENAMED.items()
}

_Identity = Tuple[int, int]


class _Stop(Exception):
    """Raised instead of printing and exiting while looking for unknown flags."""


def _quiet(parser: argparse.ArgumentParser) -> List[argparse.ArgumentParser]:
    """``parser`` and its subparsers made silent and lenient: no required flags, errors raise."""
    parsers = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            parsers += list(action.choices.values())
    for p in parsers:
        for action in p._actions:
            action.required = False

        def stop(*args: Any, **kwargs: Any) -> NoReturn:
            raise _Stop()

        p.error = stop  # type: ignore[method-assign]
        p.exit = stop  # type: ignore[method-assign]
        p._print_message = lambda *a, **k: None  # type: ignore[method-assign]
    return parsers


def reject_unknown_flags(build_parser: Callable[[], argparse.ArgumentParser], argv: Sequence[str]) -> None:
    """Exit with status 2 naming the unknown flags in ``argv``, each with the closest known flag.

    ``build_parser`` gives a fresh parser: it is parsed leniently (no required flags, nothing
    printed) to find what argparse leaves unrecognised. Anything else wrong with ``argv`` is left
    to the real parse, which reports it as before.
    """
    for arg in argv:
        flag = arg.split("=", 1)[0]
        if flag in RENAMED_FLAGS:  # refused before argparse, which would take it as an abbreviation
            build_parser().error(f"{flag} is spelled {RENAMED_FLAGS[flag]}")
    parser = build_parser()
    parsers = _quiet(parser)
    try:
        namespace, extras = parser.parse_known_args(list(argv))
    except _Stop:
        return
    unknown = [e.split("=", 1)[0] for e in extras if e.startswith("-") and len(e) > 1]
    if not unknown:
        return
    command = getattr(namespace, "command", None)
    owner = next((p for p in parsers[1:] if p.prog.rsplit(" ", 1)[-1] == command), parsers[0])
    known = sorted({s for a in owner._actions for s in a.option_strings if s.startswith("--")})

    def named(flag: str) -> str:
        close = difflib.get_close_matches(flag, known, n=1, cutoff=0.6)
        return f"{flag} (did you mean {close[0]}?)" if close else flag

    if len(unknown) == 1:
        close = difflib.get_close_matches(unknown[0], known, n=1, cutoff=0.6)
        message = f"unrecognized argument {unknown[0]}" + (f"; did you mean {close[0]}?" if close else "")
    else:
        message = f"unrecognized arguments {', '.join(named(flag) for flag in unknown)}"
    report = build_parser()
    if command is not None:
        report = next(a.choices[command] for a in report._actions if isinstance(a, argparse._SubParsersAction))
    report.error(message)


def _identity(path: Path) -> Optional[_Identity]:
    """``(st_dev, st_ino)`` of the file ``path`` points to (links followed), None if there is none."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _inputs(inputs: Sequence[Tuple[str, str]]) -> Tuple[Dict[_Identity, str], Dict[_Identity, str]]:
    """Identities of the input files (images of input folders included) and of the input folders."""
    files: Dict[_Identity, str] = {}
    folders: Dict[_Identity, str] = {}
    for flag, text in inputs:
        path = Path(text).expanduser()
        if path.is_dir():
            ident = _identity(path)
            if ident is not None:
                folders.setdefault(ident, f"{flag} {text}")
            for image in image_files(path):
                ident = _identity(image)
                if ident is not None:
                    files.setdefault(ident, f"an image of {flag} {text}")
        elif path.is_file():
            ident = _identity(path)
            if ident is not None:
                files.setdefault(ident, f"{flag} {text}")
    return files, folders


def _input_folder_holding(out: Path, folders: Dict[_Identity, str]) -> Optional[str]:
    """The input folder ``out`` would be written into (at any depth), if any."""
    here = Path(os.path.realpath(out)).parent  # where the file lands, links resolved
    for folder in (here, *here.parents):
        ident = _identity(folder)
        if ident is not None and ident in folders:
            return folders[ident]
    return None


def check_outputs(
    args: argparse.Namespace,
    inputs: Sequence[Tuple[str, str]],
    plot_format: Callable[[Path], str],
    *,
    keep_out: Sequence[Tuple[str, str]] = (),
    would_be_read: Optional[Callable[[Path], Optional[str]]] = None,
    flags: Sequence[str] = ("--json", "--plot"),
) -> None:
    """Fail before any work when an output (``flags``: ``--json`` / ``--plot``) cannot be written or would
    harm an input.

    ``inputs`` are ``(flag, PATH)`` pairs of ``--real`` / ``--fake``; missing output folders are
    created later, so only their nearest existing parent is checked here. ``keep_out`` are
    ``(description, FOLDER)`` pairs: no output is written at or below them, new file or old,
    whatever its name (folders compared by identity, links resolved). ``would_be_read(path)``
    says why a file written at ``path`` would be read as an input the next time, or None.
    """
    files, folders = _inputs(inputs)
    kept: Dict[_Identity, str] = {}
    for description, kept_folder in keep_out:
        kept_ident = _identity(Path(kept_folder))
        if kept_ident is not None:
            kept.setdefault(kept_ident, description)
    outputs: Dict[object, str] = {}
    for flag in flags:
        text = getattr(args, flag[2:])
        if text is None:
            continue
        if not text.strip():
            raise CLIError(f"{flag}: expected a file path, but got {text!r}")
        out = Path(text).expanduser()
        if out.is_dir() or text.endswith(("/", os.sep)):
            raise CLIError(f"{flag} {text}: expected a file path, but this is a directory")
        ident = _identity(out)
        if ident is not None and ident in files:
            raise CLIError(f"{flag} {text}: refusing to overwrite an input file ({files[ident]}, the same file)")
        inside = _input_folder_holding(out, kept)
        if inside is not None:
            raise CLIError(f"{flag} {text}: refusing to write inside {inside} (whatever the file's name)")
        reason = would_be_read(out) if would_be_read is not None else None
        if reason is not None:
            raise CLIError(f"{flag} {text}: refusing to write this file: {reason}")
        if {out.suffix.lower(), Path(os.path.realpath(out)).suffix.lower()} & set(IMAGE_SUFFIXES):
            folder = _input_folder_holding(out, folders)
            if folder is not None:
                raise CLIError(
                    f"{flag} {text}: refusing to write an image into the input folder {folder} "
                    f"(it would be read as one of its samples next time)"
                )
        key = ident if ident is not None else os.path.realpath(out)
        if key in outputs:
            raise CLIError(f"{flag} {text}: refusing to overwrite {outputs[key]} (the same file)")
        outputs[key] = f"the {flag} file"
        _check_writable(flag, text, out)
        if flag == "--plot":
            _check_plot_format(flag, text, out, plot_format)


def write_output(flag: str, text: str, write: Callable[[Path], Any]) -> None:
    """Create the parent folders of output ``text`` and call ``write(path)``; a failure is one line."""
    out = Path(text).expanduser()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write(out)
    except OSError as err:
        raise CLIError(f"{flag} {text}: cannot write the file: {err.strerror or err}") from err


def _check_writable(flag: str, text: str, out: Path) -> None:
    parent = out.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise CLIError(f"{flag} {text}: cannot create the file, {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CLIError(f"{flag} {text}: cannot create the file, {parent} is not writable")
    if out.exists() and not os.access(out, os.W_OK):
        raise CLIError(f"{flag} {text}: the file exists and is not writable")


def _check_plot_format(flag: str, text: str, out: Path, plot_format: Callable[[Path], str]) -> None:
    from matplotlib.figure import Figure

    formats = Figure().canvas.get_supported_filetypes()
    if plot_format(out) not in formats:
        raise CLIError(
            f"{flag} {text}: unsupported image format {out.suffix!r}; expected .png or one of "
            f"{', '.join('.' + f for f in sorted(formats))}"
        )
