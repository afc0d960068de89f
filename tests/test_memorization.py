"""The memorization panel: the nearest-training-neighbour view and dgm-eval's authenticity percentage against a
brute-force float64 oracle (``dgm_eval/metrics/authpct.py``'s rule), and the C_T data-copying statistic against
a float64 NumPy/SciPy/scikit-learn oracle that follows ``layer6ai-labs/dgm-eval``'s ``dgm_eval/metrics/ct.py``
(from ``casey-meehan/data-copying``: PCA, KMeans, per-cell nearest neighbours, ``scipy.stats.mannwhitneyu``),
compared case by case; dgm-eval itself is not on PyPI."""

import math

import numpy as np
import pytest
import torch

from lightning_prd.functional import authenticity
from lightning_prd.functional.data_copying import data_copying
from lightning_prd.functional.memorization import (
    authenticity_percentage,
    closest_pairs,
    nearest_real_neighbours,
)

import oracle_memorization as om

# ---------------------------------------------------------------------------------------------------
# nearest training neighbour, authenticity percentage
# ---------------------------------------------------------------------------------------------------


def _grid_sets(rng):
    """Integer-valued features (exact ties), a duplicate inside the real set, copies in the generated set."""
    real = torch.randint(-3, 4, (90, 3), generator=rng).double()
    real[5] = real[17]
    fake = torch.randint(-4, 5, (70, 3), generator=rng).double()
    fake[:4] = real[[5, 17, 30, 2]]
    return real, fake


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_nearest_view_equals_oracle_with_ties_and_copies(rng, dtype):
    real, fake = _grid_sets(rng)
    view = nearest_real_neighbours(real.to(dtype), fake.to(dtype))
    idx, dist, radius, ratio, authentic = om.nearest_real(real.numpy(), fake.numpy())
    assert view.real_index.tolist() == idx.tolist()  # lowest index among exact ties, as numpy's argmin
    np.testing.assert_allclose(view.distance.numpy(), dist, rtol=1e-12)
    np.testing.assert_allclose(view.real_radius.numpy(), radius, rtol=1e-12)
    np.testing.assert_allclose(view.ratio.numpy(), ratio, rtol=1e-12)
    assert view.authentic.tolist() == authentic.tolist()
    assert view.ratio[:4].tolist() == [0.0] * 4 and not view.authentic[:4].any()  # copies, incl. of a duplicate


def test_authenticity_percentage_is_100_times_authenticity(rng):
    real = torch.randn(150, 5, generator=rng, dtype=torch.float64)
    fake = torch.cat([real[:20] + 1e-3, torch.randn(60, 5, generator=rng, dtype=torch.float64)])
    pct = authenticity_percentage(real, fake)
    assert pct.dtype == torch.float64 and pct.ndim == 0
    expected = 100 * om.nearest_real(real.numpy(), fake.numpy())[4].mean()
    assert float(pct) == pytest.approx(expected, abs=1e-12)
    assert float(pct) == pytest.approx(100 * float(authenticity(real, fake)), abs=1e-12)
    assert float(authenticity_percentage(real, real.clone())) == 0.0


def test_closest_pairs_are_the_smallest_ratios(rng):
    real = torch.randn(80, 4, generator=rng, dtype=torch.float64)
    fake = torch.cat([torch.randn(50, 4, generator=rng, dtype=torch.float64), real[[3, 9]] + 1e-4, real[[7]]])
    view = nearest_real_neighbours(real, fake)
    ratio = om.nearest_real(real.numpy(), fake.numpy())[3]
    order = np.argsort(ratio, kind="stable")[:6]
    pairs = closest_pairs(view, n=6)
    assert pairs.fake_index.tolist() == order.tolist()
    assert pairs.fake_index[:3].tolist() == [52, 50, 51]  # the exact copy first, then the near-copies
    assert pairs.real_index[:3].tolist() == [7, 3, 9]
    np.testing.assert_allclose(pairs.ratio.numpy(), ratio[order], rtol=1e-12)
    assert closest_pairs(view, n=1000).fake_index.shape == (53,)


def test_nearest_view_bad_input():
    with pytest.raises(ValueError, match="`real`.*at least k \\+ 1 = 2"):
        nearest_real_neighbours(torch.zeros(1, 2), torch.zeros(3, 2))
    view = nearest_real_neighbours(torch.randn(5, 2), torch.randn(3, 2))
    with pytest.raises(ValueError, match="`n`.*positive integer.*0"):
        closest_pairs(view, n=0)
    with pytest.raises(ValueError, match="`view`.*NearestReal.*tuple"):
        closest_pairs(tuple(view), n=2)


# ---------------------------------------------------------------------------------------------------
# C_T
# ---------------------------------------------------------------------------------------------------

CENTRES = torch.tensor([[0.0, 0.0], [30.0, 0.0], [0.0, 30.0]])


def _blobs(rng, counts, dim=2, spread=1.0):
    """Three well-separated Gaussian blobs (one partition for every sound k-means), ``counts`` per blob."""
    parts = []
    for c, n in zip(CENTRES, counts):
        centre = torch.zeros(dim, dtype=torch.float64)
        centre[:2] = c
        parts.append(centre + spread * torch.randn(n, dim, generator=rng, dtype=torch.float64))
    return torch.cat(parts)


def _check_against_oracle(train, fake, test, **options):
    ours = data_copying(train, fake, test, **options)
    pca_dim = options.get("pca_dim", 64)
    ref = om.c_t(train.numpy(), test.numpy(), fake.numpy(), pca_dim=pca_dim)
    assert float(ours["ct"]) == pytest.approx(ref, rel=1e-9, abs=1e-12)
    return ours


def test_ct_equals_oracle_on_unequal_sets(rng):
    train = _blobs(rng, [200, 150, 100])
    test = _blobs(rng, [80, 70, 50])
    # blob 0: near-copies of training samples; blob 1: fresh; blob 2: too few to count
    fake = torch.cat(
        [train[:120] + 0.05 * torch.randn(120, 2, generator=rng, dtype=torch.float64), _blobs(rng, [0, 90, 15])]
    )
    out = _check_against_oracle(train, fake, test)
    assert int(out["ct_cells"]) == 2


def test_ct_equals_oracle_after_pca(rng):
    train, test = _blobs(rng, [150, 150, 150], dim=10), _blobs(rng, [60, 60, 60], dim=10)
    fake = torch.cat(
        [train[::3] + 0.1 * torch.randn(150, 10, generator=rng, dtype=torch.float64), _blobs(rng, [40, 40, 40], dim=10)]
    )
    _check_against_oracle(train, fake, test, pca_dim=3)
    _check_against_oracle(train.float().double(), fake.float().double(), test.float().double(), pca_dim=3)


def test_ct_equals_oracle_with_tied_distances(rng):
    # integer-valued features: many nearest-neighbour distances tie, Mann-Whitney counts them 1/2
    def grid(n):
        return (
            CENTRES[torch.randint(0, 3, (n,), generator=rng)] + torch.randint(-2, 3, (n, 2), generator=rng)
        ).double()

    train, test, fake = grid(240), grid(150), grid(200)
    fake[:60] = train[:60]
    _check_against_oracle(train, fake, test)


def test_ct_per_cell_outputs_and_threshold(rng):
    train, test = _blobs(rng, [100, 100, 100]), _blobs(rng, [60, 30, 10])
    fake = _blobs(rng, [21, 20, 0])  # more than 20 only in the first cell
    out = data_copying(train, fake, test, return_per_cell=True)
    kept = out["ct_cell_kept"]
    assert int(out["ct_cells"]) == 1 and int(kept.sum()) == 1
    assert out["ct_cell_fake_count"].sort().values.tolist() == [0, 20, 21]
    assert sorted(round(v, 6) for v in out["ct_cell_test_share"].tolist()) == [0.1, 0.3, 0.6]
    assert float(out["ct"]) == pytest.approx(float(out["ct_cell_z"][kept][0]), rel=1e-12)
    assert float(out["ct_cell_z"][out["ct_cell_fake_count"] == 0][0]) == 0.0
    ref, z = om.c_t_from_labels(*_labelled(train, test, fake), tau=20 / len(fake))
    assert float(out["ct"]) == pytest.approx(ref, rel=1e-9)
    assert float(data_copying(train, fake, test, cell_threshold=19)["ct_cells"]) == 2


def _labelled(train, test, fake):
    """Blob labels by the nearest blob centre, ordered as ``C_T``'s reference call (test, fake, train)."""

    def lab(x):
        return torch.cdist(x[:, :2].float(), CENTRES).argmin(1).numpy()

    return test.numpy(), lab(test), fake.numpy(), lab(fake), train.numpy(), lab(train)


def test_ct_is_nan_when_no_cell_keeps_enough_samples(rng):
    train, test = _blobs(rng, [50, 50, 50]), _blobs(rng, [20, 20, 20])
    out = data_copying(train, _blobs(rng, [7, 7, 6]), test)
    assert math.isnan(float(out["ct"])) and int(out["ct_cells"]) == 0


def test_ct_detects_copies_and_not_fresh_samples():
    g = torch.Generator().manual_seed(0)
    train, test = torch.randn(900, 6, generator=g), torch.randn(400, 6, generator=g)
    copies = train[:500] + 0.02 * torch.randn(500, 6, generator=g)
    fresh = torch.randn(500, 6, generator=g)
    assert float(data_copying(train, copies, test)["ct"]) < -10  # a z-score far below chance
    assert abs(float(data_copying(train, fresh, test)["ct"])) < 2.5
    underfit = 1.5 * torch.randn(500, 6, generator=g)
    assert float(data_copying(train, underfit, test)["ct"]) > 3


def test_ct_is_seeded(rng):
    train, test, fake = (
        torch.randn(300, 4, generator=rng),
        torch.randn(150, 4, generator=rng),
        torch.randn(200, 4, generator=rng),
    )
    a, b = data_copying(train, fake, test, seed=4), data_copying(train, fake, test, seed=4)
    assert torch.equal(a["ct"], b["ct"])


@pytest.mark.parametrize(
    "options, match",
    [
        (dict(num_cells=0), "`num_cells`.*positive integer.*0"),
        (dict(cell_threshold=-1), "`cell_threshold`.*non-negative.*-1"),
        (dict(pca_dim=0), "`pca_dim`.*positive integer.*0"),
        (dict(seed=-2), "`seed`.*-2"),
        (dict(return_per_cell="yes"), "`return_per_cell`.*bool.*'yes'"),
    ],
)
def test_ct_bad_options(options, match):
    with pytest.raises(ValueError, match=match):
        data_copying(torch.randn(30, 2), torch.randn(30, 2), torch.randn(30, 2), **options)


def test_ct_bad_sets(rng):
    with pytest.raises(ValueError, match="`test` to have the 2 features of `real`, but got 3"):
        data_copying(torch.randn(30, 2), torch.randn(30, 2), torch.randn(30, 3))
    with pytest.raises(ValueError, match="`real`.*at least `num_cells` = 3.*2"):
        data_copying(torch.randn(2, 2), torch.randn(30, 2), torch.randn(30, 2))
    with pytest.raises(ValueError, match="`test` to be finite"):
        data_copying(torch.randn(30, 2), torch.randn(30, 2), torch.full((5, 2), float("nan")))
    train = _blobs(rng, [40, 40, 40])
    with pytest.raises(ValueError, match="cell .* holds .* 0 test samples.*`num_cells`"):
        data_copying(train, train, _blobs(rng, [10, 10, 0]))
