"""Ties and copies: exact copies under large offsets, duplicates, identical points, k + 1
samples, and ties exactly on a ball's radius.

Conventions under test (DESIGN.md): ``NND_k`` excludes the point itself but counts exact
duplicates (at distance 0); balls are closed (``d <= r``); a copy is at distance 0 whatever
the offset. Expected values are derived by hand in each test or come from the float64 NumPy
oracle (``tests/oracle.py``, plus the small authenticity oracle below, written from the
definition with ``numpy.argmin`` choosing the nearest real sample); none is computed by the
code under test.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_prd import GenerativeMetrics
from lightning_prd.functional import (
    alpha_precision_beta_recall,
    authenticity,
    density_coverage,
    precision_recall,
    realism_score,
)

import oracle

F32 = torch.float32

#: every test runs with the bfloat16 screen of the tiles on and off (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("both_tile_paths")


def _f32(value: float) -> float:
    """``value`` as the float32 that a float32 score holding it would have."""
    return float(torch.tensor(value, dtype=torch.float64).to(F32))


def _oracle_authenticity(real, fake) -> float:
    """Share of fakes farther from their nearest real x_i* (numpy argmin: lowest index on
    ties) than NND_1(x_i*)."""
    d = oracle.dist(fake, real)  # [M, N]
    i_star = d.argmin(1)
    return float((d[np.arange(len(fake)), i_star] > oracle.kth_radius(real, 1)[i_star]).mean())


def _oracle_scores(real, fake, k_precision_recall, k_density_coverage):
    r, f = real.double().numpy(), fake.double().numpy()
    p, rec = oracle.precision_recall(r, f, k=k_precision_recall)
    d, c = oracle.density_coverage(r, f, k=k_density_coverage)
    return float(p), float(rec), float(d), float(c), _oracle_authenticity(r, f)


def _no_tie_at_kth(x: torch.Tensor, k: int) -> bool:
    """Every point's k-th nearest other point is strictly closer than its (k+1)-th (float64)."""
    d = oracle.dist(x.double().numpy(), x.double().numpy())
    np.fill_diagonal(d, np.inf)
    d.sort(axis=1)
    return d.shape[1] <= k + 1 or bool((d[:, k - 1] < d[:, k]).all())


# --------------------------------------------------------------------------------------
# An exact float32 copy of the real set, far from the origin
# --------------------------------------------------------------------------------------


def _offset_set(name: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(7)
    if name == "1e3+randn D16":
        return (1e3 + torch.randn(120, 16, generator=g)).to(F32)
    if name == "1e4+0.01randn D64":
        return (1e4 + 0.01 * torch.randn(120, 64, generator=g)).to(F32)
    if name == "1e4+0.01randn D512":
        return (1e4 + 0.01 * torch.randn(60, 512, generator=g)).to(F32)
    # two tight clusters at +-1e4: the mean is near 0, so centring does not remove the offset
    sign = torch.where(torch.arange(120)[:, None] % 2 == 0, 1e4, -1e4)
    return (sign + 0.01 * torch.randn(120, 64, generator=g)).to(F32)


CASES = ["1e3+randn D16", "1e4+0.01randn D64", "1e4+0.01randn D512", "+-1e4 clusters D64"]


@pytest.mark.parametrize("case", CASES)
def test_offset_sets_defeat_the_plain_gemm_formula(case):
    """Precondition of the copy tests: in float32, ||x||^2 + ||y||^2 - 2 x.y of a row with its
    own copy is far from 0 on these sets, so a copy sits at distance 0 only if the engine
    decides near-threshold pairs from exact differences."""
    x = _offset_set(case)
    sq = x.pow(2).sum(1)
    naive = (sq[:, None] + sq[None, :] - 2 * x @ x.T).diagonal()  # uncentred GEMM, x against itself
    true_nn = torch.from_numpy(oracle.kth_radius(x.double().numpy(), 1)) ** 2
    assert int((naive != 0).sum()) > len(x) // 3  # a copy would not be at distance 0
    if case != "1e3+randn D16":  # and the error dwarfs every true squared neighbour distance
        assert float(naive.abs().max()) > 100 * float(true_nn.max())


@pytest.mark.parametrize("block_bytes", [4096, 2**30])
@pytest.mark.parametrize("case", CASES)
def test_exact_copy_functional(case, block_bytes):
    """precision = recall = coverage = 1 and authenticity = 0 exactly, and density as counted
    by the oracle: (k+1)/k when no point has a tie at its k-th neighbour (see
    :func:`test_copy_density_is_k_plus_one_over_k`). ``block_bytes=4096`` forces tiles of one
    row, which exercises the rigorous per-row fallback of the refinement."""
    real = _offset_set(case)
    fake = real.clone()
    for k in (1, 3, 5):
        p, r = precision_recall(real, fake, k=k, block_bytes=block_bytes)
        d, c = density_coverage(real, fake, k=k, block_bytes=block_bytes)
        assert (float(p), float(r), float(c)) == (1.0, 1.0, 1.0), k
        od = float(oracle.density_coverage(real.double().numpy(), fake.double().numpy(), k=k)[0])
        assert float(d) == _f32(od), k
        if _no_tie_at_kth(real, k):
            assert float(d) == _f32((k + 1) / k), k
    assert float(authenticity(real, fake, block_bytes=block_bytes)) == 0.0
    out = alpha_precision_beta_recall(real, fake, block_bytes=block_bytes, return_per_sample=True)
    assert float(out["authenticity"]) == 0.0 and not bool(out["authentic"].any())
    assert float(out["beta_recall_curve"][-1]) == 1.0  # beta = 1 is coverage (k = 5)
    assert float(out["alpha_precision_curve"][-1]) == 1.0
    # every fake's nearest real is at distance 0; the lowest-index copy of it (the oracle's argmin)
    dm = oracle.dist(fake.double().numpy(), real.double().numpy())
    assert np.array_equal(out["fake_nearest_real"].numpy(), dm.argmin(1))


@pytest.mark.parametrize("case", ["1e3+randn D16", "+-1e4 clusters D64"])
def test_exact_copy_generative_metrics(case):
    real = _offset_set(case)
    metric = GenerativeMetrics(prd=False, frechet=False, alpha_beta=True)
    metric.update(real, real=True)
    metric.update(real.clone(), real=False)
    out = metric.compute()
    assert [float(out[n]) for n in ("precision", "recall", "coverage", "authenticity")] == [1.0, 1.0, 1.0, 0.0]
    od = float(oracle.density_coverage(real.double().numpy(), real.double().numpy(), k=5)[0])
    assert float(out["density"]) == _f32(od)
    if _no_tie_at_kth(real, 5):
        assert float(out["density"]) == _f32(6 / 5)
    assert float(out["beta_recall_curve"][-1]) == 1.0


@pytest.mark.parametrize("k", [1, 2, 5])
def test_copy_density_is_k_plus_one_over_k(k):
    r"""Density of an exact copy (y_j = x_j, M = N) under closed balls.

    density = 1/(kM) sum_j sum_i 1[y_j in B(x_i, NND_k(x_i))] = 1/(kN) sum_i c_i, with
    c_i = #{j : d(x_i, x_j) <= NND_k(x_i)}: ball i holds the copy of x_i itself (distance 0)
    and the copies of the real points within NND_k(x_i) of x_i. NND_k(x_i) is the k-th
    smallest of the N - 1 distances from x_i to the other points, so at least k of them are
    <= NND_k(x_i) (closed ball: the k-th neighbour's copy sits exactly on the sphere), and
    exactly k unless the (k+1)-th smallest distance equals the k-th. Hence c_i = k + 1 and
    density = (k+1)/k exactly, under the precise condition that **no point has a tie at its
    k-th neighbour distance** (d_(k)(x_i) < d_(k+1)(x_i) for every i; vacuous when N = k + 1).
    Equal radii of *different* points are harmless, and so are duplicates that do not create
    such a tie (a point repeated exactly k + 1 times: k others at 0, the next farther). A tie
    at the k-th place adds its extra points to c_i and raises the density above (k+1)/k.
    With open balls (``prdc``'s ``<``) the k-th neighbour's copy would be outside and an
    untied copy would score exactly 1.
    """
    g = torch.Generator().manual_seed(k)
    real = (50.0 + torch.randn(90, 6, generator=g)).to(F32)
    assert _no_tie_at_kth(real, k)  # continuous data: the condition holds
    d, c = density_coverage(real, real.clone(), k=k)
    assert float(d) == _f32((k + 1) / k) and float(c) == 1.0

    # duplicates without a tie at the k-th place: each point k + 1 times -> NND_k = 0, still (k+1)/k
    dup = real[:12].repeat_interleave(k + 1, 0)
    assert _no_tie_at_kth(dup, k)
    d, c = density_coverage(dup, dup.clone(), k=k)
    assert float(d) == _f32((k + 1) / k) and float(c) == 1.0

    # a tie at the k-th place: a square grid (integer coordinates, exact distances) where each
    # interior point has 4 neighbours at distance 1 -> for k = 1, 2 the ball holds 4 others
    grid = torch.stack(torch.meshgrid(torch.arange(5.0), torch.arange(5.0), indexing="ij"), -1).reshape(-1, 2) + 1e3
    assert not _no_tie_at_kth(grid, k)
    d, _ = density_coverage(grid, grid.clone(), k=k)
    expected = float(oracle.density_coverage(grid.double().numpy(), grid.double().numpy(), k=k)[0])
    assert float(d) == _f32(expected) and expected > (k + 1) / k


# --------------------------------------------------------------------------------------
# Duplicates inside a set: balls of radius 0
# --------------------------------------------------------------------------------------


def _nudged(x: torch.Tensor, how: str) -> torch.Tensor:
    y = x.clone()
    if how == "1e-6":
        y[:, 0] = y[:, 0] + 1e-6
    else:  # the next representable value: the smallest possible non-zero displacement
        y[:, 0] = torch.nextafter(y[:, 0], torch.tensor(float("inf"), dtype=y.dtype))
    assert bool((y[:, 0] != x[:, 0]).all())
    return y


@pytest.mark.parametrize(
    ("dtype", "offset", "nudge"),
    [
        (torch.float64, 0.0, "1e-6"),
        (torch.float64, 1e3, "1e-6"),
        (torch.float32, 0.0, "1e-6"),  # |x| < 8: 1e-6 is at least one float32 step
        (torch.float32, 1e3, "ulp"),  # a float32 step at 1e3 is 6e-5: 1e-6 is not representable
        (torch.float32, 1e4, "ulp"),
    ],
)
@pytest.mark.parametrize("k", [1, 3])
def test_duplicates_give_radius_zero_balls(dtype, offset, nudge, k):
    """Each real point repeated k + 1 times: every NND_k is 0. A fake equal to a real point is
    inside its k + 1 balls; a fake one step away is inside none and is authentic."""
    g = torch.Generator().manual_seed(3)
    base = (offset + torch.randn(12, 8, generator=g, dtype=torch.float64).clamp(-3, 3)).to(dtype)
    real = base.repeat_interleave(k + 1, 0)  # N = 12 (k + 1)
    fake = torch.cat([base[:6], _nudged(base[6:], nudge)])  # 6 copies, 6 nudged
    p, _ = precision_recall(real, fake, k=k)
    d, c = density_coverage(real, fake, k=k)
    a = authenticity(real, fake)
    out_dtype = torch.float64 if dtype == torch.float64 else F32

    def as_out(v: float) -> float:
        return float(torch.tensor(v, dtype=torch.float64).to(out_dtype))

    assert float(p) == 0.5  # only the 6 copies
    assert float(d) == as_out(6 * (k + 1) / (k * 12))  # each copy in the k + 1 balls of its duplicates
    assert float(c) == 0.5  # the duplicates of the 6 copied base points
    assert float(a) == 0.5  # nudged: nearest real at a positive distance > NND_1 = 0
    op, orr, od, oc, oa = _oracle_scores(real, fake, k, k)
    assert (float(p), float(d), float(c), float(a)) == (as_out(op), as_out(od), as_out(oc), as_out(oa))
    assert float(precision_recall(real, fake, k=k)[1]) == as_out(orr)


# --------------------------------------------------------------------------------------
# All points identical
# --------------------------------------------------------------------------------------


def test_all_points_identical_far_from_origin():
    g = torch.Generator().manual_seed(5)
    point = (1e4 + torch.randn(1, 32, generator=g)).to(F32)
    real, k = point.repeat(10, 1), 3

    # fake: 7 copies. Every ball has radius 0 and holds every fake: density = N / k.
    fake = point.repeat(7, 1)
    p, r = precision_recall(real, fake, k=k)
    d, c = density_coverage(real, fake, k=k)
    assert (float(p), float(r), float(c), float(authenticity(real, fake))) == (1.0, 1.0, 1.0, 0.0)
    assert float(d) == _f32(10 / 3)
    out = alpha_precision_beta_recall(real, fake, k=k, num_alphas=11, return_per_sample=True)
    assert bool((out["fake_nearest_real"] == 0).all())  # ten real samples at distance 0: the lowest index
    # both curves are 1 at every level (all distances to both centres are 0), so the
    # integrated scores are 1 - 2 * int_0^1 (1 - a) da = 0
    assert bool((out["alpha_precision_curve"] == 1).all()) and bool((out["beta_recall_curve"] == 1).all())
    assert float(out["alpha_precision"]) == pytest.approx(0.0, abs=1e-6)
    assert float(out["beta_recall"]) == pytest.approx(0.0, abs=1e-6)
    assert float(out["authenticity"]) == 0.0

    # fake: 7 copies and one far point. The far point is in no real ball; its own ball
    # (radius: distance to the copies) holds every real point.
    far = point + 1.0
    fake = torch.cat([point.repeat(7, 1), far])
    p, r = precision_recall(real, fake, k=k)
    d, c = density_coverage(real, fake, k=k)
    assert (float(p), float(r), float(c)) == (_f32(7 / 8), 1.0, 1.0)
    assert float(d) == _f32(7 * 10 / (3 * 8))
    assert float(authenticity(real, fake)) == _f32(1 / 8)

    # fake: all identical, at a point one float32 step away from the real one
    fake = torch.nextafter(point, torch.tensor(float("inf"))).repeat(5, 1)
    p, r = precision_recall(real, fake, k=k)
    d, c = density_coverage(real, fake, k=k)
    assert [float(v) for v in (p, r, d, c)] == [0.0, 0.0, 0.0, 0.0]
    assert float(authenticity(real, fake)) == 1.0


# --------------------------------------------------------------------------------------
# Sets of exactly k + 1 samples
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 3, 5])
def test_exactly_k_plus_one_samples(k):
    g = torch.Generator().manual_seed(11 + k)
    real = (1e3 + torch.randn(k + 1, 4, generator=g)).to(F32)
    # copy: every ball reaches the farthest other point, so it holds all k + 1 copies
    p, r = precision_recall(real, real.clone(), k=k)
    d, c = density_coverage(real, real.clone(), k=k)
    assert (float(p), float(r), float(c)) == (1.0, 1.0, 1.0)
    assert float(d) == _f32((k + 1) * (k + 1) / (k * (k + 1)))
    out = alpha_precision_beta_recall(real, real.clone(), k=k, num_alphas=5)
    assert float(out["authenticity"]) == 0.0 and float(out["beta_recall_curve"][-1]) == 1.0

    # integer points (exact distances, ties likely) at k + 1 on both sides, against the oracle
    real = torch.randint(-2, 3, (k + 1, 3), generator=g).to(F32) + 1e3
    fake = torch.randint(-2, 3, (k + 1, 3), generator=g).to(F32) + 1e3
    p, r = precision_recall(real, fake, k=k)
    d, c = density_coverage(real, fake, k=k)
    op, orr, od, oc, oa = _oracle_scores(real, fake, k, k)
    assert [float(v) for v in (p, r, d, c, authenticity(real, fake))] == [_f32(v) for v in (op, orr, od, oc, oa)]

    # k samples are too few for NND_k
    with pytest.raises(ValueError, match=f"at least k \\+ 1 = {k + 1} samples"):
        precision_recall(real[:k], fake, k=k)
    with pytest.raises(ValueError, match=f"at least k \\+ 1 = {k + 1} samples"):
        precision_recall(real, fake[:k], k=k)
    with pytest.raises(ValueError, match=f"at least k \\+ 1 = {k + 1} samples"):
        density_coverage(real[:k], fake, k=k)


# --------------------------------------------------------------------------------------
# Ties exactly on the radius
# --------------------------------------------------------------------------------------

# k = 1. Real a = (0, 0), b = (5, 0), c = (0, 12): NND_1 = 5, 5, 12 (d(c, b) = 13).
TIE_REAL = [[0, 0], [5, 0], [0, 12]]
TIE_FAKE = [
    [-4, -3],  # d(a) = 5 = r_a: on a's sphere (3-4-5); d(b) = 9.5, d(c) = 15.5 -> 1 ball
    [9, 3],  # d(b) = 5 = r_b: on b's sphere; d(a) = 9.5, d(c) = 12.7 -> 1 ball
    [0, 24],  # d(c) = 12 = r_c: on c's sphere; far from a and b -> 1 ball
    [-4, -4],  # d(a) = 5.66 > 5, d(b) = 9.8, d(c) = 16.5 -> outside
    [5, 12],  # d(c) = 5 < 12 (strictly inside); d(b) = 12 > 5, d(a) = 13 -> 1 ball
]


@pytest.mark.parametrize("dim", [2, 16])
@pytest.mark.parametrize(
    ("dtype", "offset"), [(torch.float64, 0.0), (torch.float32, 0.0), (torch.float32, 1e3), (torch.float32, 1e6)]
)
def test_fake_exactly_on_the_radius_is_inside(dtype, offset, dim):
    """Integer coordinates (exact in float32 up to 2^24, so even at offset 1e6) give exact
    distances: three fakes lie exactly on a real ball's sphere and count as inside (closed
    balls). Hand-derived (k = 1): precision 4/5 (prdc's open balls would give 1/5), density
    4/5, coverage 3/3; authenticity 1/5 (a fake on the sphere of its nearest real x_i* is at
    d = NND_1(x_i*), not farther, so not authentic; only (-4, -4) is)."""
    pad = torch.zeros(3, dim - 2, dtype=torch.float64)
    real = (torch.cat([torch.tensor(TIE_REAL, dtype=torch.float64), pad], 1) + offset).to(dtype)
    fake = (torch.cat([torch.tensor(TIE_FAKE, dtype=torch.float64), pad[:1].expand(5, -1)], 1) + offset).to(dtype)
    assert torch.equal(real.double() - offset, torch.cat([torch.tensor(TIE_REAL, dtype=torch.float64), pad], 1))
    out_dtype = dtype

    def as_out(v: float) -> float:
        return float(torch.tensor(v, dtype=torch.float64).to(out_dtype))

    p, r = precision_recall(real, fake, k=1)
    d, c = density_coverage(real, fake, k=1)
    a = authenticity(real, fake)
    assert (float(p), float(d), float(c), float(a)) == (as_out(4 / 5), as_out(4 / 5), 1.0, as_out(1 / 5))
    op, orr, od, oc, oa = _oracle_scores(real, fake, 1, 1)
    assert [float(v) for v in (p, r, d, c, a)] == [as_out(v) for v in (op, orr, od, oc, oa)]
    metric = GenerativeMetrics(
        k_precision_recall=1, k_density_coverage=1, prd=False, frechet=False, alpha_beta=dict(k=1)
    )
    metric.update(real, real=True)
    metric.update(fake, real=False)
    res = metric.compute()
    assert [float(res[n]) for n in ("precision", "recall", "density", "coverage", "authenticity")] == [
        as_out(v) for v in (op, orr, od, oc, oa)
    ]


@pytest.mark.parametrize("block_bytes", [4096, 2**30])
@pytest.mark.parametrize(("dim", "offset"), [(3, 1e3), (8, 3e4)])
def test_integer_grid_ties_equal_oracle(dim, offset, block_bytes):
    """Random points of a small integer grid: ties everywhere (among radii, on the radii, and
    between equidistant nearest real samples). Every score equals the float64 oracle whatever
    the block size; authenticity's i* is the lowest-index nearest real sample (numpy argmin)."""
    g = torch.Generator().manual_seed(dim)
    real = (torch.randint(-2, 3, (70, dim), generator=g) + offset).to(F32)
    fake = (torch.randint(-3, 4, (60, dim), generator=g) + offset).to(F32)
    for k in (1, 3, 5):
        p, r = precision_recall(real, fake, k=k, block_bytes=block_bytes)
        d, c = density_coverage(real, fake, k=k, block_bytes=block_bytes)
        op, orr, od, oc, _ = _oracle_scores(real, fake, k, k)
        assert [float(v) for v in (p, r, d, c)] == [_f32(v) for v in (op, orr, od, oc)], k
    oa = _oracle_authenticity(real.double().numpy(), fake.double().numpy())
    assert float(authenticity(real, fake, block_bytes=block_bytes)) == _f32(oa)
    out = alpha_precision_beta_recall(real, fake, block_bytes=block_bytes, return_per_sample=True)
    dm = oracle.dist(fake.double().numpy(), real.double().numpy())
    assert np.array_equal(out["fake_nearest_real"].numpy(), dm.argmin(1))
    assert float(out["authenticity"]) == _f32(oa)


def test_authenticity_tie_between_nearest_real_samples_goes_to_lowest_index():
    """y = 2.5 is equidistant (1.5) from the real samples 1 (NND_1 = 1) and 4 (NND_1 = 3). The
    definition picks one nearest real sample i*; ties go to the lowest index, as numpy's
    argmin: with 1 first, 1.5 > 1 -> authentic; with 4 first, 1.5 <= 3 -> not authentic.
    (Before, the choice depended on the tile layout, i.e. on ``block_bytes``.)"""
    fake = torch.tensor([[2.5]])
    for real, expected in (([0.0, 1.0, 4.0, 7.0], 1.0), ([4.0, 0.0, 1.0, 7.0], 0.0)):
        real = torch.tensor(real)[:, None]
        for block_bytes in (64, 4096, 2**30):
            assert float(authenticity(real, fake, block_bytes=block_bytes)) == expected
        assert expected == _oracle_authenticity(real.double().numpy(), fake.double().numpy())


# --------------------------------------------------------------------------------------
# Realism of copies
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("offset", [0.0, 1e3, 1e4])
def test_realism_of_copies_is_inf(offset):
    """Realism R(y) = max over kept balls of NND_k(x_i) / d(y, x_i): a copy of a kept real sample
    (d = 0) scores inf, also for radius-0 balls (0/0, the documented convention) and in float32
    far from the origin, where the GEMM value of a copy is rounding noise rather than 0. A fake
    one float32 step from a radius-0 ball scores 0 there (0 / d), so below 1: outside."""
    g = torch.Generator().manual_seed(4)
    real = (offset + torch.randn(60, 8, generator=g)).to(F32)
    out = realism_score(real, real.clone(), k=3)
    ref = oracle.realism(real.double().numpy(), real.double().numpy(), k=3)
    assert bool(torch.isinf(out[torch.from_numpy(np.isinf(ref))]).all()) and np.isinf(ref).sum() >= 30
    np.testing.assert_allclose(out.double().numpy()[~np.isinf(ref)], ref[~np.isinf(ref)], rtol=1e-3)

    dup = real[:20].repeat_interleave(2, 0)  # k = 1: every radius is 0, every ball kept
    fake = torch.cat([real[:5], _nudged(real[5:10], "ulp")])
    out = realism_score(dup, fake, k=1)
    assert bool(torch.isinf(out[:5]).all())
    assert bool((out[5:] < 1).all())


@pytest.mark.parametrize("block_bytes", [2**14, 2**28])
def test_one_hot_tabular_data_equals_oracle(block_bytes):
    """One-hot and small-integer columns (what tabular synthesizers produce): distances take a
    handful of values, so nearly every k-th neighbour is tied and most rows go through the exact
    value-only fallback (:func:`lightning_prd.functional.knn.exact.exact_rows_topk`)."""
    rng = np.random.default_rng(1)

    def tab(n):
        cols = [np.eye(3, dtype=np.float32)[rng.integers(0, 3, n)] for _ in range(6)]
        return np.concatenate(cols + [rng.integers(0, 5, (n, 2)).astype(np.float32)], 1) + 1e3

    real, fake = tab(1200), tab(1000)
    got = [float(v) for v in precision_recall(real, fake) + density_coverage(real, fake, block_bytes=block_bytes)]
    exp = [float(np.float32(v)) for v in oracle.precision_recall(real, fake) + oracle.density_coverage(real, fake)]
    assert got == exp
