"""The error bars of precision, recall, density and coverage (``error_bars=S``), computed once per evaluation
for both families (:func:`~lightning_prd.functional.uncertainty.split_spread`): no family of its own."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple


def link_both_ks(options: Optional[Dict[str, Any]], switched: Dict[str, Any], call: Dict[str, Any]) -> Any:
    """The ``link`` of precision/recall and of density/coverage: ``per_sample`` and ``error_bars`` need both
    ``k_precision_recall`` and ``k_density_coverage``."""
    if options is None:
        both = "`k_precision_recall` and `k_density_coverage`"
        if call["per_sample"]:
            raise ValueError(f"Expected {both} to be set when `per_sample=True`")
        if call["error_bars"] is not None:
            raise ValueError(f"Expected {both} to be set when `error_bars` is used")
    return options


def spread_stds(ctx: Any, names: Tuple[str, str], dtype: Any) -> Dict[str, Any]:
    """``<name>_std`` of ``names`` from the error bars (:func:`spread_of`) with ``error_bars``, else nothing."""
    if ctx.plan.error_bars is None:
        return {}
    spread = spread_of(ctx)
    return {f"{name}_std": spread[name]["std"].to(dtype) for name in names}


def spread_of(ctx: Any) -> Dict[str, Dict[str, Any]]:
    """The spreads of the four scores over ``error_bars`` generated parts, once per evaluation."""
    from lightning_prd.functional.uncertainty import split_spread

    k_pr = ctx.plan.options_of("precision_recall")["k"]
    k_dc = ctx.plan.options_of("density_coverage")["k"]
    return ctx.once(
        "error_bars",
        lambda: split_spread(
            ctx.sets,
            num_splits=ctx.plan.error_bars,
            names=("error_bars", "k_precision_recall"),
            k_precision_recall=k_pr,
            k_density_coverage=k_dc,
            dtype=ctx.dtype,
            block_bytes=ctx.block_bytes,
            real_cache=ctx.res.real,
            shard=ctx.shard,
            ball=ctx.plan.ball,
        ),
    )
