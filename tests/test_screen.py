"""The bfloat16 screen of the k-NN tiles (``lightning_prd/functional/knn/screen.py``).

The screen only decides which pairs are recomputed, so every result must equal the float64
oracle (``tests/oracle.py``) with the screen on and off. Tested here: the rounding interval
holds every exact distance (Gaussian, offset, clustered, integer, wide-range, subnormal data),
the float32-from-differences interval does, the results equal the oracle on data where balls
end in the bulk of the cross distances (many ambiguous pairs), and the two fallbacks (a cross
tile recomputed in float32, realism recomputed for unsafe samples) run and stay exact.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lightning_prd.functional.engine.one_pass import knn_pass
from lightning_prd.functional.knn import exact as knn_exact
from lightning_prd.functional.knn import listing, points, realism, self_pass, tiling
from lightning_prd.functional.knn.screen import screen_available

import oracle


def _datasets():
    g = torch.Generator().manual_seed(7)
    gauss = torch.randn(300, 64, generator=g)
    clusters = (torch.randint(0, 4, (300, 1), generator=g) * 50.0) + 0.01 * torch.randn(300, 48, generator=g)
    return {
        "gaussian": gauss,
        "offset": gauss * 0.1 + 1e3,
        "clusters": clusters,
        "integers": torch.randint(-3, 4, (300, 16), generator=g).float(),
        "wide-range": gauss * torch.logspace(-3, 3, 64)[None, :],
        "subnormal": gauss * 1e-39,
        "one-dim": torch.randn(300, 1, generator=g),
    }


DATA = _datasets()


@pytest.fixture
def screen_on(monkeypatch):
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", "1")


@pytest.mark.parametrize("offset", ["none", "median", "large"])
@pytest.mark.parametrize("name", sorted(DATA))
def test_screen_interval_holds_every_exact_distance(name, offset, screen_on):
    x = DATA[name]
    a, b = x[:150], x[150:]
    centre = a.double().mean(0)
    pa, pb = points.prepare(a, centre, torch.float32), points.prepare(b, centre, torch.float32)
    assert pa.screened is not None
    exact = torch.from_numpy(oracle.dist(a.numpy(), b.numpy()) ** 2)
    c = {"none": 0.0, "median": float(exact.median()), "large": 10 * float(exact.max())}[offset]
    points.set_offset(c, pa, pb)
    buf = tiling.buffer(len(a) * len(b), pa)
    tile = tiling.sq_tile(
        buf, pa.left(slice(None)), pa.sq_norms[:, None], pb.right(slice(None)), pb.sq_norms, points.pass_offset(pa, pb)
    ).clone()
    bound = points.bound(pa, pb, slice(None)).col()
    v = tile.double()
    assert bool((bound.low(v) <= exact).all())
    assert bool((exact <= bound.high(v)).all())
    # the thresholds used for decisions are the inverses of the interval
    thr = exact[:, :1].clone()
    sure = v <= bound.sure_below(thr)
    maybe = v <= bound.maybe_below(thr)
    assert bool((exact[sure] <= thr.expand_as(exact)[sure]).all())
    assert bool((exact[~maybe] > thr.expand_as(exact)[~maybe]).all())


def test_copies_always_reach_the_exact_recomputation(screen_on):
    # ~a = ~b for a copy: its screen value is float32 accumulation noise, inside the
    # interval of 0, so a ball of radius 0 always sends it to float64
    x = DATA["offset"][:50]
    p = points.prepare(x, x.double().mean(0), torch.float32)
    buf = tiling.buffer(50 * 50, p)
    tile = tiling.sq_tile(buf, p.left(slice(None)), p.sq_norms[:, None], p.right(slice(None)), p.sq_norms)
    bound = points.bound(p, p, slice(None))
    assert bool((tile.diagonal().double() <= bound.maybe_below(torch.zeros(50, dtype=torch.float64))).all())
    assert bool((bound.low(tile.diagonal().double()) == 0).all())


@pytest.mark.parametrize("name", sorted(DATA))
def test_difference_interval_holds_every_exact_distance(name):
    x = DATA[name]
    idx = torch.randperm(300, generator=torch.Generator().manual_seed(1))[:40].repeat(300, 1)
    direct = knn_exact.direct_sq(x, x, idx)
    lo, hi = knn_exact.direct_interval(direct, x.shape[1])
    exact = torch.from_numpy(oracle.dist(x.numpy(), x.numpy()) ** 2).gather(1, idx)
    assert bool((lo <= exact).all()) and bool((exact <= hi).all())


def _nearest_oracle(a: np.ndarray, b: np.ndarray):
    d = oracle.dist(a, b)
    i = d.argmin(1)  # lowest index on ties
    return i, d[np.arange(len(a)), i] ** 2


def _all_scores(real, fake):
    return knn_pass(real, fake, member_ks=[3, 5], recall_ks=[3], realism_k=3, nearest=True)


def _check_against_oracle(real: torch.Tensor, fake: torch.Tensor) -> None:
    res = _all_scores(real, fake)
    r, f = real.numpy(), fake.numpy()
    for k in (3, 5):
        d = oracle.dist(f, r)
        inside = d <= oracle.kth_radius(r, k)[None, :]
        assert torch.equal(res.cross.fake_in_real[k], torch.from_numpy(inside.any(1)))
        assert torch.equal(res.cross.fake_ball_count[k], torch.from_numpy(inside.sum(1)))
        assert torch.equal(res.cross.real_ball_hit[k], torch.from_numpy(inside.any(0)))
        np.testing.assert_allclose(res.real.sq_radii[k].numpy(), oracle.kth_radius(r, k) ** 2, rtol=1e-12)
    in_fake = (oracle.dist(r, f) <= oracle.kth_radius(f, 3)[None, :]).any(1)
    assert torch.equal(res.cross.real_in_fake[3], torch.from_numpy(in_fake))
    np.testing.assert_allclose(res.fake_sq_radii[3].numpy(), oracle.kth_radius(f, 3) ** 2, rtol=1e-12)
    np.testing.assert_allclose(res.cross.realism.numpy(), oracle.realism(r, f, 3), rtol=1e-5)
    i, d2 = _nearest_oracle(f, r)
    assert torch.equal(res.cross.fake_nn_index, torch.from_numpy(i))
    np.testing.assert_allclose(res.cross.fake_nn_sq_dist.numpy(), d2, rtol=1e-12)
    i, d2 = _nearest_oracle(r, f)
    assert torch.equal(res.cross.real_nn_index, torch.from_numpy(i))


def _bulk_pair(n=400, dim=256, seed=3):
    """A wider generated set in high dimension: its balls end in the bulk of the cross
    distances, so a screen's rounding interval holds many pairs (recall near 1)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, dim, generator=g), 1.1 * torch.randn(n, dim, generator=g) + 0.1


@pytest.mark.parametrize("mode", ["0", "1"])
@pytest.mark.parametrize("name", ["bulk", "gaussian", "clusters", "integers", "offset"])
def test_scores_equal_the_oracle_with_and_without_the_screen(name, mode, monkeypatch):
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", mode)
    if name == "bulk":
        real, fake = _bulk_pair()
    else:
        x = DATA[name]
        real, fake = x[:150], x[150:]
    _check_against_oracle(real, fake)


def _spy_tiles(monkeypatch):
    dtypes = []
    original = tiling.sq_tile

    def spy(buf, a_blk, *args):
        dtypes.append(a_blk.dtype)
        return original(buf, a_blk, *args)

    monkeypatch.setattr(tiling, "sq_tile", spy)
    return dtypes


def test_ambiguous_cross_tiles_are_recomputed_in_float32_and_stay_exact(screen_on, monkeypatch):
    real, fake = _bulk_pair(300, 128)
    monkeypatch.setattr(listing, "AMBIGUOUS_SHARE", 0.0)  # any ambiguous pair sends the tile back
    dtypes = _spy_tiles(monkeypatch)
    _check_against_oracle(real, fake)
    assert torch.bfloat16 in dtypes and torch.float32 in dtypes


def test_realism_of_unsafe_samples_is_recomputed_and_stays_exact(screen_on, monkeypatch):
    real, fake = _bulk_pair(300, 128)
    monkeypatch.setattr(realism, "REALISM_LIST", 2)  # the bound rarely proves the maximum
    unsafe = []
    finish = realism.RealismLists.finish

    def spy(self, shard):
        best, bad = finish(self, shard)
        unsafe.append(int(bad.numel()))
        return best, bad

    monkeypatch.setattr(realism.RealismLists, "finish", spy)
    res = knn_pass(real, fake, realism_k=3)
    assert unsafe and unsafe[0] > 0
    np.testing.assert_allclose(res.cross.realism.numpy(), oracle.realism(real.numpy(), fake.numpy(), 3), rtol=1e-5)


def _lattice_and_square(step: float, side: float, shift: float):
    """A coarse lattice (NND_3 = step) and two small squares (NND_3 = side): values exact in
    bfloat16 after centring, so the screen's tile values carry only the pass offset's rounding."""
    lat = np.stack(np.meshgrid(np.arange(-4, 5), np.arange(-4, 5)), -1).reshape(-1, 2) * step
    sq = np.array([[0, 0], [side, 0], [0, side], [side, side]], float) + shift
    return torch.tensor(np.concatenate([lat, sq, -sq]), dtype=torch.float32)


def test_screened_realism_bound_carries_the_offset(screen_on):
    # found by review: the realism bound left out the pass offset (the median radius), so a
    # ball far below it could be pruned; 3.5% too low here
    real = _lattice_and_square(128.0, 8.0, 60.0)
    fake = torch.tensor([[64.0, 51.0], [10.0, 10.0]])
    res = knn_pass(real, fake, realism_k=3)
    np.testing.assert_allclose(res.cross.realism.numpy(), oracle.realism(real.numpy(), fake.numpy(), 3), rtol=1e-12)


def test_screened_copy_of_a_small_kept_ball_is_inf(screen_on):
    # the copy's tile value is the offset's rounding (16 here), not ~0: it must still reach float64
    real = _lattice_and_square(100.0, 4.0, 4.0)
    fake = torch.tensor([[4.0, 4.0]])  # a copy of a kept real sample
    assert bool(np.isinf(oracle.realism(real.numpy(), fake.numpy(), 3)).all())
    assert bool(torch.isinf(knn_pass(real, fake, realism_k=3).cross.realism).all())


def test_realism_ties_beyond_the_lists_are_float64_exact(screen_on, monkeypatch):
    # a generated sample at the centre of a hypercube ties with all 64 vertices: no list of 33
    # can prove the maximum; it is computed against every kept real sample in float64
    import itertools

    real = torch.tensor(list(itertools.product([-1.0, 1.0], repeat=6)))
    g = torch.Generator().manual_seed(0)
    fake = torch.cat([torch.zeros(1, 6), torch.randn(3, 6, generator=g)])
    unsafe = []
    finish = realism.RealismLists.finish

    def spy(self, shard):
        best, bad = finish(self, shard)
        unsafe.append(bad.tolist())
        return best, bad

    monkeypatch.setattr(realism.RealismLists, "finish", spy)
    res = knn_pass(real, fake, realism_k=3)
    assert unsafe == [[0]]
    np.testing.assert_allclose(res.cross.realism.numpy(), oracle.realism(real.numpy(), fake.numpy(), 3), rtol=1e-12)


@pytest.mark.parametrize("mode", ["0", "1"])
def test_features_near_the_underflow_equal_the_oracle(mode, monkeypatch):
    # found by review (older than the screen): features of ~1e-30 square to 0 in float32 and
    # every pair was "surely" inside every ball; the margin now covers underflow
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", mode)
    g = np.random.default_rng(0)
    real = torch.tensor(g.standard_normal((300, 16)) * 1e-30, dtype=torch.float32)
    fake = torch.tensor(g.standard_normal((300, 16)) * 1e-30 + 2e-30, dtype=torch.float32)
    _check_against_oracle(real, fake)


def test_screened_realism_is_float64_exact(screen_on):
    real, fake = _bulk_pair(300, 128)
    res = knn_pass(real, fake, realism_k=3)
    np.testing.assert_allclose(res.cross.realism.numpy(), oracle.realism(real.numpy(), fake.numpy(), 3), rtol=1e-12)


def test_realism_of_copies_is_inf_under_the_screen(screen_on):
    real = DATA["offset"][:100]
    fake = torch.cat([real[:5], DATA["offset"][100:150]])
    res = knn_pass(real, fake, realism_k=3)
    expected = oracle.realism(real.numpy(), fake.numpy(), 3)
    assert bool(torch.isinf(res.cross.realism[:5]).all()) == bool(np.isinf(expected[:5]).all())
    np.testing.assert_allclose(res.cross.realism[5:].numpy(), expected[5:], rtol=1e-12)


def test_screen_availability_rules(monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", "1")
    assert screen_available(cpu, torch.float32)
    assert not screen_available(cpu, torch.float64)  # float64 asks for float64 tiles
    assert not screen_available(cuda, torch.float32)  # reduced-precision reductions on GPUs
    assert screen_available(cpu, torch.float32, 10, 3)  # forced: whatever the size
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", "0")
    assert not screen_available(cpu, torch.float32, 10**5, 4096)
    monkeypatch.delenv("LIGHTNING_PRD_SCREEN")
    assert not screen_available(cpu, torch.float32, 4000, 4096)  # too few rows to gain
    assert not screen_available(cpu, torch.float32, 10000, 256)  # too little work per row


def test_float64_features_are_never_screened(screen_on):
    x = DATA["gaussian"].double()
    p = points.prepare(x, x.mean(0), torch.float64)
    assert p.screened is None and p.slack == points.SLACK
    assert not math.isnan(float(p.sq_norms.sum()))


def test_width_rule_keeps_float32_tiles_for_tight_clusters(monkeypatch):
    # a collapsed generator: 10 tight clusters far from the centre, where the screen's interval
    # at the k-th neighbour distance is too wide to decide; Gaussian features are screened
    g = torch.Generator().manual_seed(5)
    modes = torch.randn(10, 256, generator=g)
    tight = modes[torch.randint(0, 10, (600,), generator=g)] + 0.02 * torch.randn(600, 256, generator=g)
    gauss = torch.randn(600, 256, generator=g)
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", "1")  # build the screen rows
    sets = {
        name: points.prepare(x, x.double().mean(0), torch.float32) for name, x in (("tight", tight), ("gauss", gauss))
    }
    offsets = {name: points.estimate_offset(p, p, 5, True) for name, p in sets.items()}
    assert points.screen_pays(sets["tight"], sets["tight"], offsets["tight"])  # forced: whatever the width
    monkeypatch.delenv("LIGHTNING_PRD_SCREEN")
    assert not points.screen_pays(sets["tight"], sets["tight"], offsets["tight"])
    assert points.screen_pays(sets["gauss"], sets["gauss"], offsets["gauss"])
    dtypes = _spy_tiles(monkeypatch)
    radii = self_pass.self_knn(sets["tight"], [5])[5]  # auto: the pass runs on float32 tiles, exactly
    assert torch.bfloat16 not in dtypes
    np.testing.assert_allclose(radii.numpy(), oracle.kth_radius(tight.numpy(), 5) ** 2, rtol=1e-12)


def _hypercube_realism(rank, world):
    import itertools

    from lightning_prd.functional.knn.shard import current_shard

    real = torch.tensor(list(itertools.product([-1.0, 1.0], repeat=6)))
    g = torch.Generator().manual_seed(0)
    fake = torch.cat([torch.zeros(3, 6), torch.randn(5, 6, generator=g)])  # three tied samples
    return knn_pass(real, fake, realism_k=3, nearest=True, shard=current_shard()).cross.realism


def test_tied_realism_is_exact_under_ddp(screen_on):
    # the unsettled samples are shared out across ranks and gathered (3 samples, 2 ranks)
    import itertools

    from ddp_utils import run_ddp

    real = np.array(list(itertools.product([-1.0, 1.0], repeat=6)))
    g = torch.Generator().manual_seed(0)
    fake = torch.cat([torch.zeros(3, 6), torch.randn(5, 6, generator=g)]).numpy()
    expected = oracle.realism(real, fake, 3)
    for got in run_ddp(_hypercube_realism):
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)


def test_copy_of_a_radius_zero_ball_is_settled_as_a_near_pair(screen_on, monkeypatch):
    # the offset's rounding leaves a copy at a tile value of 16 (offset 10,000): the near-pair
    # threshold covers every value that may still be a copy, so the copy is decided exactly
    # where it comes and no sample needs the fallback over every real sample
    lat = np.stack(np.meshgrid(np.arange(-4, 5), np.arange(-4, 5)), -1).reshape(-1, 2) * 100.0
    sq = np.array([[0, 0], [4, 0], [0, 4], [4, 4]], float) + 4.0
    dup = np.repeat([[8.0, 8.0]], 3, 0)  # with the square's corner: four copies, NND_3 = 0
    real = torch.tensor(np.concatenate([lat, sq, -sq, dup, -dup]), dtype=torch.float32)
    fake = torch.tensor([[8.0, 8.0], [50.0, 20.0]])
    unsafe = []
    finish = realism.RealismLists.finish

    def spy(self, shard):
        best, bad = finish(self, shard)
        unsafe.append(bad.tolist())
        return best, bad

    monkeypatch.setattr(realism.RealismLists, "finish", spy)
    res = knn_pass(real, fake, realism_k=3)
    assert unsafe == [[]]
    assert bool(torch.isinf(res.cross.realism[0]))  # a copy of a kept ball, radius 0 included
    expected = oracle.realism(real.numpy(), fake[1:].numpy(), 3)  # (the oracle's 0 / 0 is nan)
    np.testing.assert_allclose(res.cross.realism[1:].numpy(), expected, rtol=1e-12)


def test_mostly_ambiguous_cross_tiles_switch_to_float32_and_stay_exact(monkeypatch):
    """Once most screened cross tiles were recomputed, the later ones come from the float rows
    directly (no screened GEMM first); every count equals the unscreened pass."""
    real, fake = _bulk_pair(300, 128)
    kw = dict(member_ks=[3, 5], recall_ks=[3], cover=(2, 6), nearest=True, block_bytes=1 << 16)
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", "0")
    want = knn_pass(real, fake, **kw).cross
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", "1")
    monkeypatch.setattr(listing, "AMBIGUOUS_SHARE", 0.0)  # any ambiguous pair sends the tile back
    switched, original = [], tiling.tiles

    def spy(a, b, block_bytes, shard=None, switch=None):
        for item in original(a, b, block_bytes, shard, switch):
            switched.append(switch is not None and switch.sets is not None)
            yield item

    monkeypatch.setattr(tiling, "tiles", spy)
    got = knn_pass(real, fake, **kw).cross
    assert len(switched) > 2 and not switched[0] and all(switched[1:])
    for name in (
        "fake_in_real",
        "fake_ball_count",
        "real_ball_hit",
        "real_in_fake",
    ):
        for k, value in getattr(want, name).items():
            assert torch.equal(getattr(got, name)[k], value), (name, k)
    assert torch.equal(got.real_covered, want.real_covered) and torch.equal(got.fake_covered, want.fake_covered)
    assert torch.equal(got.fake_nn_index, want.fake_nn_index) and torch.equal(got.real_nn_sq_dist, want.real_nn_sq_dist)
