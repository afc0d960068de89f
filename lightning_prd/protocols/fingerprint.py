"""The fingerprint that travels with every score: what made the features, and what acted on them.

A fingerprint is a flat, JSON-safe dict with the keys :data:`FINGERPRINT_KEYS`:

* ``protocol``: the protocol's name, or None;
* ``extractor``: the extractor's ``name`` (its class name when it sets none; ``"identity"`` for features used
  as given), ``arch``: its architecture when it declares one (DINOv2's ``"vitl14"``, CLIP's model name),
  ``weights_sha256``: the SHA-256 of its weights file (None: random or unknown weights);
* ``resize``, ``quantisation``, ``input_size``: from the extractor's ``preprocessing``
  (:func:`lightning_prd.features.base.describe_extractor`);
* ``dtype``: the dtype the scores were computed in (e.g. of the k-NN distances);
* ``num_real``, ``num_fake``: the sample counts; ``k_precision_recall``, ``k_density_coverage``, ``ball``: of
  the k-NN scores (the protocol's when not given); ``version``: the package's version.

Two scores are comparable when their fingerprints agree (:func:`fingerprint_differences`; a fingerprint written
before the options had one name holds ``k`` for ``k_precision_recall`` and is read as such).

Example:
    >>> from lightning_prd.features import Identity
    >>> fp = fingerprint(Identity(), num_real=100, num_fake=50, k_precision_recall=3, ball="closed")
    >>> fp["extractor"], fp["weights_sha256"], fp["num_real"], fp["k_precision_recall"]
    ('identity', None, 100, 3)
    >>> fingerprint_differences(fp, dict(fp, k_precision_recall=5, version="0.0.0"))
    {'k_precision_recall': (3, 5)}
"""

from __future__ import annotations

import sys
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import torch

from lightning_prd.features.base import describe_extractor, json_value
from lightning_prd.functional.engine.vocabulary import FINGERPRINT_RENAMED, check_renamed, current_keys
from lightning_prd.protocols.table import get_protocol

FINGERPRINT_KEYS = (
    "protocol",
    "extractor",
    "arch",
    "weights_sha256",
    "resize",
    "quantisation",
    "input_size",
    "dtype",
    "num_real",
    "num_fake",
    "k_precision_recall",
    "k_density_coverage",
    "ball",
    "version",
)
#: keys :func:`fingerprint_differences` skips by default: the package version alone does not change features
IGNORED_BY_DEFAULT = ("version",)
#: keys never compared: ``direction/<score>`` (recorded by the callback: each score's better way) says how the scores
#: read, not how they were made
NOT_COMPARED = ("direction/",)


def _version() -> Optional[str]:
    root = sys.modules.get("lightning_prd")  # read, not imported: the root imports the callback, which imports us
    version = getattr(root, "__version__", None)
    return str(version) if version is not None else None


def _dtype_of(extractor: Any) -> Optional[str]:
    if isinstance(extractor, torch.nn.Module):
        for tensor in extractor.parameters():
            return json_value(tensor.dtype)
    return None


def fingerprint(
    extractor: Any = None,
    *,
    protocol: Any = None,
    num_real: Optional[int] = None,
    num_fake: Optional[int] = None,
    k_precision_recall: Optional[int] = None,
    ball: Optional[str] = None,
    dtype: Any = None,
    k_density_coverage: Optional[int] = None,
    **unknown: Any,
) -> Dict[str, Any]:
    """The fingerprint of scores computed from ``extractor``'s features (module docstring).

    Args:
        extractor: the feature extractor (any module or callable); None: features used as given, or the
            protocol's extractor when ``protocol`` names one.
        protocol: a protocol name or :class:`~lightning_prd.protocols.Protocol`, or None.
        num_real, num_fake: the sample counts the scores saw.
        k_precision_recall, ball: of the k-NN scores; None takes the protocol's.
        k_density_coverage: k of density/coverage, when those ran.
        dtype: the compute dtype (``torch.dtype`` or its name); None: the extractor's parameter dtype.
    """
    check_renamed(unknown, FINGERPRINT_RENAMED)
    if unknown:
        raise TypeError(f"fingerprint() got unexpected keyword arguments {sorted(unknown)}")
    p = get_protocol(protocol) if protocol is not None else None
    if extractor is None:
        described: Dict[str, Any] = {"name": (p.extractor if p is not None else None) or "identity"}
        described["preprocessing"] = dict(p.extractor_options) if p is not None else {}
        described["weights_sha256"] = None
    else:
        described = describe_extractor(extractor)
    pre = described.get("preprocessing") or {}
    quantisation = pre.get("quantisation", p.quantisation if p is not None else None)
    return {
        "protocol": p.name if p is not None else None,
        "extractor": json_value(described["name"]),
        "arch": json_value(described.get("arch")),
        "weights_sha256": json_value(described.get("weights_sha256")),
        "resize": json_value(pre.get("resize")),
        "quantisation": json_value(quantisation),
        "input_size": json_value(pre.get("input_size")),
        "dtype": json_value(dtype) if dtype is not None else _dtype_of(extractor),
        "num_real": None if num_real is None else int(num_real),
        "num_fake": None if num_fake is None else int(num_fake),
        "k_precision_recall": (
            int(k_precision_recall) if k_precision_recall is not None else (p.k_precision_recall if p else None)
        ),
        "k_density_coverage": None if k_density_coverage is None else int(k_density_coverage),
        "ball": ball if ball is not None else (p.ball if p is not None else None),
        "version": _version(),
    }


def fingerprint_differences(
    a: Mapping[str, Any], b: Mapping[str, Any], *, ignore: Sequence[str] = IGNORED_BY_DEFAULT
) -> Dict[str, Tuple[Any, Any]]:
    """The keys whose values differ between two fingerprints, as ``{key: (a's value, b's value)}``.

    A key missing on one side counts as None there. ``ignore`` skips keys: by default only ``version`` (the
    features are pinned to the references', so an upgrade alone does not change them); the sample counts are
    compared, since the Fréchet distance and precision/recall depend on them.
    """
    a, b = current_keys(a), current_keys(b)
    keys = [key for key in dict.fromkeys([*a, *b]) if key not in ignore and not key.startswith(NOT_COMPARED)]
    return {key: (a.get(key), b.get(key)) for key in keys if json_value(a.get(key)) != json_value(b.get(key))}
