r"""Family ``density_coverage`` (Naeem et al., ICML 2020), switched by ``k_density_coverage``.

``density`` is :math:`\frac{1}{kM}\sum_j \#\{i : y_j \in B(x_i, \mathrm{NND}_k(x_i))\}` (1 is ideal), ``coverage``
the share of real balls holding a generated sample, read off the shared k-NN pass
(:mod:`lightning_prd.functional.density_coverage`). With ``per_sample`` it adds ``covered`` ``[N]``; with
``error_bars`` ``density_std`` and ``coverage_std``.
"""

from __future__ import annotations

from typing import Any, Dict

from lightning_prd.functional.density_coverage import coverage_from_pass, density_from_pass
from lightning_prd.functional.engine.families import register_family
from lightning_prd.functional.engine.family import CliSpec
from lightning_prd.functional.engine.inputs import check_min_count, check_positive_int
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.families._spread import link_both_ks, spread_stds

KEYWORD = "k_density_coverage"


def _check(options: Dict[str, Any]) -> Dict[str, Any]:
    return {"k": check_positive_int(options["k"], KEYWORD)}


def _fit(options: Dict[str, Any], num_real: int, num_fake: int, lenient: bool) -> Dict[str, Any]:
    check_min_count(num_real, options["k"], "real", KEYWORD)
    return options


def _ask(ctx: Any, options: Dict[str, Any]) -> PassRequest:
    return PassRequest(member_ks=(options["k"],), ball=ctx.plan.ball)


def _read(ctx: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    res, k = ctx.pass_result("density_coverage"), options["k"]
    out = {"density": density_from_pass(res, k), "coverage": coverage_from_pass(res, k)}
    if ctx.plan.per_sample:
        out["covered"] = res.cross.real_ball_hit[k]
    out.update(spread_stds(ctx, ("density", "coverage"), res.dtype))
    return out


register_family(
    "density_coverage",
    outputs={"density": 1.0, "coverage": "higher"},
    defaults={"k": 5},
    check=_check,
    meaning="mean count of real balls holding a generated sample over k (1 is ideal) / share of real balls holding one",
    per_class=True,
    docs="metrics/density-coverage.md",
    keyword=KEYWORD,
    value_option="k",
    fit=_fit,
    link=link_both_ks,
    ask=_ask,
    read=_read,
    min_real=lambda options: options["k"] + 1,
    min_fake=lambda options: 1,
    empty_class={"no_fake": {"coverage": 0.0}, "no_real": {"density": 0.0}},
    per_sample=("covered",),
    other_keys=("density_std", "coverage_std"),
    cli=CliSpec(on=True, help="k of density/coverage and beta-recall (default: 5)"),
    order=20,
    _builtin=True,
)
