"""The short form of a family record turned into the full one: ``compute`` or ``pass_asks`` / ``from_pass`` into
``read`` and ``ask``, ``min_real`` / ``min_fake`` into ``fit`` (:func:`~.families.register_family`)."""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from lightning_prd.functional.engine.request import PassRequest


def asks_of(pass_asks: Optional[Callable[[Dict[str, Any]], Any]]) -> Optional[Callable[..., PassRequest]]:
    """``ask(ctx, options)`` of a family that gives ``pass_asks(options) -> PassAsks`` (None without one)."""
    if pass_asks is None:
        return None

    def ask(ctx: Any, options: Dict[str, Any]) -> PassRequest:
        asked = pass_asks(options)
        return PassRequest(real_ks=tuple(asked.real_ks), reductions=tuple(asked.reductions), ball=ctx.plan.ball)

    return ask


def reader(record: Callable[[], Any]) -> Callable[..., Dict[str, Any]]:
    """``read(ctx, options)`` of a short-form family (``record()`` gives its registered record): its
    ``from_pass`` or ``compute``, the result checked (:func:`~.family_scores.family_scores`)."""

    def read(ctx: Any, options: Dict[str, Any]) -> Dict[str, Any]:
        from lightning_prd.functional.engine.family_scores import family_scores

        return family_scores(record(), options, ctx.sets, ctx.res)

    return read


def fit_of(family: Any) -> Callable[..., Optional[Dict[str, Any]]]:
    """``fit(options, num_real, num_fake, lenient)`` of a family that gives ``min_real`` / ``min_fake``: sets
    smaller than they ask raise naming the family and its options."""

    def fit(options: Dict[str, Any], num_real: int, num_fake: int, lenient: bool) -> Optional[Dict[str, Any]]:
        for need, count, role in zip(family.fewest(options), (num_real, num_fake), ("real", "fake")):
            if count < need:
                raise ValueError(
                    f"Expected argument `{role}` to hold at least {need} samples for `{family.name}` "
                    f"(options {options}), but got {count}"
                )
        return options

    return fit
