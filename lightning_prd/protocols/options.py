"""What a protocol sets on the metrics, and the one error for an explicit argument that contradicts it.

A protocol fixes the options of :class:`~lightning_prd.GenerativeMetrics` that act on features
(:func:`metric_arguments`): k of precision/recall and of density/coverage, the ball, and which score families
run (its own on, the families it does not report off). Options it does not name (``kid``, ``vendi``, ...)
stay the caller's.

**Given means given** (:func:`resolve_arguments`): an argument is explicit unless it is still the signature's
marked default (:class:`~lightning_prd.functional.engine.vocabulary.Default`), so a value written out equal
to the default (``ball="closed"``, ``k_precision_recall=3``) is explicit too. An unset argument takes the
protocol's value; a given value equal to the protocol's is fine; a given value that differs raises
``ValueError`` (:func:`check_against_protocol`) on every surface: the Metric, the callback's ``metric=`` dict
and ``lightning-prd evaluate``'s flags.

Example:
    >>> from lightning_prd.functional.engine.vocabulary import Default
    >>> resolve_arguments("prdc", {"k_precision_recall": Default(3), "ball": Default("closed")})["ball"]
    'open'
    >>> try:
    ...     resolve_arguments("prdc", {"k_precision_recall": 3})
    ... except ValueError as err:
    ...     print(err)
    Expected argument `k_precision_recall` to agree with protocol 'prdc', which sets it to 5, but got 3; \
leave it out to take the protocol's value, or drop the protocol
"""

from __future__ import annotations

import inspect
from typing import Any, Dict, Mapping, Set, Tuple

from lightning_prd.functional.engine.families import family_of_keyword, switch_families
from lightning_prd.functional.engine.vocabulary import PRESETS, plain
from lightning_prd.functional.engine.vocabulary import given as is_given
from lightning_prd.protocols.checks import check_against_protocol, same_value
from lightning_prd.protocols.table import available_protocols, get_protocol


def default_on() -> Tuple[str, ...]:
    """The keywords of the families on by default or in a preset
    (:data:`~lightning_prd.functional.engine.vocabulary.PRESETS`); a protocol switches off those it does not
    report."""
    from lightning_prd.functional.generative import generative_metrics

    params = inspect.signature(generative_metrics).parameters
    on = {name for name, param in params.items() if plain(param.default) not in (None, False)}
    on |= {name for preset in PRESETS.values() for name, value in preset.items() if value not in (None, False)}
    return tuple(family.keyword for family in switch_families() if family.keyword in on)


def _reported_somewhere() -> Set[str]:
    """The keywords of the families whose scores some protocol of the table reports."""
    scores = {score for name in available_protocols() for score in get_protocol(name).scores}
    return {family.keyword for family in switch_families() if scores & set(family.outputs)}


def metric_arguments(protocol: Any) -> Dict[str, Any]:
    """The :class:`~lightning_prd.GenerativeMetrics` arguments a protocol fixes: each family that reports one of
    the protocol's scores on, with the protocol's value of its keyword (``Protocol.k_precision_recall``) or its
    ``metric_options``; off, the families on by default or reported by another protocol that it does not report.

    Example:
        >>> args = metric_arguments("pr50k3")
        >>> args["k_precision_recall"], args["k_density_coverage"], args["ball"], args["frechet"], args["prd"]
        (3, None, 'closed', False, False)
    """
    p = get_protocol(protocol)
    scores = set(p.scores)
    off = set(default_on()) | _reported_somewhere()
    out: Dict[str, Any] = {}
    for family in switch_families():
        if scores & set(family.outputs):
            if family.value_option is not None:
                out[family.keyword] = getattr(p, family.keyword)
            else:
                out[family.keyword] = dict(p.metric_options[family.name]) if family.name in p.metric_options else True
        elif family.value_option is not None or family.keyword in off:
            out[family.keyword] = family.switch_off
    if p.ball is not None:
        out["ball"] = p.ball
    out.update({key: value for key, value in p.metric_options.items() if family_of_keyword(key) is None})
    return out


def resolve_arguments(protocol: Any, given: Mapping[str, Any], defaults: Any = None) -> Dict[str, Any]:
    """``given`` with the protocol's values in place of the arguments left unset (module docstring).

    Args:
        protocol: a name or a :class:`Protocol`.
        given: the caller's arguments; an unset one is a :class:`~lightning_prd.functional.engine.vocabulary.Default`.
        defaults: no longer taken (explicit is decided by the marked defaults, not by comparing with them).

    Returns:
        Every argument of ``given``, those the protocol fixes and the caller left unset replaced by its values
        (the other unset ones stay marked).
    """
    if defaults is not None:
        raise ValueError(
            "Expected no argument `defaults`: an argument left unset is marked by its Default "
            "(lightning_prd.functional.engine.vocabulary.Default), a value equal to the default is given"
        )
    p = get_protocol(protocol)
    out = dict(given)
    for name, value in metric_arguments(p).items():
        if name in given and is_given(given[name]):
            if not same_value(given[name], value):
                check_against_protocol(p, name, given[name], value)
        else:
            out[name] = value
    return out
