r"""Family ``clipped`` (Salvy et al. 2026): ``clipped_density``, ``clipped_coverage``, density and coverage with each
sample's count capped at ``k``, the real radii clipped at their median (density), both calibrated to ``[0, 1]``,
from the shared k-NN pass (:mod:`lightning_prd.functional.clipped`). Switched on by ``True`` it is left out on
sets too small for it (``k + 1`` real, ``k`` generated samples); with a dict that raises.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from lightning_prd.functional.clipped import check_clipped_sizes, clipped_from_pass, pass_options
from lightning_prd.functional.engine.families import register_family
from lightning_prd.functional.engine.family import CliSpec
from lightning_prd.functional.engine.inputs import check_positive_int
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.knn.clipped import ClippedBalls

NAME = "clipped"


def _check(options: Dict[str, Any]) -> Dict[str, Any]:
    return {"k": check_positive_int(options["k"], f"{NAME}['k']")}


def _fit(options: Dict[str, Any], num_real: int, num_fake: int, lenient: bool) -> Optional[Dict[str, Any]]:
    k = options["k"]
    if lenient and (num_real < k + 1 or num_fake < k):
        return None
    check_clipped_sizes(num_real, num_fake, k, f"{NAME}['k']")
    return options


def _ask(ctx: Any, options: Dict[str, Any]) -> PassRequest:
    member, real = pass_options(options["k"], ctx.sets.num_real)  # its balls, and the radii up to k + 1
    strict = ctx.plan.ball == "open"
    return PassRequest(
        member_ks=tuple(member),
        real_ks=tuple(real),
        clipped=ClippedBalls(options["k"], strict=strict),
        ball=ctx.plan.ball,
    )


def _read(ctx: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    density, coverage = clipped_from_pass(ctx.pass_result(NAME), options["k"], ctx.block_bytes)
    return {"clipped_density": density, "clipped_coverage": coverage}


register_family(
    NAME,
    outputs={"clipped_density": "higher", "clipped_coverage": "higher"},
    defaults=dict(k=5),
    check=_check,
    meaning="density and coverage bounded and robust to outliers (Salvy et al. 2026)",
    docs="metrics/clipped.md",
    fit=_fit,
    ask=_ask,
    read=_read,
    cli=CliSpec(help="add clipped density and clipped coverage (clipped_density, clipped_coverage; k = 5)"),
    order=50,
    _builtin=True,
)
