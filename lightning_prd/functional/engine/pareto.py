r"""The Pareto front of points scored on two axes: :func:`pareto_front`.

A fidelity–diversity sweep (truncation ψ, guidance weight, temperature) gives one point
``(x_i, y_i)`` per knob value, e.g. ``(recall, precision)``. With both scores oriented so that
larger is better (a score with ``maximize=False`` is negated first), point ``j`` *dominates*
point ``i`` when it is at least as good on both axes and strictly better on one:

.. math::
    j \succ i \iff x_j \ge x_i,\ y_j \ge y_i,\ (x_j, y_j) \ne (x_i, y_i).

The front is the set of points that no point dominates (Pareto 1906; the usual convention of
multi-objective optimisation). Tie rules that follow from it:

- a point that ties another on one axis and is worse on the other is dominated (off the front);
- exact duplicates do not dominate each other: every copy of a front point is on the front;
- a point with a NaN score is never on the front and dominates no other point.

Sorting by ``x`` and sweeping the best ``y`` seen so far finds the front in ``O(n log n)``.

Example:
    >>> pareto_front([0.2, 0.5, 0.4, 0.9], [0.9, 0.6, 0.5, 0.3])
    tensor([0, 1, 3])
    >>> pareto_front([0.2, 0.5, 0.4], [3.0, 5.0, 1.0], maximize=(True, False))  # y: lower is better
    tensor([2, 1])
"""

from __future__ import annotations

import math
from typing import Any, List, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from lightning_prd.functional.engine.precision import score_precision

__all__ = ["check_maximize", "pareto_front"]


def _scores(values: Any, name: str) -> List[float]:
    """``values`` as a list of Python floats (a 1-D sequence, tensor or array of real numbers)."""
    if isinstance(values, (str, bytes)):
        raise TypeError(f"Expected argument `{name}` to be a 1-D sequence of numbers, but got {values!r}")
    try:
        t = values.detach().cpu() if isinstance(values, Tensor) else torch.as_tensor(np.asarray(values))
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"Expected argument `{name}` to be a 1-D sequence of numbers, but got {type(values).__name__}"
        ) from err
    if t.ndim != 1:
        raise ValueError(f"Expected argument `{name}` to be 1-D (one score per point), but got shape {tuple(t.shape)}")
    if t.dtype == torch.bool or t.is_complex():
        raise TypeError(f"Expected argument `{name}` to hold real numbers, but got dtype {t.dtype}")
    return [float(v) for v in t.to(torch.float64).tolist()]


def check_maximize(maximize: Any) -> Tuple[bool, bool]:
    """``maximize`` as a pair of bools, one direction per score, else ``ValueError``."""
    ok = (
        isinstance(maximize, Sequence)
        and not isinstance(maximize, (str, bytes))
        and len(maximize) == 2
        and all(isinstance(m, (bool, np.bool_)) for m in maximize)
    )
    if not ok:
        raise ValueError(
            f"Expected argument `maximize` to be a pair of bools (one direction per score), but got {maximize!r}"
        )
    return bool(maximize[0]), bool(maximize[1])


@score_precision()
def pareto_front(x_scores: Any, y_scores: Any, *, maximize: Sequence[bool] = (True, True)) -> Tensor:
    r"""Indices of the points ``(x_scores[i], y_scores[i])`` that no other point dominates.

    Point ``j`` dominates point ``i`` when, with each score oriented by ``maximize``, it is at
    least as good on both axes and strictly better on one. Points tied with a front point on
    one axis and worse on the other are off the front; exact duplicates of a front point are
    all kept; points with a NaN score are off the front and dominate nothing.

    Args:
        x_scores: ``[n]`` first score of each point (e.g. recall per knob value).
        y_scores: ``[n]`` second score (e.g. precision).
        maximize: per score, True when higher is better (precision, recall, coverage), False when
            lower is better (the Fréchet distance, KID). A score where a target value is ideal
            (density: 1) should be turned into a distance to it first, e.g. ``|density - 1|``
            with ``False``.

    Returns:
        int64 tensor of the front's indices, ordered by increasing ``x_scores`` (so along the
        front, ``y`` gets worse as ``x`` gets better); duplicates in index order.

    Example:
        >>> recall = [0.1, 0.3, 0.3, 0.6, 0.5]
        >>> precision = [0.9, 0.8, 0.7, 0.4, 0.4]
        >>> pareto_front(recall, precision)  # (0.3, 0.7) and (0.5, 0.4) are dominated
        tensor([0, 1, 3])
    """
    xs, ys = _scores(x_scores, "x_scores"), _scores(y_scores, "y_scores")
    if len(xs) != len(ys):
        raise ValueError(
            f"Expected `x_scores` and `y_scores` to hold one score per point each, but got {len(xs)} and {len(ys)}"
        )
    max_x, max_y = check_maximize(maximize)
    sx, sy = (1.0 if max_x else -1.0), (1.0 if max_y else -1.0)
    points = [(sx * x, sy * y, i) for i, (x, y) in enumerate(zip(xs, ys)) if not (math.isnan(x) or math.isnan(y))]
    points.sort(key=lambda p: (-p[0], -p[1], p[2]))  # best x first; within one x, best y first
    front: List[int] = []
    best_y = -math.inf  # best oriented y among points of strictly larger oriented x
    start = 0
    while start < len(points):
        stop = start
        while stop < len(points) and points[stop][0] == points[start][0]:
            stop += 1
        top = points[start][1]  # the group's best y: the others in the group are dominated by it
        if start == 0 or top > best_y:  # the best x's best y is never dominated
            front.extend(p[2] for p in points[start:stop] if p[1] == top)
        best_y = max(best_y, top)
        start = stop
    return torch.tensor(sorted(front, key=lambda i: (xs[i], i)), dtype=torch.long)
