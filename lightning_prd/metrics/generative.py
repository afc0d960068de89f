"""``GenerativeMetrics``: every score from one shared k-NN pass, as one Metric."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Union

from torch import Tensor

from lightning_prd.functional._engine import knn_pass
from lightning_prd.functional._validation import check_int, check_min_samples, check_positive_int
from lightning_prd.functional.alpha_beta import alpha_beta_from_pass, check_num_alphas, fake_centre_distance
from lightning_prd.functional.density_coverage import coverage_from_pass, density_from_pass
from lightning_prd.functional.frechet import frechet_distance
from lightning_prd.functional.prd import check_beta, check_prd_options, prd_curve, prd_f_beta
from lightning_prd.functional.precision_recall import precision_from_pass, recall_from_pass
from lightning_prd.functional.uncertainty import split_spread
from lightning_prd.metrics._base import FeatureMetric

_PRD_DEFAULTS = dict(num_clusters=20, num_angles=1001, num_runs=10, seed=0, enforce_balance="subsample", beta=8)
_AB_DEFAULTS = dict(num_alphas=30, k=5)


def _options(value: Union[bool, Mapping[str, Any]], defaults: Dict[str, Any], name: str) -> Optional[Dict[str, Any]]:
    if value is False or value is None:
        return None
    if value is True:
        return dict(defaults)
    if isinstance(value, Mapping):
        unknown = set(value) - set(defaults)
        if unknown:
            raise ValueError(f"Expected argument `{name}` to hold only {sorted(defaults)}, but got unknown keys {sorted(unknown)}")
        return {**defaults, **value}
    raise ValueError(f"Expected argument `{name}` to be a bool or a dict of options, but got {value!r}")


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
        kwargs: see :class:`~lightning_prd.metrics._base.FeatureMetric`.

    ``compute()`` returns the plain names: ``precision``, ``recall``, ``density``,
    ``coverage``, ``frechet_distance``; with ``prd``: ``f_beta``, ``f_inv_beta`` and the curves
    ``prd_precision``, ``prd_recall``; with ``alpha_beta``: ``alpha_precision``,
    ``beta_recall``, ``authenticity`` and the curves ``alphas``, ``alpha_precision_curve``,
    ``beta_recall_curve``; with ``realism``: ``realism`` ``[M]`` (per-sample scores; no average is
    reported: a sample at distance 0 from a kept real sample scores ``inf``).

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
        **kwargs: Any,
    ) -> None:
        self.k_pr = None if k_precision_recall is None else check_positive_int(k_precision_recall, "k_precision_recall")
        self.k_dc = None if k_density_coverage is None else check_positive_int(k_density_coverage, "k_density_coverage")
        self.per_sample = bool(per_sample)
        if self.per_sample and (self.k_pr is None or self.k_dc is None):
            raise ValueError("Expected `k_precision_recall` and `k_density_coverage` to be set when `per_sample=True`")
        self.realism = bool(realism) or self.per_sample
        self.frechet = bool(frechet)
        if error_bars is not None:
            error_bars = check_int(error_bars, "error_bars", minimum=2)
        if error_bars is not None and (self.k_pr is None or self.k_dc is None):
            raise ValueError("Expected `k_precision_recall` and `k_density_coverage` to be set when `error_bars` is used")
        self.error_bars = error_bars
        self.prd = _options(prd, _PRD_DEFAULTS, "prd")
        if self.prd is not None:
            names = ("num_clusters", "num_angles", "num_runs", "seed", "enforce_balance")
            self.prd.update(zip(names, check_prd_options(*(self.prd[name] for name in names))))
            self.prd["beta"] = check_beta(self.prd["beta"])
        self.alpha_beta = _options(alpha_beta, _AB_DEFAULTS, "alpha_beta")
        if self.alpha_beta is not None:
            self.alpha_beta["num_alphas"] = check_num_alphas(self.alpha_beta["num_alphas"])
            self.alpha_beta["k"] = check_positive_int(self.alpha_beta["k"], "alpha_beta['k']")
        super().__init__(**kwargs)

    def _check_sizes(self, real: Tensor, fake: Tensor) -> None:
        """Too few samples for one of the k: say which option (the engine only knows "k")."""
        named = [("k_precision_recall", self.k_pr), ("k_density_coverage", self.k_dc)]
        if self.alpha_beta is not None:
            named.append(("alpha_beta['k']", self.alpha_beta["k"]))
        if self.realism and self.k_pr is None:
            named.append(("realism's k", 3))
        for name, k in named:
            if k is not None:
                check_min_samples(real, k, "real", name)
        if self.k_pr is not None:
            check_min_samples(fake, self.k_pr, "fake", "k_precision_recall")

    def _compute(self, real: Tensor, fake: Tensor) -> Dict[str, Tensor]:
        self._check_sizes(real, fake)
        member = [k for k in (self.k_pr, self.k_dc) if k is not None]
        ab = self.alpha_beta
        out: Dict[str, Tensor] = {}
        if member or self.realism or ab is not None:
            dist_g = fake_centre_distance(fake) if ab is not None else None
            res = knn_pass(
                real, fake,
                member_ks=member,
                recall_ks=[self.k_pr] if self.k_pr is not None else [],
                realism_k=(self.k_pr or 3) if self.realism else None,
                nearest="fake" if ab is not None else False,
                extra_real_ks=[1] if ab is not None else [],
                fake_values=dist_g,
                value_ks=[ab["k"]] if ab is not None else [],
                dtype=self.knn_dtype, block_bytes=self.block_bytes, real_cache=self.real_side(real),
                shard=self.knn_shard(),
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
            if ab is not None:
                out.update(alpha_beta_from_pass(res, fake, dist_g, num_alphas=ab["num_alphas"], k=ab["k"]))
            if self.per_sample:
                out["inside_precision"] = res.cross.fake_in_real[self.k_pr]
                out["covered"] = res.cross.real_ball_hit[self.k_dc]
            if self.error_bars is not None:
                spread = split_spread(
                    real, fake, num_splits=self.error_bars, k_precision_recall=self.k_pr,
                    k_density_coverage=self.k_dc, dtype=self.knn_dtype, block_bytes=self.block_bytes, real_cache=res.real,
                    shard=self.knn_shard(),
                )
                out.update({f"{name}_std": v["std"].to(res.dtype) for name, v in spread.items()})
        if self.prd is not None:
            opts = dict(self.prd)
            beta = opts.pop("beta")
            precision, recall = prd_curve(real, fake, **opts)
            out["f_beta"], out["f_inv_beta"] = prd_f_beta(precision, recall, beta=beta)
            out["prd_precision"], out["prd_recall"] = precision, recall
        if self.frechet:
            out["frechet_distance"] = frechet_distance(real, fake)
        return out
