"""The duplicates ``DistributedSampler`` adds to pad ranks, and how to leave them out.

``torch.utils.data.DistributedSampler`` (``drop_last=False``, its default, and what Lightning
injects) gives every rank ``ceil(N / W)`` indices: when ``W`` does not divide ``N`` it appends
the first ``W·ceil(N/W) − N`` (at most ``W − 1``) indices again, and rank ``r`` takes positions
``r, r + W, r + 2W, …`` of that padded list. Gathered features then hold up to ``W − 1`` real
samples twice, and the k-NN scores change:

* a duplicated real sample has a neighbour at distance 0, so its ``NND_k`` is its
  ``(k−1)``-th distinct neighbour's distance: its ball shrinks;
* its copy also takes a slot in the k-NN lists of nearby samples, shrinking their balls too;
* recall and coverage count it twice in their denominators, density weighs it twice.

With ``W − 1`` duplicates among ``N`` samples the effect is small (changes of order ``W·k/N``)
but it is not zero and it depends on the world size, so runs on different numbers of GPUs
disagree. ``drop_last=True`` removes the padding but drops up to ``W − 1`` samples instead.

:func:`unpadded_count` gives the number of leading rows of a rank's shard that are genuine
samples; ``PRDCallback`` uses it for a real DataLoader with a ``DistributedSampler``, and users
of the Metric classes can keep ``features[:unpadded_count(sampler) - seen]``.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sized, cast

from torch.utils.data import DistributedSampler, RandomSampler, SubsetRandomSampler, WeightedRandomSampler

from lightning_prd.functional.engine.inputs import check_positive_int


def _samplers(loader: Any) -> List[Any]:
    """The samplers a DataLoader draws indices from: ``sampler`` and its batch sampler's ``sampler``."""
    found = [getattr(loader, "sampler", None), getattr(getattr(loader, "batch_sampler", None), "sampler", None)]
    return [s for s in found if s is not None]


def distributed_sampler_of(loader: Any) -> Optional[DistributedSampler]:
    """The ``DistributedSampler`` a DataLoader draws its indices from, or ``None``."""
    return next((s for s in _samplers(loader) if isinstance(s, DistributedSampler)), None)


def random_sampler_of(loader: Any) -> Optional[Any]:
    """A sampler of the DataLoader that draws a random order or subset (``shuffle=True``, a
    ``SubsetRandomSampler``, a ``WeightedRandomSampler``), or ``None``."""
    kinds = (RandomSampler, SubsetRandomSampler, WeightedRandomSampler)
    return next((s for s in _samplers(loader) if isinstance(s, kinds)), None)


def unpadded_count(sampler: DistributedSampler, limit: Optional[int] = None) -> int:
    r"""Rows of this rank's ``DistributedSampler`` shard that are not padding duplicates.

    The padded index list has ``total_size = num_replicas · num_samples`` entries, of which the
    first ``N = len(dataset)`` are the genuine (possibly shuffled) indices; rank ``r`` gets
    positions ``r + jW``, so its genuine rows come first and number

    .. math:: |\{j \ge 0 : r + jW < N'\}| = \max\big(0, \lceil (N' - r) / W \rceil\big),
        \qquad N' = \min(N, \text{limit}, \text{total\_size}),

    (``total_size < N`` with ``drop_last=True``, which pads nothing). Summed over the ranks this
    is exactly ``N'``, and the kept rows of all ranks are distinct. ``limit`` (e.g. the callback's
    ``num_real``) caps the samples taken over all ranks.

    Args:
        sampler: the rank's ``torch.utils.data.DistributedSampler``.
        limit: use at most this many samples over all ranks; default all.

    Example:
        Ten samples on three ranks: the sampler pads two duplicates (indices 0 and 1 again).

        >>> from torch.utils.data import DistributedSampler
        >>> shards = [list(DistributedSampler(range(10), num_replicas=3, rank=r, shuffle=False)) for r in range(3)]
        >>> shards
        [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
        >>> [unpadded_count(DistributedSampler(range(10), num_replicas=3, rank=r)) for r in range(3)]
        [4, 3, 3]
    """
    if not isinstance(sampler, DistributedSampler):
        raise TypeError(
            f"Expected argument `sampler` to be a torch DistributedSampler, but got {type(sampler).__name__}"
        )
    genuine = min(len(cast(Sized, sampler.dataset)), sampler.total_size)  # DistributedSampler requires a sized dataset
    if limit is not None:
        genuine = min(genuine, check_positive_int(limit, "limit"))
    world, rank = sampler.num_replicas, sampler.rank
    return max(0, -(-(genuine - rank) // world))
