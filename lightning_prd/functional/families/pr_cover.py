r"""Family ``pr_cover`` (Cheema & Urner, ICML 2023): ``precision_cover``, ``recall_cover``, the share of samples
whose own ``NND_{Ck}`` ball holds at least ``k`` samples of the other set, read off the shared k-NN pass
(:mod:`lightning_prd.functional.pr_cover`; ``k=None``: ``ceil((ln N + 6) / C)``). Switched on by ``True`` it is
left out on sets too small for its radii (``C k + 1`` samples each); with a dict that raises.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from lightning_prd.functional.engine.families import register_family
from lightning_prd.functional.engine.family import CliSpec
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.families._rules import fit_both
from lightning_prd.functional.pr_cover import check_cover_options, cover_from_pass, cover_k

NAME = "pr_cover"


def _check(options: Dict[str, Any]) -> Dict[str, Any]:
    k, C = check_cover_options(options["k"], options["C"])
    return {"k": k, "C": C}


def _fit(options: Dict[str, Any], num_real: int, num_fake: int, lenient: bool) -> Optional[Dict[str, Any]]:
    k, C = cover_k(options["k"], options["C"], num_real)
    return fit_both({"k": k, "C": C}, num_real, num_fake, lenient, C * k, f"C * {NAME}['k']")


def _ask(ctx: Any, options: Dict[str, Any]) -> PassRequest:
    return PassRequest(cover=(options["k"], options["k"] * options["C"]), ball=ctx.plan.ball)


def _read(ctx: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    precision, recall = cover_from_pass(ctx.pass_result(NAME), options["k"], options["C"])
    return {"precision_cover": precision, "recall_cover": recall}


register_family(
    NAME,
    outputs={"precision_cover": "higher", "recall_cover": "higher"},
    defaults=dict(k=None, C=3),
    check=_check,
    meaning="share of samples whose own ball holds k samples of the other set (Cheema & Urner 2023)",
    docs="metrics/pr-cover.md",
    fit=_fit,
    ask=_ask,
    read=_read,
    cli=CliSpec(on=True, help="precision cover and recall cover (precision_cover, recall_cover; default: on)"),
    order=40,
    _builtin=True,
)
