"""``PRDCallback(protocol=..., weights=...)``: a named protocol turned into the callback's extractor, sample
counts and metric, and the fingerprint of a fit.

**What a protocol sets** (:mod:`lightning_prd.protocols`): the extractor, built by
:meth:`~lightning_prd.protocols.Protocol.build_extractor` from ``weights`` (the protocol's own file only; None
looks in torch's hub cache); the metric's k, ball and score families (``GenerativeMetrics(protocol=...)``);
``num_samples`` (generated) and ``num_real`` where the protocol names those counts.

**What counts as explicit.** ``num_samples`` and ``num_real`` default to ``None``: left out, they take the
protocol's counts (without a protocol, ``num_samples`` is 2048 and ``num_real`` all rows); given, they must
equal them (a protocol that names no count, e.g. ``"fid"``'s real set, leaves that argument free).
``feature_extractor`` with an extractor-defining protocol may only name the protocol's network (a name, or a
dict ``{"name": ..., **options}`` whose options agree with the protocol's; the name may be left out of the dict,
e.g. ``{"random_init": True}``); a module or callable is refused, as its weights cannot be checked. A protocol
without a network (``"prdc"``) takes any extractor. The metric's options follow
:func:`~lightning_prd.protocols.resolve_arguments` (a left-out option takes the protocol's value; one given,
even equal to its default, is explicit). Every contradiction raises ``ValueError`` naming the argument, its
value, the protocol and the protocol's value.

Without a protocol, ``weights`` goes to an extractor given by name: ``feature_extractor="vgg16",
weights=PATH`` is ``feature_extractor={"name": "vgg16", "weights": PATH}``.

Example:
    >>> from lightning_prd.callback.protocol import counts
    >>> from lightning_prd.protocols import get_protocol
    >>> counts(get_protocol("pr50k3"), None, None), counts(None, None, None)
    ((50000, 50000), (2048, None))
    >>> try:
    ...     counts(get_protocol("pr50k3"), 2048, None)
    ... except ValueError as err:
    ...     print(str(err).split(";")[0])
    Expected argument `num_samples` to agree with protocol 'pr50k3', which sets it to 50000, but got 2048
"""

from __future__ import annotations

import warnings
from typing import Any, Dict, Mapping, Optional, Tuple

import torch
import torch.distributed as dist

from lightning_prd.callback.options import resolve_extractor
from lightning_prd.features.base import json_value
from lightning_prd.features.registry import canonical_name
from lightning_prd.functional.engine.families import families, switch_families
from lightning_prd.functional.engine.inputs import check_positive_int
from lightning_prd.protocols import (
    Protocol,
    check_against_protocol,
    fingerprint,
    fingerprint_differences,
    get_protocol,
    metric_arguments,
)

#: the fingerprint's keys of the directions: ``direction/<score>``
DIRECTION = "direction/"
#: generated samples per evaluation without a protocol (or with one that names no count)
DEFAULT_NUM_SAMPLES = 2048


def resolve(protocol: Any, weights: Any, feature_extractor: Any) -> Tuple[Optional[Protocol], Any, Optional[str]]:
    """``(protocol, extractor, registry name)`` of the callback's ``protocol``, ``weights`` and ``feature_extractor``
    (module docstring)."""
    p = None if protocol is None else get_protocol(protocol)
    if p is None or p.extractor is None:
        return p, *resolve_extractor(_with_weights(feature_extractor, weights))
    options, weights = _protocol_options(p, feature_extractor, weights)
    try:
        extractor = p.build_extractor(weights, **options)
    except (TypeError, OSError, ImportError) as err:  # a missing file or package: the callback's build rule
        problem = f"to build its extractor {p.extractor!r}, but {err}"
        raise TypeError(f"Expected argument `protocol`={p.name!r} {problem}") from err
    return p, extractor, p.extractor


def _with_weights(feature_extractor: Any, weights: Any) -> Any:
    """``feature_extractor`` with ``weights`` added (a name or a dict without weights); ``weights`` None: unchanged."""
    if weights is None:
        return feature_extractor
    if isinstance(feature_extractor, str):
        return {"name": feature_extractor, "weights": weights}
    if isinstance(feature_extractor, Mapping) and "class_path" not in feature_extractor:
        if feature_extractor.get("weights") is not None:
            raise ValueError(
                f"Expected the weights once, in argument `weights` or in `feature_extractor`, but got "
                f"weights={weights!r} and feature_extractor={dict(feature_extractor)!r}"
            )
        return {**feature_extractor, "weights": weights}
    raise ValueError(
        f"Expected argument `weights` only with a protocol or an extractor given by name, but got weights={weights!r} "
        f"with feature_extractor={type(feature_extractor).__name__}"
    )


def _protocol_options(p: Protocol, feature_extractor: Any, weights: Any) -> Tuple[Dict[str, Any], Any]:
    """The extractor options and weights that ``feature_extractor`` adds to protocol ``p``'s network."""
    if feature_extractor is None:
        return {}, weights
    if isinstance(feature_extractor, str):
        _check_name(p, feature_extractor)
        return {}, weights
    if isinstance(feature_extractor, Mapping) and "class_path" not in feature_extractor:
        options = dict(feature_extractor)
        name = options.pop("name", None)
        if name is not None:
            _check_name(p, name)
        given = options.pop("weights", None)
        if given is not None and weights is not None:
            raise ValueError(
                f"Expected the weights once, in argument `weights` or in `feature_extractor`, but got "
                f"weights={weights!r} and feature_extractor={dict(feature_extractor)!r}"
            )
        return options, weights if given is None else given
    shown = type(feature_extractor).__name__ if not isinstance(feature_extractor, Mapping) else dict(feature_extractor)
    raise ValueError(
        f"Expected argument `feature_extractor` to be left out with protocol {p.name!r}, which builds its network "
        f"{p.extractor!r} from `weights` (checked to be the protocol's file), but got {shown}; pass `weights=PATH`, "
        f"or drop the protocol to use your own extractor"
    )


def _check_name(p: Protocol, name: Any) -> None:
    if not isinstance(name, str) or canonical_name(name) != canonical_name(str(p.extractor)):
        check_against_protocol(p, "feature_extractor", name, p.extractor)


def counts(p: Optional[Protocol], num_samples: Optional[int], num_real: Optional[int]) -> Tuple[int, Optional[int]]:
    """``(num_samples, num_real)``: the given values checked, the protocol's where left out (module docstring)."""
    num_samples = None if num_samples is None else check_positive_int(num_samples, "num_samples")
    num_real = None if num_real is None else check_positive_int(num_real, "num_real")
    if p is not None and p.num_fake is not None:
        if num_samples is not None:
            check_against_protocol(p, "num_samples", num_samples, p.num_fake)
        num_samples = p.num_fake
    if p is not None and p.num_real is not None:
        if num_real is not None:
            check_against_protocol(p, "num_real", num_real, p.num_real)
        num_real = p.num_real
    return (DEFAULT_NUM_SAMPLES if num_samples is None else num_samples), num_real


def metric_with(p: Optional[Protocol], metric: Any) -> Any:
    """The ``metric`` argument with the protocol added: ``None`` and a dict get ``protocol``; a Metric instance
    is checked (its k and ball against the protocol's)."""
    if p is None:
        return metric
    if metric is None:
        return {"protocol": p}
    if isinstance(metric, Mapping):
        own = metric.get("protocol")
        if own is not None and get_protocol(own).name != p.name:
            check_against_protocol(p, "metric.protocol", get_protocol(own).name, p.name)
        return {**metric, "protocol": p}
    fixed = metric_arguments(p)
    valued = [family.keyword for family in switch_families() if family.value_option is not None]
    for key in (*valued, "ball"):  # the Metric's attribute of each valued option
        if fixed.get(key) is not None and hasattr(metric, key):
            check_against_protocol(p, f"metric.{key}", getattr(metric, key), fixed[key])
    return metric


def total_rows(rows: int, device: torch.device) -> int:
    """The rows of every rank together (a collective under DDP: every rank calls it)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return int(rows)
    box = torch.tensor([int(rows)], dtype=torch.int64, device=device)
    dist.all_reduce(box)
    return int(box.item())


def run_fingerprint(
    extractor: Any,
    p: Optional[Protocol],
    metric: Any,
    num_real: Optional[int],
    num_fake: int,
    dtype: Optional[torch.dtype],
    *,
    warn: bool = True,
    extractor_precision: Optional[str] = None,
) -> Dict[str, Any]:
    """The fingerprint of the callback's scores (:func:`lightning_prd.protocols.fingerprint`), with
    ``k_density_coverage`` beside ``k`` (precision/recall's) and ``dtype`` that of the k-NN distances (the
    metric's ``dtype``, else float64 for float64 features, float32 otherwise), and ``extractor_precision`` the
    precision the extractor ran in (:func:`~lightning_prd.features.precision.describe_precision`; left out
    without an extractor, whose features are used as given). With ``warn``, one warning when the real set
    holds fewer samples than the protocol's count.

    With it go :func:`family_fields`: every option of each family the metric computes (``probabilistic.k``,
    user families' too) and ``direction/<score>``, each logged score's direction, so that ``lightning-prd runs`` ranks a
    family registered in the training script the right way."""
    k_precision_recall, k_density_coverage, ball = (
        getattr(metric, name, None) for name in ("k_precision_recall", "k_density_coverage", "ball")
    )
    ball = ball if k_precision_recall is not None or k_density_coverage is not None else None  # no k-NN score: no ball
    knn = getattr(metric, "knn_dtype", None) or (torch.float64 if dtype == torch.float64 else torch.float32)
    out = fingerprint(
        extractor,
        protocol=p,
        num_real=num_real,
        num_fake=num_fake,
        k_precision_recall=k_precision_recall,
        ball=ball,
        dtype=knn,
        k_density_coverage=k_density_coverage,
    )
    out.update(family_fields(metric))
    if extractor is not None and extractor_precision is not None:
        out["extractor_precision"] = extractor_precision
    if warn and p is not None and p.num_real is not None and num_real is not None and num_real < p.num_real:
        warnings.warn(
            f"PRDCallback(protocol={p.name!r}): the protocol uses {p.num_real} real samples, but `real` gave "
            f"{num_real}: the scores are not comparable with the protocol's published numbers",
            UserWarning,
            stacklevel=4,
        )
    return out


def family_fields(metric: Any) -> Dict[str, Any]:
    """The fingerprint's fields of the score families ``metric`` computes: ``<family>.<option>`` for every option
    of each (the options change the scores: ``probabilistic.k``, ``prd.num_clusters``, a user family's), and
    ``direction/<score>`` for each of the families' outputs: ``"higher"``, ``"lower"``, ``"none"``, ``"one"``,
    ``"zero"`` or a target (the fingerprint stays flat). A metric without a plan of families (``PrecisionRecall``)
    records the directions of every registered family.

    Example:
        >>> from lightning_prd import GenerativeMetrics
        >>> fields = family_fields(GenerativeMetrics(probabilistic={"k": 10}))
        >>> fields["probabilistic.k"], fields["direction/frechet_distance"], fields["direction/density"]
        (10, 'lower', 'one')
    """
    plan = getattr(metric, "plan", None)
    out: Dict[str, Any] = {}
    directions: Dict[str, Any] = {}
    for family in families():
        options = None
        if plan is not None and family.switchable:  # a score of the extractor's other outputs: its direction
            options = plan.options_of(family.name)
            if options is None:
                continue
        if isinstance(options, Mapping):  # its declared options; a valued keyword's value is a field of its own
            fields = {key: value for key, value in options.items() if key in family.defaults}
            fields.pop(family.value_option or "", None)
            out.update({f"{family.name}.{key}": json_value(value) for key, value in fields.items()})
        directions.update(family.outputs)
    out.update({f"{DIRECTION}{key}": json_value(way) for key, way in directions.items()})
    return out


def warn_if_changed(before: Optional[Mapping[str, Any]], now: Mapping[str, Any]) -> None:
    """Warn when a checkpoint's evaluations were scored under another fingerprint than this fit's."""
    if not before:
        return
    changed = fingerprint_differences(before, now)
    if changed:
        what = ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in changed.items())
        warnings.warn(
            f"PRDCallback: the evaluations restored from the checkpoint were scored with another fingerprint "
            f"({what}); their scores and this fit's are not comparable",
            UserWarning,
            stacklevel=4,
        )
