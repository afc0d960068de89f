"""``PrecisionRecall``: improved precision and recall (Kynkäänniemi et al. 2019) as a Metric."""

from __future__ import annotations

from typing import Any, Dict

from torch import Tensor

from lightning_prd.functional.engine.inputs import check_ball, check_positive_int
from lightning_prd.functional.engine.one_pass import run_pass
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.functional.precision_recall import precision_from_pass, recall_from_pass
from lightning_prd.metrics.base import FeatureMetric


class PrecisionRecall(FeatureMetric):
    """k-NN precision and recall; see :func:`lightning_prd.functional.precision_recall`.

    ``compute()`` returns ``{"precision", "recall"}``. ``ball``: ``"closed"`` balls
    (``d <= r``, the paper's code, default) or ``"open"`` (``d < r``, as the ``prdc`` package).

    Example:
        >>> import torch
        >>> from lightning_prd import PrecisionRecall
        >>> metric = PrecisionRecall(k=1)
        >>> metric.update(torch.tensor([[0.0], [1.0], [2.0], [3.0]]), real=True)
        >>> metric.update(torch.tensor([[0.2], [0.8], [1.1], [7.0]]), real=False)
        >>> {name: round(float(v), 4) for name, v in metric.compute().items()}
        {'precision': 0.75, 'recall': 1.0}
    """

    higher_is_better = True
    plot_lower_bound = 0.0
    plot_upper_bound = 1.0

    def __init__(self, k: int = 3, ball: str = "closed", **kwargs: Any) -> None:
        self.k = check_positive_int(k, "k")
        self.ball = check_ball(ball)
        super().__init__(**kwargs)

    def _compute(self, real: Tensor, fake: Tensor) -> Dict[str, Tensor]:
        sets = FeatureSets(real, fake)  # checked batch by batch in update()
        res = run_pass(
            sets,
            PassRequest(member_ks=(self.k,), recall_ks=(self.k,), ball=self.ball),
            dtype=self.knn_dtype,
            block_bytes=self.block_bytes,
            real_cache=self.real_side(sets.real),
            shard=self.knn_shard(),
        )
        self._real_cache = res.real
        return {"precision": precision_from_pass(res, self.k), "recall": recall_from_pass(res, self.k)}
