r"""Family ``authenticity`` (Alaa et al., ICML 2022): the share of generated samples farther from their nearest real
sample :math:`x_{i^*}` than :math:`\mathrm{NND}_1(x_{i^*})` (exact squared distances: a copy is not authentic),
from the shared k-NN pass (:func:`~lightning_prd.functional.alpha_beta.authenticity`). On whenever ``alpha_beta``
is.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import torch

from lightning_prd.functional.alpha_beta import _authentic_from_pass
from lightning_prd.functional.engine.families import register_family
from lightning_prd.functional.engine.family import CliSpec
from lightning_prd.functional.engine.inputs import check_min_count
from lightning_prd.functional.engine.request import PassRequest

NAME = "authenticity"


def _link(options: Optional[Dict[str, Any]], switched: Dict[str, Any], call: Dict[str, Any]) -> Any:
    return {} if options is not None or "alpha_beta" in switched else None


def _fit(options: Dict[str, Any], num_real: int, num_fake: int, lenient: bool) -> Dict[str, Any]:
    check_min_count(num_real, 1, "real", "authenticity's k")
    return options


def _ask(ctx: Any, options: Dict[str, Any]) -> PassRequest:
    return PassRequest(nearest="fake", real_ks=(1,), ball=ctx.plan.ball)


def _read(ctx: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    res = ctx.pass_result(NAME)
    return {"authenticity": _authentic_from_pass(res).to(torch.float64).mean().to(res.dtype)}


register_family(
    NAME,
    outputs={"authenticity": "higher"},
    meaning="share of generated samples that are no copy of their nearest real sample (Alaa et al. 2022)",
    docs="metrics/alpha-beta.md",
    link=_link,
    fit=_fit,
    ask=_ask,
    read=_read,
    min_real=lambda options: 2,
    cli=CliSpec(help="authenticity alone (with --no-alpha-beta)"),
    order=90,
    _builtin=True,
)
