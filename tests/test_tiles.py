"""Tile planning: the GEMM probe, its override, the budget, and results independent of the shapes."""

import numpy as np
import pytest
import torch

from lightning_prd.functional import knn
from lightning_prd.functional.engine.one_pass import knn_pass
from lightning_prd.functional.knn import shapes, tiling

import oracle

#: every test runs with the bfloat16 screen of the tiles on and off (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("both_tile_paths")

BUDGET = knn.DEFAULT_BLOCK_BYTES


def test_override_and_rule_never_probe(monkeypatch):
    def no_probe(*args, **kwargs):
        raise AssertionError("probed")

    monkeypatch.setattr(shapes, "probe", no_probe)
    monkeypatch.setenv("LIGHTNING_PRD_TILE", "1536")
    assert shapes.min_side(2048, torch.float32, torch.device("cpu"), work=10**15) == 1536
    for rule in ("rule", "0"):
        monkeypatch.setenv("LIGHTNING_PRD_TILE", rule)
        assert shapes.min_side(2048, torch.float32, torch.device("cpu"), work=10**15) == shapes.DEFAULT_MIN_SIDE
    monkeypatch.delenv("LIGHTNING_PRD_TILE")  # small passes use the rule without measuring
    assert shapes.min_side(2048, torch.float32, torch.device("cpu"), work=10**9) == shapes.DEFAULT_MIN_SIDE
    # bfloat16-screened passes keep the rule (their reductions outweigh the GEMM's shape)
    assert shapes.min_side(2048, torch.bfloat16, torch.device("cpu"), work=10**15) == shapes.DEFAULT_MIN_SIDE


@pytest.mark.parametrize("value", ["fast", "-3", "1.5"])
def test_bad_override_names_variable_and_value(monkeypatch, value):
    monkeypatch.setenv("LIGHTNING_PRD_TILE", value)
    with pytest.raises(ValueError, match=f"LIGHTNING_PRD_TILE.*{value}"):
        shapes.min_side(64, torch.float32, torch.device("cpu"), work=1)


def test_probe_runs_once_per_key_and_picks_smallest_efficient_side(monkeypatch):
    calls = []

    def fake_probe(depth, dtype, device):
        calls.append((depth, dtype))
        return {256: 10.0, 512: 50.0, 1024: 95.0, 2048: 100.0}

    monkeypatch.delenv("LIGHTNING_PRD_TILE", raising=False)
    monkeypatch.setattr(shapes, "probe", fake_probe)
    monkeypatch.setattr(shapes, "_CACHE", {})
    for dim in (4096, 2048, 512):  # depth min(dim, 512): one key
        assert shapes.min_side(dim, torch.float32, torch.device("cpu"), work=10**12) == 1024
    assert shapes.min_side(64, torch.float32, torch.device("cpu"), work=10**12) == 1024
    assert calls == [(512, torch.float32), (64, torch.float32)]
    assert shapes.choose({256: 99.0, 512: 100.0}) == 256
    assert shapes.choose({256: 10.0, 2048: 100.0}) == 2048


def test_probe_measures_every_candidate():
    rates = shapes.probe(64, torch.float32, torch.device("cpu"), sides=(16, 32))
    assert sorted(rates) == [16, 32] and all(r > 0 for r in rates.values())
    assert shapes.choose(rates) in (16, 32)


@pytest.mark.parametrize("n", [1, 7, 999, 10_000, 50_000])
@pytest.mark.parametrize("side", [1, 256, 512, 1024, 2048, 10**6])
@pytest.mark.parametrize("budget", [512, 4096, BUDGET, 2**30])
def test_shapes_respect_budget_and_cover_the_triangle(n, side, budget):
    limit = max(1, budget // (4 * tiling.TILE_TEMPORARIES))
    rows, cols = tiling.block_shape(n, n, 4, budget, side)
    assert 1 <= rows <= n and 1 <= cols <= min(n, tiling.MAX_COLS) and rows * cols <= limit
    for parts in (1, 3):
        h, w = tiling.self_shape(n, 4, budget, side, parts)
        assert 1 <= h <= w <= n and h * w <= limit
        for i0 in list(range(0, n, h))[:3] + [n - n % h if n % h else n - h]:
            chunks = tiling.strip_chunks(i0, n, h, w)
            assert chunks[0][0] == i0 and chunks[-1][1] == n  # columns i0 .. n, contiguous
            assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))
            assert all(0 < j1 - j0 <= w for j0, j1 in chunks)
            assert chunks[0][1] >= min(i0 + h, n)  # the first tile holds the diagonal square


def test_worst_case_50k_by_4096_fits_the_budget():
    """50,000 x 50,000 x 4,096: every tile of every plan within the default budget (256 MiB)."""
    for side in shapes.CANDIDATES + (shapes.DEFAULT_MIN_SIDE, 8192):
        h, w = tiling.self_shape(50_000, 4, BUDGET, side)
        rows, cols = tiling.block_shape(50_000, 50_000, 4, BUDGET, side)
        assert max(h * w, rows * cols) * 4 * tiling.TILE_TEMPORARIES <= BUDGET


def test_wide_strips_on_the_default_plan():
    # eight strips, their height rounded up to a multiple of 16 (1,250 -> 1,264: the last is 1,152)
    assert tiling.self_shape(10_000, 4, BUDGET, 512) == (1264, 1264)  # efficient squares: as they are
    h, w = tiling.self_shape(10_000, 4, BUDGET, 2048)  # squares of 1,264 too slow: wide strips
    assert h == 1264 and w >= 2 * h
    assert tiling.strip_chunks(0, 10_000, h, w) == [(0, 5008), (5008, 10_000)]


def test_tile_sides_are_whole_cache_lines():
    """Near-equal blocks rounded up to a multiple of 16 where the maximum allows; else equal."""
    assert tiling.even(5000, 640) == 640 and tiling.even(5000, 625) == 625
    assert tiling.even(10_000, 8192) == 5008 and tiling.even(100, 100) == 100 and tiling.even(7, 3) == 3
    for n in (17, 1000, 5000, 10_001):
        for size in (16, 100, 625, 640, 4096):
            s = tiling.even(n, size)
            assert s <= max(1, min(n, size)) and -(-n // s) == -(-n // max(1, min(n, size)))


@pytest.mark.parametrize("tile", ["rule", "4096"])
def test_self_knn_equals_oracle_whatever_the_plan(monkeypatch, tile, rng):
    """Squares (rule) and wide strips (a probe that finds every square too small) give the
    float64 oracle's radii, with duplicates counting at distance 0."""
    monkeypatch.setenv("LIGHTNING_PRD_TILE", tile)
    for module in (tiling, shapes):  # strips of a small set as thin as 16 rows
        monkeypatch.setattr(module, "DEFAULT_MIN_SIDE", 16)
    h, w = tiling.self_shape(211, 8, 2**20, shapes.min_side(6, torch.float64, torch.device("cpu"), 1))
    assert (w >= 2 * h) == (tile == "4096")
    x = torch.randn(211, 6, generator=rng, dtype=torch.float64)
    x[50] = x[10]  # an exact duplicate pair
    x[150:153] = x[3]  # a copy triple across strips
    p = knn.prepare(x, x.double().mean(0), torch.float64)
    for budget in (2048, 8192, 2**20):
        got = knn.self_knn(p, [1, 2, 5], block_bytes=budget)
        for k in (1, 2, 5):
            np.testing.assert_allclose(got[k].sqrt().numpy(), oracle.kth_radius(x.numpy(), k), rtol=1e-14, atol=0)
    assert float(got[1][50]) == 0.0 and float(got[2][151]) == 0.0


def test_every_score_independent_of_the_plan(monkeypatch, rng):
    real = torch.randn(160, 9, generator=rng)
    fake = torch.randn(140, 9, generator=rng) * 1.3
    fake[:5] = real[:5]  # copies: realism inf, nearest at 0
    kw = dict(
        member_ks=[3, 5],
        recall_ks=[3],
        realism_k=3,
        nearest=True,
        real_ks=[1],
        fake_values=fake.norm(dim=1),
        value_ks=[5],
        block_bytes=4096,
    )
    for module in (tiling, shapes):  # strips of a small set as thin as 16 rows
        monkeypatch.setattr(module, "DEFAULT_MIN_SIDE", 16)
    out = {}
    for tile in ("rule", "4096", "1"):
        monkeypatch.setenv("LIGHTNING_PRD_TILE", tile)
        out[tile] = knn_pass(real, fake, **kw)
    a = out["rule"]
    for b in (out["4096"], out["1"]):
        for k in (1, 3, 5):
            assert torch.equal(a.real.sq_radii[k], b.real.sq_radii[k])
        assert torch.equal(a.fake_sq_radii[3], b.fake_sq_radii[3])
        for k in (3, 5):
            assert torch.equal(a.cross.fake_ball_count[k], b.cross.fake_ball_count[k])
            assert torch.equal(a.cross.real_ball_hit[k], b.cross.real_ball_hit[k])
        assert torch.equal(a.cross.real_in_fake[3], b.cross.real_in_fake[3])
        assert torch.equal(a.cross.fake_nn_index, b.cross.fake_nn_index)
        assert torch.equal(a.cross.real_nn_index, b.cross.real_nn_index)
        assert torch.equal(a.cross.fake_nn_sq_dist, b.cross.fake_nn_sq_dist)
        assert torch.equal(a.cross.real_ball_min_value[5], b.cross.real_ball_min_value[5])
        torch.testing.assert_close(a.cross.realism, b.cross.realism, rtol=1e-6, atol=0)  # float32 GEMM values
