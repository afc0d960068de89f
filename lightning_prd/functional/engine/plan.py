"""The options of :func:`.generative_metrics` and :class:`~lightning_prd.GenerativeMetrics`: a :class:`Plan`.

Each score family is a switch (its record's keyword, :mod:`.families`): ``False``/``None`` (off), ``True`` (its
defaults) or a dict overriding some of them (``k_precision_recall=3``: a valued switch). :func:`make_plan` checks
every switch through its record, then lets each record see the others (``link``: ``alpha_beta`` switches
``authenticity`` on, ``realism`` takes precision's ``k``); :func:`fitted` gives the options of the families for
sets of given sizes (a family switched on by ``True`` is left out of sets too small for it). Nothing here names a
family: the records do.

Example:
    >>> plan = make_plan(k_precision_recall=3, k_density_coverage=5, realism=False, authenticity=True,
    ...                  frechet=True, prd=False, alpha_beta=False, kid=dict(subsets=10))
    >>> plan.options_of("kid")["subsets"], plan.options_of("kid")["subset_size"], plan.options_of("vendi")
    (10, 1000, None)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Tuple

from lightning_prd.functional.engine.families import Family, get_family, registered_options, switch_families
from lightning_prd.functional.engine.inputs import check_ball, check_int

__all__ = ["Plan", "make_plan", "plan_of", "fitted"]


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"Expected argument `{name}` to be a bool, but got {value!r}")
    return value


@dataclass(frozen=True)
class Plan:
    """Which families to compute with which options, and the options of the call (checked by :func:`make_plan`).

    Attributes:
        families: name -> checked options of every switched-on family, in table order.
        ball: ``"closed"`` or ``"open"`` balls of the k-NN families that follow it.
        per_sample: the families' per-sample outputs too.
        error_bars: None, or the number of generated parts of the error bars.
        lenient: the families switched on by ``True``: left out of sets too small for them.
    """

    families: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    ball: str = "closed"
    per_sample: bool = False
    error_bars: Optional[int] = None
    lenient: Tuple[str, ...] = ()

    def options_of(self, name: str) -> Optional[Dict[str, Any]]:
        """The checked options of family ``name`` in this plan (None: off)."""
        return self.families.get(name)

    def on(self, name: str) -> bool:
        """Whether family ``name`` is switched on."""
        return name in self.families

    def registered(self) -> List[Tuple[Family, Dict[str, Any]]]:
        """The switched-on families with their options, in table order."""
        return [(get_family(name), options) for name, options in self.families.items()]

    def with_options(self, name: str, options: Dict[str, Any]) -> Plan:
        """This plan with family ``name``'s options replaced."""
        return replace(self, families={**self.families, name: options})


def make_plan(
    *, ball: str = "closed", per_sample: bool = False, error_bars: Optional[int] = None, **switches: Any
) -> Plan:
    """Validate the switches of :func:`generative_metrics`, by keyword, and the call's options."""
    per_sample = _flag(per_sample, "per_sample")
    if error_bars is not None:
        error_bars = check_int(error_bars, "error_bars", minimum=2)
    ball = check_ball(ball)
    options = registered_options(switches)
    call = {"ball": ball, "per_sample": per_sample, "error_bars": error_bars}
    linked: Dict[str, Dict[str, Any]] = {}
    for family in switch_families():
        own = options.get(family.name)
        if family.link is not None:
            own = family.link(own, dict(options), call)
        if own is not None:
            linked[family.name] = own
    if not linked:
        raise ValueError(
            "Expected at least one score to compute, but `k_precision_recall` and `k_density_coverage` are None "
            "and every other score is switched off"
        )
    lenient = tuple(f.name for f in switch_families() if switches.get(f.keyword) is True)
    return Plan(families=linked, ball=ball, per_sample=per_sample, error_bars=error_bars, lenient=lenient)


def plan_of(options: Mapping[str, Any], families: Optional[Mapping[str, Any]] = None) -> Plan:
    """The plan of the resolved options of :func:`~lightning_prd.functional.generative_metrics` (its keywords, by
    their one name; ``dtype``, ``block_bytes`` and ``test`` act on the call, not the plan) and the switches of the
    families that are no keyword of its signature (``families``)."""
    planned = {name: value for name, value in options.items() if name not in _CALL_OPTIONS}
    return make_plan(**planned, **dict(families or {}))


#: keywords of generative_metrics that are no option of the plan
_CALL_OPTIONS = ("dtype", "block_bytes", "test")


def fitted(plan: Plan, num_real: int, num_fake: int) -> List[Tuple[Family, Dict[str, Any]]]:
    """The families of ``plan`` with their options for sets of ``num_real`` and ``num_fake`` samples (each record's
    ``fit``: too few samples raise naming the option; a family switched on by ``True`` is left out instead where
    its record says so)."""
    out = []
    for family, options in plan.registered():
        if family.fit is not None:
            fit = family.fit(options, num_real, num_fake, family.name in plan.lenient)
            if fit is None:
                continue
            options = fit
        out.append((family, options))
    return out
