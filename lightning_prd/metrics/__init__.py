"""torchmetrics ``Metric`` classes: thin wrappers that accumulate features and call ``functional``."""

from lightning_prd.metrics.alpha_beta import AlphaPrecisionBetaRecall
from lightning_prd.metrics.density_coverage import DensityCoverage
from lightning_prd.metrics.frechet import FrechetDistance
from lightning_prd.metrics.generative import GenerativeMetrics
from lightning_prd.metrics.prd import PRDCurve
from lightning_prd.metrics.precision_recall import PrecisionRecall

__all__ = [
    "AlphaPrecisionBetaRecall",
    "DensityCoverage",
    "FrechetDistance",
    "GenerativeMetrics",
    "PRDCurve",
    "PrecisionRecall",
]
