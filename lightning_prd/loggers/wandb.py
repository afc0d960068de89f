"""Weights & Biases adapter: scalars against an epoch axis, accumulated curve tables, figures.

What it logs through ``logger.experiment`` (a ``wandb`` run; ``P`` is the prefix):

* ``P<score>`` scalars plus ``Pepoch`` and ``trainer/global_step`` (the step Lightning logs the epoch's own
  metrics at, the x-axis ``WandbLogger`` gives them: a chart's x-axis can be switched to it); every key is
  declared with ``define_metric(key, step_metric="Pepoch", summary=...)`` so charts use the epoch as x-axis and
  run tables show
  the best value in the sense of :mod:`lightning_prd.runs.scores` (``max``; ``min`` for
  ``frechet_distance``; for ``density``, where 1 is ideal, the adapter writes the value closest
  to 1 so far into the run summary itself, as W&B has no such summary);
* ``Pprd_curve``: ``wandb.plot.line`` over ONE long-format ``wandb.Table`` (columns ``epoch``,
  ``recall``, ``precision``) that accumulates every evaluated epoch, one line per epoch
  (``stroke="epoch"``), titled with the key. A custom chart shows only its latest table, hence the
  accumulation. Every key, the table and the epoch axis carry the prefix, so several callbacks on
  one run keep their charts, tables and summaries apart.
  Each epoch keeps the callback's compact curve (:func:`~lightning_prd.loggers.base.compact_prd`:
  at most 127 points, float16) so the table stays small; after a resume the rows of the
  restored epochs are rebuilt from the checkpoint (:meth:`WandbAdapter.restore`), so the table
  again holds every epoch once, with the values an uninterrupted run logs;
* ``Pfigures/prd_curve``, ``Pfigures/alpha_beta``, ``Pfigures/trajectory`` as ``wandb.Image``;
* with a per-class metric: ``Pper_class/<score>/<class>`` scalars (summaries by the score's direction;
  ``Plowest_coverage_class``, a label, keeps its last value) and,
  with the curves, ``Pper_class/<score>``, a ``wandb.plot.line_series`` over the evaluated epochs with one
  line per class, rebuilt from the callback's ``history`` at each evaluation (so it survives a resume);
* the image grids of ``log_images`` and ``log_closest_pairs`` as ``wandb.Image`` (``Psamples/...``);
* once per fit, the fingerprint into the run's config: ``run.config["Pfingerprint"]`` (a dict).

Everything of one evaluation goes into one ``run.log`` call (one W&B step).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

import numpy as np

from lightning_prd.loggers.base import (
    COMPACT_POINTS,
    PER_CLASS,
    LoggerAdapter,
    build_figures,
    compact_prd,
    has_prd,
    per_class_parts,
    per_class_series,
)
from lightning_prd.runs.plotting import figure_to_array
from lightning_prd.runs.scores import Direction, direction

#: points per epoch kept in the accumulated PRD table
TABLE_POINTS = COMPACT_POINTS
#: scalars that name a class rather than score one (summary ``last``)
LABELS = ("lowest_coverage_class",)
#: the key of Lightning's step in a W&B run (``WandbLogger`` logs every metric of Lightning's with it)
GLOBAL_STEP = "trainer/global_step"


class WandbAdapter(LoggerAdapter):
    """Logs into ``logger.experiment`` (``wandb.Run``)."""

    supports_curves = True

    def __init__(self, logger: Any, prefix: str) -> None:
        super().__init__(logger, prefix)
        self.epoch_key = f"{prefix}epoch"
        self._defined: set = set()
        self._rows: List[List[float]] = []
        self._pending: Dict[str, Any] = {}
        self._closest_to_one: Dict[str, float] = {}

    def _define(self, run: Any, key: str, summary: Any = None) -> None:
        if key in self._defined:
            return
        if not self._defined:
            run.define_metric(self.epoch_key)
            self._defined.add(self.epoch_key)
        kwargs = {"step_metric": self.epoch_key}
        if summary is not None:
            kwargs["summary"] = summary
        run.define_metric(key, **kwargs)
        self._defined.add(key)

    def restore(self, prd_curves: Sequence[Mapping[str, Any]], history: Sequence[Mapping[str, Any]]) -> None:
        self._rows = [row for curve in prd_curves for row in _rows_of(curve)]
        for entry in history:  # the value closest to 1 before the resume still counts
            for name, value in entry.items():
                if name != "epoch" and isinstance(value, float):
                    self._track_closest_to_one(f"{self.prefix}{name}", value)

    def _direction(self, key: str) -> Direction:
        """The direction of a prefixed key; a per-class score has its score's."""
        name = key[len(self.prefix) :]
        parts = per_class_parts(name)
        return direction(parts[0] if parts is not None else name)

    def _track_closest_to_one(self, key: str, value: float) -> None:
        if self._direction(key) == "one" and np.isfinite(value):
            best = self._closest_to_one.get(key)
            if best is None or abs(value - 1.0) < abs(best - 1.0):
                self._closest_to_one[key] = float(value)

    def log_scalars(self, metrics: Mapping[str, float], epoch: int, step: int) -> None:
        run = self.logger.experiment
        for key, value in metrics.items():
            way = self._direction(key)
            summaries = {"lower": "min", "one": "none", "zero": "last", "none": "last"}
            targeted = not isinstance(way, str)  # a family's target value: W&B has no "closest to t" summary
            summary = "last" if key[len(self.prefix) :] in LABELS or targeted else summaries.get(str(way), "max")
            self._define(run, key, summary)
            self._track_closest_to_one(key, value)
        self._pending = {**metrics, self.epoch_key: epoch, GLOBAL_STEP: step}
        # W&B commits a step per log call; wait for the curves (``flush``) to log them together.

    def log_curves(
        self, curves: Mapping[str, np.ndarray], history: Sequence[Mapping[str, Any]], epoch: int, step: int
    ) -> None:
        import wandb

        run = self.logger.experiment
        payload: Dict[str, Any] = {}
        if has_prd(curves):
            self._rows = [r for r in self._rows if r[0] != int(epoch)]  # one line per epoch
            self._rows += _rows_of(compact_prd(epoch, curves["prd_precision"], curves["prd_recall"]))
            table = wandb.Table(columns=["epoch", "recall", "precision"], data=self._rows)
            payload[f"{self.prefix}prd_curve"] = wandb.plot.line(
                table, "recall", "precision", stroke="epoch", title=f"{self.prefix}prd_curve: PRD curve by epoch"
            )
        for name, fig in build_figures(curves, history, epoch).items():
            payload[f"{self.prefix}figures/{name}"] = wandb.Image(figure_to_array(fig), caption=f"epoch {epoch}")
        for score, (epochs, lines) in per_class_series(history).items():
            key = f"{self.prefix}{PER_CLASS}{score}"
            payload[key] = wandb.plot.line_series(
                xs=epochs, ys=list(lines.values()), keys=list(lines), title=f"{key}: {score} per class", xname="epoch"
            )
        for key in payload:
            self._define(run, key)
        self._pending.update(payload)
        self._pending.setdefault(self.epoch_key, epoch)
        self._pending.setdefault(GLOBAL_STEP, step)

    def log_samples(
        self, grids: Mapping[str, np.ndarray], histograms: Mapping[str, np.ndarray], epoch: int, step: int
    ) -> None:
        import wandb

        payload: Dict[str, Any] = {
            f"{self.prefix}samples/{k}": wandb.Image(v, caption=f"epoch {epoch}") for k, v in grids.items()
        }
        # np.histogram with wandb's default of 64 bins: what wandb.Histogram(v) computes, from an array
        hists = {k: wandb.Histogram(np_histogram=np.histogram(v, bins=64)) for k, v in histograms.items()}
        payload.update({f"{self.prefix}{k}": h for k, h in hists.items()})
        self._pending.update(payload)
        self._pending.setdefault(self.epoch_key, epoch)
        self._pending.setdefault(GLOBAL_STEP, step)

    def log_fingerprint(self, fingerprint: Mapping[str, Any], epoch: int, step: int) -> None:
        """Into the run's config, under ``Pfingerprint`` (one nested entry; the runs table can filter and group
        by its fields); a run object without a config gets nothing."""
        update = getattr(getattr(self.logger.experiment, "config", None), "update", None)
        if callable(update):
            update({self.fingerprint_key: dict(fingerprint)}, allow_val_change=True)

    def flush(self) -> None:
        if self._pending:
            run = self.logger.experiment
            run.log(self._pending)
            for key, best in self._closest_to_one.items():
                run.summary[key] = best
            self._pending = {}


def _rows_of(curve: Mapping[str, Any]) -> List[List[float]]:
    """Table rows ``[epoch, recall, precision]`` of one compact PRD curve."""
    epoch = int(curve["epoch"])
    precision, recall = curve["prd_precision_recall"].double().tolist()
    return [[epoch, r, p] for r, p in zip(recall, precision)]
