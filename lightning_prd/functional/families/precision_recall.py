r"""Family ``precision_recall`` (Kynkäänniemi et al., NeurIPS 2019), switched by ``k_precision_recall``.

``precision`` is the share of generated samples inside some real ball :math:`B(x_i, \mathrm{NND}_k(x_i))`,
``recall`` the share of real samples inside some generated ball (closed balls ``d <= r`` unless ``ball="open"``),
both read off the shared k-NN pass (:mod:`lightning_prd.functional.precision_recall`). With ``per_sample`` it adds
``inside_precision`` ``[M]``; with ``error_bars`` the spreads ``precision_std`` and ``recall_std``
(:func:`~lightning_prd.functional.uncertainty.split_spread`, shared with density and coverage).
"""

from __future__ import annotations

from typing import Any, Dict

from lightning_prd.functional.engine.families import register_family
from lightning_prd.functional.engine.family import CliSpec
from lightning_prd.functional.engine.inputs import check_min_count, check_positive_int
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.families._spread import link_both_ks, spread_stds
from lightning_prd.functional.precision_recall import precision_from_pass, recall_from_pass

KEYWORD = "k_precision_recall"


def _check(options: Dict[str, Any]) -> Dict[str, Any]:
    return {"k": check_positive_int(options["k"], KEYWORD)}


def _fit(options: Dict[str, Any], num_real: int, num_fake: int, lenient: bool) -> Dict[str, Any]:
    check_min_count(num_real, options["k"], "real", KEYWORD)
    check_min_count(num_fake, options["k"], "fake", KEYWORD)
    return options


def _ask(ctx: Any, options: Dict[str, Any]) -> PassRequest:
    return PassRequest(member_ks=(options["k"],), recall_ks=(options["k"],), ball=ctx.plan.ball)


def _read(ctx: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    res, k = ctx.pass_result("precision_recall"), options["k"]
    out = {"precision": precision_from_pass(res, k), "recall": recall_from_pass(res, k)}
    if ctx.plan.per_sample:
        out["inside_precision"] = res.cross.fake_in_real[k]
    out.update(spread_stds(ctx, ("precision", "recall"), res.dtype))
    return out


register_family(
    "precision_recall",
    outputs={"precision": "higher", "recall": "higher"},
    defaults={"k": 3},
    check=_check,
    meaning="share of generated samples inside the real k-NN manifold / of real samples inside the generated one",
    per_class=True,
    docs="metrics/precision-recall.md",
    keyword=KEYWORD,
    value_option="k",
    fit=_fit,
    link=link_both_ks,
    ask=_ask,
    read=_read,
    min_real=lambda options: options["k"] + 1,
    min_fake=lambda options: options["k"] + 1,
    empty_class={"no_fake": {"recall": 0.0}, "no_real": {"precision": 0.0}},
    per_sample=("inside_precision",),
    other_keys=("precision_std", "recall_std"),
    cli=CliSpec(on=True, help="k of precision/recall (default: 3)"),
    order=10,
    _builtin=True,
)
