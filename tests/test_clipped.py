"""Clipped density and coverage (Salvy et al. 2026) against float64 NumPy oracles.

Two oracles, both written here from the definitions (no code of the authors is run or copied):

* :func:`oracle`: the definitions with set membership of the balls (every sample within a radius
  counts), the calibration ``f`` in exact rational arithmetic (beta-binomial probabilities as
  fractions of factorials);
* :func:`official_steps`: the steps of ``nicolassalvy/ClippedDensityCoverage``,
  ``ClippedDensityCoverage/metrics/Clipped_Density_Coverage.py`` (``ClippedDensity``: radii of the
  (k+1)-th entry of each sorted row, clipped at their median, the normaliser over the k listed
  neighbours with ``<=``, the generated samples within ``<=``, ratios capped at 1;
  ``ClippedCoverage``: the k nearest generated samples of each real one counted with ``<``, then
  ``searchsorted`` over ``f`` of ``_f_coverage`` divided by ``M + 1``), compared case by case: they
  agree with :func:`oracle` on data without ties, and the tied case where the listed normaliser
  differs is checked on its own.
"""

from fractions import Fraction
from math import comb, factorial

import numpy as np
import pytest
import torch

from lightning_prd import GenerativeMetrics
from lightning_prd.cli import main
from lightning_prd.functional import (
    clipped_density_coverage,
    density_coverage,
    generative_metrics,
    symmetric_precision_recall,
)
from lightning_prd.functional.clipped import coverage_calibration
from lightning_prd.functional.engine.one_pass import knn_pass
from lightning_prd.functional.knn import cross_pass, prepare, self_knn
from lightning_prd.functional.knn.balls import BallMembers
from lightning_prd.functional.knn.clipped import ClippedBalls
from lightning_prd.functional.knn.shard import Shard

from ddp_utils import run_ddp


def _sq(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)


def _beta(a, b):
    """B(a, b) of positive integers, exactly."""
    return Fraction(factorial(a - 1) * factorial(b - 1), factorial(a + b - 1))


def calibration(k, n, m_max):
    """f(m), m = 0..M: E[min(J, k)] / k with J ~ BetaBinomial(m, k, N - k), as fractions; 0 below k."""
    out = []
    for m in range(m_max + 1):
        if m < k:
            out.append(0.0)
            continue
        total = sum(Fraction(min(j, k), k) * comb(m, j) * _beta(j + k, m - j + n - k) for j in range(m + 1))
        out.append(float(total / _beta(k, n - k)))
    return np.array(out)


def oracle(real, fake, k=5, ball="closed"):
    """The definitions, float64, set membership; ``ball`` is clipped coverage's (density: closed)."""
    n, m = len(real), len(fake)
    drr = _sq(real, real)
    np.fill_diagonal(drr, np.inf)  # the point itself excluded, duplicates count at 0
    r2 = np.sort(drr, 1)[:, k - 1]
    r = np.sqrt(r2)
    med = np.median(r)
    clip2 = np.where(r <= med, r2, med * med)
    drf = _sq(real, fake)
    fake_in = np.minimum((drf <= clip2[:, None]).sum(0), k).sum()
    real_in = np.minimum((drr <= clip2[:, None]).sum(0), k).sum()
    density = min((fake_in / (m * k)) / (real_in / (n * k)), 1.0)
    inside = drf < r2[:, None] if ball == "open" else drf <= r2[:, None]
    y = np.minimum(inside.sum(1), k).sum() / (n * k)
    coverage = np.sum(calibration(k, n, m) < y) / (m + 1)
    return density, coverage


def official_steps(real, fake, k=5):
    """The official file's steps (module docstring), float64, ties broken by the row's sort order."""
    n, m = len(real), len(fake)
    drr = _sq(real, real)
    order = np.argsort(drr, 1, kind="stable")  # the point itself first (distance 0)
    dist = np.sqrt(np.take_along_axis(drr, order, 1))[:, : k + 1]
    radius = dist[:, -1]
    clipped = np.clip(radius, 0, np.median(radius))
    listed = order[:, 1 : k + 1][dist[:, 1:] <= clipped[:, None]]
    real_ratio = np.minimum(np.bincount(listed, minlength=n) / k, 1).mean()
    d_rf = np.sqrt(_sq(real, fake))
    fake_ratio = np.minimum((d_rf <= clipped[:, None]).sum(0) / k, 1).mean()
    density = min(fake_ratio / real_ratio, 1.0)
    nearest = np.sort(d_rf, 1)[:, :k]
    y = np.mean(np.mean(nearest < radius[:, None], 1))
    f = calibration(k, n, m)
    return density, np.searchsorted(f, y) / len(f)


def _close(got, want, atol=1e-6):
    np.testing.assert_allclose([float(v) for v in got], want, rtol=0, atol=atol)


def _pair(seed, n, m, dim, shift=0.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, dim, generator=g), 1.2 * torch.randn(m, dim, generator=g) + shift


def test_calibration_equals_the_exact_sum():
    for k, n, m in [(5, 40, 60), (3, 12, 30), (1, 2, 5), (4, 5, 4)]:
        np.testing.assert_allclose(coverage_calibration(k, n, m).numpy(), calibration(k, n, m), rtol=1e-11, atol=1e-14)


@pytest.mark.parametrize("n, m, dim, k", [(60, 45, 4, 5), (40, 90, 6, 3), (25, 25, 3, 1), (6, 5, 2, 5)])
def test_against_both_oracles_on_unequal_sets(n, m, dim, k):
    real, fake = _pair(n * m, n, m, dim, shift=0.3)
    fake[: m // 5] += 6.0  # some generated samples far from the data
    real[-2:] *= 4.0  # and two real outliers with large balls
    for ball in ("closed", "open"):
        want = oracle(real, fake, k, ball)
        _close(clipped_density_coverage(real, fake, k=k, ball=ball), want)
        _close(clipped_density_coverage(real.double(), fake.double(), k=k, ball=ball), want, atol=1e-12)
    _close(clipped_density_coverage(real, fake, k=k, ball="open"), official_steps(real, fake, k))


def test_ties_and_duplicates_follow_the_set_definition():
    g = torch.Generator().manual_seed(3)
    real = torch.randint(0, 3, (40, 3), generator=g).float()  # integer grid: many equal distances
    real = torch.cat([real, real[:6]])  # and exact duplicates
    fake = torch.cat([torch.randint(0, 4, (30, 3), generator=g).float(), real[:5]])  # copies too
    for k in (1, 3, 5):
        for ball in ("closed", "open"):
            _close(clipped_density_coverage(real, fake, k=k, ball=ball), oracle(real, fake, k, ball), atol=1e-7)


def test_the_listed_normaliser_drops_samples_tied_at_the_radius():
    # x = 0 has x = -1 and x = 1 both at its NND_1 = 1: both are in its closed ball, one is listed
    real = torch.tensor([[-1.0], [0.0], [1.0], [3.0], [3.5], [6.0]])
    fake = torch.tensor([[0.2], [10.0], [20.0], [30.0]])
    want = oracle(real, fake, 1)  # 5 of 6 real samples in another's ball: (1/4) / (5/6)
    _close(clipped_density_coverage(real, fake, k=1), want)
    assert want[0] == pytest.approx(0.3)
    assert official_steps(real, fake, 1)[0] == pytest.approx(0.375)  # x = 1 not listed: (1/4) / (4/6)


def test_copy_scores_one_and_collapse_stays_bounded():
    real, _ = _pair(1, 80, 1, 4)
    assert [float(v) for v in clipped_density_coverage(real, real)] == [1.0, 1.0]
    collapsed = 0.01 * torch.randn(90, 4, generator=torch.Generator().manual_seed(2))  # piled at the mode
    d, c = density_coverage(real, collapsed)
    cd, cc = clipped_density_coverage(real, collapsed)
    assert float(d) > 1.5 and float(cd) == 1.0 and float(cc) <= float(c) < 0.2


def test_score_falls_linearly_with_the_share_of_bad_samples():
    g = torch.Generator().manual_seed(5)
    real = torch.randn(1200, 8, generator=g)
    for bad in (0.0, 0.3, 0.6):
        fake = torch.randn(1200, 8, generator=g)
        fake[: int(bad * 1200)] += 25.0  # out of the data's support
        cd, cc = clipped_density_coverage(real, fake)
        assert abs(float(cd) - (1 - bad)) < 0.08 and abs(float(cc) - (1 - bad)) < 0.08, (bad, cd, cc)


def test_density_balls_are_closed_whatever_ball():
    real, fake = _pair(4, 50, 40, 3)
    closed, open_ = clipped_density_coverage(real, fake), clipped_density_coverage(real, fake, ball="open")
    assert float(closed[0]) == float(open_[0])


def test_screened_and_deferred_paths_count_the_same(monkeypatch):
    real, fake = _pair(6, 70, 55, 5)
    fake = torch.cat([fake, real[:8]])  # copies: pairs on the radius are decided in float64
    want = oracle(real, fake, 4)
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", "1")
    _close(clipped_density_coverage(real, fake, k=4, block_bytes=4000), want)
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", "0")
    centre = real.double().mean(0)
    r, f = prepare(real, centre, torch.float32), prepare(fake, centre, torch.float32)
    radii = self_knn(r, [4])
    for strict in (False, True):
        counts = [
            cross_pass(r, f, radii, {}, [BallMembers(4, strict), ClippedBalls(4, strict)], deferred=d)
            for d in (False, True)
        ]
        for name in ("fake_count", "real_count"):
            assert torch.equal(getattr(counts[0].clipped, name), getattr(counts[1].clipped, name)), name


def test_joined_pass_equals_the_function():
    real, fake = _pair(8, 70, 50, 4)
    for ball in ("closed", "open"):
        out = generative_metrics(real, fake, clipped=dict(k=3), ball=ball, alpha_beta=True)
        want = clipped_density_coverage(real, fake, k=3, ball=ball)
        assert [float(out["clipped_density"]), float(out["clipped_coverage"])] == [float(v) for v in want]
    assert "clipped_density" not in generative_metrics(real, fake)  # off by default
    default = generative_metrics(real, fake, clipped=True)
    assert float(default["clipped_coverage"]) == float(clipped_density_coverage(real, fake)[1])


def test_bad_input_names_the_argument():
    real, fake = _pair(9, 10, 8, 2)
    with pytest.raises(ValueError, match="`k`.*positive integer.*0"):
        clipped_density_coverage(real, fake, k=0)
    with pytest.raises(ValueError, match="`ball`.*'half'"):
        clipped_density_coverage(real, fake, ball="half")
    with pytest.raises(ValueError, match="`real`.*k \\+ 1 = 11"):
        clipped_density_coverage(real, fake, k=10)
    with pytest.raises(ValueError, match="`fake`.*k = 9.*got 8"):
        clipped_density_coverage(torch.randn(12, 2), fake, k=9)
    with pytest.raises(ValueError, match="clipped\\['k'\\]"):
        generative_metrics(real, fake, clipped=dict(k=0))
    with pytest.raises(ValueError, match="`clipped`.*unknown keys \\['K'\\]"):
        generative_metrics(real, fake, clipped=dict(K=3))
    with pytest.raises(ValueError, match="clipped\\['k'\\]"):
        generative_metrics(real, fake, clipped=dict(k=9))
    few = dict(
        k_precision_recall=None,
        k_density_coverage=None,
        realism=False,
        authenticity=False,
        probabilistic=False,
        pr_cover=False,
    )
    assert "clipped_density" not in generative_metrics(real[:5], fake[:4], clipped=True, **few)  # too small: left out


# ---------------------------------------------------------------------------- with the symmetric scores: surfaces
SURFACE_KEYS = ("clipped_density", "clipped_coverage", "sym_precision", "sym_recall")
SURFACE_REAL = torch.randn(120, 3, generator=torch.Generator().manual_seed(0))
SURFACE_FAKE = 1.3 * torch.randn(90, 3, generator=torch.Generator().manual_seed(1)) + 0.2


def test_the_metric_keeping_the_real_side_equals_the_functions():
    clip = clipped_density_coverage(SURFACE_REAL, SURFACE_FAKE, k=3)
    sym = symmetric_precision_recall(SURFACE_REAL, SURFACE_FAKE, k=2)
    want = [float(v) for v in (*clip, *sym)]
    kept = GenerativeMetrics(
        prd=False, alpha_beta=False, clipped=dict(k=3), symmetric=dict(k=2), reset_real_features=False
    )
    kept.update(SURFACE_REAL, real=True)
    for _ in range(2):  # the second compute reuses the cached real side
        kept.update(SURFACE_FAKE, real=False)
        assert [float(kept.compute()[k]) for k in SURFACE_KEYS] == want
        kept.reset()


def test_the_command_line_compare_columns_and_only_frechet_refusal(tmp_path, capfd):
    np.save(tmp_path / "real.npy", SURFACE_REAL.numpy())
    np.save(tmp_path / "fake.npy", SURFACE_FAKE.numpy())
    np.save(tmp_path / "fake2.npy", (0.5 * SURFACE_FAKE).numpy())
    argv = ["compare", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "fake.npy")]
    argv += [str(tmp_path / "fake2.npy"), "--no-prd", "--no-alpha-beta", "--clipped", "--symmetric", "-q"]
    assert main(argv) == 0
    table = capfd.readouterr().out
    assert all(key in table for key in SURFACE_KEYS)
    only = ["evaluate", "--real", str(tmp_path / "real.npy"), "--fake", str(tmp_path / "fake.npy")]
    assert main([*only, "--only", "frechet", "--clipped", "--symmetric"]) == 1
    assert "--clipped, --symmetric asks for more" in capfd.readouterr().err


# ---------------------------------------------------------------------------- DDP: the sharded pass's counts
DDP_G = torch.Generator().manual_seed(11)
DDP_REAL = torch.randn(90, 5, generator=DDP_G)
DDP_FAKE = torch.cat([1.2 * torch.randn(60, 5, generator=DDP_G) + 0.2, DDP_REAL[:10]])  # with exact copies


def _counts(shard=None):
    """The cross pass's clipped counts and the real neighbours behind the normaliser (small tiles)."""
    res = knn_pass(
        DDP_REAL,
        DDP_FAKE,
        member_ks=[4],
        real_ks=[1, 2, 3, 4, 5],
        clipped=ClippedBalls(4),
        block_bytes=12000,
        shard=shard,
    )
    return res.cross.clipped.fake_count, res.cross.clipped.real_count, res.real.sq_radii[5]


def _sharded(rank, world):
    return _counts(Shard(rank, world))


def test_the_sharded_pass_counts_equal_one_process(monkeypatch):
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", "1")
    want = _counts()
    for got in run_ddp(_sharded):
        for g, w in zip(got, want):
            assert torch.equal(g, w)
