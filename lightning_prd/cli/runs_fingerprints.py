"""The fingerprints of the runs ``lightning-prd runs`` compares: one compact line per run, the fields in which
they differ, and the warnings of a comparison, wrapped at the table's width."""

from __future__ import annotations

import json
import textwrap
from typing import Any, Dict, List, Mapping, Optional, Sequence

from lightning_prd.protocols import FINGERPRINT_KEYS, fingerprint_differences
from lightning_prd.runs.reader import Run

#: the widest line of ``lightning-prd runs``, its table's included, in characters
TABLE_WIDTH = 100

#: the fields of the compact fingerprint line: (label, key)
COMPACT = (
    ("protocol", "protocol"),
    ("extractor", "extractor"),
    ("weights", "weights_sha256"),
    ("resize", "resize"),
    ("quantisation", "quantisation"),
    ("N", "num_real"),
    ("M", "num_fake"),
    ("k", "k_precision_recall"),
    ("ball", "ball"),
)


def compact_fingerprint(fingerprint: Optional[Mapping[str, Any]], extra: Sequence[str] = ()) -> str:
    """Protocol, extractor, the first 12 hex digits of the weights' SHA-256, resize, quantisation, real and
    generated counts (N, M), k and ball, then the fields ``extra`` (e.g. family options that differ between the
    runs compared, ``probabilistic.k=4``); ``-`` for a field not set.

    Example:
        >>> compact_fingerprint({"protocol": "pr50k3", "extractor": "vgg16-nvlabs", "weights_sha256": "ab" * 32,
        ...                      "resize": None, "num_real": 50, "num_fake": 50, "k_precision_recall": 3,
        ...                      "ball": "closed"})
        'protocol=pr50k3 extractor=vgg16-nvlabs weights=abababababab resize=- quantisation=- N=50 M=50 k=3 ball=closed'
        >>> compact_fingerprint(None)
        'no fingerprint logged'
    """
    if fingerprint is None:
        return "no fingerprint logged"
    cells = []
    for label, key in COMPACT:
        value = fingerprint.get(key)
        if key == "weights_sha256" and isinstance(value, str):
            value = value[:12]
        cells.append(f"{label}={'-' if value is None else value}")
    for key in extra:
        value = fingerprint.get(key)
        cells.append(f"{key}={'-' if value is None else json.dumps(value)}")
    return " ".join(cells)


def wrapped(text: str, indent: int, first: str = "", width: int = TABLE_WIDTH) -> str:
    """``text`` wrapped at ``width`` columns at spaces, after ``first`` on its first line, the next lines indented
    by ``indent`` spaces (a word longer than a line is not cut)."""
    return textwrap.fill(
        text,
        width=width,
        initial_indent=first,
        subsequent_indent=" " * indent,
        break_on_hyphens=False,
        break_long_words=False,
    )


def fingerprint_table(runs: Sequence[Run]) -> Dict[str, Dict[str, Any]]:
    """The fields in which the runs' fingerprints differ (:func:`~lightning_prd.protocols.fingerprint_differences`:
    the version aside), in the fingerprint's order, each as ``{run label: value}`` over the runs that logged one."""
    logged = [r for r in runs if r.fingerprint is not None]
    keys: Dict[str, None] = {}
    for r in logged[1:]:
        keys.update(dict.fromkeys(fingerprint_differences(logged[0].fingerprint or {}, r.fingerprint or {})))
    order = sorted(
        keys, key=lambda k: (FINGERPRINT_KEYS.index(k) if k in FINGERPRINT_KEYS else len(FINGERPRINT_KEYS), k)
    )
    return {key: {r.label: (r.fingerprint or {}).get(key) for r in logged} for key in order}


def _shown(key: str, value: Any) -> str:
    if key == "weights_sha256" and isinstance(value, str):
        return value[:12]
    return json.dumps(value)


def fingerprint_warnings(runs: Sequence[Run], shown: Optional[Mapping[str, str]] = None) -> List[str]:
    """The warnings of a comparison: fields whose values differ between runs (family options included,
    ``probabilistic.k``), and runs without a fingerprint. ``shown`` maps a run's label to the name shown.

    Example:
        >>> from lightning_prd.runs.reader import Run
        >>> a = Run("a", "a", "csv", [], fingerprint={"resize": "tf1", "k_precision_recall": 3, "version": "1"})
        >>> b = Run("b", "b", "csv", [], fingerprint={"resize": "clean", "k_precision_recall": 3, "version": "2"})
        >>> print(fingerprint_warnings([a, b])[0])
        the runs' fingerprints differ: resize ("tf1": a; "clean": b); their scores are not comparable
    """
    out = []
    shown = shown or {}
    differing = fingerprint_table(runs)
    if differing:
        parts = []
        for key, per_run in differing.items():
            values: Dict[str, List[str]] = {}
            for label, value in per_run.items():
                values.setdefault(_shown(key, value), []).append(shown.get(label, label))
            parts.append(f"{key} (" + "; ".join(f"{v}: {', '.join(labels)}" for v, labels in values.items()) + ")")
        out.append(f"the runs' fingerprints differ: {', '.join(parts)}; their scores are not comparable")
    missing = [shown.get(r.label, r.label) for r in runs if r.fingerprint is None]
    if missing and len(missing) < len(runs):
        out.append(
            f"{', '.join(missing)} logged no fingerprint: whether their scores were made like the others' "
            "cannot be checked"
        )
    return out
