"""``DensityCoverage``: density and coverage (Naeem et al. 2020) as a Metric."""

from __future__ import annotations

from typing import Any, Dict

from torch import Tensor

from lightning_prd.functional.density_coverage import coverage_from_pass, density_from_pass
from lightning_prd.functional.engine.inputs import check_ball, check_positive_int
from lightning_prd.functional.engine.one_pass import run_pass
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.metrics.base import FeatureMetric


class DensityCoverage(FeatureMetric):
    """Density and coverage; see :func:`lightning_prd.functional.density_coverage`.

    ``compute()`` returns ``{"density", "coverage"}``. Density is unbounded above, so the
    plot has no upper bound. ``ball``: ``"closed"`` balls (``d <= r``, default) or ``"open"``
    (``d < r``, as the ``prdc`` package, to compare with numbers published with it).

    Example:
        >>> import torch
        >>> from lightning_prd import DensityCoverage
        >>> metric = DensityCoverage(k=1)
        >>> metric.update(torch.tensor([[0.0], [1.0], [2.0], [3.0]]), real=True)
        >>> metric.update(torch.tensor([[0.2], [0.8], [1.1], [7.0]]), real=False)
        >>> {name: round(float(v), 4) for name, v in metric.compute().items()}
        {'density': 1.5, 'coverage': 0.75}
    """

    higher_is_better = True
    plot_lower_bound = 0.0

    def __init__(self, k: int = 5, ball: str = "closed", **kwargs: Any) -> None:
        self.k = check_positive_int(k, "k")
        self.ball = check_ball(ball)
        super().__init__(**kwargs)

    def _compute(self, real: Tensor, fake: Tensor) -> Dict[str, Tensor]:
        sets = FeatureSets(real, fake)  # checked batch by batch in update()
        res = run_pass(
            sets,
            PassRequest(member_ks=(self.k,), ball=self.ball),
            dtype=self.knn_dtype,
            block_bytes=self.block_bytes,
            real_cache=self.real_side(sets.real),
            shard=self.knn_shard(),
        )
        self._real_cache = res.real
        return {"density": density_from_pass(res, self.k), "coverage": coverage_from_pass(res, self.k)}
