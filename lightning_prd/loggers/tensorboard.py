"""TensorBoard adapter: scalars by epoch, the PRD curve in the PR-curve dashboard, figures, a layout.

What it writes (``P`` is the prefix, default ``prd/``):

* ``P<score>`` scalars with the **epoch** as step;
* ``Pprd_curve`` in the *PR Curves* dashboard (``add_pr_curve_raw``), recall on x, one entry per
  epoch (step slider; runs overlay). The 1001 PRD points are downsampled to at most 127, the
  plugin's limit, and every point gets TP=1, FP=TN=FN=0 so the plugin keeps them all (it trims
  trailing points with TP+FP=0);
* ``Pfigures/prd_curve``, ``Pfigures/alpha_beta``, ``Pfigures/trajectory`` images (``add_figure``);
* with the callback's ``log_images``: ``Psamples/least_realistic`` and ``Psamples/uncovered_real``
  image grids and a ``Prealism`` histogram;
* once per writer, a *Custom Scalars* layout: a category ``P`` with one chart per score, where
  TensorBoard overlays the runs (one line and one legend entry per run), and a category
  ``P per run`` overlaying precision, recall, density and coverage (and F_8/F_1/8,
  α-precision/β-recall/authenticity) in one chart per group, to read within one run.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Sequence

import numpy as np

from lightning_prd.loggers.base import LoggerAdapter, build_figures, has_prd
from lightning_prd.runs.plotting import downsample, how_to_read
from lightning_prd.runs.scores import DIRECTIONS

#: the PR-curve plugin's largest number of points
MAX_PR_POINTS = 127

_GROUPS = {
    "precision, recall, density, coverage": ["precision", "recall", "density", "coverage"],
    "PRD: F_8 (recall) and F_1/8 (precision)": ["f_beta", "f_inv_beta"],
    "α-precision, β-recall, authenticity": ["alpha_precision", "beta_recall", "authenticity"],
    "Fréchet distance": ["frechet_distance"],
}


def custom_scalars_layout(prefix: str) -> Dict[str, Dict[str, List[Any]]]:
    """The Custom Scalars layout: one chart per score (runs overlaid), then one chart per group of scores.

    Tags are matched exactly. In the first category each chart holds one score, so with several
    runs its legend names the runs; the second (``<prefix> per run``) overlays related scores,
    read best with one run selected.

    Example:
        >>> layout = custom_scalars_layout("prd/")
        >>> list(layout)
        ['prd/', 'prd/ per run']
        >>> layout["prd/"]["density (1 is ideal)"]
        ['Multiline', ['^prd/density$']]
    """

    def tag(name: str) -> str:
        return f"^{re.escape(prefix)}{name}$"

    per_score = {f"{n} ({how_to_read(n)})": ["Multiline", [tag(n)]] for n in DIRECTIONS}
    groups = {title: ["Multiline", [tag(n) for n in names]] for title, names in _GROUPS.items()}
    return {prefix: per_score, f"{prefix} per run": groups}


class TensorBoardAdapter(LoggerAdapter):
    """Writes through ``logger.experiment``, a ``torch.utils.tensorboard.SummaryWriter``."""

    supports_curves = True

    def __init__(self, logger: Any, prefix: str) -> None:
        super().__init__(logger, prefix)
        self._layout_written = False

    def log_scalars(self, metrics: Mapping[str, float], epoch: int, step: int) -> None:
        writer = self.logger.experiment
        if not self._layout_written:
            writer.add_custom_scalars(custom_scalars_layout(self.prefix))
            self._layout_written = True
        for tag, value in metrics.items():
            writer.add_scalar(tag, value, global_step=epoch)

    def log_curves(self, curves: Mapping[str, np.ndarray], history: Sequence[Mapping[str, Any]], epoch: int) -> None:
        writer = self.logger.experiment
        if has_prd(curves):
            precision, recall = np.asarray(curves["prd_precision"]), np.asarray(curves["prd_recall"])
            keep = downsample(len(precision), MAX_PR_POINTS)
            n = len(keep)
            writer.add_pr_curve_raw(
                f"{self.prefix}prd_curve",
                true_positive_counts=np.ones(n),
                false_positive_counts=np.zeros(n),
                true_negative_counts=np.zeros(n),
                false_negative_counts=np.zeros(n),
                precision=precision[keep],
                recall=recall[keep],
                global_step=epoch,
                num_thresholds=n,
            )
        for name, fig in build_figures(curves, history, epoch).items():
            writer.add_figure(f"{self.prefix}figures/{name}", fig, global_step=epoch, close=True)

    def log_samples(self, grids: Mapping[str, np.ndarray], histograms: Mapping[str, np.ndarray], epoch: int) -> None:
        writer = self.logger.experiment
        for name, grid in grids.items():
            writer.add_image(f"{self.prefix}samples/{name}", grid, global_step=epoch, dataformats="HWC")
        for name, values in histograms.items():
            writer.add_histogram(f"{self.prefix}{name}", values, global_step=epoch)

    def flush(self) -> None:
        self.logger.experiment.flush()
