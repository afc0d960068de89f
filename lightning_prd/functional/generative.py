r"""Every score of the package from one shared k-NN pass: :func:`generative_metrics`.

The real x real, fake x fake and real x fake distance tiles are each computed once (by
:func:`.engine.one_pass.knn_pass`) and every k-NN score is read off that one pass; the results equal
the separate functions :func:`.precision_recall`, :func:`.density_coverage`,
:func:`.realism_score`, :func:`.authenticity`, :func:`.alpha_precision_beta_recall`,
:func:`.prd_curve` / :func:`.prd_f_beta`, :func:`.frechet_distance`,
:func:`.probabilistic_precision_recall`, :func:`.precision_recall_cover`, :func:`.cmmd`,
:func:`.clipped_density_coverage` and :func:`.symmetric_precision_recall` (which join the
pass), :func:`.top_precision_recall`, :func:`.kernel_inception_distance` and :func:`.vendi_score`
(which need no k-NN pass) called with the same options. The options are a
:class:`.engine.plan.Plan`; :class:`~lightning_prd.GenerativeMetrics` computes through
:func:`scores_from_plan`.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple, Union

import torch
from torch import Tensor

from lightning_prd.functional import knn
from lightning_prd.functional.alpha_beta import (
    _authentic_from_pass,
    alpha_beta_from_pass,
    fake_centre_distance,
)
from lightning_prd.functional.clipped import clipped_from_pass, pass_options
from lightning_prd.functional.cmmd import (
    cmmd_from_pass,
    gamma_of,
)
from lightning_prd.functional.density_coverage import (
    coverage_from_pass,
    density_from_pass,
)
from lightning_prd.functional.engine.family_scores import family_scores
from lightning_prd.functional.engine.one_pass import PassResult, RealSide, run_pass
from lightning_prd.functional.engine.plan import (
    ALPHA_BETA_DEFAULTS,
    CLIPPED_DEFAULTS,
    CMMD_DEFAULTS,
    KID_DEFAULTS,
    PR_COVER_DEFAULTS,
    PRD_DEFAULTS,
    PROBABILISTIC_DEFAULTS,
    SYMMETRIC_DEFAULTS,
    TOP_PR_DEFAULTS,
    VENDI_DEFAULTS,
    Plan,
    check_sizes,
    family_options,
    joined_ks,
    make_plan,
    plan_of,
)
from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.functional.engine.vocabulary import check_renamed, default, resolve
from lightning_prd.functional.frechet import frechet_of
from lightning_prd.functional.held_out import check_held_out_test, held_out_scores
from lightning_prd.functional.kid import kid_scores, kid_summary
from lightning_prd.functional.knn.clipped import ClippedBalls
from lightning_prd.functional.knn.shard import Shard
from lightning_prd.functional.pr_cover import cover_from_pass
from lightning_prd.functional.prd import prd_curve_of, prd_f_beta
from lightning_prd.functional.precision_recall import (
    precision_from_pass,
    recall_from_pass,
)
from lightning_prd.functional.probabilistic import probabilistic_from_pass
from lightning_prd.functional.symmetric import symmetric_from_pass
from lightning_prd.functional.top_pr import top_pr_scores
from lightning_prd.functional.uncertainty import split_spread
from lightning_prd.functional.vendi import vendi_of

__all__ = [
    "ALPHA_BETA_DEFAULTS",
    "CLIPPED_DEFAULTS",
    "CMMD_DEFAULTS",
    "KID_DEFAULTS",
    "PRD_DEFAULTS",
    "PROBABILISTIC_DEFAULTS",
    "PR_COVER_DEFAULTS",
    "SYMMETRIC_DEFAULTS",
    "TOP_PR_DEFAULTS",
    "VENDI_DEFAULTS",
    "Plan",
    "generative_metrics",
    "make_plan",
    "scores_from_plan",
]

#: the engine's tile memory budget


def scores_from_plan(
    sets: FeatureSets,
    plan: Plan,
    *,
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = knn.DEFAULT_BLOCK_BYTES,
    real_cache: Optional[RealSide] = None,
    shard: Optional[Shard] = None,
    vendi_real: Optional[Tensor] = None,
    test: Optional[Any] = None,
) -> Tuple[Dict[str, Tensor], Optional[PassResult]]:
    """The scores of ``plan`` on checked sets, and the k-NN pass (None when no k-NN score is asked).

    Nothing below validates the sets again: the pass, PRD, Fréchet, KID, Vendi and TopP&R take them as they are.

    ``vendi_real``: the real set's Vendi score with ``plan.vendi``'s options, when already known.
    ``test``: the held-out real set of ``plan.data_copying`` and ``plan.fld`` (:mod:`.held_out`).
    """
    real, fake = sets.real, sets.fake
    check_sizes(plan, real, fake)
    test = check_held_out_test(plan, real, test)  # before any work
    k_precision_recall, k_density_coverage, ab = plan.k_precision_recall, plan.k_density_coverage, plan.alpha_beta
    prob, cover_kc = family_options(plan, real, fake)
    clip_k, sym_k = joined_ks(plan, real, fake)
    member = [k for k in (k_precision_recall, k_density_coverage, sym_k) if k is not None]
    extra_real = [1] if plan.authenticity else []
    if clip_k is not None:  # its NND_k balls, and the real radii and neighbours up to k + 1
        clip_member, clip_real = pass_options(clip_k, real.shape[0])
        member, extra_real = member + clip_member, extra_real + clip_real
    registered = plan.registered()
    asks = {fam.name: fam.pass_asks(options) for fam, options in registered if fam.pass_asks is not None}
    extra_real += [k for ask in asks.values() for k in ask.real_ks]
    out: Dict[str, Tensor] = {}
    res: Optional[PassResult] = None
    joined = prob is not None or cover_kc is not None or plan.cmmd is not None or clip_k is not None or asks
    if member or plan.realism or plan.authenticity or joined:
        dist_g = fake_centre_distance(fake) if ab is not None else None
        res = run_pass(
            sets,
            PassRequest(
                member_ks=tuple(member),
                recall_ks=tuple(k for k in (k_precision_recall, sym_k) if k is not None),
                realism_k=(k_precision_recall or 3) if plan.realism else None,
                nearest="fake" if plan.authenticity or sym_k is not None else False,
                real_ks=tuple(extra_real),
                fake_values=dist_g,
                value_ks=(ab["k"],) if ab is not None else (),
                cover=(cover_kc[0], cover_kc[0] * cover_kc[1]) if cover_kc is not None else None,
                soft=(prob["k"], prob["a"], prob["terms"] == "nearest") if prob is not None else None,
                ball=plan.ball,
                kernel_gamma=gamma_of(plan.cmmd["sigma"]) if plan.cmmd is not None else None,
                clipped=ClippedBalls(clip_k, strict=plan.ball == "open") if clip_k is not None else None,
                reductions=tuple(r for ask in asks.values() for r in ask.reductions),
            ),
            dtype=dtype,
            block_bytes=block_bytes,
            real_cache=real_cache,
            shard=shard,
        )
        if plan.cmmd is not None:
            out["cmmd"] = cmmd_from_pass(res, scale=plan.cmmd["scale"], unbiased=plan.cmmd["unbiased"])
        if k_precision_recall is not None:
            out["precision"] = precision_from_pass(res, k_precision_recall)
            out["recall"] = recall_from_pass(res, k_precision_recall)
        if k_density_coverage is not None:
            out["density"] = density_from_pass(res, k_density_coverage)
            out["coverage"] = coverage_from_pass(res, k_density_coverage)
        if prob is not None:
            out["p_precision"], out["p_recall"] = probabilistic_from_pass(res)
        if cover_kc is not None:
            out["precision_cover"], out["recall_cover"] = cover_from_pass(res, *cover_kc)
        if clip_k is not None:
            out["clipped_density"], out["clipped_coverage"] = clipped_from_pass(res, clip_k, block_bytes)
        if sym_k is not None:
            out["sym_precision"], out["sym_recall"] = symmetric_from_pass(res, sym_k, plan.ball)
        if plan.realism and res.cross.realism is not None:  # realism_k was asked for
            out["realism"] = res.cross.realism.to(res.dtype)
        if ab is not None and dist_g is not None:
            out.update(alpha_beta_from_pass(res, num_alphas=ab["num_alphas"], k=ab["k"]))
        elif plan.authenticity:
            out["authenticity"] = _authentic_from_pass(res).to(torch.float64).mean().to(res.dtype)
        # make_plan requires both ks for per_sample and error_bars
        if plan.per_sample and k_precision_recall is not None and k_density_coverage is not None:
            out["inside_precision"] = res.cross.fake_in_real[k_precision_recall]
            out["covered"] = res.cross.real_ball_hit[k_density_coverage]
        if plan.error_bars is not None and k_precision_recall is not None and k_density_coverage is not None:
            spread = split_spread(
                sets,
                num_splits=plan.error_bars,
                names=("error_bars", "k_precision_recall"),
                k_precision_recall=k_precision_recall,
                k_density_coverage=k_density_coverage,
                dtype=dtype,
                block_bytes=block_bytes,
                real_cache=res.real,
                shard=shard,
                ball=plan.ball,
            )
            out.update({f"{name}_std": v["std"].to(res.dtype) for name, v in spread.items()})
    if plan.prd is not None:
        opts = dict(plan.prd)
        beta = opts.pop("beta")
        precision, recall = prd_curve_of(sets, **opts)
        out["f_beta"], out["f_inv_beta"] = prd_f_beta(precision, recall, beta=beta)
        out["prd_precision"], out["prd_recall"] = precision, recall
    if plan.frechet:
        out["frechet_distance"] = frechet_of(sets)
    if plan.kid is not None:
        values = kid_scores(sets, **plan.kid, shard=shard)
        out["kid"], out["kid_std"] = kid_summary(values)
    if plan.vendi is not None:
        out["vendi"] = vendi_of(fake, name="fake", **plan.vendi)
        out["vendi_real"] = vendi_of(real, name="real", **plan.vendi) if vendi_real is None else vendi_real
    if plan.top_pr is not None:
        out.update(top_pr_scores(sets, plan.top_pr, block_bytes=block_bytes, shard=shard))
    out.update(held_out_scores(sets, plan, test, res))
    for family, options in registered:
        out.update(family_scores(family, options, sets, res))
    return out, res


@score_precision()
def generative_metrics(
    real: Any,
    fake: Any,
    *,
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
    **families: Any,
) -> Dict[str, Tensor]:
    r"""Every score of generated samples ``fake`` against real samples ``real``, from one k-NN pass.

    The real x real, fake x fake and real x fake distances are each computed once; every value
    equals the one of the separate function with the same options. With ``NND_k`` the distance
    to the k-th nearest neighbour in the same set (the point itself excluded) and closed balls
    :math:`B(x, r) = \{z : \lVert z - x\rVert \le r\}`:

    * ``precision`` / ``recall`` (k = ``k_precision_recall``, Kynkäänniemi et al. 2019, :func:`.precision_recall`):
      share of fakes inside some real ball :math:`B(x_i, \mathrm{NND}_k(x_i))` / of reals inside
      some fake ball;
    * ``density`` / ``coverage`` (k = ``k_density_coverage``, Naeem et al. 2020, :func:`.density_coverage`):
      :math:`\frac{1}{kM}\sum_j \#\{i : y_j \in B_i\}` (1 is ideal) / share of real balls
      holding a fake;
    * ``realism`` ``[M]`` (k = ``k_precision_recall``, or 3, :func:`.realism_score`):
      :math:`\max_i \mathrm{NND}_k(x_i) / \lVert y - x_i\rVert` over the real balls up to the
      median radius;
    * ``authenticity`` (Alaa et al. 2022, :func:`.authenticity`): share of fakes farther from
      their nearest real sample :math:`x_{i^*}` than :math:`\mathrm{NND}_1(x_{i^*})`;
    * ``frechet_distance`` (:func:`.frechet_distance`):
      :math:`\lVert\mu_r - \mu_f\rVert^2 + \mathrm{Tr}(\Sigma_r + \Sigma_f - 2(\Sigma_r\Sigma_f)^{1/2})`;
    * with ``prd``: ``f_beta``, ``f_inv_beta``, ``prd_precision``, ``prd_recall`` (Sajjadi et al.
      2018, :func:`.prd_curve` then :func:`.prd_f_beta`);
    * with ``alpha_beta``: ``alphas``, ``alpha_precision_curve``, ``beta_recall_curve``,
      ``alpha_precision``, ``beta_recall`` (integrated) and ``authenticity`` (Alaa et al. 2022,
      naive mode, :func:`.alpha_precision_beta_recall`);
    * with ``kid``: ``kid``, ``kid_std`` (Bińkowski et al. 2018, :func:`.kernel_inception_distance`:
      mean and spread over random subsets of the unbiased polynomial-kernel MMD², lower is better);
    * with ``vendi``: ``vendi`` of the generated set and ``vendi_real`` of the real set (Friedman &
      Dieng 2023, :func:`.vendi_score`: effective number of distinct samples, no reference needed);
    * with ``top_pr``: ``top_precision``, ``top_recall``, ``top_f1`` (Kim et al. 2023,
      :func:`.top_precision_recall`; its own pass in a random 32-D projection).
    * with ``probabilistic``: ``p_precision``, ``p_recall`` (Park & Kim 2023,
      :func:`.probabilistic_precision_recall`): mean soft membership in linear kernels of one
      shared radius ``a * mean NND_k``;
    * with ``pr_cover``: ``precision_cover``, ``recall_cover`` (Cheema & Urner 2023,
      :func:`.precision_recall_cover`): share of samples whose own ``NND_{Ck}`` ball holds at
      least ``k`` samples of the other set.
    * with ``cmmd``: ``cmmd`` (Jayasumana et al. 2024, :func:`.cmmd`), ``scale`` times the squared
      MMD with the Gaussian kernel :math:`e^{-\lVert x - y\rVert^2 / 2\sigma^2}`, from the same tiles.
    * with ``clipped``: ``clipped_density``, ``clipped_coverage`` (Salvy et al. 2026,
      :func:`.clipped_density_coverage`): density and coverage with each sample's count capped at
      ``k``, the real radii clipped at their median (density), and both calibrated to ``[0, 1]``;
    * with ``symmetric``: ``sym_precision``, ``sym_recall`` (Khayatkhoei & AbdAlmageed 2023,
      :func:`.symmetric_precision_recall`): the minimum of precision (recall) and its mirror
      image asked with the other set's balls;
    * with ``fd_infinity``: ``frechet_distance_infinity`` (Chong & Forsyth 2020), and with ``test``, a
      held-out real set: ``data_copying`` gives ``ct``, ``ct_cells`` (Meehan et al. 2020) and
      ``authenticity_percentage``, ``fld`` gives ``fld``, ``fld_gap`` and the likelihoods
      (Jiralerspong et al. 2023); see :mod:`.held_out`.

    ``prdc`` computes all four of precision, recall, density and coverage with one
    ``nearest_k`` and open balls (``d < r``); pass ``k_precision_recall=5, k_density_coverage=5, ball="open"`` for its
    setting (the papers use k = 3 and 5).

    Args:
        real: ``[N, D]`` real features (the reference distribution P).
        fake: ``[M, D]`` generated features (the model Q).
        k_precision_recall: k of precision, recall and realism (3 in the paper); None skips precision/recall.
        k_density_coverage: k of density and coverage (5 in the paper); None skips them.
        realism: return ``realism``, one score per generated sample.
        authenticity: return ``authenticity`` (always returned with ``alpha_beta``).
        frechet: return ``frechet_distance``.
        prd: the PRD curve: False, True, or a dict overriding ``num_clusters=20,
            num_angles=1001, num_runs=10, seed=0, beta=8, enforce_balance="subsample"``
            (unequal set sizes are subsampled to the smaller one, seeded, rather than refused
            as :func:`.prd_curve` does by default).
        alpha_beta: α-precision / β-recall: False, True, or a dict overriding
            ``num_alphas=30, k=5``.
        kid: the Kernel Inception Distance: False, True, or a dict overriding ``subsets=100,
            subset_size=1000, degree=3, gamma=None, coef=1.0, seed=0`` (each set needs at least
            ``subset_size`` samples).
        vendi: the Vendi score of each set: False, True, or a dict overriding ``q=1.0,
            normalize=True``.
        top_pr: TopP&R: False, True, or a dict overriding ``alpha=0.1, num_bootstrap=10,
            projection_dim=32, k=None, bandwidth="half_row", seed=99`` (the official code's
            settings; each set then needs more than 160 samples).
        probabilistic: probabilistic precision and recall: True (default), False, or a dict
            overriding ``k=4, a=1.2, terms="all"``.
        pr_cover: precision and recall cover: True (default), False, or a dict overriding
            ``k=None`` (``ceil((ln N + 6) / C)``), ``C=3``. With ``True`` a family is left out
            when a set is too small for its radii (``k + 1``, ``C k + 1`` samples); with a dict
            that raises.
        cmmd: CMMD: False, True, or a dict overriding ``sigma=10.0, scale=1000.0,
            unbiased=False`` (sigma is calibrated for unit-norm CLIP embeddings; the passes then
            run float tiles, never the bfloat16 screen).
        clipped: clipped density and coverage: False, True, or a dict overriding ``k=5`` (the
            real set needs ``k + 1`` samples, the generated set ``k``); clipped density's balls are
            closed whatever ``ball``, clipped coverage's follow it.
        symmetric: symmetric precision and recall: False, True, or a dict overriding ``k=5``
            (``k + 1`` samples in each set); its balls follow ``ball``.
        fd_infinity: FD∞, off by default (15 Fréchet fits on generated subsets): True, or a dict
            overriding ``num_points=15, min_size=None, max_size=None, seed=0``.
        data_copying: the C_T statistic, off by default: True, or a dict overriding ``num_cells=3,
            cell_threshold=20, pca_dim=64, seed=0``; needs ``test``.
        fld: FLD, off by default (a fitted kernel density): True, or a dict overriding
            ``gen_size=10000, num_epochs=50, lr=0.5, batch_size=10000, seed=0``; needs ``test``.
        test: ``[T, D]`` held-out real features (not trained on), for ``data_copying`` and ``fld``
            (``real`` is then the training set); refused without them.
        per_sample: also return ``inside_precision`` ``[M]`` (each fake inside a real
            ``k_precision_recall`` ball) and ``covered`` ``[N]`` (each real ``k_density_coverage``
            ball holds a fake); needs ``k_precision_recall`` and ``k_density_coverage``.
        error_bars: None, or a number S >= 2 of disjoint generated subsamples: adds
            ``precision_std``, ``recall_std``, ``density_std``, ``coverage_std``, the standard
            deviation over the S parts (see :func:`lightning_prd.functional.uncertainty.score_spread`).
        dtype: GEMM dtype of the k-NN pass, float32 by default (float64 if an input is float64).
        block_bytes: memory budget of one distance tile (and of each set's centred working
            copy, made when the set fits it: peak extra memory is at most about 3x this).
        ball: ``"closed"`` (``d <= r``) or ``"open"`` (``d < r``, as ``prdc``) balls for
            precision, recall, density and coverage (and their ``error_bars``, ``per_sample``
            flags); realism, authenticity and α-precision / β-recall do not depend on it.
        preset: None, or a named set of defaults (:data:`~lightning_prd.functional.engine.vocabulary.PRESETS`:
            ``"training"`` adds ``prd`` and ``alpha_beta`` and leaves out ``realism``); a given value wins.
        families: the switches of the registry's other families, by name: ``rarity`` (the rarity score, Han et
            al. 2023, :func:`.rarity_score`: ``rarity`` ``[M]`` and ``rarity_mean``; True or a dict overriding
            ``k=3``) and every family registered with :func:`~lightning_prd.register_family` (off unless
            asked for; True or a dict of its options).

    Every keyword is also a keyword of :class:`~lightning_prd.GenerativeMetrics`, with the same default.

    Returns:
        dict of 0-dim tensors (and the per-sample and curve tensors named above), in the compute
        dtype; the scores of separate float64 computations are float64: ``frechet_distance``,
        ``frechet_distance_infinity``, ``kid``, ``kid_std``, ``vendi``, ``vendi_real``, ``cmmd``,
        ``top_precision`` / ``top_recall`` / ``top_f1``, ``ct``, ``authenticity_percentage``, the
        ``fld*`` values and the PRD curves; ``ct_cells`` is int64.

    Example:
        The 1-D worked example of the course note "Precision and recall for generative models" (k = 1):

        >>> import torch
        >>> real = torch.tensor([[0.0], [1.0], [2.0], [3.0]])
        >>> fake = torch.tensor([[0.2], [0.8], [1.1], [7.0]])
        >>> out = generative_metrics(real, fake, k_precision_recall=1, k_density_coverage=1)
        >>> {n: float(out[n]) for n in ("precision", "recall", "density", "coverage", "authenticity")}
        {'precision': 0.75, 'recall': 1.0, 'density': 1.5, 'coverage': 0.75, 'authenticity': 0.25}
        >>> out["realism"]
        tensor([ 5.0000,  5.0000, 10.0000,  0.2500])
        >>> round(float(out["frechet_distance"]), 4)
        4.1394
    """
    check_renamed(families)
    opts = resolve(
        {name: value for name, value in locals().items() if name not in ("real", "fake", "families", "preset")},
        preset=preset,
    )
    plan = plan_of(opts, families)
    sets = FeatureSets.check(real, fake)
    return scores_from_plan(sets, plan, dtype=opts["dtype"], block_bytes=opts["block_bytes"], test=opts["test"])[0]
