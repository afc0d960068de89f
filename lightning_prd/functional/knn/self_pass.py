"""The self pass: exact ``NND_k`` radii of one set from the tiles on and above the diagonal.

Stage: above :mod:`.refine` (may call :mod:`.refine`, :mod:`.tiling`, :mod:`.points`,
:mod:`.lists`, :mod:`.shapes`, :mod:`.shard`). The rows are cut into strips
(:func:`.tiling.self_shape`), each computed against the columns from its own first row on, as
a few wide tiles (:func:`.tiling.strip_chunks`, efficient GEMMs however thin the strips). Each
tile updates the running top-``t`` lists of its rows and, transposed, of its columns beyond
the diagonal square (about half the GEMM work of a full pass); the diagonal is masked by
index, so an exact duplicate still counts at distance 0 (``NND_k(x)`` excludes ``x`` itself,
``DESIGN.md``). The lists are then made exact by :func:`.refine.refine_topk`, or, for the
radii only compared with other values (PR-cover's wide balls, :mod:`.cover`), turned into
intervals that hold the exact value (:func:`self_radii`). Given a
:class:`.kernel.KernelSum`, each tile then adds its kernel values (float32 or float64 tiles:
the pass is not screened).

Example:
    >>> import torch
    >>> from lightning_prd.functional.knn.points import prepare
    >>> x = torch.tensor([[0.0], [1.0], [3.0]])
    >>> self_knn(prepare(x, x.double().mean(0), torch.float32), [1])[1].tolist()
    [1.0, 1.0, 4.0]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Dict, Iterable, List, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.knn import threads, tiling
from lightning_prd.functional.knn.kernel import KernelSum
from lightning_prd.functional.knn.lists import merge_tile, sort_lists, sync_free
from lightning_prd.functional.knn.points import (
    PointSet,
    bound,
    estimate_offset,
    pass_offset,
    screen_pays,
    set_offset,
    unscreened,
)
from lightning_prd.functional.knn.refine import refine_topk
from lightning_prd.functional.knn.shapes import min_side
from lightning_prd.functional.knn.shard import Shard


@dataclass
class LooseRadius:
    """A float64 ``[n, 2]`` interval ``(low, high)`` holding each row's exact squared ``NND_k``,
    and the self pass's running lists that make it exact for the rows that need it.

    Attributes:
        k: the radius's ``k``.
        interval: ``[n, 2]`` float64 bounds of the exact squared ``NND_k``.
        points: the point set of the pass (without its centred working copy).
        vals, idx: the pass's running lists (tile values, merged across the group).
        offset: the screen offset of the lists' tiles, or None for float tiles.
    """

    k: int
    interval: Tensor
    points: PointSet
    vals: Tensor
    idx: Tensor
    offset: Optional[float]

    def exact(
        self, rows: Tensor, block_bytes: int = tiling.DEFAULT_BLOCK_BYTES, shard: Optional[Shard] = None
    ) -> Tensor:
        """Exact float64 squared ``NND_k`` of ``rows`` (the same on every rank), refined from the
        lists with the bound of the tiles that made them (:func:`.refine.refine_topk`)."""
        pts, screen = self.points, self.points.screened
        if self.offset is None:
            pts = unscreened(pts, 0)
        elif screen is not None and screen.offset != self.offset:  # another pass wrote its own offset since
            pts = replace(pts, screened=screen.with_offset(self.offset))  # (shared rows stay as they are)
        truncated = self.vals.shape[1] < len(pts) - 1
        refined = refine_topk(
            pts, pts, self.vals[rows], self.idx[rows], [self.k], True, truncated, block_bytes, False, shard, rows
        )
        return refined[self.k][0]


def self_knn(
    points: PointSet,
    ks: Iterable[int],
    block_bytes: int = tiling.DEFAULT_BLOCK_BYTES,
    shard: Optional[Shard] = None,
    kernel: Optional[KernelSum] = None,
) -> Dict[int, Tensor]:
    """``NND_k`` for every ``k`` in ``ks``: distance to the k-th nearest *other* row.

    Returns exact float64 *squared* distances, one ``[n]`` tensor per ``k`` (squared, so that
    ``d^2 <= r^2`` comparisons stay exact; ``.sqrt()`` for radii). With a ``shard``, this
    process computes its share of the tiles and the running lists are merged across the group.
    With a ``kernel`` sum, every ordered pair ``i != j`` is added to it (``ks`` may be empty).
    """
    return self_radii(points, ks, (), block_bytes, shard, kernel)[0]


def self_radii(
    points: PointSet,
    ks: Iterable[int],
    loose_ks: Iterable[int],
    block_bytes: int = tiling.DEFAULT_BLOCK_BYTES,
    shard: Optional[Shard] = None,
    kernel: Optional[KernelSum] = None,
    neighbours: Optional[Dict[int, Tensor]] = None,
) -> Tuple[Dict[int, Tensor], Dict[int, LooseRadius]]:
    """:func:`self_knn`'s exact squared ``NND_k`` for ``ks``, and for each ``k`` of ``loose_ks``
    a :class:`LooseRadius`: a float64 ``[n, 2]`` interval ``(low, high)`` holding the exact
    squared ``NND_k``, with the lists to make it exact where needed, from the same pass.

    The interval comes from the ``k``-th listed tile value ``v`` of each row:
    ``[low(v), high(v)]`` of its :class:`.bounds.Bound` (increasing in ``v``) holds the exact
    ``k``-th smallest distance, since at most ``k - 1`` other rows have a smaller tile value and
    the first ``k`` listed have at most ``v``. No float64 work is done for these radii until
    :meth:`LooseRadius.exact` asks for some rows.

    ``neighbours``, when given, is filled with the index of each row's ``k``-th nearest other
    row for every ``k`` of ``ks`` (the row whose distance is the radius; tied rows in any order).
    """
    ks = sorted(set(int(k) for k in ks))
    loose = sorted(set(int(k) for k in loose_ks) - set(ks))
    n = len(points)
    if kernel is not None:
        points = unscreened(points, block_bytes)
    elif points.screened is not None:
        offset = estimate_offset(points, points, (ks or loose)[-1], True)  # exact radii first
        if screen_pays(points, points, offset):
            set_offset(offset, points)
        else:
            points = unscreened(points, block_bytes)
    work = n * n * points.dim // 2
    count = threads.workers(points.original.device, work) if kernel is None else 1  # kernel sums: in order
    if count > 1:  # the first thread (this one) fills ``neighbours``
        return threads.run(
            lambda s: _self_tiles(points, ks, loose, block_bytes // count, s, None, neighbours if s.tid == 0 else None),
            count,
            shard,
        )
    return _self_tiles(points, ks, loose, block_bytes, shard, kernel, neighbours)


def _self_tiles(
    points: PointSet,
    ks: List[int],
    loose: List[int],
    block_bytes: int,
    shard: Optional[Shard],
    kernel: Optional[KernelSum],
    neighbours: Optional[Dict[int, Tensor]],
) -> Tuple[Dict[int, Tensor], Dict[int, LooseRadius]]:
    """The tiles, merges and refinement of :func:`self_radii` on a set whose offset is set."""
    all_ks = sorted(set(ks) | set(loose))
    n = len(points)
    t = min(all_ks[-1] + points.slack, n - 1) if all_ks else 0
    dev, cdt = points.original.device, points.dtype
    no_sync = sync_free(dev)
    vals = torch.full((n, t), math.inf, dtype=cdt, device=dev)
    idx = torch.zeros((n, t), dtype=torch.long, device=dev)
    side = min_side(points.dim, tiling.gemm_dtype(points), dev, n * n * points.dim)
    parts = shard.world if shard is not None and kernel is None else 1  # kernel sums: single-process tiles
    height, width = tiling.self_shape(n, points.centre.element_size(), block_bytes, side, parts)
    buf = tiling.buffer(height * width, points)
    offset = pass_offset(points, points)
    number = -1
    for i0 in range(0, n, height):
        rows = slice(i0, min(i0 + height, n))
        n_rows, a_blk, a_sq = rows.stop - i0, None, points.sq_norms[rows, None]
        for j0, j1 in tiling.strip_chunks(i0, n, height, width):
            number += 1
            if shard is not None and not shard.owns(number):
                continue
            a_blk = points.left(rows) if a_blk is None else a_blk
            cols = slice(j0, j1)
            same = points.screened is None and (j0, j1) == (i0, rows.stop)
            b_blk = a_blk if same else points.right(cols)
            sq = tiling.sq_tile(buf, a_blk, a_sq, b_blk, points.sq_norms[cols], offset)
            if j0 == i0:
                sq.diagonal().fill_(math.inf)
            if t:
                merge_tile(vals, idx, rows, sq, 1, j0, t, no_sync)
                if j0 != i0:
                    merge_tile(vals, idx, cols, sq, 0, i0, t, no_sync)
                elif j1 > rows.stop:  # the diagonal square is merged along its rows only
                    merge_tile(vals, idx, slice(rows.stop, j1), sq[:, n_rows:], 0, i0, t, no_sync)
            if kernel is not None:  # last: it overwrites the tile
                kernel.add_self(sq, n_rows, j0 == i0)
    if kernel is not None:
        kernel.reduce(shard)
    if not all_ks:
        return {}, {}
    # the lists sorted for the stages below (merged lists come sorted)
    vals, idx = shard.merge_topk(vals, idx) if shard is not None else sort_lists(vals, idx)
    intervals = {}
    if loose:
        bnd = bound(points, points, slice(None)).col()
        v = vals[:, [k - 1 for k in loose]].to(torch.float64)
        low, high = bnd.low(v), bnd.high(v)
        lean = replace(points, centred=None)  # kept with the lists: not the working copy
        off = pass_offset(points, points) if points.screened is not None else None
        intervals = {
            k: LooseRadius(k, torch.stack([low[:, i], high[:, i]], 1), lean, vals, idx, off)
            for i, k in enumerate(loose)
        }
    if not ks:
        return {}, intervals
    refined = refine_topk(
        points, points, vals, idx, ks, True, truncated=t < n - 1, block_bytes=block_bytes, by_index=False, shard=shard
    )
    if neighbours is not None:
        neighbours.update({k: refined[k][1] for k in ks})
    return {k: refined[k][0] for k in ks}, intervals
