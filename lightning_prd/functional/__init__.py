"""Pure functions on feature tensors: ``real`` is ``[N, D]``, ``fake`` is ``[M, D]``.

All maths of the package lives here; the Metric classes and the callback only call it.

One public module per metric family sits here (``precision_recall``, ``kid``, ...); the machinery they
share is below: :mod:`~lightning_prd.functional.knn` (the only place that forms distances) and
:mod:`~lightning_prd.functional.engine` (checked inputs, the one pass, the plan, statistics). Imports:
nothing of the package outside ``functional/``.
"""

from lightning_prd.functional.alpha_beta import alpha_beta_masks, alpha_precision_beta_recall, authenticity
from lightning_prd.functional.audit import audit_samples, filter_fake
from lightning_prd.functional.clipped import clipped_density_coverage
from lightning_prd.functional.cmmd import cmmd
from lightning_prd.functional.data_copying import data_copying
from lightning_prd.functional.density_coverage import density_coverage
from lightning_prd.functional.engine.oneclass import train_oneclass
from lightning_prd.functional.engine.pareto import pareto_front
from lightning_prd.functional.fld import feature_likelihood_divergence
from lightning_prd.functional.frechet import frechet_distance
from lightning_prd.functional.frechet_infinity import frechet_distance_infinity
from lightning_prd.functional.generative import generative_metrics
from lightning_prd.functional.inception_score import inception_score
from lightning_prd.functional.kid import kernel_inception_distance
from lightning_prd.functional.memorization import authenticity_percentage, closest_pairs, nearest_real_neighbours
from lightning_prd.functional.per_class import per_class_metrics, per_class_scalars
from lightning_prd.functional.pr_cover import precision_recall_cover
from lightning_prd.functional.prd import prd_curve, prd_f_beta, prd_from_histograms
from lightning_prd.functional.precision_recall import precision_recall, realism_score
from lightning_prd.functional.probabilistic import probabilistic_precision_recall
from lightning_prd.functional.rarity import rarity_score
from lightning_prd.functional.sfid import spatial_frechet_distance
from lightning_prd.functional.symmetric import symmetric_precision_recall
from lightning_prd.functional.top_pr import top_precision_recall
from lightning_prd.functional.vendi import vendi_score

__all__ = [
    "alpha_beta_masks",
    "alpha_precision_beta_recall",
    "audit_samples",
    "authenticity",
    "authenticity_percentage",
    "clipped_density_coverage",
    "closest_pairs",
    "cmmd",
    "data_copying",
    "density_coverage",
    "feature_likelihood_divergence",
    "filter_fake",
    "frechet_distance",
    "frechet_distance_infinity",
    "generative_metrics",
    "inception_score",
    "kernel_inception_distance",
    "nearest_real_neighbours",
    "pareto_front",
    "per_class_metrics",
    "per_class_scalars",
    "prd_curve",
    "prd_f_beta",
    "prd_from_histograms",
    "precision_recall",
    "precision_recall_cover",
    "probabilistic_precision_recall",
    "rarity_score",
    "realism_score",
    "spatial_frechet_distance",
    "symmetric_precision_recall",
    "top_precision_recall",
    "train_oneclass",
    "vendi_score",
]
