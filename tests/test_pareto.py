"""``pareto_front`` against a brute-force O(n^2) dominance check, on random points with ties, duplicates,
NaN and infinities, in every direction; hand-checked fronts; bad input."""

import itertools
import math

import numpy as np
import pytest
import torch

from lightning_prd.functional.engine.pareto import pareto_front

DIRECTIONS = list(itertools.product([True, False], repeat=2))


def brute_force_front(xs, ys, maximize):
    """Indices no other point dominates (>= on both oriented scores, > on one), NaN points excluded,
    ordered by increasing raw x then index: the documented rule, written from its definition."""
    sx, sy = (1 if maximize[0] else -1), (1 if maximize[1] else -1)
    ok = [i for i in range(len(xs)) if not (math.isnan(xs[i]) or math.isnan(ys[i]))]
    front = []
    for i in ok:
        dominated = any(
            sx * xs[j] >= sx * xs[i]
            and sy * ys[j] >= sy * ys[i]
            and (sx * xs[j] > sx * xs[i] or sy * ys[j] > sy * ys[i])
            for j in ok
            if j != i
        )
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: (xs[i], i))


@pytest.mark.parametrize("maximize", DIRECTIONS)
@pytest.mark.parametrize("seed", range(12))
def test_matches_brute_force_with_ties_and_duplicates(seed, maximize):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    levels = int(rng.integers(2, 8))  # few distinct values: many ties on one axis and exact duplicates
    xs = (rng.integers(0, levels, n) / levels).tolist()
    ys = (rng.integers(0, levels, n) / levels).tolist()
    if seed % 3 == 0:  # plus NaN and infinite scores
        xs[0], ys[n // 2] = math.nan, math.inf
        xs[-1] = -math.inf
    got = pareto_front(xs, ys, maximize=maximize).tolist()
    assert got == brute_force_front(xs, ys, maximize)


@pytest.mark.parametrize("maximize", DIRECTIONS)
def test_matches_brute_force_on_continuous_points(maximize):
    rng = np.random.default_rng(99)
    xs, ys = rng.random(300), rng.random(300)
    got = pareto_front(torch.from_numpy(xs), ys, maximize=maximize)
    assert got.dtype == torch.long and got.tolist() == brute_force_front(xs.tolist(), ys.tolist(), maximize)


def test_tie_rules_by_hand():
    # (0.5, 0.8) twice: duplicates, both kept; (0.5, 0.6) ties them on x and is worse on y: off;
    # (0.3, 0.8) ties them on y and is worse on x: off; (0.9, 0.2) is the best recall: on
    xs = [0.5, 0.5, 0.5, 0.3, 0.9]
    ys = [0.8, 0.6, 0.8, 0.8, 0.2]
    assert pareto_front(xs, ys).tolist() == [0, 2, 4]
    # lower is better on y (e.g. a Fréchet distance): now (0.9, 0.2) dominates every other point
    assert pareto_front(xs, ys, maximize=(True, False)).tolist() == [4]
    # all points identical: every one is on the front
    assert pareto_front([1.0] * 3, [2.0] * 3).tolist() == [0, 1, 2]


def test_nan_points_are_off_and_dominate_nothing():
    assert pareto_front([math.nan, 0.1], [1.0, 0.0]).tolist() == [1]
    assert pareto_front([math.nan], [math.nan]).tolist() == []
    assert pareto_front([], []).tolist() == []


def test_bad_input():
    with pytest.raises(ValueError, match="one score per point each, but got 2 and 3"):
        pareto_front([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"`x_scores` to be 1-D .* shape \(2, 1\)"):
        pareto_front([[1.0], [2.0]], [1.0, 2.0])
    with pytest.raises(TypeError, match="`y_scores`"):
        pareto_front([1.0], ["high"])
    with pytest.raises(TypeError, match="`x_scores` to hold real numbers, but got dtype torch.bool"):
        pareto_front(torch.tensor([True]), [1.0])
    with pytest.raises(TypeError, match="`x_scores`"):
        pareto_front("0.5", [1.0])
    for bad in [(1, 0), (True,), "yes", (True, True, True), None]:
        with pytest.raises(ValueError, match="`maximize` to be a pair of bools"):
            pareto_front([1.0], [1.0], maximize=bad)
