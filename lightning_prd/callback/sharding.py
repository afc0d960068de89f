"""Which real rows each rank embeds: contiguous shards of a tensor or a DataLoader, the rows of a
``DistributedSampler`` without its padding duplicates, and the check that every rank's sampler matches
its process.

Rank ``r`` of ``W`` reads the block :func:`rank_shard` gives it, so the gathered real set of a DDP run
is the real set of a single-process run, in the same order. From a DataLoader over a map-style dataset
(with ``__len__``) read in order, a rank loads only its block (a ``Subset`` with the loader's batch size,
collate function and workers); from any other DataLoader it reads the batches up to its block's end.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

import torch.distributed as dist
from torch import Tensor
from torch.utils.data import DataLoader, DistributedSampler, IterableDataset, SequentialSampler, Subset

from lightning_prd.callback.labels import batch_labels
from lightning_prd.features.base import first_tensor
from lightning_prd.functional.knn.collectives import object_device_context
from lightning_prd.samplers import distributed_sampler_of, random_sampler_of, unpadded_count


def rank_shard(total: int, rank: int, world_size: int) -> range:
    """The contiguous block of ``range(total)`` that rank ``rank`` of ``world_size`` handles.

    Blocks differ in size by at most one and, concatenated in rank order (as the metric's
    all-gather does), give back ``range(total)`` in order. The callback splits both the
    generated samples and the real set this way, so a DDP run sees the very sets of a
    single-process run, in the same order (which even order-dependent steps, such as PRD's
    seeded k-means, need to agree).

    Example:
        >>> [list(rank_shard(5, r, 2)) for r in range(2)]
        [[0, 1, 2], [3, 4]]
    """
    base, extra = divmod(total, world_size)
    start = rank * base + min(rank, extra)
    return range(start, start + base + (rank < extra))


def real_chunks(
    real: Any, num_real: Optional[int], batch_size: int, rank: int, world: int, name: str = "real"
) -> Iterator[Tensor]:
    """This rank's rows of a tensor or a DataLoader ``real`` (the first ``num_real`` over all ranks), in
    order, in chunks; errors name the argument ``name``."""
    for x, _ in _rows(real, num_real, batch_size, rank, world, name, labelled=False):
        yield x


def labelled_chunks(
    real: Any, num_real: Optional[int], batch_size: int, rank: int, world: int, name: str = "real"
) -> Iterator[Tuple[Tensor, Tensor]]:
    """:func:`real_chunks` of a DataLoader whose batches are ``(samples, labels, ...)``: ``(x, labels)`` pairs,
    the labels checked (:func:`~lightning_prd.callback.labels.batch_labels`) and cut like the samples."""
    for x, y in _rows(real, num_real, batch_size, rank, world, name, labelled=True):
        assert y is not None  # (labelled=True gives every chunk its labels)
        yield x, y


def _rows(
    real: Any, num_real: Optional[int], batch_size: int, rank: int, world: int, name: str, labelled: bool
) -> Iterator[Tuple[Tensor, Optional[Tensor]]]:
    if isinstance(real, Tensor):
        mine = rank_shard(min(real.shape[0], num_real or real.shape[0]), rank, world)
        for start in range(mine.start, mine.stop, batch_size):
            yield real[start : min(start + batch_size, mine.stop)], None
        return
    sampler = distributed_sampler_of(real)
    if sampler is not None:
        yield from _sampler_chunks(real, num_real, sampler, rank, world, name, labelled)
        return
    shuffler = random_sampler_of(real) if world > 1 else None
    if shuffler is not None:
        raise ValueError(
            f"Expected argument `{name}` to yield the same rows in the same order on every rank, but its DataLoader "
            f"draws them at random ({type(shuffler).__name__}): ranks would embed overlapping blocks, counting "
            "some real samples twice and missing others. Pass `shuffle=False`, or a DataLoader with a "
            "DistributedSampler"
        )
    mine = rank_shard(real_total(real, num_real, name), rank, world)
    own = own_share_loader(real, mine) if world > 1 else None
    if own is not None:
        for i, batch in enumerate(own):
            x, y = _split(batch, name, i, labelled)
            yield x, y
        return
    seen = 0
    for i, batch in enumerate(real):
        if seen >= mine.stop:
            break
        x, y = _split(batch, name, i, labelled)
        lo, hi = max(mine.start - seen, 0), min(mine.stop - seen, x.shape[0])
        if hi > lo:
            yield x[lo:hi], None if y is None else y[lo:hi]
        seen += x.shape[0]


def own_share_loader(real: Any, mine: range) -> Optional[DataLoader]:
    """A DataLoader reading only the rows ``mine`` of ``real``'s dataset, in order, in ``real``'s batches, with
    its collate function and workers; None unless ``real`` is a DataLoader over a map-style dataset with
    ``__len__`` read in order (``SequentialSampler``, a batch size, no ``drop_last``)."""
    if not isinstance(real, DataLoader) or isinstance(real.dataset, IterableDataset):
        return None
    if not isinstance(real.sampler, SequentialSampler) or real.batch_size is None or real.drop_last:
        return None
    try:
        len(real.dataset)  # type: ignore[arg-type]
    except TypeError:
        return None
    extra: Dict[str, Any] = {}
    if real.num_workers > 0:
        extra = {"prefetch_factor": real.prefetch_factor, "persistent_workers": real.persistent_workers}
    return DataLoader(
        Subset(real.dataset, mine),
        batch_size=real.batch_size,
        collate_fn=real.collate_fn,
        num_workers=real.num_workers,
        pin_memory=real.pin_memory,
        timeout=real.timeout,
        worker_init_fn=real.worker_init_fn,
        multiprocessing_context=real.multiprocessing_context,
        generator=real.generator,
        **extra,
    )


def _split(batch: Any, name: str, index: int, labelled: bool) -> Tuple[Tensor, Optional[Tensor]]:
    """The samples of one batch and, when ``labelled``, its checked labels (the batch's second item)."""
    x = first_tensor(batch, f"argument `{name}`")
    return x, batch_labels(batch, x.shape[0], name, index) if labelled else None


def check_samplers_agree(real: Any, rank: int, world: int, name: str = "real") -> None:
    """Under DDP, a DistributedSampler of ``real`` that does not match its process (e.g. ``rank=0``
    hard-coded on every rank) must fail on every rank: a rank raising alone would leave the
    others waiting in the metric's all-gather. One all-gather of ``(num_replicas, rank)`` decides."""
    sampler = distributed_sampler_of(real)
    if sampler is None or world < 2 or not (dist.is_available() and dist.is_initialized()):
        return
    seen: List[Any] = [None] * world
    with object_device_context():
        dist.all_gather_object(seen, (sampler.num_replicas, sampler.rank))
    expected = [(world, r) for r in range(world)]
    if seen != expected:
        raise ValueError(
            f"Expected the DistributedSampler of argument `{name}` on each rank to match its process "
            f"(num_replicas, rank) = {expected}, but the ranks hold {seen}"
        )


def _sampler_chunks(
    real: Iterable[Any],
    num_real: Optional[int],
    sampler: DistributedSampler,
    rank: int,
    world: int,
    name: str = "real",
    labelled: bool = False,
) -> Iterator[Tuple[Tensor, Optional[Tensor]]]:
    """This rank's real rows from a DataLoader with a ``DistributedSampler``: its shard without the
    padding duplicates (:func:`lightning_prd.samplers.unpadded_count`), ``num_real`` over all ranks."""
    if (sampler.num_replicas, sampler.rank) != (world, rank):
        raise ValueError(
            f"Expected the DistributedSampler of argument `{name}` to match this process (num_replicas={world}, "
            f"rank={rank}), but it has num_replicas={sampler.num_replicas}, rank={sampler.rank}"
        )
    keep, seen = unpadded_count(sampler, num_real), 0
    for i, batch in enumerate(real):
        if seen >= keep:
            break
        x, y = _split(batch, name, i, labelled)
        yield x[: keep - seen], None if y is None else y[: keep - seen]
        seen += x.shape[0]


def real_total(real: Iterable[Any], num_real: Optional[int], name: str = "real") -> int:
    """Rows of a real DataLoader: ``num_real`` capped by ``len(dataset)``, or counted in one pass."""
    dataset = getattr(real, "dataset", None)
    try:
        total = len(dataset)  # type: ignore[arg-type]
    except TypeError:
        total = 0
        for batch in real:
            total += first_tensor(batch, f"argument `{name}`").shape[0]
            if num_real is not None and total >= num_real:
                break
    if total == 0:
        raise ValueError(f"Expected argument `{name}` to yield at least one sample, but the DataLoader was empty")
    return min(total, num_real) if num_real is not None else total
