"""Tile reductions of the cross pass keyed by kind and parameters: two of one kind at different k in one pass
give what separate passes give, on the listed (CPU) and the deferred (CUDA) path."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from lightning_prd.functional.engine.one_pass import knn_pass
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.knn import cross_pass, prepare, self_knn
from lightning_prd.functional.knn.balls import BallMembers, BallMinimum, RecallBalls
from lightning_prd.functional.knn.clipped import ClippedBalls
from lightning_prd.functional.knn.smallest import SmallestBall
from lightning_prd.functional.rarity import rarity_from_pass


def _sets():
    g = torch.Generator().manual_seed(11)
    real, fake = torch.randn(160, 6, generator=g), 1.1 * torch.randn(140, 6, generator=g)
    fake[:10] = real[20:30]  # copies: pairs on a radius, decided in float64
    return real, fake


def _oracle_smallest(real: torch.Tensor, fake: torch.Tensor, k: int) -> torch.Tensor:
    """Float64 brute force: per fake, the smallest squared radius of the open real NND_k balls holding it."""
    r64, f64 = real.double(), fake.double()
    self_d2 = torch.cdist(r64, r64).square()
    self_d2.fill_diagonal_(float("inf"))
    radii = self_d2.sort(1).values[:, k - 1]
    d2 = torch.cdist(f64, r64).square()  # [M, N]
    inside = d2 < radii[None, :]
    return torch.where(inside, radii[None, :], float("inf")).amin(1)


def test_two_smallest_balls_in_one_pass_equal_separate_passes():
    real, fake = _sets()
    both = knn_pass(real, fake, real_ks=(3, 5), reductions=(SmallestBall(3), SmallestBall(5)), block_bytes=1 << 14)
    assert set(both.cross.reduced) == {SmallestBall(3).key, SmallestBall(5).key}
    for k in (3, 5):
        alone = knn_pass(real, fake, real_ks=(k,), reductions=(SmallestBall(k),), block_bytes=1 << 14)
        got, want = both.cross.reduced[SmallestBall(k).key], alone.cross.reduced[SmallestBall(k).key]
        assert torch.equal(got, want), k
        assert torch.allclose(got, _oracle_smallest(real, fake, k), rtol=1e-12)
        for name, value in rarity_from_pass(both, k).items():
            assert torch.equal(value, rarity_from_pass(alone, k)[name]), (k, name)
    assert not torch.equal(both.cross.reduced[SmallestBall(3).key], both.cross.reduced[SmallestBall(5).key])


@pytest.mark.parametrize("deferred", [False, True])
def test_reductions_of_one_kind_at_two_k_on_both_paths(deferred):
    """Balls, minima, recall, clipped counts and smallest balls at k = 3 and 5 in one cross pass equal one pass
    per k, listed per tile or deferred to the end of the loop (the CUDA path, run here on the CPU)."""
    real, fake = _sets()
    centre = real.double().mean(0)
    r, f = prepare(real, centre, torch.float32), prepare(fake, centre, torch.float32)
    radii, fake_radii = self_knn(r, [3, 5]), self_knn(f, [3, 5])
    values = torch.rand(len(fake), generator=torch.Generator().manual_seed(2), dtype=torch.float64)

    def kinds(k):
        return [BallMembers(k), BallMinimum(k, values), RecallBalls(k), ClippedBalls(k), SmallestBall(k)]

    both = cross_pass(r, f, radii, fake_radii, kinds(3) + kinds(5), block_bytes=1 << 13, deferred=deferred)
    assert len(both.reduced) == 10
    for k in (3, 5):
        alone = cross_pass(r, f, radii, fake_radii, kinds(k), block_bytes=1 << 13, deferred=deferred)
        for reduction in kinds(k):
            _assert_same(both.reduced[reduction.key], alone.reduced[reduction.key], reduction.key)
        assert torch.equal(both.fake_in_real[k], alone.fake_in_real[k])
        assert torch.equal(both.real_ball_min_value[k], alone.real_ball_min_value[k])
        assert torch.equal(both.real_in_fake[k], alone.real_in_fake[k])


def _assert_same(got, want, key):
    if dataclasses.is_dataclass(got):
        got, want = dataclasses.astuple(got), dataclasses.astuple(want)
    else:
        got, want = (got,), (want,)
    assert len(got) == len(want), key
    for a, b in zip(got, want):
        assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b, key


def test_two_reductions_with_one_key_are_refused():
    real, fake = _sets()
    r = prepare(real, real.double().mean(0), torch.float32)
    f = prepare(fake, real.double().mean(0), torch.float32)
    with pytest.raises(ValueError, match="distinct keys"):
        cross_pass(r, f, self_knn(r, [3]), {}, [SmallestBall(3), SmallestBall(3)])


def test_a_request_merges_reductions_by_key():
    a = PassRequest(reductions=(SmallestBall(3),))
    b = PassRequest(reductions=(SmallestBall(3), SmallestBall(5)))
    assert [r.key for r in a.merge(b).reductions] == [SmallestBall(3).key, SmallestBall(5).key]
