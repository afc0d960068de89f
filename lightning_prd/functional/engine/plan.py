"""The options of :func:`.generative_metrics` and :class:`~lightning_prd.GenerativeMetrics`: a :class:`Plan`.

Each score family is a switch: ``False``/``None`` (off), ``True`` (the family's ``*_DEFAULTS``)
or a dict overriding some of them (:func:`make_plan` validates every option and names the
argument in its errors). :func:`family_options` turns the switches of the families that join the
k-NN pass into what the pass needs for the given sets.

Example:
    >>> plan = make_plan(k_pr=3, k_dc=5, realism=False, authenticity=True, frechet=True, prd=False,
    ...                  alpha_beta=False, error_bars=None, per_sample=False, kid=dict(subsets=10))
    >>> plan.kid["subsets"], plan.kid["subset_size"], plan.vendi
    (10, 1000, None)
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from torch import Tensor

from lightning_prd.functional.alpha_beta import check_num_alphas
from lightning_prd.functional.clipped import check_clipped_sizes
from lightning_prd.functional.cmmd import SCALE, SIGMA, check_cmmd_options, check_cmmd_sizes
from lightning_prd.functional.data_copying import CELL_THRESHOLD, NUM_CELLS, PCA_DIM, check_data_copying_options
from lightning_prd.functional.engine.inputs import (
    check_ball,
    check_int,
    check_min_samples,
    check_positive_int,
    check_seed,
)
from lightning_prd.functional.fld import BATCH_SIZE, GEN_SIZE, LR, NUM_EPOCHS, check_fld_options
from lightning_prd.functional.frechet_infinity import NUM_POINTS
from lightning_prd.functional.kid import check_kid_options
from lightning_prd.functional.pr_cover import check_cover_options, check_cover_sizes, cover_k
from lightning_prd.functional.prd import check_beta, check_prd_options
from lightning_prd.functional.probabilistic import check_probabilistic
from lightning_prd.functional.top_pr import TOP_PR_DEFAULTS, check_top_pr_options
from lightning_prd.functional.vendi import check_vendi_order

__all__ = ["Plan", "make_plan", "check_sizes", "family_options", "joined_ks", "TOP_PR_DEFAULTS"]

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
#: options of ``clipped=True`` (Salvy et al. 2026: clipped density and coverage)
CLIPPED_DEFAULTS: Dict[str, Any] = dict(k=5)
#: options of ``symmetric=True`` (Khayatkhoei & AbdAlmageed 2023: symmetric precision and recall)
SYMMETRIC_DEFAULTS: Dict[str, Any] = dict(k=5)
#: options of ``cmmd=True`` (a dict passed as ``cmmd`` overrides some of them); sigma is
#: calibrated for unit-norm CLIP embeddings
CMMD_DEFAULTS: Dict[str, Any] = dict(sigma=SIGMA, scale=SCALE, unbiased=False)


#: options of ``fd_infinity=True`` (dgm-eval's ``compute_FD_infinity``: 15 sizes from min(5000, M / 10) to M)
FD_INFINITY_DEFAULTS: Dict[str, Any] = dict(num_points=NUM_POINTS, min_size=None, max_size=None, seed=0)
#: options of ``data_copying=True`` (dgm-eval's ``ct.py``: PCA to 64 dimensions, 3 cells, at least 20 per cell)
DATA_COPYING_DEFAULTS: Dict[str, Any] = dict(
    num_cells=NUM_CELLS, cell_threshold=CELL_THRESHOLD, pca_dim=PCA_DIM, seed=0
)
#: options of ``fld=True`` (``marcojira/fld``: 10,000 generated samples, 50 epochs of Adam at 0.5)
FLD_DEFAULTS: Dict[str, Any] = dict(gen_size=GEN_SIZE, num_epochs=NUM_EPOCHS, lr=LR, batch_size=BATCH_SIZE, seed=0)


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


@contextmanager
def _group(name: str) -> Iterator[None]:
    """Errors raised while checking the option dict ``name`` say which dict held the option."""
    try:
        yield
    except ValueError as err:
        raise ValueError(f"{err} (an option of `{name}`)") from None


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
    #: clipped density and coverage's ``k`` (None: not computed); joins the k-NN pass
    clipped: Optional[Dict[str, Any]] = None
    #: symmetric precision and recall's ``k`` (None: not computed); joins the k-NN pass
    symmetric: Optional[Dict[str, Any]] = None
    #: FD∞'s options (None: not computed); its own Fréchet fits on generated subsets
    fd_infinity: Optional[Dict[str, Any]] = None
    #: C_T's options (None: not computed); needs a held-out real set ``test``
    data_copying: Optional[Dict[str, Any]] = None
    #: FLD's options (None: not computed); needs a held-out real set ``test``
    fld: Optional[Dict[str, Any]] = None


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
    clipped: Union[bool, Mapping[str, Any], None] = False,
    symmetric: Union[bool, Mapping[str, Any], None] = False,
    fd_infinity: Union[bool, Mapping[str, Any], None] = False,
    data_copying: Union[bool, Mapping[str, Any], None] = False,
    fld: Union[bool, Mapping[str, Any], None] = False,
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
        with _group("prd"):
            prd_opts.update(zip(keys, check_prd_options(*(prd_opts[key] for key in keys))))
            prd_opts["beta"] = check_beta(prd_opts["beta"])
    ab = _options(alpha_beta, ALPHA_BETA_DEFAULTS, "alpha_beta")
    if ab is not None:
        with _group("alpha_beta"):
            ab["num_alphas"] = check_num_alphas(ab["num_alphas"])
        ab["k"] = check_positive_int(ab["k"], "alpha_beta['k']")
    kid_opts = _options(kid, KID_DEFAULTS, "kid")
    if kid_opts is not None:
        kid_keys = ("subsets", "subset_size", "degree", "gamma", "coef", "seed")
        with _group("kid"):
            kid_opts.update(zip(kid_keys, check_kid_options(*(kid_opts[key] for key in kid_keys))))
    vendi_opts = _options(vendi, VENDI_DEFAULTS, "vendi")
    if vendi_opts is not None:
        with _group("vendi"):
            vendi_opts["q"] = check_vendi_order(vendi_opts["q"])
        vendi_opts["normalize"] = _flag(vendi_opts["normalize"], "vendi['normalize']")
    top = _options(top_pr, TOP_PR_DEFAULTS, "top_pr")
    if top is not None:
        top = check_top_pr_options(**top, owner="top_pr")
    prob = _options(probabilistic, PROBABILISTIC_DEFAULTS, "probabilistic")
    if prob is not None:
        with _group("probabilistic"):
            prob["k"], prob["a"], prob["terms"] = check_probabilistic(prob["k"], prob["a"], prob["terms"])
    cover = _options(pr_cover, PR_COVER_DEFAULTS, "pr_cover")
    if cover is not None:
        with _group("pr_cover"):
            cover["k"], cover["C"] = check_cover_options(cover["k"], cover["C"])
    cm = _options(cmmd, CMMD_DEFAULTS, "cmmd")
    if cm is not None:
        with _group("cmmd"):
            cm.update(zip(("sigma", "scale", "unbiased"), check_cmmd_options(cm["sigma"], cm["scale"], cm["unbiased"])))
    clip = _options(clipped, CLIPPED_DEFAULTS, "clipped")
    if clip is not None:
        clip["k"] = check_positive_int(clip["k"], "clipped['k']")
    sym = _options(symmetric, SYMMETRIC_DEFAULTS, "symmetric")
    if sym is not None:
        sym["k"] = check_positive_int(sym["k"], "symmetric['k']")
    fdi = _options(fd_infinity, FD_INFINITY_DEFAULTS, "fd_infinity")
    if fdi is not None:
        with _group("fd_infinity"):
            fdi["num_points"] = check_int(fdi["num_points"], "num_points", minimum=2)
            for key in ("min_size", "max_size"):
                fdi[key] = None if fdi[key] is None else check_int(fdi[key], key, minimum=2)
            fdi["seed"] = check_seed(fdi["seed"])
    ct = _options(data_copying, DATA_COPYING_DEFAULTS, "data_copying")
    if ct is not None:
        ct_keys = ("num_cells", "cell_threshold", "pca_dim", "seed")
        with _group("data_copying"):
            ct.update(zip(ct_keys, check_data_copying_options(*(ct[key] for key in ct_keys))))
    fld_opts = _options(fld, FLD_DEFAULTS, "fld")
    if fld_opts is not None:
        fld_keys = ("gen_size", "num_epochs", "lr", "batch_size")
        with _group("fld"):
            checked = check_fld_options(
                fld_opts["gen_size"],
                fld_opts["num_epochs"],
                fld_opts["lr"],
                fld_opts["batch_size"],
                None,
                fld_opts["seed"],
            )
        fld_opts.update(zip(fld_keys, checked[:4]), seed=checked[5])
    families = (prd_opts, ab, kid_opts, vendi_opts, top, prob, cover, cm, clip, sym, fdi, ct, fld_opts)
    core_on = k_pr is not None or k_dc is not None or any(v is True for v in (realism, authenticity, frechet))
    if not core_on and all(options is None for options in families):
        raise ValueError(
            f"Expected at least one score to compute, but `{names['k_pr']}` and `{names['k_dc']}` are None and "
            "every other score is switched off"
        )
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
        lenient=tuple(
            name
            for name, v in (
                ("probabilistic", probabilistic),
                ("pr_cover", pr_cover),
                ("clipped", clipped),
                ("symmetric", symmetric),
            )
            if v is True
        ),
        names=names,
        kid=kid_opts,
        vendi=vendi_opts,
        cmmd=cm,
        clipped=clip,
        symmetric=sym,
        fd_infinity=fdi,
        data_copying=ct,
        fld=fld_opts,
    )


def check_sizes(plan: Plan, real: Tensor, fake: Tensor) -> None:
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


def family_options(
    plan: Plan, real: Tensor, fake: Tensor
) -> Tuple[Optional[Dict[str, Any]], Optional[Tuple[int, int]]]:
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


def joined_ks(plan: Plan, real: Tensor, fake: Tensor) -> Tuple[Optional[int], Optional[int]]:
    """The ``k`` of clipped density/coverage and of symmetric precision/recall for these sets
    (None: not computed). A family switched on by ``True`` is left out when a set is too small
    for it (clipped: ``k + 1`` real and ``k`` generated samples; symmetric: ``k + 1`` of each);
    one given options raises."""
    clip_k = None if plan.clipped is None else plan.clipped["k"]
    if clip_k is not None:
        if "clipped" in plan.lenient and (real.shape[0] < clip_k + 1 or fake.shape[0] < clip_k):
            clip_k = None
        else:
            check_clipped_sizes(real, fake, clip_k, "clipped['k']")
    sym_k = None if plan.symmetric is None else plan.symmetric["k"]
    if sym_k is not None:
        if "symmetric" in plan.lenient and _small(real, fake, sym_k):
            sym_k = None
        else:
            check_min_samples(real, sym_k, "real", "symmetric['k']")
            check_min_samples(fake, sym_k, "fake", "symmetric['k']")
    return clip_k, sym_k
