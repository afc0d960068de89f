"""Pure functions on feature tensors: ``real`` is ``[N, D]``, ``fake`` is ``[M, D]``.

All maths of the package lives here; the Metric classes and the callback only call it.
"""

from lightning_prd.functional.density_coverage import density_coverage
from lightning_prd.functional.frechet import frechet_distance
from lightning_prd.functional.precision_recall import precision_recall, realism_score

__all__ = ["density_coverage", "frechet_distance", "precision_recall", "realism_score"]
