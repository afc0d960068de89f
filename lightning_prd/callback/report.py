"""The one line ``PRDCallback(verbose=True)`` prints per evaluation, through Lightning's rank-zero logging.

The line names the epoch, precision, recall, density, coverage and the Fréchet distance (those the metric
returned; a metric with none of them shows its first four scores) and the evaluation's wall time::

    lightning_prd: epoch 3 · precision 0.712 · recall 0.655 · density 0.930 · coverage 0.810 · 4.2 s

While a progress bar is enabled it is printed through the bar, as ``LightningModule.print`` prints: with
Lightning's TQDM bar by ``tqdm.write`` to standard output (the bars are cleared, the line written on a line of its
own, the bars drawn again below it), with any other bar by its ``print`` (the Rich bar's console). Without a bar it
goes to ``rank_zero_info`` (the logger Lightning's own ``ModelCheckpoint(verbose=True)`` writes to, at level INFO).
Either way it shows once per evaluation under DDP, from global rank zero.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Mapping

from pytorch_lightning.callbacks import TQDMProgressBar
from pytorch_lightning.utilities.rank_zero import rank_zero_info
from tqdm import tqdm

from lightning_prd.runs.scores import DIRECTIONS

#: the scores of the line, in this order (those the metric returned)
LINE_SCORES = ("precision", "recall", "density", "coverage", "frechet_distance")


def short(value: float) -> str:
    """A score in few characters: 3 decimals below 10, 1 decimal below 100,000, else 3 significant digits.

    Example:
        >>> short(0.71249), short(12.34), short(123456.0), short(float("nan"))
        ('0.712', '12.3', '1.23e+05', 'nan')
    """
    if not math.isfinite(value):
        return str(value)
    if abs(value) < 10:
        return f"{round(value, 3) + 0.0:.3f}"
    return f"{value:.1f}" if abs(value) < 1e5 else f"{value:.3g}"


def evaluation_line(record: Mapping[str, Any], seconds: float, prefix: str = "prd/") -> str:
    """The line of one evaluation: ``record`` is its ``history`` entry (``epoch``, the scores, ``final``).

    Example:
        >>> record = {"epoch": 3, "precision": 0.7124, "recall": 0.655, "density": 0.93, "coverage": 0.81}
        >>> evaluation_line(record, 4.23)
        'lightning_prd: epoch 3 · precision 0.712 · recall 0.655 · density 0.930 · coverage 0.810 · 4.2 s'
        >>> evaluation_line({"epoch": 9, "final": True, "kid": 0.01}, 0.5, prefix="gen/")
        'lightning_prd gen/: epoch 9 (final) · kid 0.010 · 0.5 s'
    """
    scores = [n for n in LINE_SCORES if n in record]
    if not scores:  # a metric of other scores: its first four, in the package's table order
        known = [n for n in DIRECTIONS if n in record]
        others = sorted(n for n in record if n not in known and n not in ("epoch", "final"))
        scores = [n for n in known + others if isinstance(record[n], (int, float))][:4]
    who = "lightning_prd:" if prefix == "prd/" else f"lightning_prd {prefix}:"
    head = f"{who} epoch {record['epoch']}{' (final)' if record.get('final') else ''}"
    cells = [head] + [f"{n} {short(float(record[n]))}" for n in scores] + [f"{seconds:.1f} s"]
    return " · ".join(cells)


def report_evaluation(trainer: Any, record: Mapping[str, Any], seconds: float, prefix: str) -> None:
    """Show :func:`evaluation_line` from global rank zero only: through the trainer's progress bar when one is
    enabled (:func:`print_line`), else logged at level INFO."""
    if trainer.is_global_zero:
        print_line(trainer, evaluation_line(record, seconds, prefix))


def print_line(trainer: Any, line: str) -> None:
    """``line`` on a line of its own in the terminal: through ``trainer``'s enabled progress bar, else to
    ``rank_zero_info``. Lightning's TQDM bar prints only while one of its bars is open (not after the last epoch),
    so for it the line goes to ``tqdm.write``, which clears every open bar, writes and draws the bars again."""
    bar = getattr(trainer, "progress_bar_callback", None)
    if bar is None or not getattr(bar, "is_enabled", True):
        rank_zero_info(line)
        return
    if isinstance(bar, TQDMProgressBar):
        tqdm.write(line, file=sys.stdout)  # Lightning's bars write to standard output
    else:
        bar.print(line)
