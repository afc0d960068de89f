"""The CUDA code path of the tile loops takes no host synchronisation per tile.

A CUDA host sync comes from a data-dependent size or a value read on the host: ``nonzero``,
``item()`` / ``bool()`` (``_local_scalar_dense``), ``masked_select``, boolean indexing,
``unique``, ``bincount``. The sync-free path is forced on the CPU (``lists.sync_free``) and
those operators are counted with a ``TorchDispatchMode``: the count must not grow with the
number of tiles, and the results must equal the default path's.
"""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from lightning_prd.functional.knn import cross, lists, self_pass
from lightning_prd.functional.knn.points import prepare
from lightning_prd.functional.knn.self_pass import self_radii

SYNCING = {"nonzero", "_local_scalar_dense", "is_nonzero", "masked_select", "bincount", "repeat_interleave"}


class SyncCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.__name__.split(".")[0]
        bool_index = name == "index" and any(
            isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] if len(args) > 1 else [])
        )
        if name in SYNCING or name.startswith("unique") or bool_index:
            self.count += 1
        return func(*args, **(kwargs or {}))


def _points(n=600, dim=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=g)
    return prepare(x, x.double().mean(0), torch.float32)


def _syncs(fn):
    with SyncCounter() as counter:
        out = fn()
    return counter.count, out


def test_self_pass_syncs_do_not_grow_with_the_tiles(monkeypatch):
    points = _points()
    want = self_radii(points, [3, 5], [12], block_bytes=1 << 20)
    monkeypatch.setattr(self_pass, "sync_free", lambda device: True)
    few, got_few = _syncs(lambda: self_radii(points, [3, 5], [12], block_bytes=1 << 20))
    many, got_many = _syncs(lambda: self_radii(points, [3, 5], [12], block_bytes=1 << 14))
    assert few == many  # only the refinement after the loop synchronises
    exact12 = self_radii(points, [12], [])[0][12]
    for got in (got_few, got_many):
        for k in (3, 5):
            assert torch.equal(got[0][k], want[0][k])
        low, high = got[1][12].interval.unbind(1)
        assert bool(((low <= exact12) & (exact12 <= high)).all())
    assert torch.equal(got_few[1][12].interval, want[1][12].interval)  # same tiles: the same interval


def test_default_cpu_path_does_sync_per_tile():
    """The check can fail: the CPU path's shortcuts (``isinf().any()``, ``nonzero``) do sync."""
    points = _points()
    few, _ = _syncs(lambda: self_radii(points, [3, 5], [], block_bytes=1 << 20))
    many, _ = _syncs(lambda: self_radii(points, [3, 5], [], block_bytes=1 << 14))
    assert many > few


def test_cross_nearest_lists_sync_free_equal(monkeypatch):
    """The cross pass's running nearest lists (authenticity, PR-cover) on the sync-free path
    give the same exact nearest neighbours."""
    from lightning_prd.functional._engine import knn_pass

    g = torch.Generator().manual_seed(1)
    real, fake = torch.randn(300, 16, generator=g), 1.2 * torch.randn(250, 16, generator=g)
    want = knn_pass(real, fake, nearest=True, cover=(2, 6), block_bytes=1 << 14).cross
    monkeypatch.setattr(cross, "sync_free", lambda device: True)
    got = knn_pass(real, fake, nearest=True, cover=(2, 6), block_bytes=1 << 14).cross
    for name in (
        "fake_nn_index",
        "fake_nn_sq_dist",
        "real_nn_index",
        "real_nn_sq_dist",
        "fake_covered",
        "real_covered",
    ):
        assert torch.equal(getattr(got, name), getattr(want, name)), name


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_uses_the_sync_free_path():
    assert lists.sync_free(torch.device("cuda")) and not lists.sync_free(torch.device("cpu"))
