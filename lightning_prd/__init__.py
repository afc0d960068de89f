"""lightning_prd: fidelity and diversity of generative models, measured apart, during training.

Public API: the Metric classes below and :mod:`lightning_prd.functional`.
"""

from lightning_prd.metrics import DensityCoverage, FrechetDistance, GenerativeMetrics, PrecisionRecall

__version__ = "0.1.0"

__all__ = ["DensityCoverage", "FrechetDistance", "GenerativeMetrics", "PrecisionRecall", "__version__"]
