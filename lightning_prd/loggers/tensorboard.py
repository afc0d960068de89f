"""TensorBoard adapter: scalars at Lightning's step, the PRD curve in the PR-curve dashboard, figures, a layout,
the fingerprint in the *HParams* tab.

What it writes (``P`` is the prefix, default ``prd/``), everything of one evaluation at one step: the step
Lightning logs its own metrics (the losses) at, so the scores and the losses share the x-axis of the
*Scalars* tab and the step slider of the other tabs means one thing:

* ``P<score>`` scalars, and ``Pepoch``, the epoch evaluated (written first at the step: ``lightning-prd runs``
  reads each score's epoch from it);
* ``Pprd_curve`` in the *PR Curves* dashboard (``add_pr_curve_raw``), recall on x, one entry per
  evaluation (step slider; runs overlay). The 1001 PRD points are downsampled to at most 127, the
  plugin's limit, and every point gets TP=1, FP=TN=FN=0 so the plugin keeps them all (it trims
  trailing points with TP+FP=0);
* ``Pfigures/prd_curve``, ``Pfigures/alpha_beta``, ``Pfigures/trajectory`` images (``add_figure``; titled
  with the epoch);
* with the callback's ``log_images``: ``Psamples/least_realistic`` and ``Psamples/uncovered_real``
  image grids and a ``Prealism`` histogram; with ``log_closest_pairs``: ``Psamples/closest_pairs``;
* with a per-class metric, ``Pper_class/<score>/<class>`` scalars (one tag per class);
* once per fit, the fingerprint: as the text ``Pfingerprint`` (*Text* tab, JSON; ``lightning-prd runs`` reads
  it), as hyperparameters ``Pfingerprint/<field>`` beside the module's in the logger's ``hparams.yaml``
  (rewritten), and in the *HParams* tab: the run's session (:func:`hold_session`) with the module's
  hyperparameters, the fingerprint's fields and the scores as metrics (and ``hp_metric`` when the logger
  has ``default_hp_metric``). TensorBoard shows a run's first session only, so with several callbacks on one
  logger the session holds the fingerprint of the first to evaluate;
* a *Custom Scalars* layout: a category ``P`` with one chart per score the run logs, titled with
  the direction that is better; TensorBoard overlays the runs in it (one line and one legend entry
  per run, the runs told apart by colour). Nothing is charted that was not logged, and no chart
  overlays several scores. With per-class scores, a category ``Pper_class`` with one chart per score
  whose lines are the classes (with several runs: one line per run and class). Several callbacks
  (prefixes) on one writer share one layout with a category each: TensorBoard shows the newest layout
  of a run, so the merged layout is written again when a prefix or a score joins it, and only then.
"""

from __future__ import annotations

import re
import weakref
from typing import Any, Dict, Iterable, List, Mapping, MutableMapping, Optional, Sequence

import numpy as np

from lightning_prd.loggers.base import PER_CLASS, LoggerAdapter, build_figures, has_prd, per_class_parts
from lightning_prd.loggers.tensorboard_hparams import rewrite_hparams_file, write_session
from lightning_prd.runs.epochs import EPOCH
from lightning_prd.runs.plotting import downsample, how_to_read
from lightning_prd.runs.reader import fingerprint_text
from lightning_prd.runs.scores import DIRECTIONS

#: the PR-curve plugin's largest number of points
MAX_PR_POINTS = 127

#: per writer: the score names each prefix logged, in order, and the layout last written
_WRITTEN: MutableMapping[Any, Dict[str, Any]] = weakref.WeakKeyDictionary()


def custom_scalars_layout(prefix: str, names: Optional[Iterable[str]] = None) -> Dict[str, Dict[str, List[Any]]]:
    """The Custom Scalars layout of ``prefix``: one chart per score in ``names`` (default: every score
    of :data:`~lightning_prd.runs.scores.DIRECTIONS`), known scores first in that table's order.

    Each chart holds one tag, matched exactly, so with several runs its lines are the runs and its
    legend names them; a score the package knows is titled with the direction that is better.
    Per-class scores (``per_class/<score>/<class>``) get a category ``<prefix>per_class`` of their own with
    one chart per score whose lines are the classes.

    Example:
        >>> layout = custom_scalars_layout("prd/", ["coverage", "density", "my_score"])
        >>> list(layout), list(layout["prd/"])
        (['prd/'], ['density (1 is ideal)', 'coverage (higher is better)', 'my_score'])
        >>> layout["prd/"]["density (1 is ideal)"]
        ['Multiline', ['^prd/density$']]
        >>> custom_scalars_layout("prd/", ["coverage", "per_class/coverage/0", "per_class/coverage/1"])["prd/per_class"]
        {'coverage per class (higher is better)': ['Multiline', ['^prd/per_class/coverage/']]}
    """
    wanted = list(DIRECTIONS) if names is None else list(dict.fromkeys(names))
    classes = list(dict.fromkeys(p[0] for p in map(per_class_parts, wanted) if p is not None))
    wanted = [n for n in wanted if per_class_parts(n) is None]
    layout = {prefix or "scores": {_title(n): ["Multiline", [f"^{re.escape(prefix + n)}$"]] for n in _ordered(wanted)}}
    if classes:
        layout[f"{prefix}per_class"] = {
            _title(n, " per class"): ["Multiline", [f"^{re.escape(prefix + PER_CLASS + n)}/"]]
            for n in _ordered(classes)
        }
    return layout


def _ordered(names: List[str]) -> List[str]:
    """Known scores first, in the order of :data:`~lightning_prd.runs.scores.DIRECTIONS`, then the rest sorted."""
    return [n for n in DIRECTIONS if n in names] + sorted(n for n in names if n not in DIRECTIONS)


def _title(name: str, what: str = "") -> str:
    return f"{name}{what} ({how_to_read(name)})" if name in DIRECTIONS else f"{name}{what}"


def _merged_layout(state: Dict[str, Any], prefix: str, names: Iterable[str]) -> Optional[Dict[str, Any]]:
    """The layout of every prefix logged through one writer (``state``) once ``names`` of ``prefix``
    joined it, or ``None`` when that is the layout last written."""
    known = state["names"].setdefault(prefix, [])
    known.extend(n for n in names if n not in known)
    layout: Dict[str, Any] = {}
    for p, logged in state["names"].items():
        layout.update(custom_scalars_layout(p, logged))
    if layout == state["layout"]:
        return None
    state["layout"] = layout
    return layout


class TensorBoardAdapter(LoggerAdapter):
    """Writes through ``logger.experiment``, a ``torch.utils.tensorboard.SummaryWriter``."""

    supports_curves = True

    def __init__(self, logger: Any, prefix: str) -> None:
        super().__init__(logger, prefix)
        self._own_state: Dict[str, Any] = {"names": {}, "layout": None}
        self._session = False  # the fingerprint was logged: write the HParams session with the next scores

    def _layout_state(self, writer: Any) -> Dict[str, Any]:
        """What was written to ``writer``'s layout, shared by every adapter of that writer."""
        try:
            return _WRITTEN.setdefault(writer, {"names": {}, "layout": None})
        except TypeError:  # a writer that cannot be weakly referenced: this adapter's layout only
            return self._own_state

    @property
    def epoch_tag(self) -> str:
        """The tag of the epoch evaluated at a step: ``Pepoch``."""
        return f"{self.prefix}{EPOCH}"

    def log_scalars(self, metrics: Mapping[str, float], epoch: int, step: int) -> None:
        writer = self.logger.experiment
        names = [tag[len(self.prefix) :] for tag in metrics if tag.startswith(self.prefix)]
        layout = _merged_layout(self._layout_state(writer), self.prefix, names)
        if layout is not None:
            writer.add_custom_scalars(layout)
        writer.add_scalar(self.epoch_tag, epoch, global_step=step)  # before the scores: a reader pairs them
        for tag, value in metrics.items():
            writer.add_scalar(tag, value, global_step=step)
        if self._session:
            self._session = False
            write_session(self.logger, metrics, step)

    def log_curves(
        self, curves: Mapping[str, np.ndarray], history: Sequence[Mapping[str, Any]], epoch: int, step: int
    ) -> None:
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
                global_step=step,
                num_thresholds=n,
            )
        for name, fig in build_figures(curves, history, epoch).items():
            writer.add_figure(f"{self.prefix}figures/{name}", fig, global_step=step, close=True)

    def log_samples(
        self, grids: Mapping[str, np.ndarray], histograms: Mapping[str, np.ndarray], epoch: int, step: int
    ) -> None:
        writer = self.logger.experiment
        for name, grid in grids.items():
            writer.add_image(f"{self.prefix}samples/{name}", grid, global_step=step, dataformats="HWC")
        for name, values in histograms.items():
            writer.add_histogram(f"{self.prefix}{name}", values, global_step=step)

    def log_fingerprint(self, fingerprint: Mapping[str, Any], epoch: int, step: int) -> None:
        """As the text ``Pfingerprint`` (JSON, which ``lightning-prd runs`` reads back), as hyperparameters (beside
        the module's; ``hparams.yaml`` rewritten) and, with the scores of :meth:`log_scalars` as metrics, as the
        run's *HParams* session (:mod:`~lightning_prd.loggers.tensorboard_hparams`)."""
        log = getattr(self.logger, "log_hyperparams", None)
        if callable(log):
            log({self.fingerprint_key: dict(fingerprint)})
            rewrite_hparams_file(self.logger)
            self._session = True
        add_text = getattr(self.logger.experiment, "add_text", None)
        if callable(add_text):
            add_text(self.fingerprint_key, fingerprint_text(dict(fingerprint)), global_step=step)

    def flush(self) -> None:
        self.logger.experiment.flush()
