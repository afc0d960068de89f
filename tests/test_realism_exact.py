"""Realism is the float64 oracle's on every tile path (float32, float64, bfloat16 screen).

Realism ratios near a copy or inside a tight cluster are where GEMM distances lose most
digits (an error relative to the norms, not the distance); the candidate lists of
``functional/knn/realism.py`` recompute every ratio that may be the maximum in float64, so the
result equals ``tests/oracle.py``'s brute-force float64 realism to rounding (1e-12), and the
paths agree bit for bit.
"""

import numpy as np
import pytest
import torch

from lightning_prd.functional.engine.one_pass import knn_pass

import oracle

pytestmark = pytest.mark.usefixtures("both_tile_paths")


def _near_pairs():
    torch.manual_seed(0)
    real = torch.randn(700, 2)
    return real, real[:200] + 0.01 * torch.randn(200, 2)


def _clusters():
    g = torch.Generator().manual_seed(1)
    centres = torch.randn(10, 16, generator=g) * 100
    real = centres.repeat_interleave(40, 0) + 0.01 * torch.randn(400, 16, generator=g)
    fake = centres.repeat_interleave(15, 0) + 0.012 * torch.randn(150, 16, generator=g)
    return real, fake


def _offset():
    g = torch.Generator().manual_seed(2)
    real = torch.randn(300, 32, generator=g) + 1000.0
    return real, 1.1 * torch.randn(250, 32, generator=g) + 1000.2


def _copies():
    g = torch.Generator().manual_seed(3)
    real = torch.randn(400, 8, generator=g)
    fake = torch.cat([real[:30], real[30:60] + 1e-6 * torch.randn(30, 8, generator=g), torch.randn(40, 8, generator=g)])
    return real, fake


def _high_dim():
    g = torch.Generator().manual_seed(4)
    real = torch.randn(500, 256, generator=g)
    return real, torch.cat([real[:50] + 0.05 * torch.randn(50, 256, generator=g), torch.randn(150, 256, generator=g)])


CASES = {"near_pairs": _near_pairs, "clusters": _clusters, "offset": _offset, "copies": _copies, "high_dim": _high_dim}


@pytest.mark.parametrize("name", sorted(CASES))
def test_realism_equals_the_float64_oracle(name):
    real, fake = CASES[name]()
    got = knn_pass(real, fake, realism_k=3).cross.realism
    assert got.dtype == torch.float64
    expected = oracle.realism(real.double().numpy(), fake.double().numpy(), 3)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)
    if name == "copies":  # copies of kept balls are inf; the oracle agrees
        assert bool(np.isinf(expected).any()) and bool(torch.isinf(got).any())


@pytest.mark.parametrize("name", sorted(CASES))
def test_realism_is_the_same_bits_with_float64_tiles(name):
    real, fake = CASES[name]()
    tiles32 = knn_pass(real, fake, realism_k=3).cross.realism
    tiles64 = knn_pass(real, fake, realism_k=3, dtype=torch.float64).cross.realism
    assert torch.equal(tiles32, tiles64)


def test_realism_is_exact_with_small_tiles_and_short_lists(monkeypatch):
    from lightning_prd.functional.knn import realism

    monkeypatch.setattr(realism, "REALISM_LIST", 2)  # most samples fall back to every real sample
    real, fake = _clusters()
    got = knn_pass(real, fake, realism_k=3, block_bytes=4096).cross.realism
    np.testing.assert_allclose(got.numpy(), oracle.realism(real.double().numpy(), fake.double().numpy(), 3), rtol=1e-12)


def test_sync_free_list_merge_keeps_the_same_lists():
    """CUDA tile loops merge realism lists by a top-k of the tile (no host synchronisation);
    the lists, once sorted, are the same as the threshold merge's (distinct values: same indices too)."""
    from lightning_prd.functional.knn.lists import RunningNearest

    g = torch.Generator().manual_seed(5)
    tiles = [torch.randn(300, 70, generator=g) for _ in range(4)]
    lists = [RunningNearest(70, 4, torch.float32, "cpu") for _ in range(2)]
    for i, tile in enumerate(tiles):
        for lst, sync_free in zip(lists, (False, True)):
            lst.update(slice(0, 70), tile, 0, 300 * i, sync_free=sync_free)
    for lst in lists:  # merged lists are unsorted until the pass sorts them
        lst.sort()
    assert torch.equal(lists[0].vals, lists[1].vals) and torch.equal(lists[0].idx, lists[1].idx)
    everything = torch.cat(tiles).T  # [70, 1200]: the 4 smallest of each column, by brute force
    assert torch.equal(lists[0].vals, everything.sort(1).values[:, :4])
