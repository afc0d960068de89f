r"""Family ``probabilistic`` (Park & Kim, ICCV 2023): ``p_precision``, ``p_recall``, the mean soft membership in
linear kernels of one shared radius ``a * mean NND_k`` per set, read off the shared k-NN pass
(:mod:`lightning_prd.functional.probabilistic`). Switched on by ``True`` it is left out on sets too small for
its radii (``k + 1`` samples each); with a dict that raises.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from lightning_prd.functional.engine.families import register_family
from lightning_prd.functional.engine.family import CliSpec
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.families._rules import fit_both
from lightning_prd.functional.probabilistic import check_probabilistic, probabilistic_from_pass

NAME = "probabilistic"


def _check(options: Dict[str, Any]) -> Dict[str, Any]:
    k, a, terms = check_probabilistic(options["k"], options["a"], options["terms"])
    return {"k": k, "a": a, "terms": terms}


def _fit(options: Dict[str, Any], num_real: int, num_fake: int, lenient: bool) -> Optional[Dict[str, Any]]:
    return fit_both(options, num_real, num_fake, lenient, options["k"], f"{NAME}['k']")


def _ask(ctx: Any, options: Dict[str, Any]) -> PassRequest:
    return PassRequest(soft=(options["k"], options["a"], options["terms"] == "nearest"), ball=ctx.plan.ball)


def _read(ctx: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    p_precision, p_recall = probabilistic_from_pass(ctx.pass_result(NAME))
    return {"p_precision": p_precision, "p_recall": p_recall}


register_family(
    NAME,
    outputs={"p_precision": "higher", "p_recall": "higher"},
    defaults=dict(k=4, a=1.2, terms="all"),
    check=_check,
    meaning="precision and recall with soft balls of one shared radius (Park & Kim 2023)",
    docs="metrics/probabilistic.md",
    fit=_fit,
    ask=_ask,
    read=_read,
    cli=CliSpec(on=True, help="probabilistic precision and recall (p_precision, p_recall; default: on)"),
    order=30,
    _builtin=True,
)
