"""Read the scores that :class:`~lightning_prd.PRDCallback` logged for several runs and compare them.

A *run* is a directory holding TensorBoard event files (``events.out.tfevents.*``, read with
TensorBoard's own ``EventAccumulator``) or a ``CSVLogger``'s ``metrics.csv`` (read with Python's
``csv`` module); a directory holding both is read from its event files. Every scalar whose tag
starts with the prefix (default ``prd/``) is a score; its values are taken per epoch. The callback
logs to TensorBoard at Lightning's step with the scalar ``<prefix>epoch`` beside the scores, which
gives each score's epoch (:mod:`lightning_prd.runs.epochs`); a CSV row's epoch is its ``epoch`` column.
An epoch logged twice (a resumed run) keeps its last value. ``<score>_std`` error bars are left out.

Every event file is checked whole first (:mod:`lightning_prd.runs.records`: the framing and the
CRC32C checksums of each record): TensorBoard stops reading a file silently at a damaged or cut-off
record, so a damaged file is reported (:attr:`Run.warnings`: the file, the byte of the damage and
how many of its bytes were read), and a run with no scores read names the damage as the cause.

Folders are searched through symbolic links too; a link to a folder already searched, or to one
of the folders it lies in (a cycle), is not followed again.

**The fingerprint** (:attr:`Run.fingerprint`: extractor, weights SHA-256, preprocessing, sample counts, k,
ball, version; ``PRDCallback`` logs it once per fit) is read from the TensorBoard text summary
``<prefix>fingerprint`` (:func:`fingerprint_text`; the last one) or a CSV run's ``fingerprint.json``
(:func:`prefixed_path`); None if not logged. Different fingerprints in one run are named in its warnings.

For each score a run has a *last* value (at its last evaluated epoch) and a *best* value with its
epoch: the highest, the lowest for the Fréchet distance, the closest to 1 for density, in the direction recorded
with the run first (:attr:`Run.directions`), else the registry's (:mod:`lightning_prd.runs.scores`); a score of
unknown direction has no best.

W&B offline runs (``wandb/offline-run-*``) are not read: ``wandb``'s Python API reads runs from
a W&B server only (``wandb sync`` uploads them); log with a ``CSVLogger`` next to the
``WandbLogger`` to compare runs offline.

Example:
    >>> import os, tempfile
    >>> from torch.utils.tensorboard import SummaryWriter
    >>> from lightning_prd.runs.reader import load_runs
    >>> root = tempfile.mkdtemp()
    >>> for name, values in (("a", [0.2, 0.6, 0.5]), ("b", [0.3, 0.4, 0.7])):
    ...     with SummaryWriter(os.path.join(root, name)) as writer:
    ...         for epoch, value in enumerate(values):
    ...             writer.add_scalar("prd/precision", value, global_step=epoch)
    >>> [(run.label, run.summary()["precision"]["best_epoch"]) for run in load_runs([root])]
    [('a', 1), ('b', 2)]
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Collection, Dict, List, Optional, Sequence, Tuple

from lightning_prd.functional.engine.family import check_direction
from lightning_prd.functional.engine.vocabulary import current_keys
from lightning_prd.runs.epochs import scores_per_epoch
from lightning_prd.runs.finding import RunsError, discover, is_event_file
from lightning_prd.runs.records import find_damage
from lightning_prd.runs.scores import DIRECTIONS, Direction, best_index, direction

#: the name (after the prefix) of the TensorBoard text summary, and of the CSV run's file, of the fingerprint
FINGERPRINT = "fingerprint"
#: the fingerprint's keys of the directions recorded with a run: ``direction/<score>``
DIRECTION_KEY = "direction/"
#: the prefix whose files sit directly in a run's ``log_dir``
DEFAULT_PREFIX = "prd/"

#: the scores drawn over epochs by :func:`lightning_prd.runs.plotting.plot_runs`, in panel order
PANEL_SCORES = ("precision", "recall", "density", "coverage")


class NoScoresError(RunsError):
    """A run directory that holds no scalar under the prefix."""


@dataclass
class Run:
    """The scores of one run.

    Attributes:
        label: a short name (the run's path below the directory it was found in).
        path: the run directory.
        source: ``"tensorboard"`` or ``"csv"``.
        files: the files read.
        scores: score name (without prefix) -> ``[(epoch, value), ...]`` sorted by epoch, one per epoch.
        warnings: what was wrong with its files (a damaged event file: which, where, how much was read).
        fingerprint: how the scores were made, as the callback logged it (module docstring); None if not logged.
    """

    label: str
    path: str
    source: str
    files: List[str]
    scores: Dict[str, List[Tuple[int, float]]] = field(default_factory=dict)
    warnings: List[str] = field(default_factory=list)
    fingerprint: Optional[Dict[str, Any]] = None

    @property
    def directions(self) -> Dict[str, Direction]:
        """The directions the callback recorded with the run (its fingerprint's ``direction/<score>``; empty if
        none); a value that is no direction is left out."""
        out: Dict[str, Direction] = {}
        for key, way in (self.fingerprint or {}).items():
            if key.startswith(DIRECTION_KEY):
                try:
                    out[key[len(DIRECTION_KEY) :]] = check_direction(key, way)
                except ValueError:
                    continue
        return out

    def direction(self, name: str) -> Direction:
        """The direction of score ``name`` in this run: recorded with it first, then the registry's
        (:func:`~lightning_prd.runs.scores.direction`)."""
        return direction(name, self.directions)

    def summary(self) -> Dict[str, Dict[str, Any]]:
        """Score name -> ``last``, ``last_epoch``, ``best``, ``best_epoch``, ``direction``, ``epochs``."""
        out: Dict[str, Dict[str, Any]] = {}
        recorded = self.directions
        for name in score_order(self.scores):
            points = self.scores[name]
            best = best_index(name, [v for _, v in points], recorded)
            out[name] = {
                "last": points[-1][1],
                "last_epoch": points[-1][0],
                "best": points[best][1] if best is not None else math.nan,
                "best_epoch": points[best][0] if best is not None else None,
                "direction": direction(name, recorded),
                "epochs": len(points),
            }
        return out


def score_order(names: Collection[str]) -> List[str]:
    """The package's table order (:data:`~lightning_prd.runs.scores.DIRECTIONS`), then other names sorted."""
    known = [n for n in DIRECTIONS if n in names]
    return known + sorted(set(names) - set(known))


def prefixed_path(log_dir: str, prefix: str, name: str) -> str:
    """Where the file or folder ``name`` of the callback with ``prefix`` lies below a run's ``log_dir`` (``prd/``:
    in it; ``gen/``: ``gen/<name>``; ``ema_``: ``ema_<name>``; parts kept to ``[A-Za-z0-9_.-]``, never ``..``).

    Example:
        >>> prefixed_path("logs", "prd/", "a"), prefixed_path("logs", "gen/", "a"), prefixed_path("l", "../x y/", "a")
        ('logs/a', 'logs/gen/a', 'l/_/x_y/a')
    """
    joined = name if prefix == DEFAULT_PREFIX else prefix + name
    parts = [re.sub(r"[^A-Za-z0-9_.-]", "_", p) for p in re.split(r"[/\\]", joined) if p]
    return os.path.join(log_dir, *("_" if set(p) == {"."} else p for p in parts))


def fingerprint_text(fingerprint: Dict[str, Any]) -> str:
    """The body of the TensorBoard text summary of a fingerprint: its JSON, keys sorted, indented four spaces
    (a code block in TensorBoard's *Text* tab); :func:`parse_fingerprint_text` reads it back.

    Example:
        >>> parse_fingerprint_text(fingerprint_text({"k_precision_recall": 3, "ball": "closed"}))
        {'ball': 'closed', 'k_precision_recall': 3}
        >>> parse_fingerprint_text('{"k": 3}')  # an older run's key
        {'k_precision_recall': 3}
    """
    body = json.dumps(fingerprint, indent=2, sort_keys=True, allow_nan=False)
    return "\n".join("    " + line for line in body.splitlines())


def parse_fingerprint_text(text: str) -> Optional[Dict[str, Any]]:
    """The fingerprint in ``text`` (:func:`fingerprint_text`, or plain JSON), old keys read as the new ones
    (:func:`~lightning_prd.functional.engine.vocabulary.current_keys`); None when it holds no JSON object."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return current_keys(value) if isinstance(value, dict) else None


def _check_readable(files: Sequence[str]) -> None:
    for f in files:
        try:
            with open(f, "rb") as fh:
                fh.read(1)
        except OSError as err:
            raise RunsError(f"{f}: cannot read the file: {err.strerror or err}") from err


def _damage(files: Sequence[str]) -> List[str]:
    """One message per damaged event file of ``files`` (:func:`~lightning_prd.runs.records.find_damage`)."""
    messages = []
    for f in files:
        try:
            damage = find_damage(f)
        except OSError as err:
            raise RunsError(f"{f}: cannot read the file: {err.strerror or err}") from err
        if damage is not None:
            messages.append(f"{f}: {damage.describe()}; the rest of the file is not read (TensorBoard stops there)")
    return messages


def _undecodable(path: str) -> str:
    """The first event file in ``path`` with a record that is not an event (``path`` if none is found)."""
    from google.protobuf.message import DecodeError
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    for name in sorted(f for f in os.listdir(path) if is_event_file(f)):
        try:
            for _ in EventFileLoader(os.path.join(path, name)).Load():
                pass
        except DecodeError:
            return os.path.join(path, name)
    return path


Fingerprints = List[Dict[str, Any]]


def _read_tensorboard(path: str, prefix: str) -> Tuple[Dict[str, Dict[int, float]], List[str], Fingerprints]:
    from google.protobuf.message import DecodeError
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, TENSORS, EventAccumulator

    acc = EventAccumulator(path, size_guidance={SCALARS: 0, TENSORS: 0})  # 0: keep every event
    try:
        acc.Reload()
    except DecodeError as err:
        raise RunsError(
            f"{_undecodable(path)}: not a TensorBoard event file (a record is not an event: {err})"
        ) from err
    tags = list(acc.Tags().get("scalars", []))
    return scores_per_epoch(acc, tags, prefix), tags, _tensorboard_fingerprints(acc, prefix)


def _tensorboard_fingerprints(acc: Any, prefix: str) -> Fingerprints:
    """The fingerprints of the text summary ``<prefix>fingerprint`` (``add_text`` appends ``/text_summary``)."""
    tags = [
        t for t in acc.Tags().get("tensors", []) if t in (prefix + FINGERPRINT, f"{prefix}{FINGERPRINT}/text_summary")
    ]
    texts = [raw.decode("utf-8", "replace") for t in tags for e in acc.Tensors(t) for raw in e.tensor_proto.string_val]
    return [p for p in map(parse_fingerprint_text, texts) if p is not None]


def _csv_fingerprints(path: str, prefix: str) -> Tuple[Fingerprints, List[str]]:
    """The fingerprint of a CSV run (``fingerprint.json`` in the prefix's folder), and what was wrong with it."""
    file = prefixed_path(path, prefix, FINGERPRINT + ".json")
    if not os.path.isfile(file):
        return [], []
    try:
        with open(file, encoding="utf-8") as fh:
            parsed = parse_fingerprint_text(fh.read())
    except (OSError, UnicodeDecodeError) as err:
        return [], [f"{file}: cannot read the fingerprint: {getattr(err, 'strerror', None) or err}"]
    return ([parsed], []) if parsed is not None else ([], [f"{file}: not a JSON object; the fingerprint is not read"])


#: epochs read from a CSV lie below this (every integer below it is exact in float64)
MAX_EPOCH = 2**53


def _read_csv(file: str, prefix: str) -> Tuple[Dict[str, Dict[int, float]], List[str]]:
    scores: Dict[str, Dict[int, float]] = {}
    try:
        with open(file, newline="", encoding="utf-8-sig") as fh:  # (a byte-order mark is not a column name)
            reader = csv.DictReader(fh)
            columns = [c for c in reader.fieldnames or [] if c]
            twice = sorted({c for c in columns if columns.count(c) > 1 and (c == "epoch" or c.startswith(prefix))})
            if twice:
                raise RunsError(f"{file}: the column(s) {', '.join(map(repr, twice))} appear more than once")
            for row in reader:
                cells = {c: row.get(c) for c in columns if c.startswith(prefix) and row.get(c) not in (None, "")}
                if not cells:
                    continue
                line = reader.line_num
                epoch = _number(row.get("epoch"), file, line, "epoch")
                if epoch is None or not 0 <= epoch < MAX_EPOCH or epoch != int(epoch):
                    raise RunsError(
                        f"{file} line {line}: expected a non-negative integer in column 'epoch' next to "
                        f"the {prefix} scores, but got {row.get('epoch')!r}"
                    )
                for column, text in cells.items():
                    value = _number(text, file, line, column)
                    scores.setdefault(column[len(prefix) :], {})[int(epoch)] = value
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise RunsError(f"{file}: cannot read the file as CSV: {getattr(err, 'strerror', None) or err}") from err
    return scores, columns


def _number(text: Any, file: str, line: int, column: str) -> Any:
    if text in (None, ""):
        return None
    try:
        return float(text)
    except ValueError:
        raise RunsError(f"{file} line {line}: expected a number in column {column!r}, but got {text!r}") from None


def read_run(path: str, source: str, files: List[str], label: str, prefix: str = "prd/") -> Run:
    """Read one run found by :func:`~lightning_prd.runs.finding.find_runs`.

    A damaged event file (cut off, or a record whose checksum fails) is read up to the damage, as
    TensorBoard reads it, and named in :attr:`Run.warnings` with how many of its bytes were read.

    Raises:
        RunsError: a file cannot be read, or the run holds no ``prefix`` scalars (the message lists
            the scalar tags it does hold, and its damaged files).
    """
    _check_readable(files)
    damage = _damage(files) if source == "tensorboard" else []
    if source == "tensorboard":
        raw, tags, prints = _read_tensorboard(path, prefix)
    else:
        (raw, tags), (prints, bad) = _read_csv(files[0], prefix), _csv_fingerprints(path, prefix)
        damage += bad
    scores = {
        name: sorted(per_epoch.items())
        for name, per_epoch in raw.items()
        if per_epoch and name != "epoch" and not name.endswith("_std")
    }
    if not scores:
        held = ", ".join(sorted(tags)[:8]) + (", ..." if len(tags) > 8 else "") if tags else "none"
        what = "scalar tags" if source == "tensorboard" else "columns"
        cause = "".join(f"; {message}" for message in damage)
        raise NoScoresError(f"{path}: no {prefix!r} scores in this {source} run ({what}: {held}){cause}")
    if len({json.dumps(p, sort_keys=True) for p in prints}) > 1:
        damage.append(f"{path}: the run logged {len(prints)} fingerprints that differ; the last one is shown")
    return Run(label, path, source, files, scores=scores, warnings=damage, fingerprint=prints[-1] if prints else None)


def load_runs(
    directories: Sequence[str], prefix: str = "prd/", warn: Any = None, found: Optional[List[str]] = None
) -> List[Run]:
    """Read every run at or below ``directories`` (each a run or a folder of runs).

    A run found *below* a directory that holds no ``prefix`` scores (e.g. a run logged without the
    callback) is skipped with a call of ``warn(message)``; a directory given as a run itself, or
    one where no run holds scores, raises :class:`RunsError`. Each damaged event file of a run
    read is a call of ``warn`` too (and is in the run's :attr:`Run.warnings`). ``found``, when
    given, receives the directory of every run found, read or skipped.
    """
    runs_found, wandb_dirs = discover(directories)
    if found is not None:
        found += [path for path, _, _, _ in runs_found] + wandb_dirs
    given = {os.path.realpath(d) for d in directories}
    runs: List[Run] = []
    skipped: List[str] = []
    for path, source, files, label in runs_found:
        try:
            runs.append(read_run(path, source, files, label, prefix))
        except NoScoresError as err:
            if os.path.realpath(path) in given:
                raise
            skipped.append(str(err))
    if not runs:
        raise RunsError(
            skipped[0]
            if len(skipped) == 1
            else f"{' '.join(directories)}: no run holds {prefix!r} "
            f"scores ({len(skipped)} runs found, e.g. {skipped[0]})"
        )
    if warn is not None:
        for run in runs:
            for message in run.warnings:
                warn(message)
        for message in skipped:
            warn(f"skipped {message}")
        if wandb_dirs:
            warn(
                f"skipped {len(wandb_dirs)} W&B offline run(s), e.g. {wandb_dirs[0]}: wandb's Python API cannot "
                "read offline runs"
            )
    return runs
