"""lightning_prd: fidelity and diversity of generative models, measured apart, during training.

Public API: the Metric classes and the Lightning callback below, :func:`register_family` (a score of your own
on every surface), :mod:`lightning_prd.functional` (pure functions), :mod:`lightning_prd.features`
(extractors) and the ``lightning-prd`` command. The package's layers, and which folder may import which, are
in ``docs/architecture.md``; this module imports only ``callback``, ``metrics`` and the family registry.
"""

from lightning_prd.callback import PRDCallback, PRDEarlyStopping
from lightning_prd.functional.engine.families import register_family, unregister_family
from lightning_prd.metrics import (
    AlphaPrecisionBetaRecall,
    DensityCoverage,
    FrechetDistance,
    GenerativeMetrics,
    InceptionScore,
    PRDCurve,
    PrecisionRecall,
)

__version__ = "0.1.0"

__all__ = [
    "AlphaPrecisionBetaRecall",
    "DensityCoverage",
    "FrechetDistance",
    "GenerativeMetrics",
    "InceptionScore",
    "PRDCallback",
    "PRDEarlyStopping",
    "PRDCurve",
    "PrecisionRecall",
    "__version__",
    "register_family",
    "unregister_family",
]
