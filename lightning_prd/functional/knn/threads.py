"""Tile passes in worker threads: one coarse parallel loop, single-threaded work inside it.

Stage: beside :mod:`.shard` (may call :mod:`.shard`, :mod:`.lists`, :mod:`.workspace`). A pass over tiles runs
many tile-sized operations (a GEMM, then comparisons, ``nonzero``, ``topk``, merges). With
PyTorch's intra-op threads, each of them is a parallel region that ends in a barrier: when
another process holds one of the cores (data-loader workers, another rank, another job), the
thread that waits at the barrier spins for the one the OS has descheduled, and the pass runs
several times slower than on a quiet machine.

Here the pass runs in ``w`` threads instead (:func:`run`), each computing its own share of the
tiles with one intra-op thread: no barrier inside a tile. The share is a :class:`ThreadShard`,
the :class:`.shard.Shard` interface of a DDP split with the threads of this process as its
ranks: each thread takes the next tile no thread has taken yet (a thread the OS has
descheduled leaves its tiles to the others), keeps its own accumulators and running lists, and
they are combined by the same collectives (any, sum, minimum, maximum, top-k merge,
row gather), here in memory, with a blocking barrier (a waiting thread sleeps and frees its
core). Under DDP the threads of a rank form the ranks ``rank * w .. rank * w + w - 1`` of a
larger split: the first thread combines its threads' values and runs the process group's
collective for them.

The results do not depend on the split: every value the engine returns is the float64 one
of the pairs it decides (see :mod:`.refine`, :mod:`.listing`, :mod:`.soft`), so a threaded pass
returns the same bits as one thread (``tests/test_knn_threads.py``). Passes that sum kernel
values in float32 tiles (:mod:`.kernel`) and CUDA passes stay in the calling thread.

``LIGHTNING_PRD_TILE_THREADS=1`` runs every pass in the calling thread with PyTorch's own
threads; ``=N`` asks for ``N`` worker threads (for tests and benchmarks).

Example:
    >>> import torch
    >>> def pass_(shard):  # each thread sums its own tiles, then the shares are combined
    ...     return shard.sum(torch.tensor([float(c) for c in range(10) if shard.owns(c)]).sum())
    >>> run(pass_, 2).item()
    45.0
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

import torch
from torch import Tensor

from lightning_prd.functional.knn.lists import merge_topk
from lightning_prd.functional.knn.shard import Shard, pad_rows
from lightning_prd.functional.knn.workspace import current, worker_slot

#: At most this many worker threads (each Python-level tile step holds the interpreter lock
#: for a few microseconds; more threads than this would queue on it).
MAX_WORKERS = 8
#: Passes of fewer multiply-adds than this (rows x columns x dimension) run in the calling
#: thread: starting threads costs more than the pass.
MIN_WORK = 2**24
#: Stages of :func:`each` touching fewer elements than this run in the calling thread.
MIN_ELEMENTS = 2**20
#: The name of every worker thread of :func:`run` starts with this (then the thread's number).
THREAD_PREFIX = "lightning_prd-knn-"

T = TypeVar("T")

_state = threading.local()


def _requested() -> Optional[int]:
    """``LIGHTNING_PRD_TILE_THREADS`` as a positive integer, or None when unset or not one."""
    value = os.environ.get("LIGHTNING_PRD_TILE_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def inside_worker() -> bool:
    """True in a thread of a running :func:`run` (a nested pass then stays in that thread)."""
    return bool(getattr(_state, "inside", False))


def workers(device: torch.device, work: int) -> int:
    """Worker threads for a CPU pass of ``work`` multiply-adds: PyTorch's intra-op thread count
    (at most :data:`MAX_WORKERS`), or 1 (run in the calling thread) on CUDA, inside a worker, for
    a pass below :data:`MIN_WORK`, or with one intra-op thread. ``LIGHTNING_PRD_TILE_THREADS``
    overrides the count and the size rule."""
    if device.type != "cpu" or inside_worker():
        return 1
    asked = _requested()
    if asked is not None:
        return asked
    threads = torch.get_num_threads()
    if threads < 2 or work < MIN_WORK:
        return 1
    return min(threads, MAX_WORKERS)


class _Exchange:
    """The meeting point of ``n`` threads' collectives: each thread leaves its value in its slot,
    the first thread combines them, every thread reads the result."""

    def __init__(self, n: int) -> None:
        self.barrier = threading.Barrier(n)
        self.slots: List[Any] = [None] * n
        self.result: Any = None
        self.lock = threading.Lock()
        self.owners: Dict[int, int] = {}

    def claim(self, number: int, tid: int) -> bool:
        """True when thread ``tid`` computes tile ``number``: the first thread to ask for a tile
        gets it (and keeps it for every later loop over the same numbers in this run)."""
        with self.lock:
            return self.owners.setdefault(number, tid) == tid

    def combine(self, tid: int, value: Any, fn: Callable[[List[Any]], Any]) -> Any:
        self.slots[tid] = value
        self.barrier.wait()
        if tid == 0:
            self.result = fn(self.slots)
        self.barrier.wait()  # a faster thread's next value goes to its slot, not to the result
        out = self.result
        return out if tid == 0 else _copy(out)


def _copy(value: Any) -> Any:
    """A private copy of a collective's result (each thread may write into its own)."""
    if isinstance(value, Tensor):
        return value.clone()
    if isinstance(value, tuple):
        return tuple(_copy(v) for v in value)
    return value


@dataclass
class ThreadShard(Shard):
    """Thread ``tid`` of ``threads`` of this process, as rank ``parent.rank * threads + tid`` of a
    split of ``parent.world * threads`` (``parent``: the process group's :class:`.shard.Shard`, or
    None for one process). Collectives combine the threads in memory; the first thread then runs the
    parent's collective."""

    tid: int = 0
    threads: int = 1
    parent: Optional[Shard] = None
    exchange: Optional[_Exchange] = field(default=None, repr=False)

    def owns(self, tile_number: int) -> bool:
        """This process's tiles (``c % parent.world == parent.rank``) go to whichever of its
        threads asks first: a thread the OS has descheduled leaves its next tiles to the others."""
        if self.parent is not None and not self.parent.owns(tile_number):
            return False
        if self.exchange is None:
            return super().owns(tile_number)
        return self.exchange.claim(tile_number, self.tid)

    def _all(self, value: Any, fn: Callable[[List[Any]], Any]) -> Any:
        if self.exchange is None:
            raise RuntimeError("a ThreadShard's collectives need the exchange of its threads")
        return self.exchange.combine(self.tid, value, fn)

    def _elementwise(self, t: Tensor, op: Callable[[Tensor, Tensor], Tensor], parent_op: str) -> Tensor:
        def fn(parts: Sequence[Tensor]) -> Tensor:
            out = parts[0].clone()
            for p in parts[1:]:
                out = op(out, p)
            return getattr(self.parent, parent_op)(out) if self.parent is not None else out

        return self._all(t, fn)

    def any(self, t: Tensor) -> Tensor:
        return self._elementwise(t, torch.logical_or if t.dtype == torch.bool else torch.maximum, "any")

    def sum(self, t: Tensor) -> Tensor:
        return self._elementwise(t, torch.add, "sum")

    def min(self, t: Tensor) -> Tensor:
        return self._elementwise(t, torch.minimum, "min")

    def max(self, t: Tensor) -> Tensor:
        return self._elementwise(t, torch.maximum, "max")

    def gather_rows(self, part: Tensor, n: int) -> Tensor:
        size = -(-n // self.world)

        def fn(parts: Sequence[Tensor]) -> Tensor:
            mine = torch.cat([pad_rows(p, size) for p in parts])  # this process's threads' rows
            if self.parent is None:
                return mine[:n]
            return self.parent.gather_rows(mine, self.parent.world * len(parts) * size)[:n]

        return self._all(part, fn)

    def merge_topk(self, vals: Tensor, idx: Tensor) -> Tuple[Tensor, Tensor]:
        def fn(parts: Sequence[Tuple[Tensor, Tensor]]) -> Tuple[Tensor, Tensor]:
            v, i = merge_topk([p[0] for p in parts], [p[1] for p in parts], vals.shape[1])
            return self.parent.merge_topk(v, i) if self.parent is not None else (v, i)

        return self._all((vals, idx), fn)


def run(fn: Callable[[ThreadShard], T], n: int, shard: Optional[Shard] = None) -> T:
    """``fn(thread_shard)`` in ``n`` threads (the calling thread is the first), each with one
    intra-op thread (or an equal part of PyTorch's count when it exceeds ``n``), and the first
    thread's result (every thread ends with the same one). ``shard``: this process's share of a
    process group, or None. An exception in any thread stops the others at their next
    collective and is raised here. The intra-op thread count and the grad mode of the calling
    thread are kept; each thread has its own slot of the caller's :mod:`.workspace`.

    No worker thread outlives the call: every started thread is joined before it returns or
    raises, also when a thread cannot be started or the calling thread is interrupted
    (``KeyboardInterrupt``) while it waits for them. The workers are named
    ``lightning_prd-knn-<tid>`` and are not daemon threads, so even a worker that outlived its
    pass would be waited for by the interpreter's exit instead of being stopped inside a torch
    operation during the interpreter's shutdown."""
    saved, grad = torch.get_num_threads(), torch.is_grad_enabled()
    intra = max(1, saved // n)
    exchange = _Exchange(n)
    world = n * (shard.world if shard is not None else 1)
    base = n * (shard.rank if shard is not None else 0)
    group = shard.group if shard is not None else None
    results: List[Any] = [None] * n
    errors: List[Optional[BaseException]] = [None] * n

    space = current()  # the caller's pass workspace: each thread gets its own slot of it

    def work(tid: int) -> None:
        _state.inside = True
        try:
            torch.set_num_threads(intra)
            with torch.set_grad_enabled(grad), worker_slot(space, tid):
                results[tid] = fn(ThreadShard(base + tid, world, group, True, tid, n, shard, exchange))
        except BaseException as e:  # noqa: BLE001 - re-raised by the calling thread
            errors[tid] = e
            exchange.barrier.abort()
        finally:
            _state.inside = False

    started: List[threading.Thread] = []
    try:
        for tid in range(1, n):
            t = threading.Thread(target=work, args=(tid,), name=f"{THREAD_PREFIX}{tid}", daemon=False)
            t.start()
            started.append(t)
        work(0)
    except BaseException:
        exchange.barrier.abort()  # the started threads stop at their next collective
        raise
    finally:
        try:
            _join_all(started, exchange)
        finally:
            torch.set_num_threads(saved)
    raised = [e for e in errors if e is not None]
    if raised:
        first = next((e for e in raised if not isinstance(e, threading.BrokenBarrierError)), raised[0])
        raise first
    return results[0]


def _join_all(started: Sequence[threading.Thread], exchange: _Exchange) -> None:
    """Join every started worker. An interrupt while waiting (``KeyboardInterrupt``) stops the
    workers at their next collective, the waiting goes on, and the interrupt is raised after."""
    interrupted: Optional[BaseException] = None
    for t in started:
        while t.is_alive():
            try:
                t.join()
            except BaseException as e:  # noqa: BLE001 - raised once every worker has ended
                interrupted = interrupted or e
                exchange.barrier.abort()
    if interrupted is not None:
        raise interrupted


def each(fn: Callable[[int], T], count: int, device: torch.device, elements: int) -> List[T]:
    """``[fn(0), ..., fn(count - 1)]`` for the independent chunks of a stage outside the tiles (rows
    of a set, blocks of columns), computed in worker threads with one intra-op thread each, every
    thread taking the next chunk not yet taken: the stage's small operations end in no barrier.
    In the calling thread (with PyTorch's threads) where :func:`workers` gives 1 or the stage touches
    fewer than :data:`MIN_ELEMENTS` elements. ``fn`` must not depend on which thread runs it (each
    chunk writes its own rows); the results come in chunk order.

    Example:
        >>> each(lambda i: i * i, 4, torch.device("cpu"), 2**22)
        [0, 1, 4, 9]
    """
    n = min(count, workers(device, MIN_WORK if elements >= MIN_ELEMENTS else 0))
    if n <= 1:
        return [fn(i) for i in range(count)]
    out: List[Any] = [None] * count

    def take(shard: ThreadShard) -> None:
        for i in range(count):
            if shard.owns(i):
                out[i] = fn(i)

    run(take, n)
    return out


def each_rows(
    fn: Callable[[slice], None], rows: int, dim: int, device: torch.device, values: int, least: int = 1
) -> None:
    """``fn(chunk)`` for the chunks of rows of an ``[rows, dim]`` set, about ``values`` elements each (at
    least ``least`` rows), through :func:`each`: ``fn`` writes the chunk's own rows of its outputs.

    Example:
        >>> out = torch.zeros(6)
        >>> each_rows(lambda r: out[r].fill_(r.start), 6, 4, torch.device("cpu"), 8)
        >>> out.tolist()
        [0.0, 0.0, 2.0, 2.0, 4.0, 4.0]
    """
    chunk = max(least, values // max(1, dim))
    each(lambda c: fn(slice(c * chunk, (c + 1) * chunk)), -(-rows // chunk), device, rows * dim)
