"""``GenerativeMetrics``: every score from one shared k-NN pass, as one Metric."""

from __future__ import annotations

from typing import Any, Dict, Optional

from torch import Tensor

from lightning_prd.functional._engine import knn_pass
from lightning_prd.functional._validation import check_positive_int
from lightning_prd.functional.density_coverage import coverage_from_pass, density_from_pass
from lightning_prd.functional.frechet import frechet_distance
from lightning_prd.functional.precision_recall import precision_from_pass, recall_from_pass
from lightning_prd.metrics._base import FeatureMetric


class GenerativeMetrics(FeatureMetric):
    """Precision, recall, density, coverage, realism and Fréchet distance from one k-NN pass.

    The real x real, fake x fake and real x fake tiles are each computed once, whatever the
    set of scores; with ``reset_real_features=False`` the real radii are kept across resets.

    Args:
        k_precision_recall: k of precision/recall (3, Kynkäänniemi et al.); None to skip.
        k_density_coverage: k of density/coverage (5, Naeem et al.); None to skip.
        realism: also return the per-sample realism scores (``"realism"``, ``[M]``) and their mean.
        frechet: also return the Fréchet distance.
        kwargs: see :class:`~lightning_prd.metrics._base.FeatureMetric`.

    ``compute()`` returns the plain names: ``precision``, ``recall``, ``density``,
    ``coverage``, ``frechet_distance`` (and ``realism``, ``realism_mean`` when asked).

    Example:
        >>> import torch
        >>> from lightning_prd import GenerativeMetrics
        >>> metric = GenerativeMetrics(k_precision_recall=1, k_density_coverage=1)
        >>> metric.update(torch.tensor([[0.0], [1.0], [2.0], [3.0]]), real=True)
        >>> metric.update(torch.tensor([[0.2], [0.8], [1.1], [7.0]]), real=False)
        >>> out = metric.compute()
        >>> [round(float(out[n]), 4) for n in ("precision", "recall", "density", "coverage")]
        [0.75, 1.0, 1.5, 0.75]
    """

    higher_is_better = None  # mixed: Fréchet distance is lower-is-better

    def __init__(
        self,
        k_precision_recall: Optional[int] = 3,
        k_density_coverage: Optional[int] = 5,
        realism: bool = False,
        frechet: bool = True,
        **kwargs: Any,
    ) -> None:
        self.k_pr = None if k_precision_recall is None else check_positive_int(k_precision_recall, "k_precision_recall")
        self.k_dc = None if k_density_coverage is None else check_positive_int(k_density_coverage, "k_density_coverage")
        self.realism = bool(realism)
        self.frechet = bool(frechet)
        super().__init__(**kwargs)

    def _compute(self, real: Tensor, fake: Tensor) -> Dict[str, Tensor]:
        member = [k for k in (self.k_pr, self.k_dc) if k is not None]
        out: Dict[str, Tensor] = {}
        if member or self.realism:
            res = knn_pass(
                real, fake,
                member_ks=member,
                recall_ks=[self.k_pr] if self.k_pr is not None else [],
                realism_k=(self.k_pr or 3) if self.realism else None,
                dtype=self.knn_dtype, block_bytes=self.block_bytes, real_cache=self.real_side(real), shard=self.knn_shard(),
            )
            self._real_cache = res.real
            if self.k_pr is not None:
                out["precision"] = precision_from_pass(res, self.k_pr)
                out["recall"] = recall_from_pass(res, self.k_pr)
            if self.k_dc is not None:
                out["density"] = density_from_pass(res, self.k_dc)
                out["coverage"] = coverage_from_pass(res, self.k_dc)
            if self.realism:
                out["realism"] = res.cross.realism.to(res.dtype)
                out["realism_mean"] = out["realism"].clamp(max=1e30).mean()
        if self.frechet:
            out["frechet_distance"] = frechet_distance(real, fake)
        return out
