"""Tile passes in worker threads (``lightning_prd.functional.knn.threads``): the collectives of a
thread split against direct computations, errors, the thread count kept, and every k-NN score
bit-identical to the pass in one thread (float32 tiles and the bfloat16 screen, ties and copies,
unequal sizes), in one process and under DDP (2 gloo processes x 2 threads)."""

import threading
import time

import pytest
import torch

from lightning_prd.functional import generative_metrics
from lightning_prd.functional.knn import threads
from lightning_prd.functional.knn.lists import merge_topk
from lightning_prd.functional.knn.shard import Shard

from ddp_utils import run_ddp

# every k-NN score of one pass (the Frechet distance is no k-NN score)
SCORES = dict(
    frechet=False,
    alpha_beta=True,
    clipped=dict(k=4),
    symmetric=dict(k=3),
)


def _data(kind: str, n: int = 260, m: int = 190, dim: int = 24):
    g = torch.Generator().manual_seed({"gauss": 1, "copies": 2, "clusters": 3}[kind])
    real = torch.randn(n, dim, generator=g)
    fake = 1.2 * torch.randn(m, dim, generator=g) + 0.1
    if kind == "copies":  # exact copies across and within the sets, and tied distances
        fake[:20] = real[:20]
        real[30:40] = real[40:50]
        fake[50:60] = fake[60:70]
    if kind == "clusters":
        centres = 6 * torch.randn(5, dim, generator=g)
        real = centres[torch.arange(n) % 5] + 0.3 * torch.randn(n, dim, generator=g)
        fake = centres[torch.arange(m) % 3] + 0.3 * torch.randn(m, dim, generator=g)
    return real, fake


def _scores(monkeypatch, workers: str, real, fake, **kw):
    monkeypatch.setenv("LIGHTNING_PRD_TILE_THREADS", workers)
    return generative_metrics(real, fake, **{**SCORES, **kw})


def _same(a, b):
    assert a.keys() == b.keys()
    for key in a:
        x, y = torch.as_tensor(a[key]), torch.as_tensor(b[key])
        assert x.dtype == y.dtype and torch.equal(x, y), key


@pytest.mark.parametrize("screen", ["0", "1"])
@pytest.mark.parametrize("kind", ["gauss", "copies", "clusters"])
def test_threaded_pass_is_bit_identical_to_one_thread(monkeypatch, kind, screen):
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", screen)
    real, fake = _data(kind)
    one = _scores(monkeypatch, "1", real, fake, block_bytes=60000)
    for workers in ("2", "3"):
        _same(one, _scores(monkeypatch, workers, real, fake, block_bytes=60000))


def test_threaded_pass_with_the_default_budget_and_open_balls(monkeypatch):
    real, fake = _data("copies", n=300, m=333)
    one = _scores(monkeypatch, "1", real, fake, ball="open", k_precision_recall=2, k_density_coverage=4)
    _same(one, _scores(monkeypatch, "2", real, fake, ball="open", k_precision_recall=2, k_density_coverage=4))


def test_threaded_pass_keeps_thread_count_and_grad_mode(monkeypatch):
    real, fake = _data("gauss", n=80, m=70, dim=8)
    before = torch.get_num_threads()
    with torch.no_grad():
        _scores(monkeypatch, "2", real, fake)
        assert not torch.is_grad_enabled()
    assert torch.get_num_threads() == before
    assert torch.is_grad_enabled()


def _gathered(workers: int, fn):
    return threads.run(fn, workers)


def test_collectives_equal_direct_computations():
    g = torch.Generator().manual_seed(5)
    parts = [torch.randn(7, generator=g) for _ in range(3)]
    flags = [torch.rand(7, generator=g) > 0.7 for _ in range(3)]
    counts = [torch.randint(0, 9, (7,), generator=g) for _ in range(3)]
    lists = [torch.sort(torch.rand(6, 4, generator=g), 1).values for _ in range(3)]
    index = [torch.randint(0, 100, (6, 4), generator=g) for _ in range(3)]
    rows = torch.randn(11, 2, generator=g)

    def fn(s):
        t = s.tid
        share = s.row_share(11)
        return (
            s.sum(counts[t]),
            s.any(flags[t]),
            s.min(parts[t]),
            s.max(parts[t]),
            s.merge_topk(lists[t], index[t]),
            s.gather_rows(rows[share] * 1.0, 11),
            s.gather_rows(flags[t][:0].new_ones(share.stop - share.start), 11),
        )

    total, anyf, low, high, (v, i), gathered, ones = threads.run(fn, 3)
    assert torch.equal(total, counts[0] + counts[1] + counts[2])
    assert torch.equal(anyf, flags[0] | flags[1] | flags[2])
    assert torch.equal(low, torch.stack(parts).min(0).values)
    assert torch.equal(high, torch.stack(parts).max(0).values)
    want_v, want_i = merge_topk(lists, index, 4)
    assert torch.equal(v, want_v) and torch.equal(i, want_i)
    assert torch.equal(gathered, rows)
    assert ones.dtype == torch.bool and bool(ones.all()) and ones.shape == (11,)


def test_tiles_are_split_once_across_threads():
    seen = []
    lock = threading.Lock()

    def fn(s):
        mine = [c for c in range(17) if s.owns(c)]
        with lock:
            seen.extend(mine)
        return s.sum(torch.tensor(len(mine)))

    assert int(threads.run(fn, 3)) == 17
    assert sorted(seen) == list(range(17))


def test_an_error_in_one_thread_is_raised_and_stops_the_others():
    def fn(s):
        if s.tid == 1:
            raise ValueError("thread 1 failed")
        return s.sum(torch.ones(2))  # would wait for thread 1 forever without the abort

    with pytest.raises(ValueError, match="thread 1 failed"):
        threads.run(fn, 3)
    assert torch.get_num_threads() >= 1


def _workers_alive():
    return [t for t in threading.enumerate() if t.name.startswith(threads.THREAD_PREFIX)]


def test_no_worker_thread_outlives_a_pass(monkeypatch):
    """The workers exist during a pass, are no daemon threads, and are all gone when it returns."""
    during = []
    real_run = threads.run

    def fn(s):
        s.sum(torch.ones(1))  # every thread has started once this returns
        if s.tid == 0:
            during.append([(t.name, t.daemon) for t in _workers_alive()])
        return s.sum(torch.ones(1))  # and none has ended before thread 0 comes here

    assert int(real_run(fn, 3)) == 3
    assert sorted(during[0]) == [(f"{threads.THREAD_PREFIX}1", False), (f"{threads.THREAD_PREFIX}2", False)]
    assert _workers_alive() == []

    passes = []

    def counted(fn, n, shard=None):
        passes.append(n)
        return real_run(lambda s: (during.append(len(_workers_alive())), fn(s))[1], n, shard)

    monkeypatch.setattr(threads, "run", counted)
    real, fake = _data("gauss", n=120, m=100, dim=8)
    _scores(monkeypatch, "3", real, fake, block_bytes=20000)
    assert passes and set(passes) == {3} and max(during[1:]) == 2
    assert _workers_alive() == []


def test_an_error_in_a_tile_joins_every_worker_before_it_is_raised():
    seen = []

    def fn(s):
        seen.append(len(_workers_alive()))
        if s.tid == 1:
            raise ValueError("tile failed")
        if s.tid == 2:
            time.sleep(0.3)  # still inside its tile when the error is raised
        return s.sum(torch.ones(1))

    with pytest.raises(ValueError, match="tile failed"):
        threads.run(fn, 3)
    assert max(seen) >= 1 and _workers_alive() == []


def test_a_thread_that_cannot_start_leaves_no_worker_behind(monkeypatch):
    started = []
    real_start = threading.Thread.start

    def start(self):
        started.append(self)
        if len(started) == 2:
            raise RuntimeError("can't start new thread")
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        threads.run(lambda s: s.sum(torch.ones(1)), 3)
    monkeypatch.undo()
    started[0].join(timeout=10)
    assert not started[0].is_alive()  # the first worker did not wait for the missing one forever


def test_an_interrupt_while_waiting_for_the_workers_still_joins_them(monkeypatch):
    """Ctrl-C while the calling thread waits: the workers stop at their next collective, are
    joined, and the interrupt is raised."""
    go = threading.Event()
    workers = []
    real_join = threading.Thread.join

    def fn(s):
        if s.tid == 0:
            workers.extend(_workers_alive())
            return None  # the calling thread is done and waits for the others
        go.wait(10)
        return s.sum(torch.ones(1))  # thread 0 never comes: only an abort ends this

    def join(self, timeout=None):
        if not go.is_set():
            go.set()
            raise KeyboardInterrupt
        return real_join(self, timeout)

    monkeypatch.setattr(threading.Thread, "join", join)
    with pytest.raises(KeyboardInterrupt):
        threads.run(fn, 3)
    monkeypatch.undo()
    for t in workers:
        t.join(timeout=10)
    assert len(workers) == 2 and not any(t.is_alive() for t in workers)


def test_workers_rule(monkeypatch):
    monkeypatch.delenv("LIGHTNING_PRD_TILE_THREADS", raising=False)
    cpu = torch.device("cpu")
    assert threads.workers(torch.device("meta"), 10**12) == 1
    assert threads.workers(cpu, 10) == 1  # too small to pay for the threads
    want = min(torch.get_num_threads(), threads.MAX_WORKERS)
    assert threads.workers(cpu, 10**12) == (want if want >= 2 else 1)
    monkeypatch.setenv("LIGHTNING_PRD_TILE_THREADS", "3")
    assert threads.workers(cpu, 10) == 3
    assert threads.run(lambda s: threads.workers(cpu, 10**12), 2) == 1  # no nested threads


def _rank_fn(rank, world, real, fake):
    cut_r, cut_f = (0, 150) if rank == 0 else (150, len(real)), (0, 60) if rank == 0 else (60, len(fake))
    from lightning_prd import GenerativeMetrics

    m = GenerativeMetrics(**SCORES, block_bytes=60000)
    m.update(real[slice(*cut_r)], real=True)
    m.update(fake[slice(*cut_f)], real=False)
    return {k: v.clone() for k, v in m.compute().items()}


@pytest.mark.parametrize("screen", ["1"])
def test_threads_under_ddp_equal_one_process(monkeypatch, screen):
    monkeypatch.setenv("LIGHTNING_PRD_SCREEN", screen)
    real, fake = _data("copies")
    one = _scores(monkeypatch, "1", real, fake, block_bytes=60000)
    monkeypatch.setenv("LIGHTNING_PRD_TILE_THREADS", "2")  # each rank: 2 threads, a split of 4
    for result in run_ddp(_rank_fn, real, fake):
        common = sorted(set(one) & set(result))
        assert {"precision", "recall", "density", "coverage", "clipped_coverage", "sym_recall"} <= set(common)
        _same({k: one[k] for k in common}, {k: result[k] for k in common})


def test_shard_interface_is_complete():
    """Every collective of the process-group shard has its thread form."""
    for name in ("any", "sum", "min", "max", "gather_rows", "merge_topk"):
        assert getattr(threads.ThreadShard, name) is not getattr(Shard, name), name
