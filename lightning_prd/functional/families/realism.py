r"""Family ``realism`` (Kynkäänniemi et al., NeurIPS 2019): per generated sample
:math:`\max_i \mathrm{NND}_k(x_i) / \lVert y - x_i\rVert` over the real balls up to the median radius
(:func:`~lightning_prd.functional.precision_recall.realism_score`), with the ``k`` of precision and recall (3 when
they are off); on with ``per_sample``. A per-sample output only: no scalar is logged.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from lightning_prd.functional.engine.families import register_family
from lightning_prd.functional.engine.family import CliSpec
from lightning_prd.functional.engine.inputs import check_min_count
from lightning_prd.functional.engine.request import PassRequest

NAME = "realism"
#: the paper's k, when precision and recall are off
K = 3


def _link(options: Optional[Dict[str, Any]], switched: Dict[str, Any], call: Dict[str, Any]) -> Any:
    if options is None and not call["per_sample"]:
        return None
    return {"k": switched["precision_recall"]["k"] if "precision_recall" in switched else K}


def _fit(options: Dict[str, Any], num_real: int, num_fake: int, lenient: bool) -> Dict[str, Any]:
    check_min_count(num_real, options["k"], "real", "realism's k")
    return options


def _ask(ctx: Any, options: Dict[str, Any]) -> PassRequest:
    return PassRequest(realism_k=options["k"], ball=ctx.plan.ball)


def _read(ctx: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    res = ctx.pass_result(NAME)
    return {} if res.cross.realism is None else {"realism": res.cross.realism.to(res.dtype)}


register_family(
    NAME,
    outputs={},
    meaning="per generated sample: the realism score (Kynkäänniemi et al. 2019)",
    docs="metrics/precision-recall.md",
    link=_link,
    fit=_fit,
    ask=_ask,
    read=_read,
    per_sample=("realism",),
    cli=CliSpec(help="the realism score of each generated sample (--json only)"),
    order=200,
    _builtin=True,
)
