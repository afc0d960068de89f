"""Which run is better: the runs ranked per score by their last evaluation, in the score's direction
(:mod:`lightning_prd.runs.scores`: the highest first, the lowest for the Fréchet distance, the closest to 1
for density, to a family's target for its scores), and the runs whose curves of a score are identical.

A run ranks by the value of its last evaluated epoch; a run without the score, or whose last value is NaN or
infinite, is left out of the ranking. A diagnostic (direction ``"none"``) ranks nothing.

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

from lightning_prd.runs.reader import Run
from lightning_prd.runs.scores import direction, worse

#: a ranked run: its label, the epoch and value of its last evaluation
Ranked = Tuple[str, int, float]


def ranked(runs: Sequence[Run], name: str) -> List[Ranked]:
    """``(label, last epoch, last value)`` of the runs with a finite last value of score ``name``, best first
    (runs of equal value keep their order); empty for a diagnostic."""
    if direction(name) == "none":
        return []
    lasts = [(r.label, *r.scores[name][-1]) for r in runs if r.scores.get(name)]
    finite = [(label, int(e), float(v)) for label, e, v in lasts if math.isfinite(float(v))]
    return sorted(finite, key=lambda item: worse(name, item[2]))


def ranking(runs: Sequence[Run], name: str) -> List[str]:
    """The labels of :func:`ranked`, best first."""
    return [label for label, _, _ in ranked(runs, name)]


def identical_curves(runs: Sequence[Run], name: str) -> List[List[str]]:
    """Groups (two runs or more, in the runs' order) of runs that logged score ``name`` at the same epochs with
    the same values.

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
            curve = tuple((int(e), "nan" if math.isnan(v) else float(v)) for e, v in r.scores[name])
            groups.setdefault(curve, []).append(r.label)
    return [labels for labels in groups.values() if len(labels) > 1]
