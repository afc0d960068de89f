"""Symmetric precision and recall (Khayatkhoei & AbdAlmageed 2023) against float64 NumPy oracles.

:func:`oracle` is written here from the definitions of ``mahyarkoy/emergent_asymmetry_pr``,
``manifmetric/manifmetric.py`` (``sym_precision``: the minimum of ``precision`` and
``comp_precision``, the coverage with the roles swapped; ``sym_recall``: the minimum of ``recall``
and ``coverage``; every radius the (k+1)-th entry of a sorted row of squared distances, the point
itself first; ``<`` there, ``ball="open"`` here), compared case by case with both ball
conventions; with ``<=`` it is also the re-implementation of ``nicolassalvy/ClippedDensityCoverage``
(``metrics/older_metrics_faster_code.py``, ``sym=True``). No code of the authors is run or copied.
"""

import numpy as np
import pytest
import torch

from lightning_prd.functional import generative_metrics, precision_recall, symmetric_precision_recall


def _sq(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)


def oracle(real, fake, k=5, ball="closed"):
    """(sym_precision, sym_recall) and their four parts, float64."""

    def radii(x):
        return np.sort(_sq(x, x), 1)[:, k]  # the point itself first, at 0: NND_k, duplicates count

    inside = np.less if ball == "open" else np.less_equal
    d = _sq(real, fake)  # [N, M]
    r_real, r_fake = radii(real), radii(fake)
    in_real_ball = inside(d, r_real[:, None])  # fake j in the ball of real i
    in_fake_ball = inside(d, r_fake[None, :])  # real i in the ball of fake j
    precision = in_real_ball.any(0).mean()  # fakes inside some real ball
    comp_precision = in_fake_ball.any(0).mean()  # fakes whose own ball holds a real
    recall = in_fake_ball.any(1).mean()  # reals inside some fake ball
    coverage = in_real_ball.any(1).mean()  # reals whose own ball holds a fake
    return (min(precision, comp_precision), min(recall, coverage)), (precision, comp_precision, recall, coverage)


def _close(got, want, atol=1e-7):
    np.testing.assert_allclose([float(v) for v in got], want, rtol=0, atol=atol)


def _pair(seed, n, m, dim, scale=1.2, shift=0.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, dim, generator=g), scale * torch.randn(m, dim, generator=g) + shift


@pytest.mark.parametrize("n, m, dim, k", [(70, 40, 5, 5), (35, 80, 3, 3), (20, 20, 2, 1), (6, 7, 4, 5)])
def test_against_the_oracle_on_unequal_sets(n, m, dim, k):
    real, fake = _pair(n + m, n, m, dim, shift=0.4)
    for ball in ("closed", "open"):
        want = oracle(real, fake, k, ball)[0]
        _close(symmetric_precision_recall(real, fake, k=k, ball=ball), want)
        _close(symmetric_precision_recall(real.double(), fake.double(), k=k, ball=ball), want, atol=1e-15)


def test_ties_and_copies_under_both_balls():
    g = torch.Generator().manual_seed(2)
    real = torch.randint(0, 3, (30, 2), generator=g).float()  # integer grid: distances tie everywhere
    fake = torch.cat([torch.randint(-1, 5, (25, 2), generator=g).float(), real[:6], real[:2]])  # copies, twice
    results = {}
    for ball in ("closed", "open"):
        for k in (1, 2, 5):
            want = oracle(real, fake, k, ball)[0]
            results[ball, k] = want
            _close(symmetric_precision_recall(real, fake, k=k, ball=ball), want)
    assert any(results["closed", k] != results["open", k] for k in (1, 2, 5))  # the data tell the balls apart


def test_high_dimensional_asymmetry_is_corrected():
    # a wider generated set in 64-D: its large balls swallow every real sample (recall near 1),
    # yet few real balls hold a generated sample; the symmetric recall keeps the smaller one
    real, fake = _pair(3, 300, 300, 64, scale=1.5)
    _, recall = precision_recall(real, fake, k=5)
    sym_p, sym_r = symmetric_precision_recall(real, fake)
    (want_p, want_r), (_, _, want_recall, want_coverage) = oracle(real, fake)
    assert float(recall) == pytest.approx(want_recall) and want_recall > 0.9 and want_coverage < 0.5
    _close((sym_p, sym_r), (want_p, want_r))
    assert float(sym_r) == pytest.approx(want_coverage)


def test_joined_pass_equals_the_function():
    real, fake = _pair(5, 60, 45, 4)
    for ball in ("closed", "open"):
        for authenticity in (True, False):  # the nearest real of each fake is asked either way
            out = generative_metrics(real, fake, symmetric=dict(k=3), ball=ball, authenticity=authenticity)
            want = symmetric_precision_recall(real, fake, k=3, ball=ball)
            assert [float(out["sym_precision"]), float(out["sym_recall"])] == [float(v) for v in want]
    out = generative_metrics(
        real, fake, symmetric=True, k_precision_recall=5, k_density_coverage=5
    )  # shares every ball with P/R and D/C
    assert float(out["sym_recall"]) == min(float(out["recall"]), float(out["coverage"]))
    assert "sym_precision" not in generative_metrics(real, fake)  # off by default


def test_bad_input_names_the_argument():
    real, fake = _pair(6, 10, 8, 2)
    with pytest.raises(ValueError, match="`k`.*positive integer"):
        symmetric_precision_recall(real, fake, k=-1)
    with pytest.raises(ValueError, match="`ball`"):
        symmetric_precision_recall(real, fake, ball=None)
    with pytest.raises(ValueError, match="`fake`.*k \\+ 1 = 9"):
        symmetric_precision_recall(real, fake, k=8)
    with pytest.raises(ValueError, match="symmetric\\['k'\\]"):
        generative_metrics(real, fake, symmetric=dict(k=1.5))
    with pytest.raises(ValueError, match="`symmetric`.*bool or a dict"):
        generative_metrics(real, fake, symmetric="on")
    with pytest.raises(ValueError, match="symmetric\\['k'\\]"):
        generative_metrics(real, fake, symmetric=dict(k=8))
    few = dict(
        k_precision_recall=None,
        k_density_coverage=None,
        realism=False,
        authenticity=False,
        probabilistic=False,
        pr_cover=False,
    )
    assert "sym_recall" not in generative_metrics(real[:5], fake[:5], symmetric=True, **few)  # too small: left out
