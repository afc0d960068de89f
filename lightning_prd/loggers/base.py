"""Backend-neutral part of the logger adapters: the interface, the figures, the choice by type.

An adapter wraps one Lightning logger and knows how that backend shows scalars, curves,
figures and the fit's fingerprint (:meth:`LoggerAdapter.log_fingerprint`). The callback calls
adapters on global rank 0 only; they never run collectives.

Curves arrive as a dict of 1-D numpy arrays under the metric's plain names (``prd_precision``,
``prd_recall``, ``alphas``, ``alpha_precision_curve``, ``beta_recall_curve``); an adapter
draws what is present and ignores the rest.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch

from lightning_prd.runs import plotting
from lightning_prd.runs.reader import FINGERPRINT

PRD_KEYS = ("prd_precision", "prd_recall")
ALPHA_BETA_KEYS = ("alphas", "alpha_precision_curve", "beta_recall_curve")
CURVE_KEYS = PRD_KEYS + ALPHA_BETA_KEYS
#: the key part of a per-class score: ``<prefix>per_class/<score>/<class label>`` (a per-class metric's
#: ``<score>_per_class`` entries, one scalar per class)
PER_CLASS = "per_class/"
#: points kept per epoch of a PRD curve in the callback's checkpointed state and the W&B table
#: (the TensorBoard PR-curve plugin's limit is 127 too)
COMPACT_POINTS = 127


def compact_prd(epoch: int, precision: np.ndarray, recall: np.ndarray) -> Dict[str, Any]:
    """One epoch's PRD curve, small enough for a checkpoint: ``{"epoch": e, "prd_precision_recall":
    tensor [2, n]}`` with at most :data:`COMPACT_POINTS` evenly spread points (ends kept), precision
    then recall, in float16 (about 3 significant digits; ~0.7 kB in a checkpoint). A
    tensor, not a NumPy array, so ``torch.load(weights_only=True)`` reads it.

    Example:
        >>> c = compact_prd(3, np.linspace(0, 1, 1001), np.linspace(1, 0, 1001))
        >>> c["epoch"], c["prd_precision_recall"].dtype, tuple(c["prd_precision_recall"].shape)
        (3, torch.float16, (2, 127))
    """
    keep = plotting.downsample(len(precision), COMPACT_POINTS)
    both = np.stack([np.asarray(precision, dtype=np.float64)[keep], np.asarray(recall, dtype=np.float64)[keep]])
    return {"epoch": int(epoch), "prd_precision_recall": torch.from_numpy(both).to(torch.float16)}


class LoggerAdapter:
    """Shows the callback's output in one backend. The default logs scalars only.

    Args:
        logger: the Lightning logger (``trainer.loggers[i]``).
        prefix: the callback's key prefix, e.g. ``"prd/"``.
    """

    #: whether :meth:`log_curves` shows anything (False: the callback warns once that curves are skipped)
    supports_curves = False

    def __init__(self, logger: Any, prefix: str) -> None:
        self.logger = logger
        self.prefix = prefix

    def log_scalars(self, metrics: Mapping[str, float], epoch: int, step: int) -> None:
        """Log prefixed scalars of the evaluation of ``epoch`` at ``step``, the step Lightning logs its own metrics
        at (the trainer's ``_batches_that_stepped``, the global step when one optimizer steps per batch).
        Default: ``logger.log_metrics`` with an ``epoch`` key at that step."""
        self.logger.log_metrics({**metrics, "epoch": epoch}, step=step)

    def log_curves(
        self, curves: Mapping[str, np.ndarray], history: Sequence[Mapping[str, Any]], epoch: int, step: int
    ) -> None:
        """Log the curves of one evaluation and the trajectory of ``history`` (all evaluations so far)."""

    def restore(self, prd_curves: Sequence[Mapping[str, Any]], history: Sequence[Mapping[str, Any]]) -> None:
        """Called once before this fit's first evaluation is logged, with the compact PRD curves
        (:func:`compact_prd`) and the scores (plain names) of the evaluations restored from a
        checkpoint. Default: nothing."""

    def log_samples(
        self, grids: Mapping[str, np.ndarray], histograms: Mapping[str, np.ndarray], epoch: int, step: int
    ) -> None:
        """Log image grids (``[H, W, 3]`` in [0, 1]) and histograms of per-sample values. Default: nothing."""

    def log_fingerprint(self, fingerprint: Mapping[str, Any], epoch: int, step: int) -> None:
        """Log the fit's fingerprint (a flat JSON-safe dict), once per fit, before its first scores. Default: as
        hyperparameters, ``logger.log_hyperparams({"<prefix>fingerprint": fingerprint})``, when the logger has
        that method."""
        log = getattr(self.logger, "log_hyperparams", None)
        if callable(log):
            log({self.fingerprint_key: dict(fingerprint)})

    @property
    def fingerprint_key(self) -> str:
        """The key of the fingerprint: ``<prefix>fingerprint``."""
        return f"{self.prefix}{FINGERPRINT}"

    def flush(self) -> None:
        """End of one evaluation: write out what the backend buffers."""


def per_class_parts(name: str) -> Optional[Tuple[str, str]]:
    """``(score, class label)`` of a per-class scalar name without the prefix, else ``None``.

    Example:
        >>> per_class_parts("per_class/coverage/3"), per_class_parts("coverage")
        (('coverage', '3'), None)
    """
    if not name.startswith(PER_CLASS):
        return None
    score, sep, label = name[len(PER_CLASS) :].rpartition("/")
    return (score, label) if sep and score and label else None


def per_class_series(
    history: Sequence[Mapping[str, Any]],
) -> Dict[str, Tuple[List[int], Dict[str, List[float]]]]:
    """Per score of ``history``'s per-class scalars: the epochs that hold it and, per class, its values at those
    epochs (NaN where a class is missing), classes in order of appearance.

    Example:
        >>> hist = [{"epoch": 0, "per_class/coverage/0": 0.5}, {"epoch": 1, "per_class/coverage/0": 0.75,
        ...          "per_class/coverage/1": 0.25}]
        >>> per_class_series(hist)
        {'coverage': ([0, 1], {'0': [0.5, 0.75], '1': [nan, 0.25]})}
    """
    out: Dict[str, Tuple[List[int], Dict[str, List[float]]]] = {}
    for entry in history:
        found: Dict[str, Dict[str, float]] = {}
        for name, value in entry.items():
            parts = per_class_parts(name)
            if parts is not None:
                found.setdefault(parts[0], {})[parts[1]] = float(value)
        for score, values in found.items():
            epochs, lines = out.setdefault(score, ([], {}))
            for label in values:
                lines.setdefault(label, [math.nan] * len(epochs))
            epochs.append(int(entry["epoch"]))
            for label, line in lines.items():
                line.append(values.get(label, math.nan))
    return out


def has_prd(curves: Mapping[str, Any]) -> bool:
    return all(k in curves for k in PRD_KEYS)


def has_alpha_beta(curves: Mapping[str, Any]) -> bool:
    return "alphas" in curves and any(k in curves for k in ALPHA_BETA_KEYS[1:])


def build_figures(curves: Mapping[str, np.ndarray], history: Sequence[Mapping[str, Any]], epoch: int) -> Dict[str, Any]:
    """Figures for one evaluation: ``prd_curve``, ``alpha_beta`` and ``trajectory``, when their data exist."""
    figures: Dict[str, Any] = {}
    if has_prd(curves):
        figures["prd_curve"] = plotting.plot_prd_curve(
            {f"epoch {epoch}": (curves["prd_precision"], curves["prd_recall"])}, title=f"PRD curve, epoch {epoch}"
        )
    if has_alpha_beta(curves):
        figures["alpha_beta"] = plotting.plot_alpha_beta(
            curves["alphas"],
            curves.get("alpha_precision_curve"),
            curves.get("beta_recall_curve"),
            title=f"α-Precision / β-Recall, epoch {epoch}",
        )
    if any("precision" in h and "recall" in h for h in history):
        figures["trajectory"] = plotting.plot_trajectory(history)
    return figures
