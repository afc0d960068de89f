r"""Every score of the package from one shared k-NN pass: :func:`generative_metrics`.

The real x real, fake x fake and real x fake distance tiles are each computed once (by
:func:`._engine.knn_pass`) and every k-NN score is read off that one pass; the results equal
the separate functions :func:`.precision_recall`, :func:`.density_coverage`,
:func:`.realism_score`, :func:`.authenticity`, :func:`.alpha_precision_beta_recall`,
:func:`.prd_curve` / :func:`.prd_f_beta`, :func:`.frechet_distance`,
:func:`.kernel_inception_distance` and :func:`.vendi_score` called with the same options (the
last two need no k-NN pass and are off by default). :class:`~lightning_prd.GenerativeMetrics`
computes through :func:`scores_from_plan`.
:func:`.prd_curve` / :func:`.prd_f_beta`, :func:`.frechet_distance` and :func:`.cmmd` called with
the same options. :class:`~lightning_prd.GenerativeMetrics` computes through :func:`scores_from_plan`.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import torch
from torch import Tensor

from lightning_prd.functional._engine import PassResult, RealSide, knn_pass
from lightning_prd.functional._validation import (
    as_features,
    check_ball,
    check_int,
    check_min_samples,
    check_pair,
    check_positive_int,
)
from lightning_prd.functional.alpha_beta import (
    _authentic_from_pass,
    alpha_beta_from_pass,
    check_num_alphas,
    fake_centre_distance,
)
from lightning_prd.functional.cmmd import (
    SCALE,
    SIGMA,
    check_cmmd_options,
    check_cmmd_sizes,
    cmmd_from_pass,
    gamma_of,
)
from lightning_prd.functional.density_coverage import (
    coverage_from_pass,
    density_from_pass,
)
from lightning_prd.functional.frechet import frechet_distance
from lightning_prd.functional.kid import check_kid_options, kid_scores
from lightning_prd.functional.knn.shard import Shard
from lightning_prd.functional.pr_cover import check_cover_options, check_cover_sizes, cover_from_pass, cover_k
from lightning_prd.functional.prd import (
    check_beta,
    check_prd_options,
    prd_curve,
    prd_f_beta,
)
from lightning_prd.functional.precision_recall import (
    precision_from_pass,
    recall_from_pass,
)
from lightning_prd.functional.probabilistic import check_probabilistic, probabilistic_from_pass
from lightning_prd.functional.top_pr import TOP_PR_DEFAULTS, check_top_pr_options, top_precision_recall
from lightning_prd.functional.uncertainty import split_spread
from lightning_prd.functional.vendi import check_vendi_order, vendi_score

#: options of ``prd=True`` (a dict passed as ``prd`` overrides some of them)
PRD_DEFAULTS: Dict[str, Any] = dict(
    num_clusters=20, num_angles=1001, num_runs=10, seed=0, enforce_balance="subsample", beta=8
)
#: options of ``alpha_beta=True`` (a dict passed as ``alpha_beta`` overrides some of them)
ALPHA_BETA_DEFAULTS: Dict[str, Any] = dict(num_alphas=30, k=5)
#: options of ``kid=True`` (the defaults of torchmetrics' ``KernelInceptionDistance``)
KID_DEFAULTS: Dict[str, Any] = dict(subsets=100, subset_size=1000, degree=3, gamma=None, coef=1.0, seed=0)
#: options of ``vendi=True``
VENDI_DEFAULTS: Dict[str, Any] = dict(q=1.0, normalize=True)
#: options of ``probabilistic=True`` (Park & Kim 2023; a dict overrides some of them)
PROBABILISTIC_DEFAULTS: Dict[str, Any] = dict(k=4, a=1.2, terms="all")
#: options of ``pr_cover=True`` (Cheema & Urner 2023; ``k=None``: ``ceil((ln N + 6) / C)``)
PR_COVER_DEFAULTS: Dict[str, Any] = dict(k=None, C=3)
#: options of ``cmmd=True`` (a dict passed as ``cmmd`` overrides some of them); sigma is
#: calibrated for unit-norm CLIP embeddings
CMMD_DEFAULTS: Dict[str, Any] = dict(sigma=SIGMA, scale=SCALE, unbiased=False)
#: the engine's tile memory budget
_BLOCK_BYTES: int = inspect.signature(knn_pass).parameters["block_bytes"].default


def _options(value: Any, defaults: Dict[str, Any], name: str) -> Optional[Dict[str, Any]]:
    """``False``/``None`` -> None, ``True`` -> the defaults, a mapping -> the defaults it overrides."""
    if value is False or value is None:
        return None
    if value is True:
        return dict(defaults)
    if isinstance(value, Mapping):
        unknown = set(value) - set(defaults)
        if unknown:
            raise ValueError(
                f"Expected argument `{name}` to hold only {sorted(defaults)}, but got unknown keys {sorted(unknown)}"
            )
        return {**defaults, **value}
    raise ValueError(f"Expected argument `{name}` to be a bool or a dict of options, but got {value!r}")


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"Expected argument `{name}` to be a bool, but got {value!r}")
    return value


@dataclass
class Plan:
    """Which scores to compute and with which options (validated by :func:`make_plan`)."""

    k_pr: Optional[int]
    k_dc: Optional[int]
    realism: bool
    authenticity: bool
    frechet: bool
    prd: Optional[Dict[str, Any]]
    alpha_beta: Optional[Dict[str, Any]]
    error_bars: Optional[int]
    per_sample: bool
    kid: Optional[Dict[str, Any]] = None
    vendi: Optional[Dict[str, Any]] = None
    #: TopP&R options (None: not computed); a separate pass in a random 32-D projection
    top_pr: Optional[Dict[str, Any]] = None
    #: ``"closed"`` or ``"open"`` balls of precision, recall, density and coverage
    ball: str = "closed"
    probabilistic: Optional[Dict[str, Any]] = None
    pr_cover: Optional[Dict[str, Any]] = None
    #: families switched on by ``True`` rather than a dict: left out on sets too small for them
    lenient: Tuple[str, ...] = ()
    #: how the options are named in error messages (the caller's argument names)
    names: Dict[str, str] = field(default_factory=dict)
    cmmd: Optional[Dict[str, Any]] = None


def make_plan(
    *,
    k_pr: Optional[int],
    k_dc: Optional[int],
    realism: bool,
    authenticity: bool,
    frechet: bool,
    prd: Union[bool, Mapping[str, Any], None],
    alpha_beta: Union[bool, Mapping[str, Any], None],
    error_bars: Optional[int],
    per_sample: bool,
    names: Optional[Mapping[str, str]] = None,
    kid: Union[bool, Mapping[str, Any], None] = False,
    vendi: Union[bool, Mapping[str, Any], None] = False,
    top_pr: Union[bool, Mapping[str, Any], None] = False,
    ball: str = "closed",
    probabilistic: Union[bool, Mapping[str, Any], None] = False,
    pr_cover: Union[bool, Mapping[str, Any], None] = False,
    cmmd: Union[bool, Mapping[str, Any], None] = False,
) -> Plan:
    """Validate the options of :func:`generative_metrics` (``names`` renames ``k_pr``/``k_dc`` in errors)."""
    names = {"k_pr": "k_pr", "k_dc": "k_dc", **(names or {})}
    k_pr = None if k_pr is None else check_positive_int(k_pr, names["k_pr"])
    k_dc = None if k_dc is None else check_positive_int(k_dc, names["k_dc"])
    per_sample = _flag(per_sample, "per_sample")
    if per_sample and (k_pr is None or k_dc is None):
        raise ValueError(f"Expected `{names['k_pr']}` and `{names['k_dc']}` to be set when `per_sample=True`")
    if error_bars is not None:
        error_bars = check_int(error_bars, "error_bars", minimum=2)
        if k_pr is None or k_dc is None:
            raise ValueError(f"Expected `{names['k_pr']}` and `{names['k_dc']}` to be set when `error_bars` is used")
    prd_opts = _options(prd, PRD_DEFAULTS, "prd")
    if prd_opts is not None:
        keys = ("num_clusters", "num_angles", "num_runs", "seed", "enforce_balance")
        prd_opts.update(zip(keys, check_prd_options(*(prd_opts[key] for key in keys))))
        prd_opts["beta"] = check_beta(prd_opts["beta"])
    ab = _options(alpha_beta, ALPHA_BETA_DEFAULTS, "alpha_beta")
    if ab is not None:
        ab["num_alphas"] = check_num_alphas(ab["num_alphas"])
        ab["k"] = check_positive_int(ab["k"], "alpha_beta['k']")
    kid_opts = _options(kid, KID_DEFAULTS, "kid")
    if kid_opts is not None:
        kid_keys = ("subsets", "subset_size", "degree", "gamma", "coef", "seed")
        kid_opts.update(zip(kid_keys, check_kid_options(*(kid_opts[key] for key in kid_keys))))
    vendi_opts = _options(vendi, VENDI_DEFAULTS, "vendi")
    if vendi_opts is not None:
        vendi_opts["q"] = check_vendi_order(vendi_opts["q"])
        vendi_opts["normalize"] = _flag(vendi_opts["normalize"], "vendi['normalize']")
    top = _options(top_pr, TOP_PR_DEFAULTS, "top_pr")
    if top is not None:
        top = check_top_pr_options(**top, owner="top_pr")
    prob = _options(probabilistic, PROBABILISTIC_DEFAULTS, "probabilistic")
    if prob is not None:
        prob["k"], prob["a"], prob["terms"] = check_probabilistic(prob["k"], prob["a"], prob["terms"])
    cover = _options(pr_cover, PR_COVER_DEFAULTS, "pr_cover")
    if cover is not None:
        cover["k"], cover["C"] = check_cover_options(cover["k"], cover["C"])
    cm = _options(cmmd, CMMD_DEFAULTS, "cmmd")
    if cm is not None:
        cm.update(zip(("sigma", "scale", "unbiased"), check_cmmd_options(cm["sigma"], cm["scale"], cm["unbiased"])))
    return Plan(
        k_pr=k_pr,
        k_dc=k_dc,
        realism=_flag(realism, "realism") or per_sample,
        authenticity=_flag(authenticity, "authenticity") or ab is not None,
        frechet=_flag(frechet, "frechet"),
        prd=prd_opts,
        alpha_beta=ab,
        error_bars=error_bars,
        per_sample=per_sample,
        top_pr=top,
        ball=check_ball(ball),
        probabilistic=prob,
        pr_cover=cover,
        lenient=tuple(name for name, v in (("probabilistic", probabilistic), ("pr_cover", pr_cover)) if v is True),
        names=names,
        kid=kid_opts,
        vendi=vendi_opts,
        cmmd=cm,
    )


def _check_sizes(plan: Plan, real: Tensor, fake: Tensor) -> None:
    """Too few samples for one of the k: name the option (the engine only knows "k")."""
    named: List[Tuple[str, Optional[int]]] = [(plan.names["k_pr"], plan.k_pr), (plan.names["k_dc"], plan.k_dc)]
    if plan.alpha_beta is not None:
        named.append(("alpha_beta['k']", plan.alpha_beta["k"]))
    if plan.realism and plan.k_pr is None:
        named.append(("realism's k", 3))
    if plan.authenticity:
        named.append(("authenticity's k", 1))
    for name, k in named:
        if k is not None:
            check_min_samples(real, k, "real", name)
    if plan.k_pr is not None:
        check_min_samples(fake, plan.k_pr, "fake", plan.names["k_pr"])
    if plan.cmmd is not None:
        check_cmmd_sizes(real.shape[0], fake.shape[0], plan.cmmd["unbiased"])


def _small(real: Tensor, fake: Tensor, k: int) -> bool:
    return min(real.shape[0], fake.shape[0]) < k + 1


def _families(plan: Plan, real: Tensor, fake: Tensor) -> Tuple[Optional[Dict[str, Any]], Optional[Tuple[int, int]]]:
    """The probabilistic options and PR-cover's ``(k, C)`` for these sets (None: not computed).

    A family switched on by ``True`` is left out when a set is too small for its radii; one
    given options raises.
    """
    prob = plan.probabilistic
    if prob is not None:
        if "probabilistic" in plan.lenient and _small(real, fake, prob["k"]):
            prob = None
        else:
            check_min_samples(real, prob["k"], "real", "probabilistic['k']")
            check_min_samples(fake, prob["k"], "fake", "probabilistic['k']")
    cover_kc = None
    if plan.pr_cover is not None:
        cover_kc = cover_k(plan.pr_cover["k"], plan.pr_cover["C"], real.shape[0])
        if "pr_cover" in plan.lenient and _small(real, fake, cover_kc[0] * cover_kc[1]):
            cover_kc = None
        else:
            check_cover_sizes(real, fake, *cover_kc, k_name="pr_cover['k']")
    return prob, cover_kc


def scores_from_plan(
    real: Tensor,
    fake: Tensor,
    plan: Plan,
    *,
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = _BLOCK_BYTES,
    real_cache: Optional[RealSide] = None,
    shard: Optional[Shard] = None,
    vendi_real: Optional[Tensor] = None,
) -> Tuple[Dict[str, Tensor], Optional[PassResult]]:
    """The scores of ``plan`` on validated features, and the k-NN pass (None when no k-NN score is asked).

    ``vendi_real``: the real set's Vendi score with ``plan.vendi``'s options, when already known.
    """
    _check_sizes(plan, real, fake)
    k_pr, k_dc, ab = plan.k_pr, plan.k_dc, plan.alpha_beta
    member = [k for k in (k_pr, k_dc) if k is not None]
    prob, cover_kc = _families(plan, real, fake)
    out: Dict[str, Tensor] = {}
    res: Optional[PassResult] = None
    joined = prob is not None or cover_kc is not None or plan.cmmd is not None
    if member or plan.realism or plan.authenticity or joined:
        dist_g = fake_centre_distance(fake) if ab is not None else None
        res = knn_pass(
            real,
            fake,
            member_ks=member,
            recall_ks=[k_pr] if k_pr is not None else [],
            realism_k=(k_pr or 3) if plan.realism else None,
            nearest="fake" if plan.authenticity else False,
            extra_real_ks=[1] if plan.authenticity else [],
            fake_values=dist_g,
            value_ks=[ab["k"]] if ab is not None else [],
            cover_ks=[cover_kc[0] * cover_kc[1]] if cover_kc is not None else [],
            soft=(prob["k"], prob["a"], prob["terms"] == "nearest") if prob is not None else None,
            dtype=dtype,
            block_bytes=block_bytes,
            real_cache=real_cache,
            shard=shard,
            ball=plan.ball,
            kernel_gamma=gamma_of(plan.cmmd["sigma"]) if plan.cmmd is not None else None,
        )
        if plan.cmmd is not None:
            out["cmmd"] = cmmd_from_pass(res, scale=plan.cmmd["scale"], unbiased=plan.cmmd["unbiased"])
        if k_pr is not None:
            out["precision"] = precision_from_pass(res, k_pr)
            out["recall"] = recall_from_pass(res, k_pr)
        if k_dc is not None:
            out["density"] = density_from_pass(res, k_dc)
            out["coverage"] = coverage_from_pass(res, k_dc)
        if prob is not None:
            out["p_precision"], out["p_recall"] = probabilistic_from_pass(res)
        if cover_kc is not None:
            out["precision_cover"], out["recall_cover"] = cover_from_pass(res, *cover_kc)
        if plan.realism and res.cross.realism is not None:  # realism_k was asked for
            out["realism"] = res.cross.realism.to(res.dtype)
        if ab is not None and dist_g is not None:
            out.update(alpha_beta_from_pass(res, fake, dist_g, num_alphas=ab["num_alphas"], k=ab["k"]))
        elif plan.authenticity:
            out["authenticity"] = _authentic_from_pass(res).to(torch.float64).mean().to(res.dtype)
        if plan.per_sample and k_pr is not None and k_dc is not None:  # make_plan requires both
            out["inside_precision"] = res.cross.fake_in_real[k_pr]
            out["covered"] = res.cross.real_ball_hit[k_dc]
        if plan.error_bars is not None and k_pr is not None and k_dc is not None:  # make_plan requires both
            spread = split_spread(
                real,
                fake,
                num_splits=plan.error_bars,
                k_precision_recall=k_pr,
                k_density_coverage=k_dc,
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
        precision, recall = prd_curve(real, fake, **opts)
        out["f_beta"], out["f_inv_beta"] = prd_f_beta(precision, recall, beta=beta)
        out["prd_precision"], out["prd_recall"] = precision, recall
    if plan.frechet:
        out["frechet_distance"] = frechet_distance(real, fake)
    if plan.kid is not None:
        values = kid_scores(real, fake, **plan.kid)
        out["kid"], out["kid_std"] = values.mean(), values.std(correction=0)
    if plan.vendi is not None:
        out["vendi"] = vendi_score(fake, **plan.vendi)
        out["vendi_real"] = vendi_score(real, **plan.vendi) if vendi_real is None else vendi_real
    if plan.top_pr is not None:
        out.update(top_precision_recall(real, fake, **plan.top_pr, block_bytes=block_bytes))
    return out, res


def generative_metrics(
    real: Any,
    fake: Any,
    *,
    k_pr: Optional[int] = 3,
    k_dc: Optional[int] = 5,
    realism: bool = True,
    authenticity: bool = True,
    frechet: bool = True,
    prd: Union[bool, Mapping[str, Any]] = False,
    alpha_beta: Union[bool, Mapping[str, Any]] = False,
    kid: Union[bool, Mapping[str, Any]] = False,
    vendi: Union[bool, Mapping[str, Any]] = False,
    top_pr: Union[bool, Mapping[str, Any]] = False,
    probabilistic: Union[bool, Mapping[str, Any]] = False,
    pr_cover: Union[bool, Mapping[str, Any]] = False,
    per_sample: bool = False,
    error_bars: Optional[int] = None,
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = _BLOCK_BYTES,
    ball: str = "closed",
    cmmd: Union[bool, Mapping[str, Any]] = False,
) -> Dict[str, Tensor]:
    r"""Every score of generated samples ``fake`` against real samples ``real``, from one k-NN pass.

    The real x real, fake x fake and real x fake distances are each computed once; every value
    equals the one of the separate function with the same options. With ``NND_k`` the distance
    to the k-th nearest neighbour in the same set (the point itself excluded) and closed balls
    :math:`B(x, r) = \{z : \lVert z - x\rVert \le r\}`:

    * ``precision`` / ``recall`` (k = ``k_pr``, Kynkäänniemi et al. 2019, :func:`.precision_recall`):
      share of fakes inside some real ball :math:`B(x_i, \mathrm{NND}_k(x_i))` / of reals inside
      some fake ball;
    * ``density`` / ``coverage`` (k = ``k_dc``, Naeem et al. 2020, :func:`.density_coverage`):
      :math:`\frac{1}{kM}\sum_j \#\{i : y_j \in B_i\}` (1 is ideal) / share of real balls
      holding a fake;
    * ``realism`` ``[M]`` (k = ``k_pr``, or 3, :func:`.realism_score`):
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

    ``prdc`` computes all four of precision, recall, density and coverage with one
    ``nearest_k`` and open balls (``d < r``); pass ``k_pr=5, k_dc=5, ball="open"`` for its
    setting (the papers use k = 3 and 5).

    Args:
        real: ``[N, D]`` real features (the reference distribution P).
        fake: ``[M, D]`` generated features (the model Q).
        k_pr: k of precision, recall and realism (3 in the paper); None skips precision/recall.
        k_dc: k of density and coverage (5 in the paper); None skips them.
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
        probabilistic: probabilistic precision and recall: False (default), True, or a dict
            overriding ``k=4, a=1.2, terms="all"``.
        pr_cover: precision and recall cover: False (default), True, or a dict overriding
            ``k=None`` (``ceil((ln N + 6) / C)``), ``C=3``. With ``True`` a family is left out
            when a set is too small for its radii (``k + 1``, ``C k + 1`` samples); with a dict
            that raises.
        cmmd: CMMD: False, True, or a dict overriding ``sigma=10.0, scale=1000.0,
            unbiased=False`` (sigma is calibrated for unit-norm CLIP embeddings; the passes then
            run float tiles, never the bfloat16 screen).
        per_sample: also return ``inside_precision`` ``[M]`` (each fake inside a real
            ``k_pr`` ball) and ``covered`` ``[N]`` (each real ``k_dc`` ball holds a fake); needs
            ``k_pr`` and ``k_dc``.
        error_bars: None, or a number S >= 2 of disjoint generated subsamples: adds
            ``precision_std``, ``recall_std``, ``density_std``, ``coverage_std``, the standard
            deviation over the S parts (see :func:`lightning_prd.functional.uncertainty.score_spread`).
        dtype: GEMM dtype of the k-NN pass, float32 by default (float64 if an input is float64).
        block_bytes: memory budget of one distance tile (and of each set's centred working
            copy, made when the set fits it: peak extra memory is at most about 3x this).
        ball: ``"closed"`` (``d <= r``) or ``"open"`` (``d < r``, as ``prdc``) balls for
            precision, recall, density and coverage (and their ``error_bars``, ``per_sample``
            flags); realism, authenticity and α-precision / β-recall do not depend on it.

    Returns:
        dict of 0-dim tensors (and the per-sample and curve tensors named above), in the compute
        dtype; ``frechet_distance``, ``kid``, ``kid_std``, ``vendi``, ``vendi_real`` and the PRD
        curves are float64.
        dtype; ``frechet_distance``, ``cmmd`` and the PRD curves are float64.

    Example:
        The 1-D worked example of the course note "Precision and recall for generative models" (k = 1):

        >>> import torch
        >>> real = torch.tensor([[0.0], [1.0], [2.0], [3.0]])
        >>> fake = torch.tensor([[0.2], [0.8], [1.1], [7.0]])
        >>> out = generative_metrics(real, fake, k_pr=1, k_dc=1)
        >>> {n: float(out[n]) for n in ("precision", "recall", "density", "coverage", "authenticity")}
        {'precision': 0.75, 'recall': 1.0, 'density': 1.5, 'coverage': 0.75, 'authenticity': 0.25}
        >>> out["realism"]
        tensor([ 5.0000,  5.0000, 10.0000,  0.2500])
        >>> round(float(out["frechet_distance"]), 4)
        4.1394
    """
    plan = make_plan(
        k_pr=k_pr,
        k_dc=k_dc,
        realism=realism,
        authenticity=authenticity,
        frechet=frechet,
        prd=prd,
        alpha_beta=alpha_beta,
        error_bars=error_bars,
        per_sample=per_sample,
        kid=kid,
        vendi=vendi,
        top_pr=top_pr,
        ball=ball,
        probabilistic=probabilistic,
        pr_cover=pr_cover,
        cmmd=cmmd,
    )
    real, fake = as_features(real, "real"), as_features(fake, "fake")
    check_pair(real, fake)
    return scores_from_plan(real, fake, plan, dtype=dtype, block_bytes=block_bytes)[0]
