"""Exact k-th neighbours from running candidate lists: settle the certain, recompute the rest.

Stage: above :mod:`.exact` (may call :mod:`.exact`, :mod:`.points`, :mod:`.lists`,
:mod:`.shard`). The running lists of a pass hold tile values; :func:`refine_topk` turns them
into exact float64 k-th distances (and indices) in three steps, one mechanism for every tile
kind:

1. **Certain k-th candidates** (:func:`undecided`): the candidates' values, sorted, each with
   an interval holding its exact squared distance. The k-th is certain when its interval
   overlaps neither neighbour's and lies below every candidate left out. float32/float64
   tiles use the tile values and their :class:`.bounds.Bound`; the bfloat16 screen's interval
   holds too many candidates (about 17 at D = 2,048), so its candidates are first recomputed in
   float32 from their differences (:func:`.exact.direct_sq`, error relative to the distance).
   Only the certain k-th pair is computed in float64.
2. **Uncertain rows** (:func:`_refine_rows`): every candidate in float64, re-sorted, ties by
   index. The row is safe when no candidate left out can be closer than the exact k-th value.
3. **Unsafe rows**: :func:`.exact.exact_rows_topk` over every pair that may be closer.

Example:
    >>> import torch
    >>> lo = torch.tensor([[1.0, 2.0, 2.5]]); hi = lo + 0.6
    >>> undecided(lo, hi, [1], None).tolist(), undecided(lo, hi, [2], None).tolist()
    ([False], [True])
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.knn import exact
from lightning_prd.functional.knn.lists import sort_by_value_then_index
from lightning_prd.functional.knn.points import PointSet, bound
from lightning_prd.functional.knn.shard import Shard
from lightning_prd.functional.knn.tiling import DEFAULT_BLOCK_BYTES


def refine_topk(
    a: PointSet,
    b: PointSet,
    approx: Tensor,
    idx: Tensor,
    ks: Sequence[int],
    exclude_self: bool,
    truncated: bool,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    by_index: bool = True,
    shard: Optional[Shard] = None,
    rows: Optional[Tensor] = None,
) -> Dict[int, Tuple[Tensor, Tensor]]:
    """Exact float64 squared distance and index of the k-th nearest neighbour, for each ``k``.

    ``approx``/``idx`` are sorted running top-``t`` lists of tile values (the same on every
    rank) of the rows ``rows`` of ``a`` (all of them by default); ``truncated``: rows of ``b``
    were left out of the lists. ``by_index``: ties are ordered by index (nearest neighbours);
    else only the values are exact (radii). With a ``shard``, each rank refines a contiguous
    share of the rows and the results are gathered.
    """
    n_all = approx.shape[0]
    if rows is None:
        rows = torch.arange(n_all, device=approx.device)
    if shard is not None:
        mine = shard.row_share(n_all)
        rows, approx, idx = rows[mine], approx[mine], idx[mine]
    kth = _kth_screened if a.screened is not None else _kth_tiles
    cand, uncertain = kth(a, b, rows, approx, idx, ks, truncated)
    rows_rep = rows[:, None].expand_as(cand)
    vals = exact.exact_pairs(a.original, b.original, rows_rep.reshape(-1), cand.reshape(-1)).view(cand.shape)
    if bool(uncertain.any()):
        local = uncertain.nonzero(as_tuple=True)[0]
        v, i = _refine_rows(
            a, b, rows[local], approx[local], idx[local], max(ks), exclude_self, truncated, block_bytes, by_index
        )
        ki = [k - 1 for k in ks]
        vals[local], cand[local] = v[:, ki], i[:, ki]
    if shard is not None:
        vals, cand = shard.gather_rows(vals, n_all), shard.gather_rows(cand, n_all)
    return {k: (vals[:, i].contiguous(), cand[:, i].contiguous()) for i, k in enumerate(ks)}


def undecided(lo: Tensor, hi: Tensor, ks: Sequence[int], floor: Optional[Tensor]) -> Tensor:
    """Rows whose k-th candidate is not certain, for some ``k`` in ``ks``.

    ``lo``/``hi`` bound the exact squared distances of each row's candidates, sorted by value;
    ``floor`` (or None: nothing left out) bounds from below every candidate left out. The k-th
    is certain when its interval overlaps neither neighbour's and lies below ``floor``."""
    width = lo.shape[1]
    out = torch.zeros(lo.shape[0], dtype=torch.bool, device=lo.device)
    for k in ks:
        if k >= 2:
            out |= lo[:, k - 1] <= hi[:, k - 2]
        if k < width:
            out |= lo[:, k] <= hi[:, k - 1]
        if floor is not None:
            out |= floor <= hi[:, k - 1]
    return out


def _kth_tiles(
    a: PointSet, b: PointSet, rows: Tensor, approx: Tensor, idx: Tensor, ks: Sequence[int], truncated: bool
) -> Tuple[Tensor, Tensor]:
    """k-th candidates (``[n, len(ks)]``) of float tile lists, and the rows they do not settle."""
    bnd = bound(a, b, rows).col()
    v = approx.to(torch.float64)
    lo, hi = bnd.low(v), bnd.high(v)
    # every entry left out of a list is at least its last value
    uncertain = undecided(lo, hi, ks, lo[:, -1] if truncated else None)
    return idx[:, [k - 1 for k in ks]], uncertain


def _kth_screened(
    a: PointSet, b: PointSet, rows: Tensor, approx: Tensor, idx: Tensor, ks: Sequence[int], truncated: bool
) -> Tuple[Tensor, Tensor]:
    """k-th candidates of bfloat16 screen lists, recomputed in float32 from differences.

    Only the candidates whose interval reaches below the largest k-th candidate's can be
    among the k nearest: a prefix of each sorted list. Most rows need a short prefix (the
    screen's interval is narrow near its offset), a few the whole list: two widths."""
    n, t = approx.shape
    bnd = bound(a, b, rows)
    screen_low = bnd.col().low(approx.to(torch.float64))
    needed = (screen_low <= bnd.high(approx[:, max(ks) - 1].to(torch.float64))[:, None]).sum(1)
    short = min(t, max(max(ks) + 1, int(torch.quantile(needed.to(torch.float64), 0.8).ceil()))) if n else t
    cand = torch.empty((n, len(ks)), dtype=torch.long, device=approx.device)
    uncertain = torch.zeros(n, dtype=torch.bool, device=approx.device)
    for sel, width in ((needed <= short, short), (needed > short, t)):
        local = sel.nonzero(as_tuple=True)[0]
        if local.numel() == 0:
            continue
        head = approx[local, :width]
        direct = exact.direct_sq(a.original[rows[local]], b.original, idx[local, :width])
        direct, order = torch.sort(torch.where(torch.isinf(head), math.inf, direct), dim=1, stable=True)
        lo, hi = exact.direct_interval(direct, a.dim)
        # left out: beyond the width (at least screen_low[:, width] far) or not listed (at
        # least the last listed value's)
        low = screen_low[local]
        floor = low[:, width] if width < t else low[:, -1] if truncated else None
        uncertain[local] = undecided(lo, hi, ks, floor)
        cand[local] = torch.gather(idx[local, :width], 1, order)[:, [k - 1 for k in ks]]
    return cand, uncertain


def _refine_rows(
    a: PointSet,
    b: PointSet,
    rows: Tensor,
    approx: Tensor,
    idx: Tensor,
    k: int,
    exclude_self: bool,
    truncated: bool,
    block_bytes: int,
    by_index: bool,
) -> Tuple[Tensor, Tensor]:
    """Exact ``k`` nearest of ``a[rows]`` from their candidate lists ``approx``/``idx``.

    All candidates are recomputed exactly and re-sorted. A row is *safe* when no non-candidate
    can be closer than its exact k-th value: every non-candidate has a tile value at least the
    last candidate's, so ``low(last) > exact k-th`` suffices. Unsafe rows are recomputed
    rigorously by :func:`.exact.exact_rows_topk`.
    """
    ex = exact.exact_pairs(a.original, b.original, rows[:, None].expand_as(idx).reshape(-1), idx.reshape(-1))
    ex = torch.where(torch.isinf(approx), math.inf, ex.view(idx.shape))  # padded slots stay empty
    ex_sorted, ids_sorted = sort_by_value_then_index(ex, idx)
    vals, ids = ex_sorted[:, :k], ids_sorted[:, :k]
    if truncated:
        # an exact k-th value of 0 cannot be beaten (ties at 0 give the same value; the index
        # among identical rows is made canonical by :func:`.exact.lowest_identical`). ``<=``: a
        # non-candidate tied with the k-th value must be found (ties go to the lowest index).
        low = bound(a, b, rows).low(approx[:, -1].to(torch.float64))
        unsafe = (low <= vals[:, -1]) & (vals[:, -1] > 0)
        if bool(unsafe.any()):
            bad = unsafe.nonzero(as_tuple=True)[0]
            vals[bad], ids[bad] = exact.exact_rows_topk(
                a, b, rows[bad], vals[bad, -1], k, exclude_self, block_bytes, by_index=by_index
            )
    return vals, ids
