"""What a path given as a file is, when it is no readable file: for errors that say so and name the file
expected there (weights files of the extractors and of the protocols)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Tuple


def require_file(path: Path, head: str, tail: str) -> None:
    """Raise the error of :func:`not_a_file` when ``path`` is no readable file: ``"<head> <what it is>; <tail>"``.

    Example:
        >>> import pathlib, tempfile
        >>> try:
        ...     require_file(pathlib.Path(tempfile.mkdtemp()), "weights file 'w'", "expected `m.pth` there")
        ... except ValueError as err:
        ...     print(err)
        weights file 'w' is a directory; expected `m.pth` there
    """
    found = not_a_file(path)
    if found is not None:
        kind, what = found
        raise kind(f"{head} {what}; {tail}")


def not_a_file(path: Path) -> Optional[Tuple[type, str]]:
    """Why ``path`` is no readable file, as ``(exception type, what it is)``; None when it is one.

    Missing paths and broken links give :class:`FileNotFoundError`, a directory, a pipe or device and a
    file that cannot be opened :class:`ValueError`.

    Example:
        >>> import tempfile, pathlib
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> (folder / "link").symlink_to(folder / "gone.pth")
        >>> for path in (folder, folder / "link", folder / "nothing.pth"):
        ...     print(not_a_file(path)[1])
        is a directory
        is a broken symbolic link (to ...gone.pth)
        does not exist
    """
    if path.is_symlink() and not path.exists():
        return FileNotFoundError, f"is a broken symbolic link (to {os.readlink(path)})"
    if not path.exists():
        return FileNotFoundError, "does not exist"
    if path.is_dir():
        return ValueError, "is a directory"
    if not path.is_file():
        return ValueError, "is not a regular file (a pipe, socket or device)"
    try:
        with path.open("rb"):
            pass
    except OSError as err:
        return ValueError, f"cannot be read ({err.strerror or type(err).__name__})"
    return None
