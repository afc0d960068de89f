"""Where the runs are: the run directories at or below the folders given to ``lightning-prd runs`` (a folder
with TensorBoard event files or a ``CSVLogger``'s ``metrics.csv``), each with its label, searched through
symbolic links too (a link to a folder already searched, or to a folder it lies in, is not followed again);
W&B offline runs are set apart."""

from __future__ import annotations

import os
from typing import List, Sequence, Tuple


class RunsError(ValueError):
    """Input that cannot be compared: no run found, a run without scores, an unreadable file."""


def is_event_file(name: str) -> bool:
    """Whether a file named ``name`` is a TensorBoard event file."""
    return "tfevents" in name


def is_run_file(name: str) -> bool:
    """Whether a file named ``name`` makes its folder a run (an event file, ``metrics.csv``, ``*.wandb``)."""
    return is_event_file(name) or name == "metrics.csv" or name.endswith(".wandb")


def _is_wandb_offline(path: str, files: Sequence[str]) -> bool:
    return os.path.basename(path).startswith("offline-run-") or any(f.endswith(".wandb") for f in files)


def find_runs(directory: str) -> Tuple[List[Tuple[str, str, List[str]]], List[str]]:
    """Run directories at or below ``directory``: ``([(path, source, files), ...], wandb_offline_dirs)``.

    Symbolic links to folders are followed, except one to a folder already searched or to a
    folder it lies in (which would search the same runs again, or forever).

    Raises:
        RunsError: ``directory`` does not exist or is not a directory.
    """
    if not os.path.exists(directory):
        raise RunsError(f"DIR {directory}: no such directory")
    if not os.path.isdir(directory):
        raise RunsError(f"DIR {directory}: expected a directory of runs, but this is a file")
    found: List[Tuple[str, str, List[str]]] = []
    wandb_dirs: List[str] = []
    searched = {os.path.realpath(directory)}
    for path, subdirs, files in os.walk(directory, onerror=_raise_walk_error, followlinks=True):
        here = os.path.realpath(path)
        keep = set()
        for sub in sorted(subdirs, key=lambda d: os.path.islink(os.path.join(path, d))):  # folders before links
            real = os.path.realpath(os.path.join(path, sub))
            if real not in searched and not contains(real, here):
                searched.add(real)
                keep.add(sub)
        subdirs[:] = sorted(keep)
        if _is_wandb_offline(path, files):
            wandb_dirs.append(path)
            subdirs.clear()
            continue
        events = sorted(f for f in files if is_event_file(f))
        if events:
            found.append((path, "tensorboard", [os.path.join(path, f) for f in events]))
        elif "metrics.csv" in files:
            found.append((path, "csv", [os.path.join(path, "metrics.csv")]))
    return found, wandb_dirs


def contains(folder: str, path: str) -> bool:
    """Whether ``path`` is ``folder`` or lies below it (both resolved)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _raise_walk_error(err: OSError) -> None:
    raise RunsError(f"{err.filename}: cannot list the directory: {err.strerror or err}")


def _label(run_dir: str, directory: str) -> str:
    rel = os.path.relpath(run_dir, directory)
    return os.path.basename(os.path.abspath(directory)) if rel == "." else rel.replace(os.sep, "/")


def discover(directories: Sequence[str]) -> Tuple[List[Tuple[str, str, List[str], str]], List[str]]:
    """Every run below ``directories`` as ``(path, source, files, label)``, and the W&B offline dirs skipped.

    Raises:
        RunsError: a directory does not exist, or no run is found below any of them.
    """
    runs: List[Tuple[str, str, List[str], str]] = []
    wandb_dirs: List[str] = []
    seen = set()
    for directory in directories:
        found, skipped = find_runs(directory)
        wandb_dirs += skipped
        for path, source, files in found:
            key = os.path.realpath(path)
            if key not in seen:
                seen.add(key)
                runs.append((path, source, files, _label(path, directory)))
    labels = [r[3] for r in runs]
    if len(set(labels)) < len(labels):  # labels that clash: every run is labelled by its path
        runs = [(p, s, f, p.replace(os.sep, "/")) for p, s, f, _ in runs]
    if not runs:
        where = " ".join(directories)
        if wandb_dirs:
            raise RunsError(
                f"{where}: only W&B offline runs found ({wandb_dirs[0]}); wandb's Python API cannot read "
                "offline runs: log with a CSVLogger next to the WandbLogger, or `wandb sync` them"
            )
        raise RunsError(f"{where}: no run found (no TensorBoard event files, no metrics.csv at or below it)")
    return runs, wandb_dirs
