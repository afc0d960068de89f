"""Batch sizes: the generated samples split into global batches, the extraction batch of an extractor, and
the halving of a batch size that runs out of memory.

**Generated batches.** The ``num_samples`` generated samples of an evaluation are cut into global batches of
``batch_size`` rows, in order: batch ``b`` holds samples ``b·B .. min((b+1)·B, N) − 1`` and is drawn by one
generator call under its own seed, :func:`batch_seed` (``seed`` itself for batch 0). Rank ``r`` of ``W``
draws a contiguous run of whole batches (:func:`rank_batches`: the runs differ by at most one batch, so
every rank makes the same number of generator calls, ±1), and the features gathered in rank order are the
global samples in order. The noise of sample ``i`` therefore depends on ``seed``, ``batch_size`` and ``i``
only, not on the number of processes: a 1-process and a W-process run score the same generated set.

**Extraction batches.** An extractor embeds at most :func:`extraction_batch` rows per call: the
callback's ``extract_batch_size`` when given, else the extractor's ``default_batch_size`` attribute
(each built-in network declares one that fits a 24 GB card beside a model in training), else
:data:`CUSTOM_BATCH` for another module, else each chunk as it comes (no extractor, the identity, a
function: a batch of generated samples, a chunk of the real set as read).

**Out of memory.** A :class:`Halving` batch size that meets ``torch.OutOfMemoryError`` halves (down to 1;
a size of None: half the rows of the call that failed) and the whole step is run again from its start
(:func:`retry_halving`), so the result equals that of a run at the smaller size from the start; one
warning names the size that worked, which is kept for later calls.

Example:
    >>> [list(rank_batches(5, 2, r, 2)) for r in range(2)]  # 3 batches of 2, 2, 1 rows
    [[0, 1], [2]]
    >>> [rows_of(5, 2, r, 2) for r in range(2)]
    [range(0, 4), range(4, 5)]
    >>> batch_seed(7, 0)
    7
"""

from __future__ import annotations

import gc
import warnings
from typing import Any, Callable, Iterator, Optional, Sequence, Tuple, TypeVar

import torch
import torch.distributed as dist
from torch import nn

from lightning_prd.callback.rng import stream_seed
from lightning_prd.callback.sharding import rank_shard
from lightning_prd.features.base import Identity

T = TypeVar("T")

#: stream of the generated samples' per-batch seeds (apart from the real side's and ``compute``'s)
FAKE_STREAM = 3
#: extraction batch of a module that declares no ``default_batch_size``
CUSTOM_BATCH = 64
#: a size of None (each chunk as it comes) in the ranks' all-reduce: larger than any batch
_NONE = 2**62
#: who warns about a halved batch size
OWNER = "PRDCallback"
#: what running out of memory raises (``torch.cuda.OutOfMemoryError`` on torch < 2.5)
OutOfMemory: Any = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError


def num_batches(num_samples: int, batch_size: int) -> int:
    """Global batches of ``batch_size`` rows in ``num_samples`` (the last may be short)."""
    return -(-num_samples // batch_size)


def rank_batches(num_samples: int, batch_size: int, rank: int, world: int) -> range:
    """The global batches that rank ``rank`` of ``world`` draws: a contiguous run, in order."""
    return rank_shard(num_batches(num_samples, batch_size), rank, world)


def rows_of(num_samples: int, batch_size: int, rank: int, world: int) -> range:
    """The global sample indices that rank ``rank`` of ``world`` draws (its batches' rows), in order."""
    mine = rank_batches(num_samples, batch_size, rank, world)
    return range(min(mine.start * batch_size, num_samples), min(mine.stop * batch_size, num_samples))


def batch_seed(seed: int, batch: int) -> int:
    """The seed of global batch ``batch``: ``seed`` for batch 0, else ``stream_seed(stream_seed(seed,
    FAKE_STREAM), batch)``."""
    return int(seed) if batch == 0 else stream_seed(stream_seed(seed, FAKE_STREAM), batch)


def generated_batches(num_samples: int, batch_size: int, rank: int, world: int) -> Iterator[Tuple[int, int]]:
    """``(batch index, rows)`` of each global batch rank ``rank`` draws, in order."""
    for b in rank_batches(num_samples, batch_size, rank, world):
        yield b, min(batch_size, num_samples - b * batch_size)


def extraction_batch(extractor: Any, given: Optional[int] = None) -> Optional[int]:
    """Rows per extractor call: ``given``; else the extractor's ``default_batch_size``; else :data:`CUSTOM_BATCH`
    for a module (but :class:`~lightning_prd.features.Identity`); else None: each chunk as it comes (a batch of
    generated samples, a chunk of the real set), for no extractor, the identity or a plain function, whose cost
    is its own (set ``extract_batch_size`` for a network inside one)."""
    if given is not None:
        return given
    declared = getattr(extractor, "default_batch_size", None)
    if isinstance(declared, int) and not isinstance(declared, bool) and declared > 0:
        return declared
    if isinstance(extractor, nn.Module) and not isinstance(extractor, Identity):
        return CUSTOM_BATCH
    return None


class Halving:
    """A batch size (``size``; None: each chunk as it comes) for ``what`` (e.g. ``"sampling"``) that halves
    when it runs out of memory."""

    def __init__(self, size: Optional[int], what: str) -> None:
        self.size, self.what = size, what
        self._failed: Optional[int] = None  # the largest size that ran out of memory since the last warning
        self._pending = False

    def run(self, rows: int, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on ``rows`` rows; out of memory on more than one row halves :attr:`size` (``rows``
        when None) and marks a retry (the error goes on to :func:`retry_halving`, which runs the step again);
        on one row it passes through."""
        try:
            return fn(*args)
        except OutOfMemory:
            if rows <= 1:
                raise
            current = rows if self.size is None else self.size
            if self._failed is None:
                self._failed = current
            self.size = max(1, current // 2)
            self._pending = True
            raise

    def warn(self, owner: str) -> None:
        """One warning per halving that ended in a size that worked."""
        if self._failed is None:
            return
        warnings.warn(
            f"{owner}: out of memory in {self.what} at batch size {self._failed}; batch size {self.size} worked "
            f"and is kept for later evaluations (set it from the start to skip the retries)",
            RuntimeWarning,
            stacklevel=3,
        )
        self._failed = None


def _free(device: Optional[torch.device]) -> None:
    gc.collect()
    if device is not None and device.type == "cuda":
        torch.cuda.empty_cache()


def retry_halving(
    step: Callable[[], T], sizes: Sequence[Halving], owner: str, device: Optional[torch.device] = None
) -> T:
    """``step()``, run again from its start after each out-of-memory error that halved one of ``sizes``
    (:meth:`Halving.run` inside ``step``); then one warning per halved size. An error that halved none (a
    size already 1, or memory run out elsewhere) passes through unchanged."""
    while True:
        try:
            out = step()
        except OutOfMemory:
            halved = [s for s in sizes if s._pending]
            if not halved:
                raise
            for s in halved:
                s._pending = False
            _free(device)
            continue
        for s in sizes:
            s.warn(owner)
        return out


def agree_on_sizes(sizes: Sequence[Halving], device: torch.device, world: int) -> bool:
    """Under DDP, whether every rank holds the same :attr:`Halving.size` of each of ``sizes`` (one all-reduce
    MIN of every ``(size, −size)`` on ``device``); if not, each becomes the smallest over the ranks and the
    caller runs its step again. Every rank gets the same answer, so all make the same number of calls. True
    without a process group."""
    if world < 2 or not (dist.is_available() and dist.is_initialized()):
        return True
    held = [_NONE if s.size is None else s.size for s in sizes]
    both = torch.tensor([v for size in held for v in (size, -size)], dtype=torch.int64, device=device)
    dist.all_reduce(both, op=dist.ReduceOp.MIN)
    agreed = True
    for i, s in enumerate(sizes):
        smallest, largest = int(both[2 * i]), -int(both[2 * i + 1])
        s.size = None if smallest == _NONE else smallest
        agreed = agreed and smallest == largest
    return agreed
