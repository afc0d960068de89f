"""Candidate lists: the bottom stage of the k-NN engine (imports only torch and :mod:`.workspace`).

Every stage that keeps "the ``t`` nearest so far" uses these helpers: per-row lists of
``(value, index)``, merged by one ``topk`` (unsorted while tiles stream in, sorted once
when the pass ends); tiles merged into them; candidate
pairs padded into the list shape; and the tie rule of the whole engine, equal values ordered
by index (``numpy.argmin``'s rule), so no result depends on the tile layout.

Example:
    >>> import torch
    >>> v, i = merge_topk([torch.tensor([[1.0, 3.0]]), torch.tensor([[2.0]])],
    ...                   [torch.tensor([[7, 8]]), torch.tensor([[9]])], 2)
    >>> v.tolist(), i.tolist()
    ([[1.0, 2.0]], [[7, 9]])
"""

from __future__ import annotations

import math
from typing import Sequence, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.knn.workspace import tile_mask


def sync_free(device: torch.device) -> bool:
    """Whether tile loops on ``device`` avoid host synchronisation (CUDA: a ``nonzero`` or a
    ``bool()`` per tile would stall the GPU's queue; on the CPU the data-dependent shortcuts are
    cheaper)."""
    return device.type == "cuda"


def merge_topk(vals: Sequence[Tensor], idx: Sequence[Tensor], t: int, sort: bool = True) -> Tuple[Tensor, Tensor]:
    """Per row, the ``t`` smallest of the concatenated candidate lists, with their indices:
    sorted by value, or in no order when not ``sort`` (several times cheaper for short lists)."""
    all_v, all_i = torch.cat(list(vals), dim=1), torch.cat(list(idx), dim=1)
    top_v, pos = torch.topk(all_v, min(t, all_v.shape[1]), dim=1, largest=False, sorted=sort)
    return top_v, torch.gather(all_i, 1, pos)


def sort_lists(vals: Tensor, idx: Tensor) -> Tuple[Tensor, Tensor]:
    """Running lists sorted by value (the order :func:`merge_tile` does not keep)."""
    vals, order = torch.sort(vals, dim=1)
    return vals, torch.gather(idx, 1, order)


def padded(ent: Tensor, vals: Tensor, idx: Tensor, n: int) -> Tuple[Tensor, Tensor]:
    """Candidate ``(value, index)`` pairs of ``n`` entities, listed entity by entity (``ent``
    non-decreasing), side by side in ``[n, most per entity]`` blocks padded with ``inf`` / 0:
    the shape :func:`merge_topk` merges into running lists."""
    counts = torch.bincount(ent, minlength=n)
    starts = torch.cumsum(counts, 0) - counts
    pos = torch.arange(ent.numel(), device=ent.device) - starts[ent]
    pad_v = torch.full((n, int(counts.max())), math.inf, dtype=vals.dtype, device=vals.device)
    pad_i = torch.zeros(pad_v.shape, dtype=torch.long, device=vals.device)
    pad_v[ent, pos], pad_i[ent, pos] = vals, idx
    return pad_v, pad_i


def smallest_by_value_then_index(vals: Tensor, idx: Tensor, t: int) -> Tuple[Tensor, Tensor]:
    """Per row, the ``t`` smallest ``(value, index)`` pairs in lexicographic order, by two
    ``topk`` calls instead of a full sort: every value below the t-th smallest is taken, and
    the values equal to it are taken by lowest index."""
    kth = torch.topk(vals, t, dim=1, largest=False, sorted=True).values[:, -1:]
    key = torch.where(vals < kth, -1, torch.where(vals == kth, idx, torch.iinfo(torch.int64).max))
    pos = torch.topk(key, t, dim=1, largest=False, sorted=False).indices
    return sort_by_value_then_index(torch.gather(vals, 1, pos), torch.gather(idx, 1, pos))


def sort_by_value_then_index(vals: Tensor, idx: Tensor) -> Tuple[Tensor, Tensor]:
    """Sort each row by value, equal values by index: exact ties go to the lowest index
    (``numpy.argmin``'s rule), whatever the tile order or the block size."""
    order = torch.argsort(idx, dim=1, stable=True)
    vals, idx = torch.gather(vals, 1, order), torch.gather(idx, 1, order)
    order = torch.argsort(vals, dim=1, stable=True)
    return torch.gather(vals, 1, order), torch.gather(idx, 1, order)


def _tile_topk(sq: Tensor, t: int, dim: int) -> Tuple[Tensor, Tensor]:
    """The ``t`` smallest values of a tile along ``dim``, as ``[rows_of_other_dim, t]``."""
    v, i = torch.topk(sq, min(t, sq.shape[dim]), dim=dim, largest=False, sorted=False)
    return (v, i) if dim == 1 else (v.T, i.T)


def _merge_into(vals: Tensor, idx: Tensor, rows: slice, new_v: Tensor, new_i: Tensor, t: int) -> None:
    """Merge candidate lists ``new_v``/``new_i`` into the running lists of ``rows`` (in place, unsorted)."""
    vals[rows], idx[rows] = merge_topk([vals[rows], new_v], [idx[rows], new_i], t, sort=False)


def merge_tile(
    vals: Tensor, idx: Tensor, span: slice, sq: Tensor, dim: int, offset: int, t: int, sync_free: bool = False
) -> None:
    """Merge a tile into the running top-``t`` lists of ``span`` (its rows for ``dim=1``, its
    columns for ``dim=0``); the tile's indices along ``dim`` are shifted by ``offset``.

    Once the lists are full, only tile entries below an entity's current ``t``-th value can
    enter: they are found by one comparison and merged from a small padded block, instead of a
    ``topk`` over the whole tile (along the columns of a wide row-major tile ``topk`` is strided
    and several times slower than the comparison). Entries equal to the ``t``-th value are
    left out; the lists stay approximate tile lists, which the exact stages make exact.
    ``sync_free``: always the ``topk`` (no host synchronisation: for CUDA tile loops).
    """
    thr = vals[span].amax(1)  # the t-th value of each entity (lists are kept unsorted)
    cand = None
    if not sync_free and not bool(torch.isinf(thr).any()):
        below = torch.lt(sq, thr[None, :] if dim == 0 else thr[:, None], out=tile_mask(sq, "lists"))
        cand = below.nonzero(as_tuple=True)
        if cand[0].numel() > sq.numel() // 16:  # many candidates (early tiles): topk is cheaper
            cand = None
    if cand is None:
        v, i = _tile_topk(sq, t, dim)
        _merge_into(vals, idx, span, v, i + offset, t)
        return
    r, c = cand
    if r.numel() == 0:
        return
    ent, other = (c, r) if dim == 0 else (r, c)
    v = sq[r, c]
    if dim == 0:  # nonzero lists entries row by row; group them by column
        order = torch.argsort(ent, stable=True)
        ent, other, v = ent[order], other[order], v[order]
    _merge_into(vals, idx, span, *padded(ent, v, other + offset, thr.numel()), t)


class RunningNearest:
    """Running top-``t`` (tile values) of the other set, for every row of one set: unsorted
    while tiles are merged (:func:`merge_tile`), sorted by :meth:`sort` for the stages after."""

    def __init__(self, n: int, t: int, dtype: torch.dtype, device: torch.device) -> None:
        self.t = t
        self.vals = torch.full((n, t), math.inf, dtype=dtype, device=device)
        self.idx = torch.zeros((n, t), dtype=torch.long, device=device)

    def update(self, rows: slice, sq: Tensor, dim: int, offset: int, sync_free: bool = False) -> None:
        merge_tile(self.vals, self.idx, rows, sq, dim, offset, self.t, sync_free)

    def sort(self) -> None:
        """Sort the lists by value (in place of the attributes)."""
        self.vals, self.idx = sort_lists(self.vals, self.idx)
