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

from lightning_prd.functional.engine.one_pass import knn_pass
from lightning_prd.functional.knn import cross, deferred, lists, self_pass, tiling
from lightning_prd.functional.knn.points import prepare
from lightning_prd.functional.knn.self_pass import self_radii
from lightning_prd.functional.knn.shard import Shard

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


@pytest.mark.parametrize("static", [True, False])
# the tiles flag 17, 9 and 9 entries: the log overflows in the first tile, in the third, is exactly full, has room
@pytest.mark.parametrize("size", [5, 30, 35, 1000])
def test_pair_log_lists_flagged_entries_in_order(static, size):
    g = torch.Generator().manual_seed(4)
    tiles = [(0, 0, (7, 9)), (0, 9, (7, 5)), (7, 0, (3, 14))]  # (first row, first col, shape)
    log, want = deferred.PairLog(size, torch.device("cpu")), []
    log._static = static  # nonzero_static, or the prefix sum of devices without it
    for i0, j0, shape in tiles:
        flags = torch.randint(0, 8, shape, generator=g, dtype=torch.int32) * (torch.rand(shape, generator=g) < 0.3)
        log.add(flags, i0, j0)
        r, c = (flags != 0).nonzero(as_tuple=True)  # row-major, as the log keeps them
        want += [(i0 + int(a), j0 + int(b), int(flags[a, b])) for a, b in zip(r, c)]
    got = log.pairs()
    if len(want) > size:
        assert got is None and int(log.count) == len(want)
    else:
        assert [tuple(t) for t in torch.stack(got, 1).tolist()] == want


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


def _tied_sets(seed=0):
    """Integer features (many pairs exactly on a ball's edge), near-copies and exact copies:
    every question of the cross pass has ambiguous pairs."""
    g = torch.Generator().manual_seed(seed)
    real = torch.randint(0, 3, (300, 6), generator=g).float()
    fake = torch.randint(0, 3, (250, 6), generator=g).float()
    fake[:40] = real[:40] + 1e-4 * torch.randn(40, 6, generator=g)
    fake[40:60] = real[60:80]
    return real, fake


FAKE_VALUES = torch.rand(250, generator=torch.Generator().manual_seed(3), dtype=torch.float64)


def _cross(block_bytes, ball="closed", shard=None, sets=None):
    """Every reduction of the cross pass at once."""
    real, fake = sets if sets is not None else _tied_sets()
    return knn_pass(
        real,
        fake,
        member_ks=[3, 5],
        recall_ks=[3, 5],
        realism_k=3,
        nearest=True,
        fake_values=FAKE_VALUES[: len(fake)].to(fake.device),
        value_ks=[3, 4],
        cover=(2, 6),
        soft=(4, 1.2, False),
        block_bytes=block_bytes,
        ball=ball,
        shard=shard,
    ).cross


def _fields(res):
    """A cross result as a dict of its fields."""
    return {name: getattr(res, name) for name in res.__dataclass_fields__}


def _plain(value):
    """Dataclasses as dicts of their fields, all the way down (a result crosses process boundaries)."""
    if hasattr(value, "__dataclass_fields__"):
        value = _fields(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value


def _assert_same(got, want, name="cross"):
    """Equal bit for bit: tensors, and dicts, tuples and dataclasses of them (``reduced`` too)."""
    if hasattr(got, "__dataclass_fields__"):
        got, want = _fields(got), _fields(want)
    if isinstance(got, dict):
        assert got.keys() == want.keys(), name
        for k in got:
            _assert_same(got[k], want[k], f"{name}.{k}")
    elif isinstance(got, (tuple, list)):
        assert len(got) == len(want), name
        for i, (a, b) in enumerate(zip(got, want)):
            _assert_same(a, b, f"{name}[{i}]")
    elif got is None:
        assert want is None, name
    else:
        assert torch.equal(got, want), name


def _loop_syncs(monkeypatch):
    """Count the synchronising operators while the cross pass's tile loop runs (between its
    first tile and the end of the tiles), summed over the calls."""
    counter = SyncCounter()
    counts = []
    real_tiles = tiling.tiles

    def counted(*args, **kwargs):
        with counter:
            yield from real_tiles(*args, **kwargs)
        counts.append(counter.count)
        counter.count = 0

    monkeypatch.setattr(cross.tiling, "tiles", counted)
    return counts


@pytest.mark.parametrize("ball", ["closed", "open"])
def test_cross_pass_loop_takes_no_sync(monkeypatch, ball):
    """Precision, recall, density, coverage, beta-recall's minima, realism, nearest lists,
    PR-cover and soft products: no synchronising operator in the tile loop, however many
    tiles, and the results of the listing path (the CPU's) exactly."""
    want = _cross(1 << 14, ball)
    monkeypatch.setattr(cross, "sync_free", lambda device: True)
    monkeypatch.setattr(self_pass, "sync_free", lambda device: True)
    flags = []
    settle = deferred.DeferredDecisions.settle

    def spy(self):
        flags.append(self.log.flags[: int(self.log.count)].clone())
        return settle(self)

    monkeypatch.setattr(deferred.DeferredDecisions, "settle", spy)
    counts = _loop_syncs(monkeypatch)
    for block_bytes in (1 << 20, 1 << 14):
        _assert_same(_cross(block_bytes, ball), want)
    assert counts == [0, 0]
    # every question had ambiguous pairs: 3 ball kinds, 2 recall ks, realism's near pairs, copies
    for logged in flags:
        assert logged.numel() > 0
        for bit in range(7):
            assert bool(((logged >> bit) & 1).any()), bit


def test_cross_listing_path_does_sync_in_the_loop(monkeypatch):
    """The check can fail: the listing path lists each tile's pairs with ``nonzero``."""
    counts = _loop_syncs(monkeypatch)
    _cross(1 << 14)
    assert counts[0] > 0


def test_overflowing_log_runs_the_listing_path(monkeypatch):
    want = _cross(1 << 14)
    monkeypatch.setattr(cross, "sync_free", lambda device: True)
    monkeypatch.setattr(deferred, "capacity", lambda n, m: 16)
    calls = []
    real_reduce = cross._reduce

    def spy(*args, **kwargs):
        calls.append(args[5])  # no_sync: the deferred path
        return real_reduce(*args, **kwargs)

    monkeypatch.setattr(cross, "_reduce", spy)
    _assert_same(_cross(1 << 14), want)
    assert calls == [True, False]  # the deferred pass, then the rerun on the listing path


def _sharded_rank(rank, world):
    # rank 0's log overflows, rank 1's does not: both must run the listing path again
    cross.sync_free = lambda device: True
    self_pass.sync_free = lambda device: True
    if rank == 0:
        deferred.capacity = lambda n, m: 16
    reruns, first = [], cross._reduce

    def spy(*args, **kwargs):
        if not args[5]:  # no_sync False: a run on the listing path
            reruns.append(False)
        return first(*args, **kwargs)

    cross._reduce = spy
    tied = _plain(_cross(1 << 14, shard=Shard(rank, world)))
    tied_reruns = list(reruns)
    gaussian = _plain(_cross(1 << 14, shard=Shard(rank, world), sets=_gaussian_sets()))
    return (tied, gaussian), (tied_reruns, reruns[len(tied_reruns) :])


def _gaussian_sets():
    g = torch.Generator().manual_seed(5)
    return torch.randn(200, 8, generator=g), 1.1 * torch.randn(180, 8, generator=g) + 0.1


def test_sharded_deferred_pass_equals_one_process():
    """2 gloo ranks on the deferred path, one with an overflowing log, equal one listing process."""
    from ddp_utils import run_ddp

    want = (_cross(1 << 14), _cross(1 << 14, sets=_gaussian_sets()))
    for got, (tied_reruns, gaussian_reruns) in run_ddp(_sharded_rank):
        for g, w in zip(got, want):
            _assert_same(g, _plain(w))
        assert tied_reruns == [False]  # both ranks ran the listing path again
        assert gaussian_reruns == []  # no log overflowed: the deferred results stand


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_uses_the_sync_free_path():
    assert lists.sync_free(torch.device("cuda")) and not lists.sync_free(torch.device("cpu"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("sets", ["tied", "gaussian"])
def test_cuda_cross_pass_equals_the_cpu_listing_path(monkeypatch, sets):
    """On a GPU: no synchronising operator in the cross pass's tile loop, and every reduction
    equal to the CPU's."""
    real, fake = _tied_sets() if sets == "tied" else _gaussian_sets()
    want = _cross(1 << 16, sets=(real, fake))
    counts = _loop_syncs(monkeypatch)
    got = _cross(1 << 16, sets=(real.cuda(), fake.cuda()))
    assert counts == [0]
    _assert_same({k: _to_cpu(v) for k, v in _fields(got).items()}, want)


def _to_cpu(value):
    if hasattr(value, "__dataclass_fields__"):
        return type(value)(**_to_cpu(_fields(value)))
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_to_cpu(v) for v in value)
    return value.cpu() if value is not None else None
