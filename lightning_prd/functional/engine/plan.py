"""The options of :func:`.generative_metrics` and :class:`~lightning_prd.GenerativeMetrics`: a :class:`Plan`.

Each score family is a switch: ``False``/``None`` (off), ``True`` (the family's ``*_DEFAULTS``)
or a dict overriding some of them (:func:`make_plan` validates every option and names the
argument in its errors). :func:`family_options` turns the switches of the families that join the
k-NN pass into what the pass needs for the given sets.

Example:
    >>> plan = make_plan(k_precision_recall=3, k_density_coverage=5, realism=False, authenticity=True,
    ...                  frechet=True, prd=False, alpha_beta=False, error_bars=None, per_sample=False,
    ...                  kid=dict(subsets=10))
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
from lightning_prd.functional.cmmd import check_cmmd_options, check_cmmd_sizes
from lightning_prd.functional.data_copying import check_data_copying_options
from lightning_prd.functional.engine.families import Family, get_family, registered_options
from lightning_prd.functional.engine.inputs import (
    check_ball,
    check_int,
    check_min_samples,
    check_positive_int,
    check_seed,
)
from lightning_prd.functional.fld import check_fld_options
from lightning_prd.functional.kid import check_kid_options
from lightning_prd.functional.pr_cover import check_cover_options, check_cover_sizes, cover_k
from lightning_prd.functional.prd import check_beta, check_prd_options
from lightning_prd.functional.probabilistic import check_probabilistic
from lightning_prd.functional.top_pr import TOP_PR_DEFAULTS, check_top_pr_options
from lightning_prd.functional.vendi import check_vendi_order

__all__ = ["Plan", "make_plan", "plan_of", "check_sizes", "family_options", "joined_ks", "TOP_PR_DEFAULTS"]


def _defaults(name: str) -> Dict[str, Any]:
    return get_family(name).defaults


#: the options of each built-in switch and their defaults: the family registry's records (:mod:`.families`)
PRD_DEFAULTS = _defaults("prd")
ALPHA_BETA_DEFAULTS = _defaults("alpha_beta")
KID_DEFAULTS = _defaults("kid")
VENDI_DEFAULTS = _defaults("vendi")
PROBABILISTIC_DEFAULTS = _defaults("probabilistic")
PR_COVER_DEFAULTS = _defaults("pr_cover")
CLIPPED_DEFAULTS = _defaults("clipped")
SYMMETRIC_DEFAULTS = _defaults("symmetric")
CMMD_DEFAULTS = _defaults("cmmd")


def _options(value: Any, name: str) -> Optional[Dict[str, Any]]:
    """The switch ``value`` of built-in family ``name`` as options (:meth:`.family.Family.options`: ``False`` /
    ``None`` -> None, ``True`` -> its defaults, a mapping -> the defaults it overrides); the plan checks them."""
    return get_family(name).options(value)


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

    k_precision_recall: Optional[int]
    k_density_coverage: Optional[int]
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
    #: the families computed through their registry record alone (the rarity score, user families):
    #: name -> checked options, in registration order
    families: Dict[str, Dict[str, Any]] = field(default_factory=dict)

    def options_of(self, name: str) -> Optional[Dict[str, Any]]:
        """The checked options of family ``name`` in this plan (None: off)."""
        family = get_family(name)
        return getattr(self, name) if family.engine else self.families.get(name)

    def registered(self) -> List[Tuple[Family, Dict[str, Any]]]:
        """The registry families of this plan with their options."""
        return [(get_family(name), options) for name, options in self.families.items()]


def make_plan(
    *,
    k_precision_recall: Optional[int],
    k_density_coverage: Optional[int],
    realism: bool,
    authenticity: bool,
    frechet: bool,
    prd: Union[bool, Mapping[str, Any], None],
    alpha_beta: Union[bool, Mapping[str, Any], None],
    error_bars: Optional[int],
    per_sample: bool,
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
    families: Optional[Mapping[str, Any]] = None,
) -> Plan:
    """Validate the options of :func:`generative_metrics` (``families``: the switches of the families computed
    through their registry record, by name)."""
    if k_precision_recall is not None:
        k_precision_recall = check_positive_int(k_precision_recall, "k_precision_recall")
    if k_density_coverage is not None:
        k_density_coverage = check_positive_int(k_density_coverage, "k_density_coverage")
    both = "`k_precision_recall` and `k_density_coverage`"
    per_sample = _flag(per_sample, "per_sample")
    if per_sample and (k_precision_recall is None or k_density_coverage is None):
        raise ValueError(f"Expected {both} to be set when `per_sample=True`")
    if error_bars is not None:
        error_bars = check_int(error_bars, "error_bars", minimum=2)
        if k_precision_recall is None or k_density_coverage is None:
            raise ValueError(f"Expected {both} to be set when `error_bars` is used")
    prd_opts = _options(prd, "prd")
    if prd_opts is not None:
        keys = ("num_clusters", "num_angles", "num_runs", "seed", "enforce_balance")
        with _group("prd"):
            prd_opts.update(zip(keys, check_prd_options(*(prd_opts[key] for key in keys))))
            prd_opts["beta"] = check_beta(prd_opts["beta"])
    ab = _options(alpha_beta, "alpha_beta")
    if ab is not None:
        with _group("alpha_beta"):
            ab["num_alphas"] = check_num_alphas(ab["num_alphas"])
        ab["k"] = check_positive_int(ab["k"], "alpha_beta['k']")
    kid_opts = _options(kid, "kid")
    if kid_opts is not None:
        kid_keys = ("subsets", "subset_size", "degree", "gamma", "coef", "seed")
        with _group("kid"):
            kid_opts.update(zip(kid_keys, check_kid_options(*(kid_opts[key] for key in kid_keys))))
    vendi_opts = _options(vendi, "vendi")
    if vendi_opts is not None:
        with _group("vendi"):
            vendi_opts["q"] = check_vendi_order(vendi_opts["q"])
        vendi_opts["normalize"] = _flag(vendi_opts["normalize"], "vendi['normalize']")
    top = _options(top_pr, "top_pr")
    if top is not None:
        top = check_top_pr_options(**top, owner="top_pr")
    prob = _options(probabilistic, "probabilistic")
    if prob is not None:
        with _group("probabilistic"):
            prob["k"], prob["a"], prob["terms"] = check_probabilistic(prob["k"], prob["a"], prob["terms"])
    cover = _options(pr_cover, "pr_cover")
    if cover is not None:
        with _group("pr_cover"):
            cover["k"], cover["C"] = check_cover_options(cover["k"], cover["C"])
    cm = _options(cmmd, "cmmd")
    if cm is not None:
        with _group("cmmd"):
            cm.update(zip(("sigma", "scale", "unbiased"), check_cmmd_options(cm["sigma"], cm["scale"], cm["unbiased"])))
    clip = _options(clipped, "clipped")
    if clip is not None:
        clip["k"] = check_positive_int(clip["k"], "clipped['k']")
    sym = _options(symmetric, "symmetric")
    if sym is not None:
        sym["k"] = check_positive_int(sym["k"], "symmetric['k']")
    fdi = _options(fd_infinity, "fd_infinity")
    if fdi is not None:
        with _group("fd_infinity"):
            fdi["num_points"] = check_int(fdi["num_points"], "num_points", minimum=2)
            for key in ("min_size", "max_size"):
                fdi[key] = None if fdi[key] is None else check_int(fdi[key], key, minimum=2)
            fdi["seed"] = check_seed(fdi["seed"])
    ct = _options(data_copying, "data_copying")
    if ct is not None:
        ct_keys = ("num_cells", "cell_threshold", "pca_dim", "seed")
        with _group("data_copying"):
            ct.update(zip(ct_keys, check_data_copying_options(*(ct[key] for key in ct_keys))))
    fld_opts = _options(fld, "fld")
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
    registered = registered_options(families or {})
    switched = (prd_opts, ab, kid_opts, vendi_opts, top, prob, cover, cm, clip, sym, fdi, ct, fld_opts)
    core_on = (
        k_precision_recall is not None
        or k_density_coverage is not None
        or any(v is True for v in (realism, authenticity, frechet))
    )
    if not core_on and not registered and all(options is None for options in switched):
        raise ValueError(
            f"Expected at least one score to compute, but {both} are None and every other score is switched off"
        )
    return Plan(
        k_precision_recall=k_precision_recall,
        k_density_coverage=k_density_coverage,
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
        kid=kid_opts,
        vendi=vendi_opts,
        cmmd=cm,
        clipped=clip,
        symmetric=sym,
        fd_infinity=fdi,
        data_copying=ct,
        fld=fld_opts,
        families=registered,
    )


def plan_of(options: Mapping[str, Any], families: Optional[Mapping[str, Any]] = None) -> Plan:
    """The plan of the resolved options of :func:`~lightning_prd.functional.generative_metrics` (its keywords, by
    their one name; ``dtype``, ``block_bytes`` and ``test`` act on the call, not the plan) and the switches of the
    registry families (``families``)."""
    planned = {name: value for name, value in options.items() if name not in _CALL_OPTIONS}
    return make_plan(**planned, families=families)


#: keywords of generative_metrics that are no option of the plan
_CALL_OPTIONS = ("dtype", "block_bytes", "test")


def check_sizes(plan: Plan, real: Tensor, fake: Tensor) -> None:
    """Too few samples for one of the k: name the option (the engine only knows "k")."""
    named: List[Tuple[str, Optional[int]]] = [
        ("k_precision_recall", plan.k_precision_recall),
        ("k_density_coverage", plan.k_density_coverage),
    ]
    if plan.alpha_beta is not None:
        named.append(("alpha_beta['k']", plan.alpha_beta["k"]))
    if plan.realism and plan.k_precision_recall is None:
        named.append(("realism's k", 3))
    if plan.authenticity:
        named.append(("authenticity's k", 1))
    for name, k in named:
        if k is not None:
            check_min_samples(real, k, "real", name)
    if plan.k_precision_recall is not None:
        check_min_samples(fake, plan.k_precision_recall, "fake", "k_precision_recall")
    if plan.cmmd is not None:
        check_cmmd_sizes(real.shape[0], fake.shape[0], plan.cmmd["unbiased"])
    for family, options in plan.registered():
        for need, points, role in zip(family.fewest(options), (real, fake), ("real", "fake")):
            if points.shape[0] < need:
                raise ValueError(
                    f"Expected argument `{role}` to hold at least {need} samples for `{family.name}` "
                    f"(options {options}), but got {points.shape[0]}"
                )


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
