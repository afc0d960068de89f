"""``FrechetDistance``: the FID formula on accumulated features, in float64."""

from __future__ import annotations

from typing import Dict

from torch import Tensor

from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.functional.frechet import frechet_of
from lightning_prd.metrics.base import FeatureMetric


class FrechetDistance(FeatureMetric):
    """Fréchet distance of the accumulated features; see :func:`lightning_prd.functional.frechet_distance`.

    Keeps the features themselves (the same states as the k-NN metrics, so a
    ``MetricCollection`` shares them) rather than running sums. ``compute()`` returns
    ``{"frechet_distance"}`` (float64).

    Example:
        >>> import torch
        >>> from lightning_prd import FrechetDistance
        >>> metric = FrechetDistance()
        >>> real = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0], [2.0, 2.0]])
        >>> metric.update(real, real=True)
        >>> metric.update(real + 1.0, real=False)
        >>> round(float(metric.compute()["frechet_distance"]), 6)
        2.0
    """

    higher_is_better = False
    plot_lower_bound = 0.0

    def _compute(self, real: Tensor, fake: Tensor) -> Dict[str, Tensor]:
        sets = FeatureSets(real, fake)  # checked batch by batch in update()
        return {"frechet_distance": frechet_of(sets)}
