"""Which way is better for each scalar score: read from the score-family registry, shared by the CLI, the
callback and ``runs``.

Each family declares its outputs' directions (:func:`lightning_prd.register_family`):

- ``"higher"``: larger is better (precision, recall, coverage, F-scores, α/β, authenticity);
- ``"lower"``: smaller is better (the Fréchet distance, KID);
- ``"one"`` / ``"zero"``: 1 (density: below 1 means samples in empty regions, above 1 samples piled in dense
  regions) or 0 (``ct``, ``fld_gap``) is ideal, so the best value is the one closest to it;
- a number ``t``: ``t`` is ideal (a user family's target);
- ``"none"``: a diagnostic that ranks nothing (``ct_cells``, the rarity score's mean).

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
"""

from __future__ import annotations

import math
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
}


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


def direction(name: str) -> Direction:
    """The direction of score ``name`` (``"higher"`` for scores not in :data:`DIRECTIONS`).

    Names may carry a prefix (``"prd/coverage"``) or an error-bar suffix (``"precision_std"``
    has no direction: a spread is neither better nor worse, it returns ``"higher"`` like any
    unknown score, so callers that rank should skip ``*_std`` keys).
    """
    base = name.rsplit("/", 1)[-1]
    return DIRECTIONS.get(base, "higher")


def direction_label(name: str) -> str:
    """How the direction of ``name`` reads in a table: ``higher``, ``lower``, ``1 is ideal``, ``0 is ideal``
    or ``-`` (a diagnostic)."""
    return label(direction(name))


def format_score(value: float) -> str:
    """A score as the command line prints it: 4 decimals (never ``-0.0000``), 4 significant digits from 1e5.

    Example:
        >>> format_score(0.123456), format_score(-1e-7), format_score(123456.0)
        ('0.1235', '0.0000', '1.235e+05')
    """
    return f"{round(value, 4) + 0.0:.4f}" if abs(value) < 1e5 else f"{value:.4g}"


def best_index(name: str, values: Sequence[float]) -> Optional[int]:
    """Index of the best finite value of score ``name`` (first one on ties), ``None`` if none is finite.

    Best is the maximum for ``"higher"``, the minimum for ``"lower"``, the value closest to 1
    for ``"one"`` (density), closest to 0 for ``"zero"`` (``ct``, ``fld_gap``), closest to ``t`` for a
    target ``t``; a ``"none"`` score (a diagnostic) has no best.
    """
    if direction(name) == "none":
        return None
    best: Optional[int] = None
    best_key = math.inf
    for i, value in enumerate(values):
        v = float(value)
        if not math.isfinite(v):
            continue
        key = worse(name, v)
        if key < best_key:
            best, best_key = i, key
    return best


def worse(name: str, value: float) -> float:
    """How far a finite ``value`` of score ``name`` is from the best, as a sort key: smaller is better (``-value``
    for ``"higher"``, ``value`` for ``"lower"``, the distance to the target for a target).

    Example:
        >>> sorted([0.7, 1.2, 0.95], key=lambda v: worse("density", v))
        [0.95, 1.2, 0.7]
    """
    way = direction(name)
    ideal = target(way)
    return (
        -value if way == "higher" else value if way == "lower" else abs(value - ideal) if ideal is not None else -value
    )
