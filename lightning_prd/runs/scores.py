"""Which way is better for each scalar score: read from the score-family registry, shared by the CLI, the
callback and ``runs``.

Each family declares its outputs' directions (:func:`lightning_prd.register_family`):

- ``"higher"``: larger is better (precision, recall, coverage, F-scores, α/β, authenticity);
- ``"lower"``: smaller is better (the Fréchet distance, KID);
- ``"one"`` / ``"zero"``: 1 (density: below 1 means samples in empty regions, above 1 samples piled in dense
  regions) or 0 (``ct``, ``fld_gap``) is ideal, so the best value is the one closest to it;
- a number ``t``: ``t`` is ideal (a user family's target);
- ``"none"``: a diagnostic that ranks nothing (``ct_cells``, the rarity score's mean);
- ``"unknown"``: a score no family declares (nor the run recorded): shown, never ranked.

**Derived keys** take their score's direction (:func:`direction`): ``per_class/<score>/<class>`` and
``<score>/<class>`` (per class), ``<score>_mean`` (mean over classes), ``<score>_min`` (the lowest class value);
a label or a count (``lowest_coverage_class``, ``num_real``, ``num_fake_per_class``, ``epoch``) ranks nothing.

**Recorded directions.** ``PRDCallback`` records each family's directions with the run (the fingerprint's
``direction/<score>``), so a family registered in the training script ranks the right way in another process:
:func:`direction` reads ``recorded`` first, then the registry of this process.

**Ties.** Two values are equal when they agree to float32 precision (:func:`tied`: TensorBoard stores float32,
a CSV log float64, so one run logged to both reads the same), and two values at the same distance from a target
(density 0.75 and 1.25) are equal too.

Example:
    >>> from lightning_prd.runs.scores import best_index, direction, direction_label
    >>> direction("density"), direction("frechet_distance"), direction("precision")
    ('one', 'lower', 'higher')
    >>> best_index("density", [0.7, 1.2, 0.95])
    2
    >>> best_index("frechet_distance", [3.0, 1.5, 2.0])
    1
    >>> from lightning_prd import register_family, unregister_family
    >>> _ = register_family("gap", lambda real, fake: {}, outputs={"gap": 0.5})
    >>> direction("gap"), direction_label("gap"), best_index("gap", [0.1, 0.6, 0.9])
    (0.5, '0.5 is ideal', 1)
    >>> unregister_family("gap")
    >>> direction("per_class/frechet_distance/0"), direction("density_mean"), direction("lowest_coverage_class")
    ('lower', 'one', 'none')
    >>> direction("my_score"), direction("my_score", {"my_score": "lower"})
    ('unknown', 'lower')
"""

from __future__ import annotations

import math
import re
from typing import Dict, Iterator, Mapping, Optional, Sequence, Union

from lightning_prd.functional.engine.families import directions

Direction = Union[str, float]


class _Directions(Mapping):
    """Score name -> direction over the registered families, in the order of printed tables (a live view: a
    family registered later is in it)."""

    def __getitem__(self, name: str) -> Direction:
        return directions()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(directions())

    def __len__(self) -> int:
        return len(directions())

    def __repr__(self) -> str:
        return repr(directions())


#: score name -> direction; the order is the order of printed tables
DIRECTIONS: Mapping[str, Direction] = _Directions()

#: how each named direction reads in a table (a target ``t`` reads ``"t is ideal"``)
DIRECTION_LABELS: Dict[str, str] = {
    "higher": "higher",
    "lower": "lower",
    "one": "1 is ideal",
    "zero": "0 is ideal",
    "none": "-",
    "unknown": "direction unknown",
}

#: the directions that rank nothing
UNRANKED = ("none", "unknown")
#: a per-class key's leading part
PER_CLASS = "per_class/"
#: suffixes of keys derived from a score that keep its direction (the mean and the lowest value over classes)
DERIVED_SUFFIXES = ("_mean", "_min")
#: keys that are labels or counts, never scores: they rank nothing
NOT_SCORES = re.compile(r"^(epoch|step|lowest_\w*_class|num_\w*|\w*_count|\w*_cells)$")


def target(way: Direction) -> Optional[float]:
    """The ideal value of a direction (``"one"``: 1, ``"zero"``: 0, a number: itself), None for the others."""
    if isinstance(way, (int, float)):
        return float(way)
    return {"one": 1.0, "zero": 0.0}.get(way)


def label(way: Direction) -> str:
    """How direction ``way`` reads in a table."""
    if isinstance(way, (int, float)):
        return f"{way:g} is ideal"
    return DIRECTION_LABELS[way]


def direction(name: str, recorded: Optional[Mapping[str, Direction]] = None) -> Direction:
    """The direction of score ``name`` (module docstring): ``recorded`` (directions recorded with a run) first,
    then the registered families; a derived key takes its score's; a label or count is ``"none"``; any other
    name is ``"unknown"``.

    Names may carry a prefix (``"prd/coverage"``); ``"<score>_std"`` (an error bar: a spread is neither better nor
    worse) is ``"none"``.
    """

    def known(key: str) -> Optional[Direction]:
        if recorded is not None and key in recorded:
            return recorded[key]
        return DIRECTIONS.get(key)

    def of(key: str) -> Optional[Direction]:
        way = known(key)
        if way is not None:
            return way
        if NOT_SCORES.match(key) or key.endswith("_std"):
            return "none"
        if key.startswith(PER_CLASS):
            return of(key[len(PER_CLASS) :].split("/", 1)[0])
        if "/" in key:  # ``<score>/<class>`` or ``<prefix>/<score>``
            head, tail = key.split("/", 1)
            return of(head) if known(head) is not None else of(tail)
        for suffix in DERIVED_SUFFIXES:
            if key.endswith(suffix) and known(key[: -len(suffix)]) is not None:
                return known(key[: -len(suffix)])
        return None

    way = of(name)
    return "unknown" if way is None else way


def ranks(way: Direction) -> bool:
    """Whether direction ``way`` ranks values (not a diagnostic, not unknown)."""
    return not (isinstance(way, str) and way in UNRANKED)


def direction_label(name: str, recorded: Optional[Mapping[str, Direction]] = None) -> str:
    """How the direction of ``name`` reads in a table: ``higher``, ``lower``, ``1 is ideal``, ``0 is ideal``,
    ``-`` (a diagnostic) or ``direction unknown``."""
    return label(direction(name, recorded))


def format_score(value: float) -> str:
    """A score as the command line prints it: 4 decimals (never ``-0.0000``), 4 significant digits from 1e5.

    Example:
        >>> format_score(0.123456), format_score(-1e-7), format_score(123456.0)
        ('0.1235', '0.0000', '1.235e+05')
    """
    return f"{round(value, 4) + 0.0:.4f}" if abs(value) < 1e5 else f"{value:.4g}"


def best_index(name: str, values: Sequence[float], recorded: Optional[Mapping[str, Direction]] = None) -> Optional[int]:
    """Index of the best finite value of score ``name`` (first one on ties), ``None`` if none is finite.

    Best is the maximum for ``"higher"``, the minimum for ``"lower"``, the value closest to 1
    for ``"one"`` (density), closest to 0 for ``"zero"`` (``ct``, ``fld_gap``), closest to ``t`` for a
    target ``t``; a score that ranks nothing (a diagnostic, an unknown direction) has no best.
    """
    way = direction(name, recorded)
    if not ranks(way):
        return None
    best: Optional[int] = None
    best_key = math.inf
    for i, value in enumerate(values):
        v = float(value)
        if not math.isfinite(v):
            continue
        key = distance(way, v)
        if key < best_key:
            best, best_key = i, key
    return best


def distance(way: Direction, value: float) -> float:
    """How far a finite ``value`` is from the best in direction ``way``, as a sort key: smaller is better
    (``-value`` for ``"higher"``, ``value`` for ``"lower"``, the distance to the target for a target)."""
    ideal = target(way)
    return (
        -value if way == "higher" else value if way == "lower" else abs(value - ideal) if ideal is not None else -value
    )


def worse(name: str, value: float, recorded: Optional[Mapping[str, Direction]] = None) -> float:
    """:func:`distance` of a finite ``value`` of score ``name`` from the best.

    Example:
        >>> sorted([0.7, 1.2, 0.95], key=lambda v: worse("density", v))
        [0.95, 1.2, 0.7]
    """
    return distance(direction(name, recorded), value)


#: the relative precision to which two values are the same: float32's (TensorBoard stores scalars as float32)
FLOAT32_EPS = 2.0**-23


def tied(way: Direction, a: float, b: float) -> bool:
    """Whether finite values ``a`` and ``b`` are equally good in direction ``way``: equal to float32 precision
    (one value stored as float32 and as float64 reads the same), or at the same distance from a target to that
    precision (density 0.75 and 1.25).

    Example:
        >>> import numpy as np
        >>> tied("higher", float(np.float32(0.2976)), 0.2976), tied("higher", 0.2976, 0.2977)
        (True, False)
        >>> tied("one", 0.75, 1.25), tied("zero", -1.5, 1.5), tied("one", 0.75, 1.3)
        (True, True, False)
    """
    scale = max(abs(a), abs(b))
    if abs(a - b) <= FLOAT32_EPS * scale:
        return True
    ideal = target(way)
    return ideal is not None and abs(abs(a - ideal) - abs(b - ideal)) <= FLOAT32_EPS * scale
