"""Which run is better: the runs ranked per score by their last evaluation, in the score's direction
(:mod:`lightning_prd.runs.scores`: the highest first, the lowest for the Fréchet distance, the closest to 1
for density, to a family's target for its scores), and the runs whose curves of a score are identical.

A run ranks by the value of its last evaluated epoch; a run without the score, or whose last value is NaN or
infinite, is left out of the ranking. A diagnostic (direction ``"none"``), a label or count, and a score whose
direction is unknown rank nothing. The direction is the one recorded with the runs (:func:`runs_direction`), else
this process's registry's. Values equal to float32 precision, or at the same distance from a target, are equal
(:func:`~lightning_prd.runs.scores.tied`).

Example:
    >>> from lightning_prd.runs.reader import Run
    >>> a = Run("a", "a", "csv", [], scores={"precision": [(0, 0.5), (1, 0.8)], "density": [(0, 1.4)]})
    >>> b = Run("b", "b", "csv", [], scores={"precision": [(0, 0.6), (1, 0.7)], "density": [(0, 0.9)]})
    >>> ranking([a, b], "precision"), ranking([a, b], "density")
    (['a', 'b'], ['b', 'a'])
"""

from __future__ import annotations

import math
from typing import Dict, List, Sequence, Tuple

import numpy as np

from lightning_prd.runs.reader import Run
from lightning_prd.runs.scores import Direction, direction, distance, ranks

#: a ranked run: its label, the epoch and value of its last evaluation
Ranked = Tuple[str, int, float]


def runs_direction(runs: Sequence[Run], name: str) -> Direction:
    """The direction of score ``name`` for ``runs``: each run's (:meth:`Run.direction`: recorded with it first);
    a run that does not know it does not count; runs that disagree give ``"unknown"`` (never ranked).

    Example:
        >>> from lightning_prd.runs.reader import Run
        >>> a = Run("a", "a", "csv", [], fingerprint={"direction/gap": "lower"})
        >>> b = Run("b", "b", "csv", [])
        >>> c = Run("c", "c", "csv", [], fingerprint={"direction/gap": "higher"})
        >>> runs_direction([a, b], "gap"), runs_direction([a, c], "gap"), runs_direction([b], "gap")
        ('lower', 'unknown', 'unknown')
    """
    ways = {json_key(r.direction(name)): r.direction(name) for r in runs} if runs else {}
    known = [way for way in ways.values() if way != "unknown"]
    return known[0] if len(known) == 1 else "unknown" if runs else direction(name)


def json_key(way: Direction) -> str:
    """A direction as a comparable key (1 and ``"one"`` alike)."""
    return {1.0: "one", 0.0: "zero"}.get(way, str(way)) if isinstance(way, float) else str(way)


def ranked(runs: Sequence[Run], name: str) -> List[Ranked]:
    """``(label, last epoch, last value)`` of the runs with a finite last value of score ``name``, best first
    (runs of equal value keep their order); empty for a score that ranks nothing."""
    way = runs_direction(runs, name)
    if not ranks(way):
        return []
    lasts = [(r.label, *r.scores[name][-1]) for r in runs if r.scores.get(name)]
    finite = [(label, int(e), float(v)) for label, e, v in lasts if math.isfinite(float(v))]
    return sorted(finite, key=lambda item: distance(way, item[2]))


def ranking(runs: Sequence[Run], name: str) -> List[str]:
    """The labels of :func:`ranked`, best first."""
    return [label for label, _, _ in ranked(runs, name)]


def identical_curves(runs: Sequence[Run], name: str) -> List[List[str]]:
    """Groups (two runs or more, in the runs' order) of runs that logged score ``name`` at the same epochs with
    the same values to float32 precision (a run logged to TensorBoard, float32, and to CSV, float64).

    Example:
        >>> from lightning_prd.runs.reader import Run
        >>> curve = [(0, 0.5), (1, 0.75)]
        >>> runs = [Run(x, x, "csv", [], scores={"recall": list(c)}) for x, c in (("a", curve), ("b", [(0, 0.5)]),
        ...                                                                       ("c", curve))]
        >>> identical_curves(runs, "recall")
        [['a', 'c']]
    """
    groups: Dict[Tuple[Tuple[int, object], ...], List[str]] = {}
    for r in runs:
        if r.scores.get(name):  # NaN is not equal to itself: keyed by its name
            curve = tuple((int(e), "nan" if math.isnan(v) else float(np.float32(v))) for e, v in r.scores[name])
            groups.setdefault(curve, []).append(r.label)
    return [labels for labels in groups.values() if len(labels) > 1]
