"""What a protocol sets on the metrics, and the one error for an explicit argument that contradicts it.

A protocol fixes the options of :class:`~lightning_prd.GenerativeMetrics` that act on features
(:func:`metric_arguments`): k of precision/recall and of density/coverage, the ball, and which score families
run (its own on, the families it does not report off). Options it does not name (``kid``, ``vendi``, ...)
stay the caller's.

**Explicit** (:func:`resolve_arguments`): an argument counts as given when its value differs from the
signature's default. A default value takes the protocol's; a given value equal to the protocol's is fine;
a given value that differs raises ``ValueError`` (:func:`check_against_protocol`). So a LightningCLI YAML that
writes out every default still works with ``protocol:``; the price is that an argument written *at* its
default cannot be told from one left out (``ball="closed"`` with ``protocol="prdc"`` gives open balls).

Example:
    >>> from lightning_prd.protocols import get_protocol
    >>> resolve_arguments("prdc", {"k_precision_recall": 3, "ball": "closed"},
    ...                   {"k_precision_recall": 3, "ball": "closed"})["ball"]
    'open'
    >>> try:
    ...     resolve_arguments("prdc", {"k_precision_recall": 7}, {"k_precision_recall": 3})
    ... except ValueError as err:
    ...     print(err)
    Expected argument `k_precision_recall` to agree with protocol 'prdc', which sets it to 5, but got 7; \
leave it out (or at its default) to take the protocol's value, or drop the protocol
"""

from __future__ import annotations

from typing import Any, Dict, Mapping

from lightning_prd.protocols.checks import check_against_protocol, same_value
from lightning_prd.protocols.table import get_protocol

#: the score families of GenerativeMetrics that are on by default; a protocol switches off those it does not report
_DEFAULT_ON = ("prd", "alpha_beta", "probabilistic", "pr_cover")


def metric_arguments(protocol: Any) -> Dict[str, Any]:
    """The :class:`~lightning_prd.GenerativeMetrics` arguments a protocol fixes.

    Example:
        >>> args = metric_arguments("pr50k3")
        >>> args["k_precision_recall"], args["k_density_coverage"], args["ball"], args["frechet"], args["prd"]
        (3, None, 'closed', False, False)
    """
    p = get_protocol(protocol)
    scores = set(p.scores)
    out: Dict[str, Any] = {
        "k_precision_recall": p.k if scores & {"precision", "recall"} else None,
        "k_density_coverage": p.k_density_coverage if scores & {"density", "coverage"} else None,
        "frechet": "frechet_distance" in scores,
        "cmmd": dict(p.metric_options.get("cmmd", {})) if "cmmd" in scores else False,
    }
    if p.ball is not None:
        out["ball"] = p.ball
    out.update({family: False for family in _DEFAULT_ON})
    out.update({k: v for k, v in p.metric_options.items() if k != "cmmd"})
    return out


def resolve_arguments(protocol: Any, given: Mapping[str, Any], defaults: Mapping[str, Any]) -> Dict[str, Any]:
    """``given`` with the protocol's values filled in (module docstring: what counts as explicit).

    Args:
        protocol: a name or a :class:`Protocol`.
        given: the caller's values of the arguments (at least those the protocol fixes).
        defaults: the signature's defaults of the same arguments.

    Returns:
        Every argument of ``given``, those the protocol fixes replaced by its values.
    """
    p = get_protocol(protocol)
    out = dict(given)
    for name, value in metric_arguments(p).items():
        if name in given and name in defaults and not same_value(given[name], defaults[name]):
            check_against_protocol(p, name, given[name], value)
        out[name] = value
    return out
