"""Exact blocked Euclidean k-NN: the only place in the package that forms distances.

Every k-NN metric (precision/recall, density/coverage, realism, authenticity, beta-recall)
is a small reduction over three families of tiles of squared distances:

* real x real  -> ``NND_k`` radii of the real samples (diagonal masked, duplicates count at 0),
* fake x fake  -> ``NND_k`` radii of the generated samples,
* real x fake  -> one pass that reduces every tile in both directions (ball membership,
  counts, realism ratios, nearest neighbours).

Distances come from one GEMM per tile, ``||a||^2 + ||b||^2 - 2 a.b``, on data centred by
the real mean and clamped at 0; no ``N x M`` matrix ever exists, the tile size follows a
memory budget (:data:`DEFAULT_BLOCK_BYTES`).

Exactness. The GEMM identity loses accuracy when two points are close compared with their
norms. Every *decision* the metrics take (a k-th neighbour, ``d <= r``, a nearest neighbour)
is therefore taken on the GEMM value only when it is farther from the threshold than a
rounding margin ``8 * sqrt(D + 1) * eps * (||a||^2 + ||b||^2)``; pairs inside the margin are
recomputed in float64 from the original (uncentred) rows as ``sum((a - b)^2)``. Radii and
nearest distances are always float64 values of that exact form. On data without ties the
decisions equal those of a float64 oracle, and an exact copy sits at distance 0.

Conventions (``DESIGN.md``): ``NND_k(x)`` excludes ``x`` itself but counts exact duplicates;
balls are closed (``d <= r``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, Iterator, Optional, Sequence, Tuple

import torch
from torch import Tensor

#: Default memory budget, in bytes, for one distance tile and its temporaries.
DEFAULT_BLOCK_BYTES = 256 * 2**20
#: Extra candidates kept beyond k in running top-k lists, so that float64 refinement can
#: reorder near-ties without a second pass.
_SLACK = 4
#: Number of temporaries of tile size alive at once (distance tile, masks, ratios).
_TILE_TEMPORARIES = 6


# --------------------------------------------------------------------------------------
# Prepared point sets and tiles
# --------------------------------------------------------------------------------------


@dataclass
class PointSet:
    """A point set ready for GEMM distances.

    Attributes:
        original: the rows as given (used for exact float64 recomputation).
        centred: ``original - centre`` in the compute dtype.
        sq_norms: ``||centred||^2`` per row, compute dtype.
    """

    original: Tensor
    centred: Tensor
    sq_norms: Tensor

    def __len__(self) -> int:
        return self.original.shape[0]


def prepare(points: Tensor, centre: Tensor, dtype: torch.dtype) -> PointSet:
    """Centre ``points`` by ``centre`` and cast to ``dtype`` for the GEMM pass."""
    centred = points.to(dtype) - centre.to(dtype)
    return PointSet(original=points, centred=centred, sq_norms=centred.pow(2).sum(1))


def _tol_factor(dtype: torch.dtype, dim: int) -> float:
    """Relative rounding margin of a GEMM squared distance (see module docstring)."""
    return 8.0 * math.sqrt(dim + 1) * torch.finfo(dtype).eps


def block_shape(n_rows: int, n_cols: int, itemsize: int, block_bytes: int) -> Tuple[int, int]:
    """Rows and columns of a tile so that ``_TILE_TEMPORARIES`` tiles fit ``block_bytes``."""
    elements = max(1, block_bytes // (itemsize * _TILE_TEMPORARIES))
    cols = max(1, min(n_cols, 8192, elements))
    rows = max(1, min(n_rows, elements // cols))
    return rows, cols


def tiles(a: PointSet, b: PointSet, block_bytes: int) -> Iterator[Tuple[int, int, Tensor]]:
    """Yield ``(row0, col0, squared_distance_tile)`` covering ``a x b`` in blocks."""
    rows, cols = block_shape(len(a), len(b), a.centred.element_size(), block_bytes)
    for i0 in range(0, len(a), rows):
        a_blk = a.centred[i0 : i0 + rows]
        a_sq = a.sq_norms[i0 : i0 + rows, None]
        for j0 in range(0, len(b), cols):
            b_blk = b.centred[j0 : j0 + cols]
            sq = torch.addmm(b.sq_norms[None, j0 : j0 + cols], a_blk, b_blk.T, alpha=-2.0)
            sq.add_(a_sq).clamp_(min=0.0)
            yield i0, j0, sq


def exact_sq_dist(a: Tensor, b: Tensor) -> Tensor:
    """Float64 ``sum((a - b)^2)`` of matching rows of ``a`` and ``b`` (same shape ``[n, D]``)."""
    return (a.to(torch.float64) - b.to(torch.float64)).pow(2).sum(-1)


def _exact_pairs(a: Tensor, b: Tensor, ia: Tensor, ib: Tensor, chunk: int = 4096) -> Tensor:
    """Float64 squared distances of the pairs ``(a[ia[t]], b[ib[t]])``, in chunks."""
    out = torch.empty(ia.shape[0], dtype=torch.float64, device=a.device)
    for s in range(0, ia.shape[0], chunk):
        out[s : s + chunk] = exact_sq_dist(a[ia[s : s + chunk]], b[ib[s : s + chunk]])
    return out


# --------------------------------------------------------------------------------------
# Running top-k with float64 refinement
# --------------------------------------------------------------------------------------


def _merge_topk(vals: Tensor, idx: Tensor, new_vals: Tensor, col0: int, t: int) -> Tuple[Tensor, Tensor]:
    """Merge a tile's rows into running ``t`` smallest values (and their column indices)."""
    new_idx = torch.arange(col0, col0 + new_vals.shape[1], device=new_vals.device).expand_as(new_vals)
    all_vals = torch.cat([vals, new_vals], dim=1)
    all_idx = torch.cat([idx, new_idx], dim=1)
    t = min(t, all_vals.shape[1])
    top_vals, pos = torch.topk(all_vals, t, dim=1, largest=False, sorted=True)
    return top_vals, torch.gather(all_idx, 1, pos)


def _exact_rows_topk(
    a: PointSet, b: PointSet, rows: Tensor, bound: Tensor, t: int, exclude_self: bool, tol_f: float
) -> Tuple[Tensor, Tensor]:
    """Exact float64 ``t`` nearest of ``a[rows]`` in ``b``, among pairs whose GEMM value is below
    ``bound`` (plus the margin): a rigorous fallback for rows where refinement was ambiguous."""
    sub = PointSet(a.original[rows], a.centred[rows], a.sq_norms[rows])
    best_v = torch.full((len(rows), 0), math.inf, dtype=torch.float64, device=a.original.device)
    best_i = torch.zeros((len(rows), 0), dtype=torch.long, device=a.original.device)
    for i0, j0, sq in tiles(sub, b, DEFAULT_BLOCK_BYTES):
        n_r, n_c = sq.shape
        tol = tol_f * (sub.sq_norms[i0 : i0 + n_r, None] + b.sq_norms[None, j0 : j0 + n_c])
        cand = sq.to(torch.float64) - tol <= bound[i0 : i0 + n_r, None]
        if exclude_self:
            cols = torch.arange(j0, j0 + n_c, device=sq.device)
            cand &= rows[i0 : i0 + n_r, None] != cols[None, :]
        r_loc, c_loc = cand.nonzero(as_tuple=True)
        exact = torch.full((n_r, n_c), math.inf, dtype=torch.float64, device=sq.device)
        exact[r_loc, c_loc] = _exact_pairs(sub.original, b.original, i0 + r_loc, j0 + c_loc)
        best_v, best_i = _merge_topk(best_v, best_i, exact, j0, t)
    return best_v, best_i


def refine_topk(
    a: PointSet, b: PointSet, approx: Tensor, idx: Tensor, k: int, exclude_self: bool, truncated: bool
) -> Tuple[Tensor, Tensor]:
    """Turn running GEMM top-``t`` lists into exact float64 ``k`` nearest (squared distances).

    The candidates are recomputed exactly and re-sorted. A row is *safe* when no
    non-candidate can be closer than its exact k-th value: every non-candidate has a GEMM
    value at least the last candidate's, so ``last - margin >= exact k-th`` suffices. Unsafe
    rows are recomputed rigorously by :func:`_exact_rows_topk`.
    """
    n = approx.shape[0]
    tol_f = _tol_factor(a.centred.dtype, a.centred.shape[1])
    rows = torch.arange(n, device=approx.device)[:, None].expand_as(idx)
    exact = torch.empty_like(approx, dtype=torch.float64)
    flat_r, flat_c = rows.reshape(-1), idx.reshape(-1)
    exact.view(-1)[:] = _exact_pairs(a.original, b.original, flat_r, flat_c)
    exact = torch.where(torch.isinf(approx), math.inf, exact)  # padded slots stay empty
    exact_sorted, order = torch.sort(exact, dim=1)
    idx_sorted = torch.gather(idx, 1, order)
    vals, ids = exact_sorted[:, :k], idx_sorted[:, :k]
    if truncated:
        max_b = b.sq_norms.max().to(torch.float64)
        margin = tol_f * (a.sq_norms.to(torch.float64) + max_b)
        unsafe = approx[:, -1].to(torch.float64) - margin < vals[:, -1]
        if bool(unsafe.any()):
            bad = unsafe.nonzero(as_tuple=True)[0]
            v, i = _exact_rows_topk(a, b, bad, vals[bad, -1], k, exclude_self, tol_f)
            vals[bad], ids[bad] = v, i
    return vals, ids


def self_knn(points: PointSet, ks: Iterable[int], block_bytes: int = DEFAULT_BLOCK_BYTES) -> Dict[int, Tensor]:
    """``NND_k`` for every ``k`` in ``ks``: distance to the k-th nearest *other* row.

    The diagonal is masked by index, so an exact duplicate still counts at distance 0.
    Returns exact float64 *squared* distances, one ``[n]`` tensor per ``k`` (squared, so that
    ``d^2 <= r^2`` comparisons stay exact; take ``.sqrt()`` for reported radii).
    """
    ks = sorted(set(int(k) for k in ks))
    n = len(points)
    k_max = ks[-1]
    t = min(k_max + _SLACK, n - 1)
    dev = points.centred.device
    vals = torch.full((n, 0), math.inf, dtype=points.centred.dtype, device=dev)
    idx = torch.zeros((n, 0), dtype=torch.long, device=dev)
    run_v, run_i = [], []
    rows_done = -1
    for i0, j0, sq in tiles(points, points, block_bytes):
        n_r, n_c = sq.shape
        if i0 != rows_done:  # a new row block starts
            if rows_done >= 0:
                run_v.append(vals)
                run_i.append(idx)
            vals = torch.full((n_r, 0), math.inf, dtype=sq.dtype, device=dev)
            idx = torch.zeros((n_r, 0), dtype=torch.long, device=dev)
            rows_done = i0
        lo, hi = max(i0, j0), min(i0 + n_r, j0 + n_c)
        if lo < hi:  # the tile crosses the diagonal
            d = torch.arange(lo, hi, device=dev)
            sq[d - i0, d - j0] = math.inf
        vals, idx = _merge_topk(vals, idx, sq, j0, t)
    run_v.append(vals)
    run_i.append(idx)
    approx, cand = torch.cat(run_v), torch.cat(run_i)
    exact, _ = refine_topk(points, points, approx, cand, k_max, True, truncated=t < n - 1)
    return {k: exact[:, k - 1] for k in ks}


# --------------------------------------------------------------------------------------
# The real x fake pass
# --------------------------------------------------------------------------------------


@dataclass
class CrossResult:
    """Everything the k-NN metrics need from the real x fake tiles.

    Keys of the dicts are the ``k`` of the radii used. Distances are float64, plain.

    Attributes:
        fake_in_real: ``[M]`` bool per k: fake inside some real ball (precision).
        fake_ball_count: ``[M]`` int64 per k: number of real balls holding the fake (density).
        real_ball_hit: ``[N]`` bool per k: real sample's own ball holds a fake (coverage).
        real_in_fake: ``[N]`` bool per k: real inside some fake ball (recall).
        realism: ``[M]`` realism scores, or None.
        fake_nn_index, fake_nn_sq_dist: nearest real sample of each fake (exact float64
            squared distance, comparable with the squared radii without rounding).
        real_nn_index, real_nn_sq_dist: nearest fake sample of each real.
        real_ball_min_value: ``[N]`` per k: minimum of ``fake_values`` over the fakes inside
            the real sample's ball (``inf`` when none), used by beta-recall.
    """

    fake_in_real: Dict[int, Tensor] = field(default_factory=dict)
    fake_ball_count: Dict[int, Tensor] = field(default_factory=dict)
    real_ball_hit: Dict[int, Tensor] = field(default_factory=dict)
    real_in_fake: Dict[int, Tensor] = field(default_factory=dict)
    realism: Optional[Tensor] = None
    fake_nn_index: Optional[Tensor] = None
    fake_nn_sq_dist: Optional[Tensor] = None
    real_nn_index: Optional[Tensor] = None
    real_nn_sq_dist: Optional[Tensor] = None
    real_ball_min_value: Dict[int, Tensor] = field(default_factory=dict)


def _closed_ball_member(sq: Tensor, thr: Tensor, tol: Tensor, along_rows: bool, exact_fn) -> Tensor:
    """``sq <= thr`` on a tile, with pairs within the rounding margin decided in float64.

    ``thr`` (exact float64 squared radii) and ``tol`` (float64 margins) are per-row
    (``along_rows``) or per-column vectors. ``exact_fn(r, c)`` returns exact squared
    distances of tile pairs ``(r, c)``.
    """
    eps = torch.finfo(sq.dtype).eps
    slack = tol + eps * thr  # the margin, widened by the rounding of the bounds themselves
    lo, hi = (thr - slack).to(sq.dtype), (thr + slack).to(sq.dtype)
    if along_rows:
        lo, hi = lo[:, None], hi[:, None]
    sure = sq <= lo
    amb = (sq <= hi) & ~sure
    if bool(amb.any()):
        r, c = amb.nonzero(as_tuple=True)
        sure[r, c] = exact_fn(r, c) <= (thr[r] if along_rows else thr[c])
    return sure


def cross_pass(
    real: PointSet,
    fake: PointSet,
    real_sq_radii: Dict[int, Tensor],
    fake_sq_radii: Dict[int, Tensor],
    *,
    member_ks: Sequence[int] = (),
    recall_ks: Sequence[int] = (),
    realism_k: Optional[int] = None,
    nearest: bool = False,
    fake_values: Optional[Tensor] = None,
    value_ks: Sequence[int] = (),
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> CrossResult:
    """One pass over the real x fake tiles, reduced in both directions.

    Args:
        real_sq_radii / fake_sq_radii: exact float64 squared ``NND_k`` per k.
        member_ks: real-ball radii k for which fake membership, counts and coverage are wanted.
        recall_ks: fake-ball radii k for which real membership is wanted.
        realism_k: real radii k for realism (median-pruned, plain-distance ratio), or None.
        nearest: also find exact nearest neighbours across the sets (both directions).
        fake_values, value_ks: per-fake values whose minimum over each real ball (radius k
            in ``value_ks``) is wanted.
    """
    n, m = len(real), len(fake)
    dim = real.centred.shape[1]
    dev, cdt = real.centred.device, real.centred.dtype
    tol_f = _tol_factor(cdt, dim)
    res = CrossResult()
    for k in member_ks:
        res.fake_in_real[k] = torch.zeros(m, dtype=torch.bool, device=dev)
        res.fake_ball_count[k] = torch.zeros(m, dtype=torch.long, device=dev)
        res.real_ball_hit[k] = torch.zeros(n, dtype=torch.bool, device=dev)
    for k in recall_ks:
        res.real_in_fake[k] = torch.zeros(n, dtype=torch.bool, device=dev)
    for k in value_ks:
        res.real_ball_min_value[k] = torch.full((n,), math.inf, dtype=torch.float64, device=dev)
    realism_num = None
    if realism_k is not None:
        r = real_sq_radii[realism_k].sqrt()
        keep = r <= torch.quantile(r, 0.5)
        # pruned balls get radius 0: their ratio is 0 and never the maximum of a kept ball
        realism_num = torch.where(keep, real_sq_radii[realism_k], 0.0).to(cdt)
        realism_keep = keep
        realism_max = torch.zeros(m, dtype=cdt, device=dev)
    t_near = min(1 + _SLACK, n), min(1 + _SLACK, m)
    if nearest:
        f_vals = torch.full((m, t_near[0]), math.inf, dtype=cdt, device=dev)
        f_idx = torch.zeros((m, t_near[0]), dtype=torch.long, device=dev)
        r_v, r_i, r_parts = None, None, []

    # thresholds as compute-dtype vectors with their rounding margins
    real_thr = {k: real_sq_radii[k] for k in set(member_ks) | set(value_ks)}
    fake_thr = {k: fake_sq_radii[k] for k in recall_ks}
    real_sq64 = real.sq_norms.to(torch.float64)
    fake_sq64 = fake.sq_norms.to(torch.float64)

    cur_row = -1
    for i0, j0, sq in tiles(real, fake, block_bytes):
        n_r, n_c = sq.shape
        rs, cs = slice(i0, i0 + n_r), slice(j0, j0 + n_c)

        def exact_fn(r: Tensor, c: Tensor) -> Tensor:
            return _exact_pairs(real.original, fake.original, i0 + r, j0 + c)

        # per-row margin uses the tile's largest column norm: a conservative bound
        row_tol = tol_f * (real_sq64[rs] + fake_sq64[cs].max())
        col_tol = tol_f * (fake_sq64[cs] + real_sq64[rs].max())
        for k in sorted(real_thr):
            member = _closed_ball_member(sq, real_thr[k][rs], row_tol, True, exact_fn)
            if k in res.fake_in_real:
                res.fake_in_real[k][cs] |= member.any(0)
                res.fake_ball_count[k][cs] += member.sum(0)
                res.real_ball_hit[k][rs] |= member.any(1)
            if k in res.real_ball_min_value:
                masked = torch.where(member, fake_values[None, cs], math.inf)
                res.real_ball_min_value[k][rs] = torch.minimum(res.real_ball_min_value[k][rs], masked.min(1).values)
        for k in sorted(fake_thr):
            member = _closed_ball_member(sq, fake_thr[k][cs], col_tol, False, exact_fn)
            res.real_in_fake[k][rs] |= member.any(1)
        if realism_num is not None:
            num = realism_num[rs, None]
            ratio = torch.where(sq > 0, num / sq, torch.where(realism_keep[rs, None], math.inf, 0.0))
            realism_max[cs] = torch.maximum(realism_max[cs], ratio.max(0).values)
        if nearest:
            # fakes: running top-t over reals (columns of this tile are fakes)
            top_v, top_p = torch.topk(sq, min(t_near[0], n_r), dim=0, largest=False)
            merged_v = torch.cat([f_vals[cs], top_v.T], 1)
            merged_i = torch.cat([f_idx[cs], (top_p + i0).T], 1)
            tv, tp = torch.topk(merged_v, t_near[0], dim=1, largest=False, sorted=True)
            f_vals[cs], f_idx[cs] = tv, torch.gather(merged_i, 1, tp)
            # reals: running top-t over fakes, row block by row block
            if i0 != cur_row:
                if r_v is not None:
                    r_parts.append((r_v, r_i))
                r_v = torch.full((n_r, 0), math.inf, dtype=cdt, device=dev)
                r_i = torch.zeros((n_r, 0), dtype=torch.long, device=dev)
                cur_row = i0
            r_v, r_i = _merge_topk(r_v, r_i, sq, j0, t_near[1])

    if realism_num is not None:
        res.realism = realism_max.to(torch.float64).sqrt()
    if nearest:
        r_parts.append((r_v, r_i))
        rv = torch.cat([p[0] for p in r_parts])
        ri = torch.cat([p[1] for p in r_parts])
        v, i = refine_topk(real, fake, rv, ri, 1, False, truncated=t_near[1] < m)
        res.real_nn_sq_dist, res.real_nn_index = v[:, 0], i[:, 0]
        v, i = refine_topk(fake, real, f_vals, f_idx, 1, False, truncated=t_near[0] < n)
        res.fake_nn_sq_dist, res.fake_nn_index = v[:, 0], i[:, 0]
    return res
