"""The blocked k-NN engine: radii, exact refinement, ties, copies, block independence, devices."""

import numpy as np
import pytest
import torch

from lightning_prd.functional import density_coverage, knn, precision_recall
from lightning_prd.functional.engine.one_pass import knn_pass
from lightning_prd.functional.knn import exact

import oracle

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])

#: every test runs with the bfloat16 screen of the tiles on and off (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("both_tile_paths")


def _point_set(x):
    return knn.prepare(x, x.double().mean(0), torch.float32 if x.dtype != torch.float64 else torch.float64)


@pytest.mark.parametrize("k", [1, 2, 7])
def test_self_knn_equals_oracle(k, rng):
    x = torch.randn(97, 5, generator=rng, dtype=torch.float64)
    ours = knn.self_knn(_point_set(x), [k], block_bytes=2048)[k].sqrt()
    # same neighbour, float64 values up to the summation order of numpy vs torch
    np.testing.assert_allclose(ours.numpy(), oracle.kth_radius(x.numpy(), k), rtol=1e-14)


def test_duplicates_count_at_distance_zero():
    x = torch.tensor([[0.0, 0.0], [0.0, 0.0], [5.0, 0.0], [9.0, 0.0]])
    r1 = knn.self_knn(_point_set(x), [1])[1]
    assert r1[0] == 0 and r1[1] == 0  # each duplicate is the other's nearest neighbour
    assert float(r1[2].sqrt()) == 4.0 and float(r1[3].sqrt()) == 4.0


def test_all_identical_points_closed_balls():
    x = torch.ones(20, 4)
    p, r = precision_recall(x, x.clone(), k=3)
    d, c = density_coverage(x, x.clone(), k=5)
    assert float(p) == float(r) == float(c) == 1.0
    assert float(d) == pytest.approx(20 / 5)  # every fake in every real ball: M / k


def test_exact_copy_with_large_offset_float32(rng):
    real = torch.randn(400, 64, generator=rng) * 0.5 + 3000.0
    fake = real.clone()
    res = knn_pass(real, fake, member_ks=[3, 5], recall_ks=[3], nearest=True, real_ks=[1])
    assert bool(res.cross.fake_in_real[3].all()) and bool(res.cross.real_in_fake[3].all())
    assert bool(res.cross.real_ball_hit[5].all())
    assert bool((res.cross.fake_nn_sq_dist == 0).all())
    assert torch.equal(res.cross.fake_nn_index, torch.arange(400))


def test_refinement_fixes_catastrophic_cancellation(rng):
    """Two tight clusters far from the mean: float32 GEMM values are dominated by rounding
    (error ~1e-7 * 1e6) while true squared distances are ~1e-3; decisions must still be exact."""
    centres = torch.tensor([[1000.0] * 6, [-1000.0] * 6])
    real = (centres[torch.arange(300) % 2] + 0.02 * torch.randn(300, 6, generator=rng)).float()
    fake = (centres[torch.arange(260) % 2] + 0.025 * torch.randn(260, 6, generator=rng)).float()
    p, r = precision_recall(real, fake, k=3)
    d, c = density_coverage(real, fake, k=5)
    op, orr = oracle.precision_recall(real.double().numpy(), fake.double().numpy(), k=3)
    od, oc = oracle.density_coverage(real.double().numpy(), fake.double().numpy(), k=5)
    assert round(float(p) * 260) == round(op * 260) and round(float(r) * 300) == round(orr * 300)
    assert round(float(d) * 5 * 260) == round(od * 5 * 260) and round(float(c) * 300) == round(oc * 300)


@pytest.mark.parametrize("block_bytes", [512, 4096, 2**20])
def test_block_size_independence(block_bytes, rng):
    real = torch.randn(150, 9, generator=rng)
    fake = torch.randn(130, 9, generator=rng) * 1.3
    kw = dict(
        member_ks=[3, 5],
        recall_ks=[3],
        realism_k=3,
        nearest=True,
        real_ks=[1],
        fake_values=fake.norm(dim=1),
        value_ks=[5],
    )
    a = knn_pass(real, fake, block_bytes=block_bytes, **kw).cross
    b = knn_pass(real, fake, block_bytes=2**30, **kw).cross
    for k in (3, 5):
        assert torch.equal(a.fake_ball_count[k], b.fake_ball_count[k])
        assert torch.equal(a.real_ball_hit[k], b.real_ball_hit[k])
    assert torch.equal(a.real_in_fake[3], b.real_in_fake[3])
    assert torch.equal(a.fake_nn_index, b.fake_nn_index) and torch.equal(a.real_nn_index, b.real_nn_index)
    torch.testing.assert_close(a.realism, b.realism, rtol=1e-6, atol=0)  # float32 GEMM values
    assert torch.equal(a.real_ball_min_value[5], b.real_ball_min_value[5])


def test_nearest_neighbours_and_ball_min_equal_oracle(rng):
    real = torch.randn(120, 4, generator=rng, dtype=torch.float64)
    fake = torch.randn(140, 4, generator=rng, dtype=torch.float64)
    vals = torch.rand(140, generator=rng, dtype=torch.float64)
    res = knn_pass(real, fake, member_ks=[5], nearest=True, fake_values=vals, value_ks=[5], block_bytes=4096)
    dm = oracle.dist(fake.numpy(), real.numpy())  # [M, N]
    np.testing.assert_array_equal(res.cross.fake_nn_index.numpy(), dm.argmin(1))
    np.testing.assert_array_equal(res.cross.real_nn_index.numpy(), dm.argmin(0))
    np.testing.assert_allclose(res.cross.fake_nn_sq_dist.sqrt().numpy(), dm.min(1), rtol=1e-12)
    inside = dm <= oracle.kth_radius(real.numpy(), 5)[None, :]
    expected = np.where(inside, vals.numpy()[:, None], np.inf).min(0)
    np.testing.assert_array_equal(res.cross.real_ball_min_value[5].numpy(), expected)


def test_several_k_from_one_pass(rng):
    x = torch.randn(80, 3, generator=rng, dtype=torch.float64)
    radii = knn.self_knn(_point_set(x), [1, 3, 5])
    for k in (1, 3, 5):
        np.testing.assert_allclose(radii[k].sqrt().numpy(), oracle.kth_radius(x.numpy(), k), rtol=1e-14)


@pytest.mark.parametrize("device", DEVICES)
def test_device_agnostic(device, rng):
    real = torch.randn(200, 16, generator=rng)
    fake = torch.randn(180, 16, generator=rng)
    cpu = precision_recall(real, fake) + density_coverage(real, fake)
    dev = precision_recall(real.to(device), fake.to(device)) + density_coverage(real.to(device), fake.to(device))
    assert all(v.device.type == device for v in dev)
    assert [float(v) for v in cpu] == [float(v) for v in dev]


def test_collapsed_duplicates_take_no_slow_path(rng, monkeypatch):
    """A fake set of one repeated row: every k-th distance is exactly 0, which nothing can beat,
    so no row needs the rigorous all-pairs fallback (it made the cost quadratic)."""
    calls = []
    orig = exact.exact_rows_topk
    monkeypatch.setattr(
        exact, "exact_rows_topk", lambda a, b, rows, *args: calls.append(len(rows)) or orig(a, b, rows, *args)
    )
    real = torch.randn(300, 16, generator=rng)
    fake = real[:1].repeat(300, 1)
    p, r = precision_recall(real, fake, k=3)
    assert sum(calls) == 0
    assert float(p) == 1.0 and float(r) == pytest.approx(
        float(oracle.precision_recall(real.double().numpy(), fake.double().numpy(), k=3)[1])
    )
