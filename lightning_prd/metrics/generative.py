"""``GenerativeMetrics``: every score from one shared k-NN pass, as one Metric."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Union

from torch import Tensor

from lightning_prd.functional.generative import make_plan, scores_from_plan
from lightning_prd.metrics._base import FeatureMetric


class GenerativeMetrics(FeatureMetric):
    """Every score of the package from one k-NN pass: precision, recall, density, coverage,
    realism, α-precision, β-recall, authenticity, plus the PRD curve and the Fréchet distance.

    The real x real, fake x fake and real x fake tiles are each computed once, whatever the
    set of scores; with ``reset_real_features=False`` the real radii are kept across resets.

    Args:
        k_precision_recall: k of precision/recall (3, Kynkäänniemi et al.); None to skip.
        k_density_coverage: k of density/coverage (5, Naeem et al.); None to skip.
        realism: also return the per-sample realism scores (``"realism"``, ``[M]``).
        frechet: also return the Fréchet distance.
        prd: PRD curve (Sajjadi et al.): True, False, or a dict overriding
            ``num_clusters=20, num_angles=1001, num_runs=10, seed=0, beta=8,
            enforce_balance="subsample"`` (unequal set sizes are subsampled here rather than
            refused, so an evaluation during training never fails on them).
        alpha_beta: α-precision / β-recall / authenticity in the naive mode (Alaa et al.): True,
            False, or a dict overriding ``num_alphas=30, k=5``. For the one-class embedding use
            :class:`~lightning_prd.AlphaPrecisionBetaRecall`.
        error_bars: None (default), or a number S >= 2 of disjoint generated subsamples: adds
            ``<name>_std`` for precision, recall, density and coverage, their standard deviation
            over the S parts (each scored against the full real set; see
            :func:`lightning_prd.functional.uncertainty.score_spread` for what it measures).
        per_sample: also return ``realism`` ``[M]`` and ``inside_precision`` ``[M]`` per generated
            sample and ``covered`` ``[N]`` per real sample, in the (gathered) order of ``update``.
        cmmd: CMMD (Jayasumana et al. 2024, :func:`~lightning_prd.functional.cmmd`), off by
            default (its ``sigma=10`` is calibrated for unit-norm CLIP embeddings): True, or a dict
            overriding ``sigma=10.0, scale=1000.0, unbiased=False``. Its kernel sums come from
            the same tiles (float tiles, never the bfloat16 screen); with
            ``reset_real_features=False`` the real side's sum is kept across resets.
        kwargs: see :class:`~lightning_prd.metrics._base.FeatureMetric`.

    ``compute()`` returns the plain names: ``precision``, ``recall``, ``density``,
    ``coverage``, ``frechet_distance``; with ``prd``: ``f_beta``, ``f_inv_beta`` and the curves
    ``prd_precision``, ``prd_recall``; with ``alpha_beta``: ``alpha_precision``,
    ``beta_recall``, ``authenticity`` and the curves ``alphas``, ``alpha_precision_curve``,
    ``beta_recall_curve``; with ``cmmd``: ``cmmd`` (float64); with ``realism``: ``realism``
    ``[M]`` (per-sample scores; no average is reported: a sample at distance 0 from a kept real
    sample scores ``inf``).

    Example:
        >>> import torch
        >>> from lightning_prd import GenerativeMetrics
        >>> metric = GenerativeMetrics(k_precision_recall=1, k_density_coverage=1, prd=False, alpha_beta=dict(k=1))
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
        prd: Union[bool, Mapping[str, Any]] = True,
        alpha_beta: Union[bool, Mapping[str, Any]] = True,
        error_bars: Optional[int] = None,
        per_sample: bool = False,
        cmmd: Union[bool, Mapping[str, Any]] = False,
        **kwargs: Any,
    ) -> None:
        self.plan = make_plan(
            k_pr=k_precision_recall,
            k_dc=k_density_coverage,
            realism=bool(realism),
            authenticity=False,
            frechet=bool(frechet),
            prd=prd,
            alpha_beta=alpha_beta,
            error_bars=error_bars,
            per_sample=bool(per_sample),
            names={"k_pr": "k_precision_recall", "k_dc": "k_density_coverage"},
            cmmd=cmmd,
        )
        self.k_pr, self.k_dc = self.plan.k_pr, self.plan.k_dc
        self.realism, self.frechet, self.per_sample = self.plan.realism, self.plan.frechet, self.plan.per_sample
        self.prd, self.alpha_beta, self.error_bars = self.plan.prd, self.plan.alpha_beta, self.plan.error_bars
        self.cmmd = self.plan.cmmd
        super().__init__(**kwargs)

    def _compute(self, real: Tensor, fake: Tensor) -> Dict[str, Tensor]:
        out, res = scores_from_plan(
            real,
            fake,
            self.plan,
            dtype=self.knn_dtype,
            block_bytes=self.block_bytes,
            real_cache=self.real_side(real),
            shard=self.knn_shard(),
        )
        if res is not None:
            self._real_cache = res.real
        return out
