r"""Family ``alpha_beta`` (Alaa et al., ICML 2022, naive mode): the α-precision and β-recall curves over
``num_alphas`` levels and their integrals ``alpha_precision``, ``beta_recall``, from the shared k-NN pass
(:func:`~lightning_prd.functional.alpha_beta.alpha_precision_beta_recall`); it switches ``authenticity`` on.
"""

from __future__ import annotations

from typing import Any, Dict

from lightning_prd.functional.alpha_beta import (
    PER_SAMPLE_KEYS,
    alpha_beta_from_pass,
    check_num_alphas,
    fake_centre_distance,
)
from lightning_prd.functional.engine.families import register_family
from lightning_prd.functional.engine.family import CliSpec
from lightning_prd.functional.engine.inputs import check_min_count, check_positive_int
from lightning_prd.functional.engine.request import PassRequest

NAME = "alpha_beta"


def _check(options: Dict[str, Any]) -> Dict[str, Any]:
    k = check_positive_int(options["k"], f"{NAME}['k']")
    return {"num_alphas": check_num_alphas(options["num_alphas"]), "k": k}


def _fit(options: Dict[str, Any], num_real: int, num_fake: int, lenient: bool) -> Dict[str, Any]:
    check_min_count(num_real, options["k"], "real", f"{NAME}['k']")
    return options


def _ask(ctx: Any, options: Dict[str, Any]) -> PassRequest:
    # beta-recall's per-ball minima of ||y - c_g||; authenticity's nearest real samples and NND_1
    return PassRequest(
        fake_values=ctx.once("fake_centre_distance", lambda: fake_centre_distance(ctx.sets.fake)),
        value_ks=(options["k"],),
        nearest="fake",
        real_ks=(1,),
        ball=ctx.plan.ball,
    )


def _read(ctx: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    out = alpha_beta_from_pass(ctx.pass_result(NAME), num_alphas=options["num_alphas"], k=options["k"])
    out.pop("authenticity")  # the authenticity family's score
    return out


register_family(
    NAME,
    outputs={"alpha_precision": "higher", "beta_recall": "higher"},
    defaults=dict(num_alphas=30, k=5),
    check=_check,
    meaning="integrated alpha-precision and beta-recall curves (Alaa et al. 2022)",
    docs="metrics/alpha-beta.md",
    fit=_fit,
    ask=_ask,
    read=_read,
    min_real=lambda options: options["k"] + 1,
    other_keys=("alphas", "alpha_precision_curve", "beta_recall_curve", *PER_SAMPLE_KEYS),
    cli=CliSpec(
        on=True,
        flags={"--num-alphas": ("num_alphas", "points of the alpha/beta curves, at least 2 (default: 30)")},
        linked={"k": "k_density_coverage"},
        help="alpha-precision, beta-recall and authenticity",
    ),
    order=80,
    _builtin=True,
)
