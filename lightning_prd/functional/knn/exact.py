"""Exact recomputation: float64 distances of chosen pairs, and the rigorous per-row fallback.

Stage: above :mod:`.tiling` (may call :mod:`.tiling`, :mod:`.points`, :mod:`.bounds`,
:mod:`.lists`, :mod:`.workspace`). Every radius, nearest distance and ambiguous decision of the engine ends
here as ``sum((a - b)^2)`` in float64 on the original rows: float32 inputs widen exactly,
so a bitwise copy is at distance exactly 0 and two calls give the same bits.
:func:`exact_rows_topk` finds the exact ``t`` nearest of rows whose candidate lists could not
settle them, over every pair whose tile value may be below a bound. :func:`direct_sq` is the
float32 middle step of the screened path: differences first, so its error is relative to
the distance.

Example:
    >>> import torch
    >>> exact_sq_dist(torch.tensor([[1.0, 2.0]]), torch.tensor([[4.0, 6.0]])).tolist()
    [25.0]
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.knn.bounds import tol_factor
from lightning_prd.functional.knn.lists import (
    merge_topk,
    padded,
    smallest_by_value_then_index,
)
from lightning_prd.functional.knn.points import PointSet, bound
from lightning_prd.functional.knn.tiling import tiles
from lightning_prd.functional.knn.workspace import scratch


def exact_sq_dist(a: Tensor, b: Tensor, buffer: Optional[Tensor] = None) -> Tensor:
    """Float64 ``sum((a - b)^2)`` of matching rows of ``a`` and ``b`` (``b`` broadcasts to ``a``'s
    shape ``[n, D]``); ``buffer``: float64 storage of at least ``n`` rows for the difference,
    reused across calls (a fresh large allocation per call costs page faults).

    float32 inputs widen exactly to float64, so the difference of a row with a bitwise copy
    of itself is exactly 0, and two calls on the same pair give the same bits.
    """
    if buffer is None:
        diff = a.to(torch.float64, copy=True)
    else:
        diff = buffer[: a.shape[0]].copy_(a)
    diff.sub_(b)
    return diff.square_().sum(-1)


#: Memory budget, in bytes, of one chunk of :func:`exact_pairs` (two gathered rows and a
#: float64 difference per pair: about ``16 * D`` bytes) and of :func:`direct_sq`. A chunk stays
#: in the cache between its steps (gather, widen, subtract, square and sum): at D = 2,048 both
#: take 1.3 to 1.7 times longer with 16 or 32 MiB chunks than with 2 to 8 MiB
#: (``benchmarks/bench_chunks.py``).
_CHUNK_BYTES = 4 * 2**20


def exact_pairs(a: Tensor, b: Tensor, ia: Tensor, ib: Tensor, chunk: Optional[int] = None) -> Tensor:
    """Float64 squared distances of the pairs ``(a[ia[t]], b[ib[t]])``, in chunks sized from
    :data:`_CHUNK_BYTES` (many pairs per call at small D: the per-chunk overhead dominated
    the fallback passes)."""
    if chunk is None:
        chunk = max(256, _CHUNK_BYTES // (16 * max(1, a.shape[1])))
    out = torch.empty(ia.shape[0], dtype=torch.float64, device=a.device)
    m = min(chunk, ia.shape[0])
    # the pass's scratch buffers: a fresh allocation per chunk or call costs more in page faults
    # than the arithmetic
    rows_a = scratch("pairs_a", m * a.shape[1], a.dtype, a.device).view(m, a.shape[1])
    rows_b = scratch("pairs_b", m * b.shape[1], b.dtype, a.device).view(m, b.shape[1])
    diff = scratch("pairs_diff", m * a.shape[1], torch.float64, a.device).view(m, a.shape[1])
    for s in range(0, ia.shape[0], chunk):
        c = min(chunk, ia.shape[0] - s)
        torch.index_select(a, 0, ia[s : s + c], out=rows_a[:c])
        torch.index_select(b, 0, ib[s : s + c], out=rows_b[:c])
        d = diff[:c]
        d.copy_(rows_a[:c])
        d.sub_(rows_b[:c])
        out[s : s + c] = d.square_().sum(-1)
    return out


def exact_rows_topk(
    a: PointSet,
    b: PointSet,
    rows: Tensor,
    below: Tensor,
    t: int,
    exclude_self: bool,
    block_bytes: int,
    by_index: bool = True,
) -> Tuple[Tensor, Tensor]:
    """Exact float64 ``t`` nearest of ``a[rows]`` in ``b``, among pairs whose tile value may be
    below ``below`` (one float64 squared distance per row): the rigorous fallback for rows
    whose candidate lists could not settle them.

    ``by_index``: equal values are ordered by index (the nearest neighbour's identity matters);
    without it only the values are exact (radii), and ties keep whichever index comes first
    (one ``topk`` per tile instead of two and a sort: tie-heavy data, e.g. one-hot tabular
    features, sends many rows here)."""
    sub, dev = a.subset(rows), a.original.device
    best_v = torch.full((len(rows), t), math.inf, dtype=torch.float64, device=dev)
    best_i = torch.zeros((len(rows), t), dtype=torch.long, device=dev)
    if not by_index:
        # candidates are selected in the tile's own dtype against one threshold per row (the
        # bound plus the row's largest margin, rounded up); only they are recomputed and merged
        thr = bound(sub, b, slice(None)).maybe_below(below)
        thr_c = thr.to(sub.dtype)
        up = torch.nextafter(thr_c, torch.full_like(thr_c, math.inf))
        thr_c = torch.where(thr_c.to(torch.float64) < thr, up, thr_c)
        for i0, j0, sq in tiles(sub, b, block_bytes):
            n_r = sq.shape[0]
            r_loc, c_loc = (sq <= thr_c[i0 : i0 + n_r, None]).nonzero(as_tuple=True)
            if exclude_self:
                keep = rows[i0 + r_loc] != j0 + c_loc
                r_loc, c_loc = r_loc[keep], c_loc[keep]
            if r_loc.numel() == 0:
                continue
            exact = exact_pairs(sub.original, b.original, i0 + r_loc, j0 + c_loc)
            pad_v, pad_i = padded(r_loc, exact, j0 + c_loc, n_r)  # nonzero lists the pairs row by row
            rs = slice(i0, i0 + n_r)
            best_v[rs], best_i[rs] = merge_topk([best_v[rs], pad_v], [best_i[rs], pad_i], t)
        return best_v, best_i
    # a tile covers rows i0 : i0 + n_r only (small budgets give tiles of fewer rows than
    # ``rows``), so each tile merges into its own row slice
    for i0, j0, sq in tiles(sub, b, block_bytes // 2):  # float64 tiles: half the elements
        n_r, n_c = sq.shape
        rs = slice(i0, i0 + n_r)
        cand = sq.to(torch.float64) <= bound(sub, b, rs, slice(j0, j0 + n_c)).maybe_below(below[rs])[:, None]
        if exclude_self:
            cols = torch.arange(j0, j0 + n_c, device=sq.device)
            cand &= rows[i0 : i0 + n_r, None] != cols[None, :]
        r_loc, c_loc = cand.nonzero(as_tuple=True)
        exact = torch.full((n_r, n_c), math.inf, dtype=torch.float64, device=sq.device)
        exact[r_loc, c_loc] = exact_pairs(sub.original, b.original, i0 + r_loc, j0 + c_loc)
        cols_idx = torch.arange(j0, j0 + n_c, device=sq.device).expand(n_r, n_c)
        best_v[rs], best_i[rs] = smallest_by_value_then_index(
            torch.cat([best_v[rs], exact], 1), torch.cat([best_i[rs], cols_idx], 1), t
        )
    return best_v, best_i


def lowest_identical(points: Tensor, idx: Tensor, sq_dist: Tensor) -> Tensor:
    """Replace ``idx[j]`` by the lowest index of a row of ``points`` identical to ``points[idx[j]]``
    where ``sq_dist[j] == 0``: with more exact duplicates than the candidate lists hold, the
    refinement may return any of them (all at distance 0, with equal radii); this makes the
    choice the lowest index, like every other tie."""
    zero = sq_dist == 0
    if not bool(zero.any()):
        return idx
    _, inverse = torch.unique(points, dim=0, return_inverse=True)
    first = torch.full((int(inverse.max()) + 1,), points.shape[0], dtype=torch.long, device=points.device)
    first.scatter_reduce_(0, inverse, torch.arange(points.shape[0], device=points.device), reduce="amin")
    out = idx.clone()
    out[zero] = first[inverse[idx[zero]]]
    return out


def direct_sq(a: Tensor, b: Tensor, idx: Tensor) -> Tensor:
    """``sum((a[i] - b[idx[i, j]])^2)`` in ``a``'s dtype (float32), for every candidate.

    Computed from the differences, its error is relative to the distance itself, whatever the
    norms: each of the ``D`` terms carries at most three roundings, and the sum of ``D``
    non-negative terms a relative error that grows like ``sqrt(D) u`` for blocked sums (``(D - 1) u``
    at worst); :func:`direct_interval` takes the float32 GEMM margin, relative to the distance.
    """
    n, t = idx.shape
    out = torch.empty((n, t), dtype=a.dtype, device=a.device)
    chunk = max(1, _CHUNK_BYTES // (t * a.shape[1] * a.element_size()))
    cap = min(chunk, n) * t
    buf = scratch("direct", cap * a.shape[1], b.dtype, a.device).view(cap, a.shape[1])  # no page faults
    for s in range(0, n, chunk):
        rows = idx[s : s + chunk].reshape(-1)
        diff = torch.index_select(b, 0, rows, out=buf[: rows.numel()]).view(-1, t, a.shape[1])
        diff.sub_(a[s : s + chunk, None, :])
        out[s : s + chunk] = diff.square_().sum(-1)
    return out


def direct_interval(v: Tensor, dim: int) -> Tuple[Tensor, Tensor]:
    """Float64 interval holding the exact squared distance of a :func:`direct_sq` value ``v``:
    the float32 GEMM margin (:func:`.bounds.tol_factor`), here relative to the distance."""
    rel = tol_factor(v.dtype, dim)
    tiny = dim * torch.finfo(v.dtype).tiny
    v = v.to(torch.float64)
    return (v * (1 - rel) - tiny).clamp(min=0), v * (1 + rel) + tiny
