"""``lightning-prd runs DIR [DIR ...]``: the scores the callback logged for several runs, side by side.

Reading is :mod:`lightning_prd.runs`, the figure :func:`lightning_prd.runs.plotting.plot_runs`; this
module holds the subcommand's arguments, its table, ``--json`` and ``--plot``.

Example:
    >>> import os, tempfile
    >>> from torch.utils.tensorboard import SummaryWriter
    >>> from lightning_prd.cli import main
    >>> root = tempfile.mkdtemp()
    >>> with SummaryWriter(os.path.join(root, "baseline")) as writer:
    ...     for epoch, (p, d) in enumerate([(0.2, 0.5), (0.6, 1.3), (0.5, 0.9)]):
    ...         writer.add_scalar("prd/precision", p, global_step=epoch)
    ...         writer.add_scalar("prd/density", d, global_step=epoch)
    >>> main(["runs", root])  # doctest: +NORMALIZE_WHITESPACE
                                 precision                density
    run       source       evals last    best    epoch  last    best    epoch
    --------  -----------  -----  ------  ------  -----  ------  ------  -----
    baseline  tensorboard  3      0.5000  0.6000  1      0.9000  0.9000  2
    <BLANKLINE>
    last: the value at the run's last evaluation; best: the highest value and the epoch of it
    (density: the value closest to 1; frechet_distance: the lowest)
    0
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, List, Sequence

from lightning_prd import __version__
from lightning_prd.cli.checks import check_outputs, write_output
from lightning_prd.cli.inputs import CLIError
from lightning_prd.runs.reader import PANEL_SCORES, Run, RunsError, load_runs, score_order
from lightning_prd.runs.scores import format_score

EPILOG = """\
runs:
  A DIR is a run or a folder searched recursively for runs. A run is a directory with
  TensorBoard event files (read with TensorBoard's EventAccumulator) or a CSVLogger's
  metrics.csv; every scalar named PREFIX<score> is a score, taken per epoch (an epoch logged
  twice keeps its last value). W&B offline runs (wandb/offline-run-*) are not read: wandb's
  Python API reads runs from a W&B server only; log with a CSVLogger next to the WandbLogger.

table (and --json):
  one row per run: for every score its last value and its best value with the epoch of the
  best. Best is the highest, the lowest for frechet_distance, the closest to 1 for density.
  --plot: precision-recall trajectories of all runs in one panel (first epoch: open circle,
  last: square), and precision, recall, density, coverage over epochs, one line per run.
  Outputs never overwrite a file of a run. Bad input: exit status 1 and one line on stderr.

examples:
  python examples/gan_ring.py --seed 0        # logs to runs/gan_ring/seed0_epochs50
  python examples/gan_ring.py --seed 1        # logs to runs/gan_ring/seed1_epochs50
  lightning-prd runs runs/gan_ring --plot runs.png --json runs.json
  lightning-prd runs runs/gan_ring/seed0_epochs50 lightning_logs/version_3 --scores precision coverage
"""


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
    p.add_argument("--scores", nargs="+", metavar="NAME", help="only these scores in the table (default: every one)")
    p.add_argument("--debug", action="store_true", help="show the full traceback of errors")
    p.set_defaults(handler=run_command)
    return p


def _fmt(value: Any) -> str:
    return "-" if value is None else format_score(float(value))


def format_table(runs: Sequence[Run], names: Sequence[str]) -> str:
    """The table: run, source, number of evaluations, then ``last``, ``best``, ``epoch`` per score."""
    summaries = [r.summary() for r in runs]
    columns: List[List[str]] = [
        ["run"] + [r.label for r in runs],
        ["source"] + [r.source for r in runs],
        ["evals"] + [str(max(len(p) for p in r.scores.values())) for r in runs],
    ]
    groups = ["", "", ""]
    for name in names:
        cells = [s.get(name) for s in summaries]
        columns += [
            ["last"] + [_fmt(c["last"]) if c else "-" for c in cells],
            ["best"] + [_fmt(c["best"]) if c else "-" for c in cells],
            ["epoch"] + [str(c["best_epoch"]) if c and c["best_epoch"] is not None else "-" for c in cells],
        ]
        groups += [name, "", ""]
    widths = [max(len(x) for x in col) for col in columns]
    for i in range(3, len(columns), 3):  # a score's name must fit over its three columns
        extra = len(groups[i]) - (widths[i] + widths[i + 1] + widths[i + 2] + 4)
        widths[i] += max(extra, 0)
    top = "  ".join(g.ljust(w) for g, w in zip(groups, widths)).rstrip()
    rows = [top, "  ".join(c[0].ljust(w) for c, w in zip(columns, widths)).rstrip(), "  ".join("-" * w for w in widths)]
    for r in range(1, len(runs) + 1):
        rows.append("  ".join(c[r].ljust(w) for c, w in zip(columns, widths)).rstrip())
    return "\n".join(rows)


LEGEND = (
    "last: the value at the run's last evaluation; best: the highest value and the epoch of it\n"
    "(density: the value closest to 1; frechet_distance: the lowest)"
)


def _check_outputs(args: argparse.Namespace, runs: Sequence[Run]) -> None:
    """Refuse outputs that are a directory, the same file twice, or any file of a run (by identity:
    hard links and symbolic links too), with the checks of ``evaluate`` (:mod:`lightning_prd.cli.checks`)."""
    inputs = [("a file of a run,", str(f)) for r in runs for f in r.files]
    try:
        check_outputs(args, inputs, lambda out: out.suffix[1:].lower() or "png")
    except CLIError as err:
        raise RunsError(str(err)) from None


def _write(path: str, flag: str, write: Any) -> None:
    try:
        write_output(flag, path, write)
    except CLIError as err:
        raise RunsError(str(err)) from None


def run_command(args: argparse.Namespace) -> int:
    """Run ``lightning-prd runs``; errors are raised (the caller prints one line)."""

    def warn(message: str) -> None:
        print(f"lightning-prd runs: warning: {message}", file=sys.stderr)

    runs = load_runs(args.dirs, prefix=args.prefix, warn=warn)
    available = score_order({n for r in runs for n in r.scores})
    names = available
    if args.scores:
        unknown = [n for n in args.scores if n not in available]
        if unknown:
            raise RunsError(
                f"--scores {' '.join(unknown)}: not logged by these runs; available: {', '.join(available)}"
            )
        names = list(args.scores)
    _check_outputs(args, runs)
    print(format_table(runs, names))
    print()
    print(LEGEND)
    if args.json:
        payload = {
            "command": "runs",
            "version": __version__,
            "prefix": args.prefix,
            "runs": [
                {
                    "label": r.label,
                    "path": r.path,
                    "source": r.source,
                    "files": r.files,
                    "scores": {n: s for n, s in r.summary().items() if n in names},
                    "history": {n: [[e, v] for e, v in r.scores[n]] for n in names if n in r.scores},
                }
                for r in runs
            ],
        }
        text = json.dumps(_finite(payload), indent=2, allow_nan=False) + "\n"  # standard JSON: null, not NaN
        _write(args.json, "--json", lambda out: out.write_text(text))
    if args.plot:
        from lightning_prd.runs.plotting import plot_runs

        fig = plot_runs({r.label: r.scores for r in runs}, panels=PANEL_SCORES)
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
