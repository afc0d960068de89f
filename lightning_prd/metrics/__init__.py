"""torchmetrics ``Metric`` classes: thin wrappers that accumulate features and call ``functional``.

Each class keeps its states and wires ``compute()`` to the functional core in a few lines
(:mod:`~lightning_prd.metrics.base` holds the shared accumulation, validation of each batch and the
DDP gather of :mod:`~lightning_prd.metrics.gather`). Imports: ``functional`` only.
"""

from lightning_prd.metrics.alpha_beta import AlphaPrecisionBetaRecall
from lightning_prd.metrics.density_coverage import DensityCoverage
from lightning_prd.metrics.frechet import FrechetDistance
from lightning_prd.metrics.generative import GenerativeMetrics
from lightning_prd.metrics.inception_score import InceptionScore
from lightning_prd.metrics.prd import PRDCurve
from lightning_prd.metrics.precision_recall import PrecisionRecall

__all__ = [
    "AlphaPrecisionBetaRecall",
    "DensityCoverage",
    "FrechetDistance",
    "GenerativeMetrics",
    "InceptionScore",
    "PRDCurve",
    "PrecisionRecall",
]
