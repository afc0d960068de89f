"""``GenerativeMetrics``: every score from one shared k-NN pass, as one Metric."""

from __future__ import annotations

import inspect
from typing import Any, Dict, Hashable, List, Mapping, Optional, Set, Tuple, Union

import torch
from torch import Tensor
from torchmetrics.utilities import rank_zero_warn

from lightning_prd.functional import knn
from lightning_prd.functional.engine.families import METRIC_KEYWORDS, pop_switches, switch_families
from lightning_prd.functional.engine.inputs import check_int, same_features
from lightning_prd.functional.engine.plan import plan_of
from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.functional.engine.vocabulary import check_renamed, default, resolve
from lightning_prd.functional.frechet import check_statistics, frechet_to_statistics
from lightning_prd.functional.generative import Plan, generative_metrics, scores_from_plan
from lightning_prd.functional.held_out import check_held_out_test, needs_test
from lightning_prd.functional.memorization import closest_pairs as pick_closest_pairs
from lightning_prd.functional.memorization import nearest_real_from_pass
from lightning_prd.functional.per_class import per_class_metrics
from lightning_prd.metrics.base import FeatureMetric


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
        kid: Kernel Inception Distance (Bińkowski et al.), off by default (it draws its own
            subsets, a separate pass): True, or a dict overriding ``subsets=100,
            subset_size=1000, degree=3, gamma=None, coef=1.0, seed=0``. When a set holds fewer
            than ``subset_size`` samples, the subsets take ``min(N, M)`` samples instead, with a
            warning (once): MMD² stays unbiased, only its spread grows (torchmetrics raises;
            :func:`~lightning_prd.functional.kernel_inception_distance` raises too).
        vendi: Vendi score (Friedman & Dieng) of the generated set and of the real set, off by
            default: True, or a dict overriding ``q=1.0, normalize=True``. With
            ``reset_real_features=False`` the real set's value is computed once.
        top_pr: TopP&R (Kim et al. 2023, :func:`~lightning_prd.functional.top_precision_recall`):
            False (default: it costs its own pass), True, or a dict overriding ``alpha=0.1,
            num_bootstrap=10, projection_dim=32, k=None, bandwidth="half_row", seed=99``.
        error_bars: None (default), or a number S >= 2 of disjoint generated subsamples: adds
            ``<name>_std`` for precision, recall, density and coverage, their standard deviation
            over the S parts (each scored against the full real set; see
            :func:`lightning_prd.functional.uncertainty.score_spread` for what it measures).
        probabilistic: probabilistic precision and recall (Park & Kim 2023): True (default),
            False, or a dict overriding ``k=4, a=1.2, terms="all"``; returns ``p_precision``, ``p_recall``.
        pr_cover: precision and recall cover (Cheema & Urner 2023): True (default), False, or a
            dict overriding ``k=None`` (``ceil((ln N + 6) / C)``), ``C=3``; returns
            ``precision_cover``, ``recall_cover``. Both join the shared pass (together about
            +2-26% at 10,000 x 2,048, see the Performance docs); with ``True`` a
            family is left out when a set is too small for its radii, with a dict that raises.
        per_sample: also return ``realism`` ``[M]`` and ``inside_precision`` ``[M]`` per generated
            sample and ``covered`` ``[N]`` per real sample, in the (gathered) order of ``update``.
        ball: ``"closed"`` (``d <= r``, default) or ``"open"`` (``d < r``, as the ``prdc``
            package) balls of precision, recall, density and coverage; realism, α-precision,
            β-recall and authenticity do not depend on it.
        cmmd: CMMD (Jayasumana et al. 2024, :func:`~lightning_prd.functional.cmmd`), off by
            default (its ``sigma=10`` is calibrated for unit-norm CLIP embeddings): True, or a dict
            overriding ``sigma=10.0, scale=1000.0, unbiased=False``. Its kernel sums come from
            the same tiles (float tiles, never the bfloat16 screen); with
            ``reset_real_features=False`` the real side's sum is kept across resets.
        clipped: clipped density and coverage (Salvy et al. 2026,
            :func:`~lightning_prd.functional.clipped_density_coverage`): False (default), True, or a
            dict overriding ``k=5``; returns ``clipped_density``, ``clipped_coverage``.
        symmetric: symmetric precision and recall (Khayatkhoei & AbdAlmageed 2023,
            :func:`~lightning_prd.functional.symmetric_precision_recall`): False (default), True, or
            a dict overriding ``k=5``; returns ``sym_precision``, ``sym_recall``. Both join the shared
            pass (no pass of their own; their cost is in ``benchmarks/bench_knn.py``); with ``True``
            a family is left out on sets too small for it, with a dict that raises.
        fd_infinity: FD∞ (Chong & Forsyth 2020), off by default (its own Fréchet fits): True, or a dict
            overriding ``num_points=15, min_size=None, max_size=None, seed=0``; returns
            ``frechet_distance_infinity``.
        data_copying: the C_T data-copying statistic (Meehan et al. 2020), off by default: True, or a
            dict overriding ``num_cells=3, cell_threshold=20, pca_dim=64, seed=0``; returns ``ct``,
            ``ct_cells`` and ``authenticity_percentage``. Needs a held-out real set:
            ``update(features, role="test")``; ``real`` is then the training set.
        fld: FLD (Jiralerspong et al. 2023), off by default: True, or a dict overriding
            ``gen_size=10000, num_epochs=50, lr=0.5, batch_size=10000, seed=0``; returns ``fld``,
            ``fld_train``, ``fld_gap``, ``fld_nll_test``, ``fld_nll_train``, ``fld_nll_baseline``; needs
            ``role="test"`` features like ``data_copying``.
        per_class: scores per class of a conditional model
            (:func:`~lightning_prd.functional.per_class.per_class_metrics`): every ``update`` then takes
            ``labels=`` (one integer class per sample); returns ``<score>_per_class`` ``[C]`` and
            ``<score>_mean`` for precision, recall, density, coverage (and the Fréchet distance with
            ``frechet``), ``classes``, ``coverage_min`` and ``lowest_coverage_class``.
        closest_pairs: the ``n`` (generated, nearest real) pairs of smallest ratio of distance to the real
            sample's own ``NND_1``, the likeliest copies (:func:`~lightning_prd.functional.memorization.closest_pairs`
            on the shared pass); 0 (default) for none. Returns ``closest_fake_index``, ``closest_real_index``
            (int64 ``[n]``, rows of the accumulated sets, in the gathered order under DDP), ``closest_ratio``,
            ``closest_distance`` (float64 ``[n]``), and ``authenticity``.
        protocol: a named protocol (:mod:`lightning_prd.protocols`: ``"fid"``, ``"pr50k3"``, ``"prdc"``, ...) or
            None. It sets the options that act on features: ``k_precision_recall``, ``k_density_coverage``,
            ``ball``, and which families run (its scores on; ``prd``, ``alpha_beta``, ``probabilistic``,
            ``pr_cover`` and, where it does not report them, ``frechet`` and ``cmmd`` off); the options it does not
            name (``kid``, ``vendi``, ...) stay as given. An argument counts as explicit when it is given at all,
            even equal to this signature's default (only a left-out argument takes the protocol's value); an
            explicit value that contradicts the protocol raises ``ValueError`` naming the argument, its value, the
            protocol and the protocol's value. The extractor and
            sample counts are the caller's (the callback's and ``lightning-prd evaluate``'s ``protocol``); the
            Inception Score and sFID of the ``"fid"`` protocols come from the Inception logits and spatial
            features, not from this metric.
        kwargs: see :class:`~lightning_prd.metrics.base.FeatureMetric`.

    ``compute()`` returns the plain names: ``precision``, ``recall``, ``density``,
    ``coverage``, ``frechet_distance``; with ``probabilistic``: ``p_precision``, ``p_recall``; with
    ``pr_cover``: ``precision_cover``, ``recall_cover``; with ``clipped``: ``clipped_density``,
    ``clipped_coverage``; with ``symmetric``: ``sym_precision``, ``sym_recall`` (each on sets large
    enough for its radii); with ``prd``:
    ``f_beta``, ``f_inv_beta`` and the curves
    ``prd_precision``, ``prd_recall``; with ``alpha_beta``: ``alpha_precision``,
    ``beta_recall``, ``authenticity`` and the curves ``alphas``, ``alpha_precision_curve``,
    ``beta_recall_curve``; with ``kid``: ``kid``, ``kid_std``; with ``vendi``: ``vendi`` (generated
    set), ``vendi_real`` (real set); with ``cmmd``: ``cmmd`` (float64); with ``fd_infinity``:
    ``frechet_distance_infinity``; with ``data_copying``: ``ct``, ``ct_cells``,
    ``authenticity_percentage``; with ``fld``: the ``fld*`` values; with ``per_class``: the
    per-class scores named above; with ``realism``: ``realism`` ``[M]`` (per-sample scores; no
    average is reported: a sample at distance 0 from a kept real sample scores ``inf``).

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
        k_precision_recall: Optional[int] = default(3),
        k_density_coverage: Optional[int] = default(5),
        realism: bool = default(True),
        authenticity: bool = default(True),
        frechet: bool = default(True),
        prd: Union[bool, Mapping[str, Any]] = default(False),
        alpha_beta: Union[bool, Mapping[str, Any]] = default(False),
        kid: Union[bool, Mapping[str, Any]] = default(False),
        vendi: Union[bool, Mapping[str, Any]] = default(False),
        top_pr: Union[bool, Mapping[str, Any]] = default(False),
        probabilistic: Union[bool, Mapping[str, Any]] = default(True),
        pr_cover: Union[bool, Mapping[str, Any]] = default(True),
        per_sample: bool = default(False),
        error_bars: Optional[int] = default(None),
        dtype: Optional[torch.dtype] = default(None),
        block_bytes: int = default(knn.DEFAULT_BLOCK_BYTES),
        ball: str = default("closed"),
        cmmd: Union[bool, Mapping[str, Any]] = default(False),
        clipped: Union[bool, Mapping[str, Any]] = default(False),
        symmetric: Union[bool, Mapping[str, Any]] = default(False),
        fd_infinity: Union[bool, Mapping[str, Any]] = default(False),
        data_copying: Union[bool, Mapping[str, Any]] = default(False),
        fld: Union[bool, Mapping[str, Any]] = default(False),
        test: Optional[Any] = default(None),
        preset: Optional[str] = default(None),
        per_class: bool = False,
        closest_pairs: int = 0,
        protocol: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        values = {name: value for name, value in locals().items() if name in _OPTIONS}
        check_renamed(kwargs)
        switches = pop_switches(kwargs, METRIC_KEYWORDS | set(inspect.signature(FeatureMetric.__init__).parameters))
        self.closest_pairs = check_int(closest_pairs, "closest_pairs", minimum=0)
        self.protocol: Optional[str] = None
        if protocol is not None:
            from lightning_prd.protocols import get_protocol, resolve_arguments

            self.protocol = get_protocol(protocol).name
            values = resolve_arguments(protocol, values)
        self.options = resolve(values, preset=preset)
        opts = {**self.options, "authenticity": self.options["authenticity"] or self.closest_pairs > 0}
        self.plan = plan_of(opts, switches)
        if not isinstance(per_class, bool):
            raise ValueError(f"Expected argument `per_class` to be a bool, but got {per_class!r}")
        self.per_class = per_class
        self.ball, self.per_sample, self.error_bars = self.plan.ball, self.plan.per_sample, self.plan.error_bars
        # each package family's switch as an attribute: `metric.k_precision_recall` (its k or None),
        # `metric.frechet` (a bool), `metric.kid` (its options or None); a user family's are in `metric.plan`
        for family in switch_families():
            if family.builtin:
                setattr(self, family.keyword, _attribute(family, self.plan.options_of(family.name)))
        super().__init__(dtype=self.options["dtype"], block_bytes=self.options["block_bytes"], **kwargs)
        self._fixed_test: Optional[Tensor] = None
        if needs_test(self.plan):
            self.enable_role("test")
        if self.options["test"] is not None:
            self.check_test_role(True)
            self._fixed_test = FeatureSets.check(self.options["test"], self.options["test"]).real
        if per_class:
            self.enable_labels()
        #: values of the real set alone (the real set's Vendi score), kept while the real features stay the same
        self._real_memo: Dict[Hashable, Any] = {}
        self._memo_real: Optional[Tensor] = None
        self._shrink_warned: Set[str] = set()
        #: the real set as a mean and covariance (a statistics file), in place of real features
        self._real_statistics: Optional[Tuple[Tensor, Tensor, str]] = None

    def set_real_statistics(self, mean: Any, cov: Any, *, num_samples: Optional[int] = None, source: str = "") -> None:
        """Stand in a real set's float64 ``mean`` ``[D]`` and covariance ``[D, D]`` for real features, as a
        statistics file holds them (pytorch-fid's ``--save-stats``, clean-fid's custom statistics, EDM2's
        reference ``.pkl``): they serve the Fréchet distance only
        (:func:`~lightning_prd.functional.frechet.frechet_to_statistics`).

        The metric must be asked for nothing but the Fréchet distance (``k_precision_recall=None,
        k_density_coverage=None, prd=False, alpha_beta=False, probabilistic=False, pr_cover=False`` and the
        other families off): every other score needs per-sample real features, and asking for one raises
        ``ValueError`` naming it. The statistics are kept across ``reset()`` when ``reset_real_features`` is
        False. ``num_samples`` and ``source`` (where the statistics come from) only name them in errors.

        Example:
            >>> import torch
            >>> from lightning_prd.functional import frechet_distance
            >>> g = torch.Generator().manual_seed(0)
            >>> real, fake = torch.randn(200, 3, generator=g) + 1.0, torch.randn(150, 3, generator=g)
            >>> m = GenerativeMetrics(k_precision_recall=None, k_density_coverage=None, realism=False,
            ...                       authenticity=False, probabilistic=False, pr_cover=False)
            >>> m.set_real_statistics(real.double().mean(0), torch.cov(real.double().T))
            >>> m.update(fake, real=False)
            >>> out = m.compute()
            >>> sorted(out), bool(torch.isclose(out["frechet_distance"], frechet_distance(real, fake), rtol=1e-5))
            (['frechet_distance'], True)
        """
        held = f"the mean and covariance of {source or 'the real set'}" + (
            f" ({num_samples} samples)" if num_samples is not None else ""
        )
        beyond = self._scores_beyond_frechet()
        if beyond or not any(family.statistics for family, _ in self.plan.registered()):
            asked = ", ".join(beyond) if beyond else "no Fréchet distance (frechet=False)"
            raise ValueError(
                f"Expected a metric asking for the Fréchet distance only, since the real set is given as {held}, "
                f"but it asks for {asked}: these need per-sample real features (a features file), or switch them off"
            )
        mu, sigma = check_statistics(mean, cov, "real")
        self._real_statistics = (mu, sigma, held)

    def check_test_role(self, given: bool) -> None:
        """``ValueError`` when a score of this metric needs a held-out set ``test`` (``data_copying``, ``fld``)
        and ``given`` is False, or when ``given`` is True and none does
        (:func:`~lightning_prd.functional.held_out.check_held_out_test`)."""
        if not (given and needs_test(self.plan)):
            check_held_out_test(self.plan, torch.empty(0, 0), object() if given else None)

    def _scores_beyond_frechet(self) -> List[str]:
        """The options of this metric that ask for a score a real set's mean and covariance cannot serve (every
        switched-on family whose record is not ``statistics``, and the options that need per-sample features)."""
        plan = self.plan
        on = [family.keyword for family, _ in plan.registered() if not family.statistics]
        options = {
            "per_class": self.per_class,
            "closest_pairs": self.closest_pairs > 0,
            "error_bars": plan.error_bars is not None,
            "per_sample": plan.per_sample,
        }
        return on + [name for name, asked in options.items() if asked]

    def compute(self) -> Dict[str, Tensor]:
        """Every score of the accumulated sets; with :meth:`set_real_statistics`, the Fréchet distance of the
        generated features to those statistics."""
        if self._real_statistics is None:
            return super().compute()
        if isinstance(self.real_features, list) and any(t.numel() for t in self.real_features):
            raise ValueError(
                f"Expected either real features or real statistics, but got both ({self._real_statistics[2]} "
                "and features from `update(..., real=True)`)"
            )
        mean, cov, held = self._real_statistics
        return {"frechet_distance": frechet_to_statistics(mean, cov, self._features("fake"), held)}

    def _compute(self, real: Tensor, fake: Tensor) -> Dict[str, Tensor]:
        sets = FeatureSets(real, fake)  # checked batch by batch in update()
        out, res = scores_from_plan(
            sets,
            self._fitted_plan(sets.num_real, sets.num_fake),
            dtype=self.knn_dtype,
            block_bytes=self.block_bytes,
            real_cache=self.real_side(real),
            shard=self.knn_shard(),
            real_memo=self._memo_for(real),
            test=self._held_out_test() if needs_test(self.plan) else None,
        )
        if res is not None:
            self._real_cache = res.real
        if self.closest_pairs and res is not None:
            pairs = pick_closest_pairs(nearest_real_from_pass(res), self.closest_pairs)
            out["closest_fake_index"], out["closest_real_index"] = pairs.fake_index, pairs.real_index
            out["closest_ratio"], out["closest_distance"] = pairs.ratio, pairs.distance
        if self.per_class:
            per_class = {f.keyword: f.switch(o) for f, o in self.plan.registered() if f.per_class}
            out.update(
                per_class_metrics(
                    real,
                    fake,
                    real_labels=self._labels("real"),
                    fake_labels=self._labels("fake"),
                    ball=self.plan.ball,
                    dtype=self.knn_dtype,
                    block_bytes=self.block_bytes,
                    **_per_class_switches(per_class),
                )
            )
        return out

    def _held_out_test(self) -> Tensor:
        """The held-out real set: the ``role="test"`` updates, else the ``test`` given at construction."""
        got = self._features("test")
        return self._fixed_test if got.shape[0] == 0 and self._fixed_test is not None else got

    def _fitted_plan(self, num_real: int, num_fake: int) -> Plan:
        """The plan, with the options of a family whose record shrinks them for small sets (KID's
        ``subset_size`` cut to ``min(N, M)``), warned once per family."""
        plan = self.plan
        for family, options in self.plan.registered():
            if family.shrink is None:
                continue
            shrunk, warning = family.shrink(options, num_real, num_fake)
            if warning and family.name not in self._shrink_warned:
                self._shrink_warned.add(family.name)
                rank_zero_warn(warning, UserWarning)
            plan = plan.with_options(family.name, shrunk)
        return plan

    def _memo_for(self, real: Tensor) -> Dict[Hashable, Any]:
        """The real-set values kept for ``real`` (emptied when the real features change)."""
        if self._memo_real is None or not same_features(self._memo_real, real):
            self._real_memo, self._memo_real = {}, real
        return self._real_memo

    def reset(self) -> None:
        """Clear the accumulated features (and the real set's kept values unless it is kept)."""
        if self.reset_real_features:
            self._real_memo, self._memo_real = {}, None
            self._real_statistics = None
        super().reset()


#: the keywords GenerativeMetrics shares with generative_metrics (the same names and defaults)
_OPTIONS = tuple(
    p.name
    for p in inspect.signature(generative_metrics).parameters.values()
    if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name != "preset"
)


def _attribute(family: Any, options: Optional[Dict[str, Any]]) -> Any:
    """The value of a family's switch the Metric shows as an attribute: its valued option, a bool for a family
    without options, its options otherwise (None when off)."""
    if family.value_option is not None:
        return None if options is None else options[family.value_option]
    if not family.defaults:
        return options is not None
    return options


def _per_class_switches(switches: Dict[str, Any]) -> Dict[str, Any]:
    """The per-class families' switches as :func:`~lightning_prd.functional.per_class.per_class_metrics` takes them:
    its own keywords, every other family under ``families``; the families of its keywords that are off, off."""
    params = inspect.signature(per_class_metrics).parameters
    own = {f.keyword: f.switch_off for f in switch_families() if f.keyword in params}
    own.update({name: value for name, value in switches.items() if name in params})
    return {**own, "families": {name: value for name, value in switches.items() if name not in params}}
