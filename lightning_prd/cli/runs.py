"""``lightning-prd runs DIR [DIR ...]``: the scores the callback logged for several runs, side by side.

Reading is :mod:`lightning_prd.runs`, the figure :func:`lightning_prd.runs.plotting.plot_runs`; this
module holds the subcommand's arguments, its table, ``--json`` and ``--plot``.

Example:
    >>> import os, tempfile
    >>> from torch.utils.tensorboard import SummaryWriter
    >>> from lightning_prd.cli import main
    >>> root = tempfile.mkdtemp()
    >>> for run, scores in (("baseline", [(0.2, 0.5), (0.6, 1.3), (0.5, 0.9)]), ("wide", [(0.3, 0.6), (0.7, 0.8)])):
    ...     with SummaryWriter(os.path.join(root, run)) as writer:
    ...         for epoch, (p, d) in enumerate(scores):
    ...             writer.add_scalar("prd/precision", p, global_step=epoch)
    ...             writer.add_scalar("prd/density", d, global_step=epoch)
    >>> main(["runs", root])  # doctest: +NORMALIZE_WHITESPACE
                           precision         density
    run      source evals  last   best   ep  last   best   ep
    -------- ------ -----  ------ ------ --  ------ ------ --
    baseline tb     3      0.5000 0.6000 1   0.9000 0.9000 2
    wide     tb     2      0.7000 0.7000 1   0.8000 0.8000 1
    <BLANKLINE>
    last: the value at the run's last evaluation; best: the highest value and its epoch (ep)
    (density: the value closest to 1; frechet_distance: the lowest); source tb: TensorBoard event files
    <BLANKLINE>
    the better run, by the last evaluation (A > B: A is better; A = B: equally good):
      precision (higher)    wide 0.7000 (epoch 1) > baseline 0.5000 (epoch 2)
      density (1 is ideal)  baseline 0.9000 (epoch 2) > wide 0.8000 (epoch 1)
    0
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import textwrap
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

from lightning_prd import __version__
from lightning_prd.cli.checks import check_outputs, write_output
from lightning_prd.cli.inputs import CLIError
from lightning_prd.cli.runs_fingerprints import (
    COMPACT,
    TABLE_WIDTH,
    compact_fingerprint,
    fingerprint_table,
    fingerprint_warnings,
    wrapped,
)
from lightning_prd.cli.verdicts import verdict_lines
from lightning_prd.runs.finding import RunsError, contains, is_run_file
from lightning_prd.runs.labels import distinct_names
from lightning_prd.runs.ranking import identical_curves, ranking, runs_direction
from lightning_prd.runs.reader import PANEL_SCORES, Run, load_runs, score_order
from lightning_prd.runs.scores import format_score, ranks

EPILOG = """\
runs:
  A DIR is a run or a folder searched recursively for runs, through symbolic links too (a link
  to a folder already searched, or to a folder it lies in, is not followed again). A run is a
  directory with TensorBoard event files (read with TensorBoard's EventAccumulator) or a
  CSVLogger's metrics.csv; every scalar named PREFIX<score> is a score, taken per epoch (an
  epoch logged twice keeps its last value). W&B offline runs (wandb/offline-run-*) are not
  read: wandb's Python API reads runs from a W&B server only; log with a CSVLogger next to the
  WandbLogger.

fingerprints:
  PRDCallback logs once per fit how its scores were made: protocol, extractor, SHA-256 of the
  weights file, resize, quantisation, input size, dtype, real (N) and generated (M) sample
  counts, k, ball, every option of each score family (probabilistic.k, ...), each score's
  direction (direction/<score>) and the package version (TensorBoard: the text
  PREFIXfingerprint; CSV: fingerprint.json beside metrics.csv). Below the table, one line per
  run (wrapped at 100 columns) shows it, compact, with the family options that differ; --json
  holds it whole. When the runs' fingerprints differ (the version and directions aside), a
  warning on stderr, wrapped at 100 columns, names each differing field with its values and
  runs: their scores are not comparable. A run without a fingerprint among runs with one is
  named in a warning too.

damaged event files:
  Every event file is checked whole first (the framing and CRC32C checksums of its records).
  TensorBoard stops reading a file at a damaged or cut-off record; such a file is read up to
  the damage and named in a warning on stderr with the byte of the damage and how many of its
  bytes were read (and in the run's "warnings" in --json); the exit status stays 0. A run with
  no scores read names the damage as the cause.

run labels:
  the parts of the runs' paths that tell them apart: the path parts every run shares at the
  start and at the end are dropped (logs/baseline/version_0 and logs/wide/version_0 read
  baseline and wide), then shortened in the middle (to no fewer than 10 characters) where the
  table would be wider than 100 columns; --json holds every run's whole label and its name.

table (and --json):
  one row per run: its source (tb: TensorBoard, csv), its evaluations, and for every score its
  last value and its best value with the epoch of the best (ep). The default table shows
  precision, recall, density and coverage (when the runs logged none of them, their first four
  scores); --scores NAME ... picks others, --scores all shows every score (wider); --json holds
  every score.

directions:
  best is the highest, the lowest (frechet_distance, kid), the closest to 1 (density), to 0
  (ct, fld_gap) or to a family's target. The direction recorded with the run by PRDCallback
  comes first (a family registered in the training script), then the families registered here.
  A derived key takes its score's direction (per_class/<score>/<class>, <score>_mean,
  coverage_min); a label or count (lowest_coverage_class, num_real) ranks nothing; a score of
  unknown direction is shown, has no best and is not ranked.

the better run:
  under the table, one line per score of the table: the runs ranked by their last evaluation,
  best first, in the score's direction, "A > B" when A is better, "A = B" when equally good
  (equal to float32 precision: TensorBoard stores float32, CSV float64; or as far from the
  target); the epochs when the last evaluations lie at different epochs; the runs without a
  finite last value; and the runs whose curves of the score are identical (the same values to
  float32 precision at the same epochs). --json: "ranking" {score: [labels, best first]} for
  every score that ranks, "directions" {score: direction} and "identical_curves" {score:
  [[labels], ...]}.
  --plot: precision-recall trajectories of all runs in one panel (first epoch: open circle,
  last: square), and precision, recall, density, coverage over epochs, one line per run;
  non-finite values (NaN, inf) are gaps in the lines.
  Outputs are never written inside a run directory being compared (new file or old, whatever
  its name, links resolved), onto a file read, nor as a file that would be read as a run next
  time (an event file, metrics.csv or *.wandb below a DIR). Bad input: exit status 1 and one
  line on stderr.

examples:
  python examples/gan_ring.py --seed 0        # logs to runs/gan_ring/seed0_epochs50
  python examples/gan_ring.py --seed 1        # logs to runs/gan_ring/seed1_epochs50
  lightning-prd runs runs/gan_ring --plot runs.png --json runs.json
  lightning-prd runs runs/gan_ring/seed0_epochs50 lightning_logs/version_3 --scores precision coverage
  lightning-prd runs runs/gan_ring --scores all
"""

#: the scores of the default table (those the runs logged), in this order
MAIN_SCORES = PANEL_SCORES
#: run labels are shortened to fit the table's width, but never below this many characters
MIN_LABEL = 10


def add_runs_parser(sub: Any, formatter_class: Any) -> argparse.ArgumentParser:
    """Register the ``runs`` subcommand on ``sub`` (an argparse subparsers object)."""
    p = sub.add_parser(
        "runs",
        help="compare the scores PRDCallback logged for several runs",
        formatter_class=formatter_class,
        epilog=EPILOG,
        description="Read what PRDCallback logged for several runs (TensorBoard event files or CSVLogger "
        "metrics.csv) and print one row per run: the last and the best value of every score.",
    )
    p.add_argument("dirs", nargs="+", metavar="DIR", help="a run directory, or a folder of runs (searched recursively)")
    p.add_argument("--json", metavar="OUT", help="write the table (and every run's scores per epoch) to this JSON file")
    p.add_argument("--plot", metavar="OUT.png", help="write a PNG: trajectories and scores over epochs of every run")
    p.add_argument("--prefix", default="prd/", help="the callback's key prefix (default: prd/)")
    p.add_argument(
        "--scores",
        nargs="+",
        metavar="NAME",
        help="the scores in the table, or all (default: precision recall density coverage); --json holds every score",
    )
    p.add_argument("--debug", action="store_true", help="show the full traceback of errors")
    p.set_defaults(handler=run_command)
    return p


def _fmt(value: Any) -> str:
    return "-" if value is None else format_score(float(value))


#: how the table names a run's source (the JSON keeps the full name)
SOURCE_SHORT = {"tensorboard": "tb", "csv": "csv"}


def format_table(runs: Sequence[Run], names: Sequence[str], width: int = TABLE_WIDTH) -> str:
    """The table: run, source (``tb``: TensorBoard, ``csv``), number of evaluations, then ``last``, ``best``
    and ``ep`` (the epoch of the best) per score.

    Columns of a group (the run's, a score's) are one space apart, groups two. Run labels are
    shortened in the middle when the table would be wider than ``width`` (:func:`table_labels`).
    """
    columns, widths, groups = _columns(runs, names)
    columns[0] = ["run"] + table_labels(runs, names, width)
    widths[0] = max(len(x) for x in columns[0])

    def line(cells: Sequence[str]) -> str:
        parts = [
            " ".join(c.ljust(w) for c, w in zip(cells[3 * g : 3 * g + 3], widths[3 * g : 3 * g + 3]))
            for g in range(len(groups))
        ]
        return "  ".join(parts).rstrip()

    spans = [sum(widths[3 * g : 3 * g + 3]) + 2 for g in range(len(groups))]
    rows = ["  ".join(name.ljust(w) for name, w in zip(groups, spans)).rstrip(), line([c[0] for c in columns])]
    rows.append(line(["-" * w for w in widths]))
    rows += [line([c[r] for c in columns]) for r in range(1, len(runs) + 1)]
    return "\n".join(rows)


def table_labels(runs: Sequence[Run], names: Sequence[str], width: int = TABLE_WIDTH) -> List[str]:
    """The run labels as the table of ``names`` shows them: the parts of the runs' paths that tell them apart
    (:func:`~lightning_prd.runs.labels.distinct_names`: the path parts every run shares at the start and at the
    end dropped), then shortened in the middle (:func:`shorten_labels`) when the table would be wider than
    ``width``, to no fewer than :data:`MIN_LABEL` characters (kept as they are when even that would not fit, e.g.
    with ``--scores all``)."""
    _, widths, groups = _columns(runs, names)
    rest = sum(widths[1:]) + 2 * (len(groups) - 1) + 2 * len(groups)  # everything but the label column
    labels = distinct_names([r.label for r in runs])
    return shorten_labels(labels, width - rest) if width - rest >= MIN_LABEL else labels


def _columns(runs: Sequence[Run], names: Sequence[str]) -> Tuple[List[List[str]], List[int], List[str]]:
    """The table's columns (header cell first; the label column with full labels), their widths and the groups'
    names (``""`` for the run's group)."""
    summaries = [r.summary() for r in runs]
    columns: List[List[str]] = [
        ["run"] + [r.label for r in runs],
        ["source"] + [SOURCE_SHORT.get(r.source, r.source) for r in runs],
        ["evals"] + [str(max(len(p) for p in r.scores.values())) for r in runs],
    ]
    groups = [""]
    for name in names:
        cells = [s.get(name) for s in summaries]
        columns += [
            ["last"] + [_fmt(c["last"]) if c else "-" for c in cells],
            ["best"] + [_fmt(c["best"]) if c else "-" for c in cells],
            ["ep"] + [str(c["best_epoch"]) if c and c["best_epoch"] is not None else "-" for c in cells],
        ]
        groups.append(name)
    widths = [max(len(x) for x in col) for col in columns]
    for g, name in enumerate(groups[1:], start=1):  # a score's name must fit over its three columns
        widths[3 * g + 2] += max(len(name) - (sum(widths[3 * g : 3 * g + 3]) + 2), 0)
    return columns, widths, groups


def shorten_labels(labels: Sequence[str], width: int) -> List[str]:
    """``labels`` cut to ``width`` characters by a ``...`` in the middle, keeping them distinct.

    As much of the end as fits is kept (where runs of one folder differ), then of the start; if
    no cut keeps the labels distinct they are returned whole.

    Example:
        >>> shorten_labels(["sweep/learning_rate_0.1/seed0", "sweep/learning_rate_0.1/seed1", "b"], 14)
        ['...e_0.1/seed0', '...e_0.1/seed1', 'b']
    """
    if all(len(label) <= width for label in labels) or width < 5:
        return list(labels)
    keep = width - 3
    for head in range(0, keep):
        cut = [
            label if len(label) <= width else label[:head] + "..." + label[len(label) - keep + head :]
            for label in labels
        ]
        if len(set(cut)) == len(set(labels)):
            return cut
    return list(labels)


LABELS_NOTE = (
    "run labels: the parts of the runs' paths that tell them apart (shortened to fit where needed); "
    "--json holds them whole"
)

LEGEND = (
    "last: the value at the run's last evaluation; best: the highest value and its epoch (ep)\n"
    "(density: the value closest to 1; frechet_distance: the lowest); source tb: TensorBoard event files"
)


def _check_outputs(args: argparse.Namespace, runs: Sequence[Run], found: Sequence[str]) -> None:
    """Refuse outputs that are a directory, the same file twice, any file read (by identity: hard
    links and symbolic links too), anything inside a run directory found (``found``), or a file
    that would be read as a run next time, with the checks of ``evaluate`` (:mod:`lightning_prd.cli.checks`)."""
    inputs = [("a file of a run,", str(f)) for r in runs for f in r.files]
    keep_out = [(f"the run {path}", path) for path in found]
    searched = [(d, os.path.realpath(d)) for d in args.dirs]

    def would_be_read(out: Path) -> Optional[str]:
        for where in (Path(os.path.abspath(out)), Path(os.path.realpath(out))):
            if not is_run_file(where.name):
                continue
            for text, real in searched:
                if contains(real, os.path.realpath(where.parent)):
                    return f"a file named {where.name!r} below DIR {text} would be read as a run next time"
        return None

    try:
        check_outputs(
            args, inputs, lambda out: out.suffix[1:].lower() or "png", keep_out=keep_out, would_be_read=would_be_read
        )
    except CLIError as err:
        raise RunsError(str(err)) from None


def _write(path: str, flag: str, write: Any) -> None:
    try:
        write_output(flag, path, write)
    except CLIError as err:
        raise RunsError(str(err)) from None


def run_command(args: argparse.Namespace) -> int:
    """Run ``lightning-prd runs``; errors are raised (the caller prints one line)."""

    def warn(message: str, wrap: bool = False) -> None:
        text = f"lightning-prd runs: warning: {message}"
        print(wrapped(message, 4, "lightning-prd runs: warning: ") if wrap else text, file=sys.stderr)

    found: List[str] = []
    runs = load_runs(args.dirs, prefix=args.prefix, warn=warn, found=found)
    available = score_order({n for r in runs for n in r.scores})
    names = [n for n in MAIN_SCORES if n in available] or available[:4]
    if args.scores and "all" in args.scores:
        names = available
    elif args.scores:
        unknown = [n for n in args.scores if n not in available]
        if unknown:
            raise RunsError(
                f"--scores {' '.join(unknown)}: not logged by these runs; available: {', '.join(available)} (or all)"
            )
        names = list(args.scores)
    _check_outputs(args, runs, found)
    table = format_table(runs, names)
    print(table)
    print()
    print(LEGEND)
    shown = table_labels(runs, names)
    names_of = {r.label: label for r, label in zip(runs, shown)}
    if shown != [r.label for r in runs]:
        print(wrapped(LABELS_NOTE, 0))
    if len(runs) > 1:
        print("\nthe better run, by the last evaluation (A > B: A is better; A = B: equally good):")
        print("\n".join(verdict_lines(runs, names, names_of)))
    hidden = [n for n in available if n not in names]
    if hidden:
        note = f"not shown: {', '.join(hidden)} (--scores all shows every score; --json holds them all)"
        print(textwrap.fill(note, width=100, break_on_hyphens=False))
    if any(r.fingerprint is not None for r in runs):
        print("\nfingerprints:")
        width = min(max(len(names_of[r.label]) for r in runs), TABLE_WIDTH // 3)
        extra = [key for key in fingerprint_table(runs) if key not in dict(COMPACT).values()]
        for r in runs:
            head = f"  {names_of[r.label].ljust(width)}  "
            print(wrapped(compact_fingerprint(r.fingerprint, extra), min(len(head), TABLE_WIDTH // 3 + 4), head))
    for message in fingerprint_warnings(runs, names_of):
        warn(message, wrap=True)  # lines of 100 columns, the next ones indented
    if args.json:
        payload = {
            "command": "runs",
            "version": __version__,
            "prefix": args.prefix,
            "table_scores": names,
            "fingerprint_differences": fingerprint_table(runs),
            "ranking": {n: ranking(runs, n) for n in available if ranks(runs_direction(runs, n))},
            "directions": {n: runs_direction(runs, n) for n in available},
            "identical_curves": {n: groups for n in available if (groups := identical_curves(runs, n))},
            "runs": [
                {
                    "label": r.label,
                    "name": names_of[r.label],
                    "path": r.path,
                    "source": r.source,
                    "files": r.files,
                    "warnings": r.warnings,
                    "fingerprint": r.fingerprint,
                    "scores": r.summary(),
                    "history": {n: [[e, v] for e, v in r.scores[n]] for n in score_order(r.scores)},
                }
                for r in runs
            ],
        }
        text = json.dumps(_finite(payload), indent=2, allow_nan=False) + "\n"  # standard JSON: null, not NaN
        _write(args.json, "--json", lambda out: out.write_text(text))
    if args.plot:
        from lightning_prd.runs.plotting import plot_runs

        fig = plot_runs({names_of[r.label]: r.scores for r in runs}, panels=PANEL_SCORES)
        _write(args.plot, "--plot", lambda out: fig.savefig(out, format=out.suffix[1:].lower() or "png"))
    return 0


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float (a NaN or infinite logged score) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
