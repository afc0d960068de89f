"""Realism lists over many tiles: the floor comparison keeps the lists of every-ratio tiles.

Once a list is full, :class:`~lightning_prd.functional.knn.realism.RealismLists` compares a
tile with the lists' floors instead of computing every ratio; the lists, the near pairs
decided exactly and the realism must stay those of the every-ratio merge, and the realism
the float64 oracle's (``tests/oracle.py``), with tiles small enough that most of them take
the comparison.
"""

import numpy as np
import pytest
import torch
from test_realism_exact import CASES

from lightning_prd.functional.engine.one_pass import knn_pass
from lightning_prd.functional.knn import realism

import oracle

SMALL_TILES = 16 * 1024  # a few dozen rows per tile: most tiles meet full lists
#: minimum tile side for these tests (the planner's default, 512, would give these small sets
#: one block of rows, so no tile would meet a full list)
SMALL_SIDE = "32"


def _capture(monkeypatch):
    """Record every RealismLists made by the passes (their lists once the pass is done)."""
    made = []
    init = realism.RealismLists.__init__

    def spy(self, *args):
        init(self, *args)
        made.append(self)

    monkeypatch.setattr(realism.RealismLists, "__init__", spy)
    return made


@pytest.mark.parametrize("name", sorted(CASES))
def test_realism_over_small_tiles_equals_the_float64_oracle(name, monkeypatch):
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", "0")
    monkeypatch.setenv("LIGHTNING_PRD_TILE", SMALL_SIDE)
    compared = []
    floor_path = realism.RealismLists._update_below_floor

    def spy(self, *args):
        compared.append(1)
        return floor_path(self, *args)

    monkeypatch.setattr(realism.RealismLists, "_update_below_floor", spy)
    real, fake = CASES[name]()
    got = knn_pass(real, fake, realism_k=3, block_bytes=SMALL_TILES).cross.realism
    assert len(compared) > 0  # the floor comparison ran
    expected = oracle.realism(real.double().numpy(), fake.double().numpy(), 3)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_floor_comparison_keeps_the_every_ratio_lists(name, monkeypatch):
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", "0")
    monkeypatch.setenv("LIGHTNING_PRD_TILE", SMALL_SIDE)
    real, fake = CASES[name]()
    made = _capture(monkeypatch)
    fast = knn_pass(real, fake, realism_k=3, block_bytes=SMALL_TILES).cross.realism
    monkeypatch.setattr(realism.RealismLists, "update", realism.RealismLists._update_full)
    every = knn_pass(real, fake, realism_k=3, block_bytes=SMALL_TILES).cross.realism
    half = len(made) // 2  # one accumulator per pass, or per worker thread of a threaded pass
    assert half >= 1 and len(made) == 2 * half
    for a, b in zip(made[:half], made[half:]):
        assert torch.equal(a.listed.vals, b.listed.vals) and torch.equal(a.listed.idx, b.listed.idx)
        assert torch.equal(a.near_best, b.near_best)
    assert torch.equal(fast, every)
