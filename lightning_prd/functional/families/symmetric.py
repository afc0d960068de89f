r"""Family ``symmetric`` (Khayatkhoei & AbdAlmageed, AAAI 2023): ``sym_precision``, ``sym_recall``, the minimum of
precision (recall) and its mirror image asked with the other set's balls, from the shared k-NN pass
(:mod:`lightning_prd.functional.symmetric`; its balls follow ``ball``). Switched on by ``True`` it is left out on
sets too small for it (``k + 1`` samples each); with a dict that raises.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from lightning_prd.functional.engine.families import register_family
from lightning_prd.functional.engine.family import CliSpec
from lightning_prd.functional.engine.inputs import check_positive_int
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.families._rules import fit_both
from lightning_prd.functional.symmetric import symmetric_from_pass

NAME = "symmetric"


def _check(options: Dict[str, Any]) -> Dict[str, Any]:
    return {"k": check_positive_int(options["k"], f"{NAME}['k']")}


def _fit(options: Dict[str, Any], num_real: int, num_fake: int, lenient: bool) -> Optional[Dict[str, Any]]:
    return fit_both(options, num_real, num_fake, lenient, options["k"], f"{NAME}['k']")


def _ask(ctx: Any, options: Dict[str, Any]) -> PassRequest:
    k = options["k"]
    return PassRequest(member_ks=(k,), recall_ks=(k,), nearest="fake", ball=ctx.plan.ball)


def _read(ctx: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    precision, recall = symmetric_from_pass(ctx.pass_result(NAME), options["k"], ctx.plan.ball)
    return {"sym_precision": precision, "sym_recall": recall}


register_family(
    NAME,
    outputs={"sym_precision": "higher", "sym_recall": "higher"},
    defaults=dict(k=5),
    check=_check,
    meaning="the lesser of precision (recall) and its mirror image (Khayatkhoei & AbdAlmageed 2023)",
    docs="metrics/symmetric.md",
    fit=_fit,
    ask=_ask,
    read=_read,
    cli=CliSpec(help="add symmetric precision and recall (sym_precision, sym_recall; k = 5)"),
    order=60,
    _builtin=True,
)
