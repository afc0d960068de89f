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
rounding margin ``(2 sqrt(D + 1) + 8) * eps * (||a||^2 + ||b||^2)``; pairs inside the margin are
recomputed in float64 from the original (uncentred) rows as ``sum((a - b)^2)``. Radii and
nearest distances are always float64 values of that exact form. The decisions equal those of
a float64 oracle, and an exact copy sits at distance 0. Exact ties (integer-valued features,
duplicates) are decided the same way; a nearest neighbour tied with others is the one of
lowest index (``numpy.argmin``'s rule), so no result depends on the tile layout.

bfloat16 screen. On CPUs that multiply bfloat16 natively, large float32 sets are tiled by one
bfloat16 GEMM per tile (about 4x the float32 rate) with a rigorous, wider rounding interval
(:mod:`._screen`); the many candidates it leaves are recomputed in float32 from their
differences (error relative to the distance) before float64 settles the rest, and realism is
then taken from exact float64 distances of its candidates. Decisions, radii and nearest
neighbours are the same as with float32 tiles; a cross tile with too many ambiguous pairs is
recomputed in float32.

Conventions (``DESIGN.md``): ``NND_k(x)`` excludes ``x`` itself but counts exact duplicates;
balls are closed (``d <= r``).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, Iterable, Iterator, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from lightning_prd.functional._screen import (
    SCREEN_REL,
    Bound,
    Screened,
    screen,
    screen_available,
    screen_forced,
    screen_tile,
    tol_factor,
)
from lightning_prd.functional._shard import Shard
from lightning_prd.functional._topk import merge_topk

#: Default memory budget, in bytes, for one distance tile and its temporaries.
DEFAULT_BLOCK_BYTES = 256 * 2**20
#: Extra candidates kept beyond k in running top-k lists, so that float64 refinement can
#: reorder near-ties without a second pass.
_SLACK = 4
#: The same with the bfloat16 screen, whose rounding interval (with the pass's offset near
#: the k-th distances) holds about 17 neighbours of a 2,048-dimensional Gaussian sample.
_SCREEN_SLACK = 16
#: Length of the screened realism lists: ratios spread less than distances, so the largest
#: ones need a longer list to be proven (33: no sample recomputed at 10,000 x 2,048; 17: 57).
_SCREEN_REALISM_LIST = 33
#: Minimum number of row blocks of a self pass (tiles on and above the diagonal only).
_SELF_BLOCKS = 8
#: Number of temporaries of tile size alive at once (distance tile, masks, ratios).
_TILE_TEMPORARIES = 6
#: Called once per computed tile when set (see :func:`tile_progress`).
_ON_TILE: Optional[Callable[[], None]] = None


@contextmanager
def tile_progress(callback: Callable[[], None]) -> Iterator[None]:
    """Call ``callback()`` after every distance tile computed inside the ``with`` block (progress bars).

    Example:
        >>> import torch
        >>> from lightning_prd.functional import precision_recall
        >>> ticks = []
        >>> with tile_progress(lambda: ticks.append(1)):
        ...     _ = precision_recall(torch.randn(20, 2), torch.randn(20, 2))
        >>> len(ticks) > 0
        True
    """
    global _ON_TILE
    previous, _ON_TILE = _ON_TILE, callback
    try:
        yield
    finally:
        _ON_TILE = previous


def _tick() -> None:
    if _ON_TILE is not None:
        _ON_TILE()


# --------------------------------------------------------------------------------------
# Prepared point sets and tiles
# --------------------------------------------------------------------------------------


@dataclass
class PointSet:
    """A point set ready for GEMM distances, centred block by block, or from a centred working
    copy during one pass when the set fits the tile budget (:func:`with_centred`).

    Attributes:
        original: the rows as given (used for exact float64 recomputation).
        centre: the shared centre, in the compute dtype.
        sq_norms: ``||row - centre||^2`` per row, compute dtype.
        centred: ``original - centre`` in the compute dtype, or None (blocks are centred as used).
        screened: the bfloat16 screen rows (:mod:`._screen`), or None: tiles are then GEMMs
            in the compute dtype.
    """

    original: Tensor
    centre: Tensor
    sq_norms: Tensor
    centred: Optional[Tensor] = None
    screened: Optional[Screened] = None

    def __len__(self) -> int:
        return self.original.shape[0]

    @property
    def dtype(self) -> torch.dtype:
        return self.centre.dtype

    @property
    def dim(self) -> int:
        return self.original.shape[1]

    def block(self, rows) -> Tensor:
        """``original[rows] - centre`` in the compute dtype."""
        if self.centred is not None:
            return self.centred[rows]
        return self.original[rows].to(self.dtype) - self.centre

    def left(self, rows) -> Tensor:
        """Rows as the left operand of a tile GEMM."""
        return self.block(rows) if self.screened is None else self.screened.rows[rows]

    def right(self, rows) -> Tensor:
        """Rows as the right operand of a tile GEMM."""
        return self.block(rows) if self.screened is None else self.screened.right(rows)

    @property
    def slack(self) -> int:
        """Candidates kept beyond k in running top-k lists over this set's tiles."""
        return _SLACK if self.screened is None else _SCREEN_SLACK

    def subset(self, rows: Tensor) -> "PointSet":
        centred = None if self.centred is None else self.centred[rows]
        screened = None if self.screened is None else self.screened[rows]
        return PointSet(self.original[rows], self.centre, self.sq_norms[rows], centred, screened)


def prepare(points: Tensor, centre: Tensor, dtype: torch.dtype, chunk: int = 8192, cache_bytes: int = 0) -> PointSet:
    """Wrap ``points`` for the GEMM pass: the centre in ``dtype`` and the centred squared norms
    (with a centred working copy when it takes at most ``cache_bytes``, see :func:`with_centred`),
    and the bfloat16 screen rows where the hardware multiplies bfloat16 natively
    (:func:`._screen.screen_available`)."""
    centre = centre.to(device=points.device, dtype=dtype)
    sq = torch.empty(points.shape[0], dtype=dtype, device=points.device)
    screened = screen(points, centre) if screen_available(points.device, dtype, *points.shape) else None
    out = with_centred(PointSet(points, centre, sq, screened=screened), cache_bytes)
    for s0 in range(0, points.shape[0], chunk):
        sq[s0 : s0 + chunk] = out.block(slice(s0, s0 + chunk)).pow(2).sum(1)
    return out


def with_centred(points: PointSet, cache_bytes: int) -> PointSet:
    """``points`` with a centred working copy when it takes at most ``cache_bytes`` (else as is).

    Tiles then slice the copy instead of centring their rows again for every tile; a set larger
    than the budget (50,000 x 4,096 at the default) keeps being centred tile by tile, so memory
    stays bounded by the budget. The copy lives as long as the returned object (one pass).
    """
    if points.screened is not None:  # screened tiles never read the centred rows
        return points
    if points.centred is not None or len(points) * points.dim * points.centre.element_size() > cache_bytes:
        return points
    return replace(points, centred=points.original.to(points.dtype) - points.centre)


def unscreened(points: PointSet, cache_bytes: int) -> PointSet:
    """``points`` with tiles in the compute dtype (and a centred copy where it fits)."""
    return points if points.screened is None else with_centred(replace(points, screened=None), cache_bytes)


def _bound(a: PointSet, b: PointSet, rows, cols=slice(None)) -> Bound:
    """Rounding interval of the tile values of ``a[rows]`` against any of ``b[cols]``, one
    per row (the other side's largest norm and rounding: a conservative bound)."""
    if a.screened is None:
        sq_a, sq_b = a.sq_norms[rows].to(torch.float64), b.sq_norms[cols].to(torch.float64)
        # plus underflow: products and norms below the smallest normal lose up to its size each
        # (features of ~1e-30 square to nothing in float32)
        underflow = 4 * (a.dim + 2) * torch.finfo(a.dtype).tiny
        return Bound(0.0, None, tol_factor(a.dtype, a.dim) * (sq_a + sq_b.max()) + underflow)
    sa, sb = a.screened, b.screened
    offset = _offset(a, b)
    tol = 2 * tol_factor(torch.float32, sa.rows.shape[1])
    tau = tol * (sa.sq_norms[rows] + sb.sq_norms[cols].max() + abs(offset)) + 1e-30
    return Bound(SCREEN_REL, sa.rho[rows] + sb.rho[cols].max(), tau, offset)


def _offset(a: PointSet, b: PointSet) -> float:
    """The offset of screen tiles of ``a x b``: each side's norm parts carry a quarter of its own."""
    return (a.screened.offset + b.screened.offset) / 2 if a.screened is not None else 0.0


#: Rows sampled to estimate a pass's offset (:func:`_estimate_offset`).
_OFFSET_SAMPLE = 256


def _estimate_offset(a: PointSet, b: PointSet, k: int, exclude_self: bool) -> float:
    """Median, over up to 256 evenly spaced rows of ``a``, of the squared distance to their
    ``k``-th nearest row of ``b`` (float32 GEMM, itself a row when ``exclude_self``): the scale
    of the pass's decisions, used as the screen's offset (tightness only, not correctness)."""
    rows = torch.linspace(0, len(a) - 1, min(len(a), _OFFSET_SAMPLE), device=a.original.device).round().long()
    a_blk, a_sq = a.block(rows), a.sq_norms[rows, None]
    k = min(k + int(exclude_self), len(b))
    best = torch.full((len(rows), 0), math.inf, dtype=a.dtype, device=a_blk.device)
    for j0 in range(0, len(b), 2048):  # small float32 blocks: the estimate adds little memory
        cols = slice(j0, j0 + 2048)
        sq = torch.addmm(a_sq + b.sq_norms[None, cols], a_blk, b.block(cols).T, alpha=-2.0)
        best = torch.cat([best, sq], 1).topk(min(k, best.shape[1] + sq.shape[1]), dim=1, largest=False).values
    return float(best[:, -1].clamp(min=0).median())


#: Largest relative width ``2 e / d`` of the screen's interval at the offset's distance for
#: which a pass is screened. Wider (tight clusters far from the centre: a collapsed generator),
#: most k-th neighbours stay undecided and float32 tiles cost less. Measured, one self pass of
#: 10,000 x 1,024 in 10 clusters: width 4.9%: 1.9 s screened vs 0.8 s float32; width 1.6%:
#: 0.70 vs 0.75 s; Gaussian (0.5%): 0.47 vs 0.76 s.
_SCREEN_MAX_WIDTH = 0.03


def _screen_pays(a: PointSet, b: PointSet, offset: float) -> bool:
    """Whether the screen's interval is narrow at the pass's decisions (see ``_SCREEN_MAX_WIDTH``)."""
    if screen_forced():
        return True
    e = float(a.screened.rho.median() + b.screened.rho.median())
    return offset > 0 and 2 * e <= _SCREEN_MAX_WIDTH * math.sqrt(offset)


def _set_offset(offset: float, *sets: PointSet) -> None:
    for p in sets:
        if p.screened is not None:
            p.screened.set_offset(offset)


def block_shape(n_rows: int, n_cols: int, itemsize: int, block_bytes: int) -> Tuple[int, int]:
    """Rows and columns of a tile so that ``_TILE_TEMPORARIES`` tiles fit ``block_bytes``."""
    elements = max(1, block_bytes // (itemsize * _TILE_TEMPORARIES))
    cols = max(1, min(n_cols, 8192, elements))
    rows = max(1, min(n_rows, elements // cols))
    return rows, cols


def _buffer(elements: int, points: PointSet) -> Tuple[Tensor, Optional[Tensor]]:
    """Reused tile storage of one pass: the tile in the compute dtype, and the bfloat16 GEMM
    output when ``points`` is screened."""
    dev = points.original.device
    low = torch.empty(elements, dtype=torch.bfloat16, device=dev) if points.screened is not None else None
    return torch.empty(elements, dtype=points.dtype, device=dev), low


def _sq_tile(
    buf: Tuple[Tensor, Optional[Tensor]], a_blk: Tensor, a_sq: Tensor, b_blk: Tensor, b_sq: Tensor, offset: float = 0.0
) -> Tensor:
    """``||a||^2 + ||b||^2 - 2 a.b`` clamped at 0, written into (a view of) the reused ``buf``:
    one allocation per pass instead of one per tile. The tile is valid until the next call.
    Screen rows (bfloat16) carry their norms: one bfloat16 GEMM gives the tile (:mod:`._screen`)."""
    shape = (a_blk.shape[0], b_blk.shape[0])
    out = buf[0][: shape[0] * shape[1]].view(shape)
    if a_blk.dtype == torch.bfloat16:
        screen_tile(out, buf[1][: shape[0] * shape[1]].view(shape), a_blk, b_blk, offset)
    else:
        torch.add(a_sq, b_sq[None, :], out=out)
        out.addmm_(a_blk, b_blk.T, alpha=-2.0).clamp_(min=0.0)
    _tick()
    return out


def tiles(a: PointSet, b: PointSet, block_bytes: int, shard: Optional[Shard] = None) -> Iterator[Tuple[int, int, Tensor]]:
    """Yield ``(row0, col0, squared_distance_tile)`` covering ``a x b`` in blocks (only this
    process's tiles when ``shard`` is given)."""
    number = -1
    rows, cols = block_shape(len(a), len(b), a.centre.element_size(), block_bytes)
    if shard is not None:  # enough row blocks (4 per rank) for an even split
        rows = min(rows, max(1, -(-len(a) // (4 * shard.world))))
    b_blocks = [b.right(slice(j0, j0 + cols)) for j0 in range(0, len(b), cols)] if len(b) <= cols else None
    buf = _buffer(min(rows, len(a)) * min(cols, len(b)), a)
    for i0 in range(0, len(a), rows):
        a_blk = a.left(slice(i0, i0 + rows))
        a_sq = a.sq_norms[i0 : i0 + rows, None]
        for j0 in range(0, len(b), cols):
            number += 1
            if shard is not None and not shard.owns(number):
                continue
            b_blk = b_blocks[0] if b_blocks is not None else b.right(slice(j0, j0 + cols))
            yield i0, j0, _sq_tile(buf, a_blk, a_sq, b_blk, b.sq_norms[j0 : j0 + cols], _offset(a, b))


def exact_sq_dist(a: Tensor, b: Tensor) -> Tensor:
    """Float64 ``sum((a - b)^2)`` of matching rows of ``a`` and ``b`` (same shape ``[n, D]``).

    float32 inputs widen exactly to float64, so the difference of a row with a bitwise copy
    of itself is exactly 0, and two calls on the same pair give the same bits.
    """
    diff = a.to(torch.float64, copy=True)
    diff.sub_(b)
    return diff.square_().sum(-1)


#: Memory budget, in bytes, of one chunk of :func:`_exact_pairs` (two gathered rows and a
#: float64 difference per pair: about ``16 * D`` bytes).
_PAIR_CHUNK_BYTES = 32 * 2**20


def _exact_pairs(a: Tensor, b: Tensor, ia: Tensor, ib: Tensor, chunk: Optional[int] = None) -> Tensor:
    """Float64 squared distances of the pairs ``(a[ia[t]], b[ib[t]])``, in chunks sized from
    :data:`_PAIR_CHUNK_BYTES` (many pairs per call at small D: the per-chunk overhead dominated
    the fallback passes)."""
    if chunk is None:
        chunk = max(256, _PAIR_CHUNK_BYTES // (16 * max(1, a.shape[1])))
    out = torch.empty(ia.shape[0], dtype=torch.float64, device=a.device)
    m = min(chunk, ia.shape[0])
    # reused buffers: a fresh allocation per chunk costs more in page faults than the arithmetic
    rows_a = torch.empty((m, a.shape[1]), dtype=a.dtype, device=a.device)
    rows_b = torch.empty((m, b.shape[1]), dtype=b.dtype, device=a.device)
    diff = torch.empty((m, a.shape[1]), dtype=torch.float64, device=a.device)
    for s in range(0, ia.shape[0], chunk):
        c = min(chunk, ia.shape[0] - s)
        torch.index_select(a, 0, ia[s : s + c], out=rows_a[:c])
        torch.index_select(b, 0, ib[s : s + c], out=rows_b[:c])
        d = diff[:c]
        d.copy_(rows_a[:c])
        d.sub_(rows_b[:c])
        out[s : s + c] = d.square_().sum(-1)
    return out


# --------------------------------------------------------------------------------------
# Running top-k with float64 refinement
# --------------------------------------------------------------------------------------


def _exact_rows_topk(
    a: PointSet, b: PointSet, rows: Tensor, bound: Tensor, t: int, exclude_self: bool,
    block_bytes: int = DEFAULT_BLOCK_BYTES, by_index: bool = True,
) -> Tuple[Tensor, Tensor]:
    """Exact float64 ``t`` nearest of ``a[rows]`` in ``b``, among pairs whose GEMM value is below
    ``bound`` (plus the margin): a rigorous fallback for rows where refinement was ambiguous.

    ``by_index``: equal values are ordered by index (the nearest neighbour's identity matters);
    without it only the values are exact (radii), and ties keep whichever index comes first
    (one ``topk`` per tile instead of two and a sort: tie-heavy data, e.g. one-hot tabular
    features, sends many rows here)."""
    if not by_index:
        return _exact_rows_values(a, b, rows, bound, t, exclude_self, block_bytes)
    sub = a.subset(rows)
    # running lists of every row; a tile covers rows i0 : i0 + n_r only (small budgets give
    # tiles of fewer rows than ``rows``), so each tile merges into its own row slice
    best_v = torch.full((len(rows), t), math.inf, dtype=torch.float64, device=a.original.device)
    best_i = torch.zeros((len(rows), t), dtype=torch.long, device=a.original.device)
    for i0, j0, sq in tiles(sub, b, block_bytes // 2):  # float64 tiles: half the elements
        n_r, n_c = sq.shape
        rs = slice(i0, i0 + n_r)
        cand = sq.to(torch.float64) <= _bound(sub, b, rs, slice(j0, j0 + n_c)).maybe_below(bound[rs])[:, None]
        if exclude_self:
            cols = torch.arange(j0, j0 + n_c, device=sq.device)
            cand &= rows[i0 : i0 + n_r, None] != cols[None, :]
        r_loc, c_loc = cand.nonzero(as_tuple=True)
        exact = torch.full((n_r, n_c), math.inf, dtype=torch.float64, device=sq.device)
        exact[r_loc, c_loc] = _exact_pairs(sub.original, b.original, i0 + r_loc, j0 + c_loc)
        cols_idx = torch.arange(j0, j0 + n_c, device=sq.device).expand(n_r, n_c)
        best_v[rs], best_i[rs] = _smallest_by_value_then_index(
            torch.cat([best_v[rs], exact], 1), torch.cat([best_i[rs], cols_idx], 1), t
        )
    return best_v, best_i


def _exact_rows_values(
    a: PointSet, b: PointSet, rows: Tensor, bound: Tensor, t: int, exclude_self: bool, block_bytes: int
) -> Tuple[Tensor, Tensor]:
    """:func:`_exact_rows_topk` when only the values count (radii): candidates are selected in
    the tile's own dtype against one threshold per row (``bound`` plus the row's largest
    margin, rounded up), and only the candidate pairs are recomputed in float64 and merged."""
    sub = a.subset(rows)
    dev = a.original.device
    best_v = torch.full((len(rows), t), math.inf, dtype=torch.float64, device=dev)
    best_i = torch.zeros((len(rows), t), dtype=torch.long, device=dev)
    thr = _bound(sub, b, slice(None)).maybe_below(bound)
    thr_c = thr.to(sub.dtype)
    thr_c = torch.where(thr_c.to(torch.float64) < thr, torch.nextafter(thr_c, torch.full_like(thr_c, math.inf)), thr_c)
    for i0, j0, sq in tiles(sub, b, block_bytes):
        n_r = sq.shape[0]
        r_loc, c_loc = (sq <= thr_c[i0 : i0 + n_r, None]).nonzero(as_tuple=True)
        if exclude_self:
            keep = rows[i0 + r_loc] != j0 + c_loc
            r_loc, c_loc = r_loc[keep], c_loc[keep]
        if r_loc.numel() == 0:
            continue
        exact = _exact_pairs(sub.original, b.original, i0 + r_loc, j0 + c_loc)
        pad_v, pad_i = _padded(r_loc, exact, j0 + c_loc, n_r)  # nonzero lists the pairs row by row
        rs = slice(i0, i0 + n_r)
        best_v[rs], best_i[rs] = merge_topk([best_v[rs], pad_v], [best_i[rs], pad_i], t)
    return best_v, best_i


def _padded(ent: Tensor, vals: Tensor, idx: Tensor, n: int) -> Tuple[Tensor, Tensor]:
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


def _smallest_by_value_then_index(vals: Tensor, idx: Tensor, t: int) -> Tuple[Tensor, Tensor]:
    """Per row, the ``t`` smallest ``(value, index)`` pairs in lexicographic order, by two
    ``topk`` calls instead of a full sort: every value below the t-th smallest is taken, and
    the values equal to it are taken by lowest index."""
    kth = torch.topk(vals, t, dim=1, largest=False, sorted=True).values[:, -1:]
    key = torch.where(vals < kth, -1, torch.where(vals == kth, idx, torch.iinfo(torch.int64).max))
    pos = torch.topk(key, t, dim=1, largest=False, sorted=False).indices
    return _sort_by_value_then_index(torch.gather(vals, 1, pos), torch.gather(idx, 1, pos))


def _sort_by_value_then_index(vals: Tensor, idx: Tensor) -> Tuple[Tensor, Tensor]:
    """Sort each row by value, equal values by index: exact ties go to the lowest index
    (``numpy.argmin``'s rule), whatever the tile order or the block size."""
    order = torch.argsort(idx, dim=1, stable=True)
    vals, idx = torch.gather(vals, 1, order), torch.gather(idx, 1, order)
    order = torch.argsort(vals, dim=1, stable=True)
    return torch.gather(vals, 1, order), torch.gather(idx, 1, order)


def _lowest_identical(points: Tensor, idx: Tensor, sq_dist: Tensor) -> Tensor:
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


def _refine_rows(
    a: PointSet, b: PointSet, rows: Tensor, approx: Tensor, idx: Tensor, k: int, exclude_self: bool, truncated: bool,
    block_bytes: int = DEFAULT_BLOCK_BYTES, by_index: bool = True,
) -> Tuple[Tensor, Tensor]:
    """Exact ``k`` nearest of ``a[rows]`` from their GEMM candidate lists ``approx``/``idx``.

    All candidates are recomputed exactly and re-sorted. A row is *safe* when no non-candidate
    can be closer than its exact k-th value: every non-candidate has a GEMM value at least the
    last candidate's, so ``last - margin >= exact k-th`` suffices. Unsafe rows are recomputed
    rigorously by :func:`_exact_rows_topk`.
    """
    exact = _exact_pairs(a.original, b.original, rows[:, None].expand_as(idx).reshape(-1), idx.reshape(-1))
    exact = torch.where(torch.isinf(approx), math.inf, exact.view(idx.shape))  # padded slots stay empty
    exact_sorted, ids_sorted = _sort_by_value_then_index(exact, idx)
    vals, ids = exact_sorted[:, :k], ids_sorted[:, :k]
    if truncated:
        # an exact k-th value of 0 cannot be beaten (ties at 0 give the same value; the index
        # among identical rows is made canonical by :func:`_lowest_identical`). ``<=``: a
        # non-candidate tied with the k-th value must be found (ties go to the lowest index).
        low = _bound(a, b, rows).low(approx[:, -1].to(torch.float64))
        unsafe = (low <= vals[:, -1]) & (vals[:, -1] > 0)
        if bool(unsafe.any()):
            bad = unsafe.nonzero(as_tuple=True)[0]
            vals[bad], ids[bad] = _exact_rows_topk(
                a, b, rows[bad], vals[bad, -1], k, exclude_self, block_bytes, by_index=by_index
            )
    return vals, ids


def refine_topk(
    a: PointSet, b: PointSet, approx: Tensor, idx: Tensor, ks: Sequence[int], exclude_self: bool, truncated: bool,
    block_bytes: int = DEFAULT_BLOCK_BYTES, by_index: bool = True, shard: Optional[Shard] = None,
) -> Dict[int, Tuple[Tensor, Tensor]]:
    """Exact float64 squared distance and index of the k-th nearest neighbour, for each ``k``.

    ``approx``/``idx`` are sorted running GEMM top-``t`` lists (the same on every rank). Where
    the GEMM values around the k-th candidate are separated by more than twice the rounding
    margin, the k-th neighbour is certain and only its distance is recomputed exactly (one
    pair per row and k). Other rows are fully refined by :func:`_refine_rows`. With a
    ``shard``, each rank refines a contiguous share of the rows and the results are gathered.
    """
    rows = torch.arange(approx.shape[0], device=approx.device)
    if shard is None:
        return _refine_block(a, b, rows, approx, idx, ks, exclude_self, truncated, block_bytes, by_index)
    mine = shard.row_share(len(rows))
    part = _refine_block(a, b, rows[mine], approx[mine], idx[mine], ks, exclude_self, truncated, block_bytes, by_index)
    vals = shard.gather_rows(torch.stack([part[k][0] for k in ks], 1), len(rows))
    ids = shard.gather_rows(torch.stack([part[k][1] for k in ks], 1), len(rows))
    return {k: (vals[:, i].contiguous(), ids[:, i].contiguous()) for i, k in enumerate(ks)}


def _refine_block(
    a: PointSet, b: PointSet, rows: Tensor, approx: Tensor, idx: Tensor, ks: Sequence[int], exclude_self: bool,
    truncated: bool, block_bytes: int, by_index: bool,
) -> Dict[int, Tuple[Tensor, Tensor]]:
    """:func:`refine_topk` for the rows ``rows`` of ``a`` (their lists ``approx``/``idx``)."""
    n, t = approx.shape
    if a.screened is not None:
        return _refine_screened(a, b, rows, approx, idx, ks, exclude_self, truncated, block_bytes, by_index)
    v = approx.to(torch.float64)
    bound = _bound(a, b, rows)
    uncertain = torch.zeros(n, dtype=torch.bool, device=approx.device)
    for k in ks:  # the k-th is certain when its rounding interval overlaps no neighbour's
        if k >= 2:
            uncertain |= bound.low(v[:, k - 1]) <= bound.high(v[:, k - 2])
        if k < t:
            uncertain |= bound.low(v[:, k]) <= bound.high(v[:, k - 1])
        elif truncated:
            uncertain[:] = True
    cols = idx[:, [k - 1 for k in ks]]  # [n, len(ks)]: the k-th candidates, all k at once
    return _settle(a, b, rows, approx, idx, cols, uncertain, ks, exclude_self, truncated, block_bytes, by_index)


def _settle(
    a: PointSet, b: PointSet, rows: Tensor, approx: Tensor, idx: Tensor, cols: Tensor, uncertain: Tensor,
    ks: Sequence[int], exclude_self: bool, truncated: bool, block_bytes: int, by_index: bool,
) -> Dict[int, Tuple[Tensor, Tensor]]:
    """Exact values of the settled k-th candidates ``cols`` (``[n, len(ks)]``), and the uncertain
    rows refined by :func:`_refine_rows`."""
    rows_rep = rows[:, None].expand_as(cols)
    exact = _exact_pairs(a.original, b.original, rows_rep.reshape(-1), cols.reshape(-1)).view(cols.shape)
    out = {k: (exact[:, i].clone(), cols[:, i].clone()) for i, k in enumerate(ks)}
    if bool(uncertain.any()):
        local = uncertain.nonzero(as_tuple=True)[0]
        vals, ids = _refine_rows(
            a, b, rows[local], approx[local], idx[local], max(ks), exclude_self, truncated, block_bytes, by_index=by_index
        )
        for k in ks:
            out[k][0][local], out[k][1][local] = vals[:, k - 1], ids[:, k - 1]
    return out


#: Memory budget, in bytes, of one chunk of :func:`_direct_sq`.
_DIRECT_CHUNK_BYTES = 32 * 2**20


def _direct_sq(a: Tensor, b: Tensor, idx: Tensor) -> Tensor:
    """``sum((a[i] - b[idx[i, j]])^2)`` in ``a``'s dtype (float32), for every candidate.

    Computed from the differences, its error is relative to the distance itself, whatever the
    norms: each of the ``D`` terms carries at most three roundings, and the sum of ``D``
    non-negative terms a relative error that grows like ``sqrt(D) u`` for blocked sums (``(D - 1) u``
    at worst); :func:`_direct_interval` takes the float32 GEMM margin, relative to the distance.
    """
    n, t = idx.shape
    out = torch.empty((n, t), dtype=a.dtype, device=a.device)
    chunk = max(1, _DIRECT_CHUNK_BYTES // (t * a.shape[1] * a.element_size()))
    buf = torch.empty((min(chunk, n) * t, a.shape[1]), dtype=b.dtype, device=a.device)  # reused: no page faults
    for s in range(0, n, chunk):
        rows = idx[s : s + chunk].reshape(-1)
        diff = torch.index_select(b, 0, rows, out=buf[: rows.numel()]).view(-1, t, a.shape[1])
        diff.sub_(a[s : s + chunk, None, :])
        out[s : s + chunk] = diff.square_().sum(-1)
    return out


def _direct_interval(v: Tensor, dim: int) -> Tuple[Tensor, Tensor]:
    """Float64 interval holding the exact squared distance of a :func:`_direct_sq` value ``v``:
    the float32 GEMM margin (:func:`._screen.tol_factor`), here relative to the distance."""
    rel = tol_factor(v.dtype, dim)
    tiny = dim * torch.finfo(v.dtype).tiny
    v = v.to(torch.float64)
    return (v * (1 - rel) - tiny).clamp(min=0), v * (1 + rel) + tiny


def _refine_screened(
    a: PointSet, b: PointSet, rows: Tensor, approx: Tensor, idx: Tensor, ks: Sequence[int], exclude_self: bool,
    truncated: bool, block_bytes: int, by_index: bool,
) -> Dict[int, Tuple[Tensor, Tensor]]:
    """:func:`refine_topk` for lists from bfloat16 screen tiles (rows ``rows`` of ``a``).

    The screen's rounding interval holds many candidates (about 17 at D = 2,048), so almost
    no k-th neighbour is certain from the screen values. The candidates are first recomputed
    in float32 from their differences (:func:`_direct_sq`: error relative to the distance,
    about ``1e-5`` at D = 2,048) and re-sorted; where the k-th candidate's interval overlaps
    no other candidate's and lies below every candidate left out, only the k-th pair is
    computed in float64. Other rows go through :func:`_refine_rows`.
    """
    n, t = approx.shape
    # only the candidates whose interval reaches below the largest k-th candidate's can be
    # among the k nearest: a prefix of each sorted list. Most rows need a short prefix (the
    # screen's interval is narrow near its offset), a few the whole list: two widths
    bound = _bound(a, b, rows)
    screen_low = bound.col().low(approx.to(torch.float64))
    needed = (screen_low <= bound.high(approx[:, max(ks) - 1].to(torch.float64))[:, None]).sum(1)
    short = min(t, max(max(ks) + 1, int(torch.quantile(needed.to(torch.float64), 0.8).ceil()))) if n else t
    cand = torch.empty((n, len(ks)), dtype=torch.long, device=approx.device)
    uncertain = torch.zeros(n, dtype=torch.bool, device=approx.device)
    for sel, width in ((needed <= short, short), (needed > short, t)):
        local = sel.nonzero(as_tuple=True)[0]
        if local.numel():
            cand[local], uncertain[local] = _settle_prefix(
                a, b, rows[local], approx[local, :width], idx[local, :width], screen_low[local], ks, truncated
            )
    return _settle(a, b, rows, approx, idx, cand, uncertain, ks, exclude_self, truncated, block_bytes, by_index)


def _settle_prefix(
    a: PointSet, b: PointSet, rows: Tensor, approx: Tensor, idx: Tensor, screen_low: Tensor, ks: Sequence[int],
    truncated: bool,
) -> Tuple[Tensor, Tensor]:
    """The k-th candidates of ``a[rows]`` from the first ``width`` entries of their sorted screen
    lists (``approx``/``idx``), recomputed in float32 from differences, and the rows where that
    does not settle them: two candidates' intervals overlap at the k-th place, or a candidate
    left out (beyond the width: at least ``screen_low[:, width]`` far; not listed: at least the
    last listed value's) may be nearer."""
    width, t = approx.shape[1], screen_low.shape[1]
    direct = torch.where(torch.isinf(approx), math.inf, _direct_sq(a.original[rows], b.original, idx))
    direct, order = torch.sort(direct, dim=1, stable=True)
    cand = torch.gather(idx, 1, order)
    lo, hi = _direct_interval(direct, a.dim)
    floor = screen_low[:, width] if width < t else screen_low[:, -1] if truncated else None
    uncertain = torch.zeros(len(rows), dtype=torch.bool, device=rows.device)
    for k in ks:
        if k >= 2:
            uncertain |= lo[:, k - 1] <= hi[:, k - 2]
        if k < width:
            uncertain |= lo[:, k] <= hi[:, k - 1]
        if floor is not None:
            uncertain |= floor <= hi[:, k - 1]
    return cand[:, [k - 1 for k in ks]], uncertain


def _tile_topk(sq: Tensor, t: int, dim: int) -> Tuple[Tensor, Tensor]:
    """The ``t`` smallest values of a tile along ``dim``, as ``[rows_of_other_dim, t]``."""
    v, i = torch.topk(sq, min(t, sq.shape[dim]), dim=dim, largest=False, sorted=False)
    return (v, i) if dim == 1 else (v.T, i.T)


def _merge_into(vals: Tensor, idx: Tensor, rows: slice, new_v: Tensor, new_i: Tensor, t: int) -> None:
    """Merge candidate lists ``new_v``/``new_i`` into the running lists of ``rows`` (in place)."""
    vals[rows], idx[rows] = merge_topk([vals[rows], new_v], [idx[rows], new_i], t)


def _merge_tile(vals: Tensor, idx: Tensor, span: slice, sq: Tensor, dim: int, offset: int, t: int) -> None:
    """Merge a tile into the running top-``t`` lists of ``span`` (its rows for ``dim=1``, its
    columns for ``dim=0``); the tile's indices along ``dim`` are shifted by ``offset``.

    Once the lists are full, only tile entries below an entity's current ``t``-th value can
    enter: they are found by one comparison and merged from a small padded block, instead of a
    ``topk`` over the whole tile (along the columns of a wide row-major tile ``topk`` is strided
    and several times slower than the comparison). Entries equal to the ``t``-th value are
    left out; the lists stay approximate GEMM lists, which :func:`refine_topk` makes exact.
    """
    thr = vals[span, -1]  # the lists are sorted: the t-th value of each entity
    cand = None
    if not bool(torch.isinf(thr).any()):
        cand = (sq < (thr[None, :] if dim == 0 else thr[:, None])).nonzero(as_tuple=True)
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
    _merge_into(vals, idx, span, *_padded(ent, v, other + offset, thr.numel()), t)


def self_knn(
    points: PointSet, ks: Iterable[int], block_bytes: int = DEFAULT_BLOCK_BYTES, shard: Optional[Shard] = None
) -> Dict[int, Tensor]:
    """``NND_k`` for every ``k`` in ``ks``: distance to the k-th nearest *other* row.

    Only the tiles on and above the block diagonal are computed: each off-diagonal tile
    updates the running top-k of its rows and, transposed, of its columns (half the GEMM
    work of a full pass). The diagonal is masked by index, so an exact duplicate still
    counts at distance 0. Returns exact float64 *squared* distances, one ``[n]`` tensor per
    ``k`` (squared, so that ``d^2 <= r^2`` comparisons stay exact; ``.sqrt()`` for radii).
    With a ``shard``, this process computes its share of the tiles and the running lists are
    merged across the group.
    """
    ks = sorted(set(int(k) for k in ks))
    n = len(points)
    if points.screened is not None:
        offset = _estimate_offset(points, points, ks[-1], True)
        if _screen_pays(points, points, offset):
            _set_offset(offset, points)
        else:
            points = unscreened(points, block_bytes)
    t = min(ks[-1] + points.slack, n - 1)
    dev, cdt = points.original.device, points.dtype
    vals = torch.full((n, t), math.inf, dtype=cdt, device=dev)
    idx = torch.zeros((n, t), dtype=torch.long, device=dev)
    side = max(1, int(math.isqrt(max(1, block_bytes // (points.centre.element_size() * _TILE_TEMPORARIES)))))
    # diagonal tiles are computed whole, so the saved share of the GEMM is 1/2 - 1/(2 blocks):
    # at least _SELF_BLOCKS blocks (56% of the full work with 8, 67% with 3; more blocks add
    # per-tile overhead: 16 and 32 measured slower at 10,000 x 2,048), tiles of >= 512 rows
    side = min(side, max(512, -(-n // _SELF_BLOCKS)))
    if shard is not None:  # enough tiles (about 4 per rank or more) for an even split
        side = min(side, max(1, -(-n // (3 * shard.world))))
    buf = _buffer(min(side, n) ** 2, points)
    number = -1
    for i0 in range(0, n, side):
        rows = slice(i0, min(i0 + side, n))
        a_blk, a_sq = None, points.sq_norms[rows, None]
        for j0 in range(i0, n, side):
            number += 1
            if shard is not None and not shard.owns(number):
                continue
            a_blk = points.left(rows) if a_blk is None else a_blk
            cols = slice(j0, min(j0 + side, n))
            b_blk = points.right(cols) if points.screened is not None or j0 != i0 else a_blk
            sq = _sq_tile(buf, a_blk, a_sq, b_blk, points.sq_norms[cols], _offset(points, points))
            if j0 == i0:
                sq.fill_diagonal_(math.inf)
            _merge_tile(vals, idx, rows, sq, 1, j0, t)
            if j0 != i0:
                _merge_tile(vals, idx, cols, sq, 0, i0, t)
    if shard is not None:
        vals, idx = shard.merge_topk(vals, idx)
    refined = refine_topk(
        points, points, vals, idx, ks, True, truncated=t < n - 1, block_bytes=block_bytes, by_index=False, shard=shard
    )
    return {k: refined[k][0] for k in ks}


# --------------------------------------------------------------------------------------
# The real x fake pass
# --------------------------------------------------------------------------------------


@dataclass
class CrossResult:
    """Everything the k-NN metrics need from the real x fake tiles.

    Keys of the dicts are the ``k`` of the radii used.

    Attributes:
        fake_in_real: ``[M]`` bool per k: fake inside some real ball (precision).
        fake_ball_count: ``[M]`` int64 per k: number of real balls holding the fake (density).
        real_ball_hit: ``[N]`` bool per k: real sample's own ball holds a fake (coverage).
        real_in_fake: ``[N]`` bool per k: real inside some fake ball (recall).
        realism: ``[M]`` float64 realism scores, or None.
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


#: Above this share of candidate pairs in a tile, membership stays a dense mask.
_SPARSE_SHARE = 1 / 16
#: A screened cross tile with more ambiguous pairs than this share is recomputed in the
#: compute dtype (a float64 pair costs about as much as 100 pairs of a float32 GEMM).
_AMBIGUOUS_SHARE = 1 / 256


class _Ambiguous(Exception):
    """Raised by :class:`_Members` when a screened tile holds too many ambiguous pairs."""


def _check(ambiguous: int, limit: Optional[float]) -> None:
    if limit is not None and ambiguous > limit:
        raise _Ambiguous()


def _thresholds(thr: Tensor, bound: Bound, dtype: torch.dtype) -> Tuple[Tensor, Tensor]:
    """Tile values at or below which a pair is surely / maybe within ``thr`` (float64 squared
    radii), in the tile's dtype, widened by the rounding of the bounds themselves."""
    widen = torch.finfo(dtype).eps * thr
    return (bound.sure_below(thr) - widen).to(dtype), (bound.maybe_below(thr) + widen).to(dtype)


def _rows_inside(
    sq: Tensor, thr: Tensor, bound: Bound, exact_fn: Callable, decided: Tensor, limit: Optional[float]
) -> Tensor:
    """Per tile row: inside the ball (radius ``thr``, one per column) of some column (recall).

    Only an existence per row is wanted, so rows already ``decided`` (inside some ball of an
    earlier tile) or surely inside a ball of this one need no float64 work; the pairs that
    may be inside are listed only for the rows still open. With recall near 1 (most real
    samples inside some generated ball) almost every row is settled by one comparison.
    """
    lo, hi = _thresholds(thr, bound, sq.dtype)
    done = decided | (sq <= lo[None, :]).any(1)
    open_rows = (~done).nonzero(as_tuple=True)[0]
    if open_rows.numel() == 0:
        return done
    part = sq if open_rows.numel() * 2 > sq.shape[0] else sq[open_rows]
    r, c = (part <= hi[None, :]).nonzero(as_tuple=True)
    if part is sq:
        keep = ~done[r]
        r, c = r[keep], c[keep]
    else:
        r = open_rows[r]
    if r.numel():
        _check(r.numel(), limit)
        inside = exact_fn(r, c) <= thr[c]
        done = done.index_fill(0, r[inside], True)
    return done


class _Members:
    """The pairs ``(row, col)`` of a tile with ``sq <= thr[row]`` (balls of the tile's rows): a
    sparse list or a dense mask.

    A ball holds few points of the other set (about k per ball when the sets match), so the
    pairs below the upper rounding bound are usually a small share of the tile: they are
    listed once and every reduction runs on the list. Dense tiles (collapsed models, ties)
    keep a mask. Pairs within the rounding margin are decided in float64 (``exact_fn``).
    """

    def __init__(
        self, sq: Tensor, thr: Tensor, bound: Bound, exact_fn: Callable,
        within: Optional["_Members"] = None, limit: Optional[float] = None,
    ) -> None:
        """``limit``: raise :class:`_Ambiguous` rather than decide more pairs in float64."""
        lo, hi = _thresholds(thr, bound, sq.dtype)
        self.shape, self.limit = sq.shape, limit
        self.maybe: Optional[Tuple[Tensor, Tensor, Tensor]] = None
        if within is not None and within.maybe is not None:
            # smaller balls of the same centres (thr <= within's thr, elementwise): the pairs
            # below this upper bound are among ``within``'s listed pairs, no tile pass needed
            r, c, v = within.maybe
            sel = v <= hi[r]
            self._sparse(r[sel], c[sel], v[sel], thr, lo, exact_fn)
            return
        maybe = sq <= hi[:, None]
        if int(torch.count_nonzero(maybe)) <= _SPARSE_SHARE * sq.numel():
            r, c = maybe.nonzero(as_tuple=True)
            self._sparse(r, c, sq[r, c], thr, lo, exact_fn)
        else:
            sure = sq <= lo[:, None]
            amb = maybe & ~sure
            if bool(amb.any()):
                r, c = amb.nonzero(as_tuple=True)
                _check(r.numel(), self.limit)
                sure[r, c] = exact_fn(r, c) <= thr[r]
            self.mask = sure

    def _sparse(self, r: Tensor, c: Tensor, v: Tensor, thr: Tensor, lo: Tensor, exact_fn: Callable) -> None:
        """Members from the listed pairs below the upper bound (values ``v``): sure below ``lo``,
        the rest decided in float64."""
        self.maybe = (r, c, v)
        keep = v <= lo[r]
        amb = (~keep).nonzero(as_tuple=True)[0]
        if amb.numel():
            _check(amb.numel(), self.limit)
            keep[amb] = exact_fn(r[amb], c[amb]) <= thr[r[amb]]
        self.rows, self.cols, self.mask = r[keep], c[keep], None

    def any_per_col(self) -> Tensor:
        if self.mask is not None:
            return self.mask.any(0)
        out = torch.zeros(self.shape[1], dtype=torch.bool, device=self.cols.device)
        return out.index_fill_(0, self.cols, True)

    def any_per_row(self) -> Tensor:
        if self.mask is not None:
            return self.mask.any(1)
        out = torch.zeros(self.shape[0], dtype=torch.bool, device=self.rows.device)
        return out.index_fill_(0, self.rows, True)

    def count_per_col(self) -> Tensor:
        if self.mask is not None:
            return self.mask.sum(0)
        return torch.bincount(self.cols, minlength=self.shape[1])

    def min_per_row(self, col_values: Tensor) -> Tensor:
        """Minimum of ``col_values`` over each row's member columns (``inf`` when none)."""
        if self.mask is not None:
            return torch.where(self.mask, col_values[None, :], math.inf).amin(1)
        out = torch.full((self.shape[0],), math.inf, dtype=col_values.dtype, device=col_values.device)
        return out.scatter_reduce_(0, self.rows, col_values[self.cols], reduce="amin")


class _RunningNearest:
    """Running top-``t`` (GEMM values) of the other set, for every row of one set."""

    def __init__(self, n: int, t: int, dtype: torch.dtype, device: torch.device) -> None:
        self.t = t
        self.vals = torch.full((n, t), math.inf, dtype=dtype, device=device)
        self.idx = torch.zeros((n, t), dtype=torch.long, device=device)

    def update(self, rows: slice, sq: Tensor, dim: int, offset: int) -> None:
        _merge_tile(self.vals, self.idx, rows, sq, dim, offset, self.t)


class _ScreenedRealism:
    """Realism from screened tiles, exact in float64.

    Per generated sample, a running list of the ``t`` reals with the largest approximate ratio
    ``r^2 / v`` (``v`` the screen value) is kept; pairs closer than ``s0`` (64 rounding radii:
    near-copies, where the screen's relative error is large) are decided exactly as they come.
    At the end, the listed pairs whose ratio interval reaches the best lower bound are
    recomputed in float64 (a few per sample) and the largest exact ratio is the realism.
    Beyond ``s0`` a screen value ``v`` is within a factor ``F(v) = v / low(v)`` of the exact
    squared distance, so no unlisted real can beat the listed ones once the best exact ratio is
    at least ``F`` times the last listed approximate one; samples where that fails are
    recomputed by the caller in float64 over every kept real sample.
    """

    def __init__(self, real: PointSet, fake: PointSet, num: Tensor, t: int) -> None:
        m, dev = len(fake), real.original.device
        self.real, self.fake, self.num = real, fake, num  # float64, -1 for pruned balls
        self.neg_num = (-num).to(torch.float32)
        bound = _bound(real, fake, slice(None))
        # per real row; at least 4x the largest value that may still be a copy (the offset's
        # rounding can leave a copy well above 0), so that beyond s0 every distance is positive
        zero = torch.zeros_like(bound.tau)
        self.s0 = torch.maximum(torch.maximum(4096 * bound.e.square(), 64 * bound.tau), 4 * bound.maybe_below(zero))
        # pruned balls never need the exact path: a negative threshold, one comparison per tile
        self.s0_kept = torch.where(num >= 0, self.s0, -1.0).to(torch.float32)
        # one bound for every row (the largest rounding terms), applied from the smallest
        # squared distance an unlisted pair can have (see :meth:`finish`)
        self.bound = Bound(bound.rel, bound.e.max(), bound.tau.max(), bound.offset)
        self.bound_no_offset = Bound(bound.rel, bound.e.max(), bound.tau.max())
        kept = num >= 0
        # unlisted pairs of kept balls are above their row's float32 threshold, hence above this
        self.s0_min = self.s0_kept[kept].min().to(torch.float64) if bool(kept.any()) else self.s0.min()
        self.num_min = num[kept].min() if bool(kept.any()) else torch.zeros((), dtype=num.dtype, device=dev)
        self.listed = _RunningNearest(m, t, torch.float32, dev)
        self.near_best = torch.full((m,), -math.inf, dtype=torch.float64, device=dev)

    def update(self, rs: slice, cs: slice, sq: Tensor, i0: int, exact_fn: Callable) -> None:
        neg_ratio = torch.div(self.neg_num[rs, None], sq)
        r0, c0 = (sq <= self.s0_kept[rs, None]).nonzero(as_tuple=True)
        if r0.numel():
            ratio = _exact_ratio(self.num[rs][r0], exact_fn(r0, c0))
            best = self.near_best[cs]
            best.scatter_reduce_(0, c0, ratio, reduce="amax")
            neg_ratio[r0, c0] = math.inf  # decided exactly: never listed
        self.listed.update(cs, neg_ratio, 0, i0)

    def finish(self, shard: Optional[Shard]) -> Tuple[Tensor, Tensor]:
        """Exact ratio maxima (float64) and the indices of the unsafe generated samples."""
        if shard is not None:
            self.listed.vals, self.listed.idx = shard.merge_topk(self.listed.vals, self.listed.idx)
            self.near_best = shard.max(self.near_best)
        # each rank settles a share of the generated samples (every rank has the merged lists)
        mine = shard.row_share(len(self.fake)) if shard is not None else slice(None)
        vals, idx, near_best = self.listed.vals[mine], self.listed.idx[mine], self.near_best[mine]
        num, listed = self.num[idx], torch.isfinite(vals)
        # the screen values back from the listed ratios (float32 division: within 1e-6), their
        # intervals, and the listed pairs whose ratio may still be the largest
        q = -vals.to(torch.float64)
        v = torch.where(q > 0, num / q, math.inf)
        floor, ceiling = _ratio_interval(num, self.bound.low(v * (1 - 1e-6)), self.bound.high(v * (1 + 1e-6)))
        floor = torch.where(listed, floor, -math.inf)
        best = torch.maximum(near_best, floor.amax(1))
        f, j = (listed & (num >= 0) & (ceiling >= best[:, None])).nonzero(as_tuple=True)
        # those pairs exactly (float64); the largest exact ratio beats every other listed one
        first = 0 if shard is None else mine.start
        dist = _exact_pairs(self.real.original, self.fake.original, idx[f, j], f + first)
        best = near_best.scatter_reduce(0, f, _exact_ratio(num[f, j], dist), reduce="amax")
        last = -vals[:, -1].to(torch.float64)  # the t-th largest approximate ratio
        # an unlisted pair of a kept ball has ratio num / v <= last, so v >= num_min / last, and
        # v > s0: its exact ratio is at most last * F(v). F(v) = v / low(v) decreases below the
        # offset c; above it the spread rel (v - c) is below the offset-free rel v, whose F
        # decreases too: the larger of the two at the smallest v bounds every unlisted pair
        v = torch.maximum(self.num_min / last.clamp(min=1e-300), self.s0_min)
        factor = torch.maximum(v / self.bound.low(v), v / self.bound_no_offset.low(v))
        unsafe = torch.isfinite(vals[:, -1]) & (last > 0) & (best < last * factor)
        if shard is not None:
            best = shard.gather_rows(best, len(self.fake))
            unsafe = shard.gather_rows(unsafe, len(self.fake))
        return best, unsafe.nonzero(as_tuple=True)[0]


def _exact_realism(real: PointSet, fake: PointSet, fakes: Tensor, num: Tensor, block_bytes: int) -> Tensor:
    """Float64 ``max num / d^2`` over the kept real samples (``num >= 0``) for the generated
    samples ``fakes`` (the few whose lists could not settle it): compute-dtype tiles of these
    samples against every real one bound each ratio; the pairs whose upper bound reaches the
    best lower bound are recomputed in float64."""
    dev = num.device
    if len(fakes) == 0:  # a rank's empty share under DDP
        return torch.empty(0, dtype=torch.float64, device=dev)
    sub, reals = unscreened(fake, 0).subset(fakes), unscreened(real, 0)
    floor_best = torch.full((len(fakes),), -math.inf, dtype=torch.float64, device=dev)
    pairs = []
    for i0, j0, sq in tiles(sub, reals, max(1, block_bytes // 4)):  # float64 copies of the tile
        n_r, n_c = sq.shape
        rs = slice(i0, i0 + n_r)
        bound, v = _bound(sub, reals, rs, slice(j0, j0 + n_c)).col(), sq.to(torch.float64)
        nums = num[None, j0 : j0 + n_c]
        floor, ceiling = _ratio_interval(nums, bound.low(v), bound.high(v))
        floor_best[rs] = torch.maximum(floor_best[rs], floor.amax(1))
        r, c = (ceiling >= floor_best[rs, None]).nonzero(as_tuple=True)  # a superset of the final
        pairs.append((i0 + r, j0 + c, ceiling[r, c]))
    f, j, ceiling = (torch.cat(p) for p in zip(*pairs))
    keep = ceiling >= floor_best[f]
    f, j = f[keep], j[keep]
    ratio = _exact_ratio(num[j], _exact_pairs(real.original, fake.original, j, fakes[f]))
    out = torch.full((len(fakes),), -math.inf, dtype=torch.float64, device=dev)
    return out.scatter_reduce(0, f, ratio, reduce="amax")


def _ratio_interval(num: Tensor, low: Tensor, high: Tensor) -> Tuple[Tensor, Tensor]:
    """Bounds of a kept ball's ratio ``num / d^2`` from bounds ``[low, high]`` of ``d^2``: a pair
    that may be at distance 0 may be a copy (``inf``); pruned balls (``num < 0``) get ``-inf``."""
    kept = num >= 0
    floor = torch.where(kept, num / high, -math.inf)
    ceiling = torch.where(kept, torch.where(low > 0, num / low, math.inf), -math.inf)
    return floor, ceiling


def _exact_ratio(num: Tensor, dist: Tensor) -> Tensor:
    """``num / dist`` with the realism conventions: a copy of a kept ball's centre is ``inf``
    (even when the radius is 0), a pruned ball (``num < 0``) stays negative."""
    return torch.where((dist == 0) & (num >= 0), math.inf, num / dist)


def cross_pass(
    real: PointSet,
    fake: PointSet,
    real_sq_radii: Dict[int, Tensor],
    fake_sq_radii: Dict[int, Tensor],
    *,
    member_ks: Sequence[int] = (),
    recall_ks: Sequence[int] = (),
    realism_k: Optional[int] = None,
    nearest: Union[bool, str] = False,
    fake_values: Optional[Tensor] = None,
    value_ks: Sequence[int] = (),
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    shard: Optional[Shard] = None,
) -> CrossResult:
    """One pass over the real x fake tiles, reduced in both directions.

    Args:
        real_sq_radii / fake_sq_radii: exact float64 squared ``NND_k`` per k.
        member_ks: real-ball radii k for which fake membership, counts and coverage are wanted.
        recall_ks: fake-ball radii k for which real membership is wanted.
        realism_k: real radii k for realism (median-pruned, plain-distance ratio), or None.
        nearest: exact nearest neighbours across the sets: True for both directions, ``"fake"``
            for the nearest real sample of each fake only (what authenticity needs).
        fake_values, value_ks: per-fake values whose minimum over each real ball (radius k
            in ``value_ks``) is wanted.
        shard: compute only this process's tiles and combine the accumulators across the group.
    """
    if (real.screened is None) != (fake.screened is None):  # one set too small to be screened
        real, fake = unscreened(real, block_bytes), unscreened(fake, block_bytes)
    screened = real.screened is not None
    if screened:  # the scale of the decisions: the real balls' radii, or the nearest distances
        radii = [real_sq_radii[k] for k in sorted(set(member_ks) | set(value_ks) | {realism_k} - {None})]
        offset = float(radii[-1].median()) if radii else _estimate_offset(fake, real, 1, False)
        if _screen_pays(real, fake, offset):
            _set_offset(offset, real, fake)
        else:
            real, fake = unscreened(real, block_bytes), unscreened(fake, block_bytes)
            screened = False
    # a screened tile with too many ambiguous pairs is recomputed from the float rows
    plain_real, plain_fake = replace(real, screened=None), replace(fake, screened=None)
    n, m = len(real), len(fake)
    dev, cdt = real.original.device, real.dtype
    res = CrossResult()
    for k in member_ks:
        res.fake_in_real[k] = torch.zeros(m, dtype=torch.bool, device=dev)
        res.fake_ball_count[k] = torch.zeros(m, dtype=torch.long, device=dev)
        res.real_ball_hit[k] = torch.zeros(n, dtype=torch.bool, device=dev)
    for k in recall_ks:
        res.real_in_fake[k] = torch.zeros(n, dtype=torch.bool, device=dev)
    for k in value_ks:
        res.real_ball_min_value[k] = torch.full((n,), math.inf, dtype=torch.float64, device=dev)
    if realism_k is not None:
        r_sq = real_sq_radii[realism_k]
        keep = r_sq.sqrt() <= torch.quantile(r_sq.sqrt(), 0.5)
        # ratio r^2 / d^2 by one division: pruned balls get -1 (never the maximum of a kept
        # ball, whose ratios are >= 0); a kept ball of radius 0 gives 0 / d^2 = 0 to every
        # sample not on it, and (below, from the exact distance) inf to a copy of its centre
        realism_num64 = torch.where(keep, r_sq, -1.0)  # exact, for the pairs decided in float64
        realism_num = realism_num64.to(cdt)
        realism_max = torch.full((m,), -math.inf, dtype=cdt, device=dev)
    screened_realism = (
        _ScreenedRealism(real, fake, realism_num64, min(_SCREEN_REALISM_LIST, n))
        if screened and realism_k is not None
        else None
    )
    if nearest not in (False, True, "fake"):
        raise ValueError(f"Expected argument `nearest` to be True, False or 'fake', but got {nearest!r}")
    near_fake = _RunningNearest(m, min(1 + real.slack, n), cdt, dev) if nearest else None
    near_real = _RunningNearest(n, min(1 + real.slack, m), cdt, dev) if nearest is True else None

    for i0, j0, sq in tiles(real, fake, block_bytes, shard):
        n_r, n_c = sq.shape
        rs, cs = slice(i0, i0 + n_r), slice(j0, j0 + n_c)

        def exact_fn(r: Tensor, c: Tensor) -> Tensor:
            return _exact_pairs(real.original, fake.original, i0 + r, j0 + c)

        def decide(sq: Tensor, a: PointSet, b: PointSet, limit: Optional[int]):
            # margins use the tile's largest norm on the other side: a conservative bound
            row_bound, col_bound = _bound(a, b, rs, cs), _bound(b, a, cs, rs)
            balls, wider = {}, None  # largest k first: a smaller k's balls lie inside, so its pairs are among those listed
            for k in sorted(set(member_ks) | set(value_ks), reverse=True):
                balls[k] = wider = _Members(sq, real_sq_radii[k][rs], row_bound, exact_fn, wider, limit)
            inside = {
                k: _rows_inside(sq, fake_sq_radii[k][cs], col_bound, exact_fn, res.real_in_fake[k][rs], limit)
                for k in recall_ks
            }
            return balls, inside, row_bound

        try:
            balls, inside, row_bound = decide(sq, real, fake, sq.numel() * _AMBIGUOUS_SHARE if screened else None)
        except _Ambiguous:
            sq = _sq_tile((sq.reshape(-1), None), plain_real.left(rs), plain_real.sq_norms[rs, None], plain_fake.right(cs), plain_fake.sq_norms[cs])
            balls, inside, row_bound = decide(sq, plain_real, plain_fake, None)
        for k, members in balls.items():
            if k in res.fake_in_real:
                res.fake_in_real[k][cs] |= members.any_per_col()
                res.fake_ball_count[k][cs] += members.count_per_col()
                res.real_ball_hit[k][rs] |= members.any_per_row()
            if k in res.real_ball_min_value:
                best = res.real_ball_min_value[k]
                best[rs] = torch.minimum(best[rs], members.min_per_row(fake_values[cs]))
        for k, rows_in in inside.items():
            res.real_in_fake[k][rs] |= rows_in
        if screened_realism is not None:  # (the screen's bound holds for recomputed tiles too)
            screened_realism.update(rs, cs, sq, i0, exact_fn)
        elif realism_k is not None:
            ratio = realism_num[rs, None] / sq
            # a pair whose GEMM value is within the rounding margin of 0 may be an exact copy
            # (ratio inf) that rounding made positive, or a distinct pair that rounding made 0:
            # its ratio is taken from the exact distance
            r0, c0 = (sq <= row_bound.tau.to(sq.dtype)[:, None]).nonzero(as_tuple=True)
            if r0.numel():
                num, dist = realism_num64[rs][r0], exact_fn(r0, c0)
                exact_ratio = torch.where((dist == 0) & (num >= 0), math.inf, num / dist)  # a copy: inf, even 0/0
                ratio[r0, c0] = exact_ratio.to(ratio.dtype)
            realism_max[cs] = torch.maximum(realism_max[cs], ratio.amax(0))
        if near_fake is not None:
            near_fake.update(cs, sq, 0, i0)
        if near_real is not None:
            near_real.update(rs, sq, 1, j0)

    if shard is not None:
        _combine(res, shard)
        if realism_k is not None and screened_realism is None:
            realism_max = shard.max(realism_max)
        for near in (near_fake, near_real):
            if near is not None:
                near.vals, near.idx = shard.merge_topk(near.vals, near.idx)
    if screened_realism is not None:
        best, unsafe = screened_realism.finish(shard)
        if unsafe.numel():  # ties the lists cannot settle: every kept real sample, in float64
            mine = shard.row_share(len(unsafe)) if shard is not None else slice(None)
            part = _exact_realism(real, fake, unsafe[mine], screened_realism.num, block_bytes)
            best[unsafe] = shard.gather_rows(part, len(unsafe)) if shard is not None else part
        res.realism = best.clamp(min=0).sqrt()
    elif realism_k is not None:
        res.realism = realism_max.to(torch.float64).clamp(min=0).sqrt()
    # nearest neighbours: exact ties (equidistant samples) go to the lowest index, as numpy's
    # argmin; authenticity depends on which tied real sample is i*
    if near_real is not None:
        dist, index = refine_topk(
            real, fake, near_real.vals, near_real.idx, [1], False, truncated=near_real.t < m, block_bytes=block_bytes,
            shard=shard,
        )[1]
        res.real_nn_sq_dist, res.real_nn_index = dist, _lowest_identical(fake.original, index, dist)
    if near_fake is not None:
        dist, index = refine_topk(
            fake, real, near_fake.vals, near_fake.idx, [1], False, truncated=near_fake.t < n, block_bytes=block_bytes,
            shard=shard,
        )[1]
        res.fake_nn_sq_dist, res.fake_nn_index = dist, _lowest_identical(real.original, index, dist)
    return res


def _combine(res: CrossResult, shard: Shard) -> None:
    """All-reduce the per-sample accumulators of a sharded cross pass."""
    for k in res.fake_in_real:
        res.fake_in_real[k] = shard.any(res.fake_in_real[k])
        res.fake_ball_count[k] = shard.sum(res.fake_ball_count[k])
        res.real_ball_hit[k] = shard.any(res.real_ball_hit[k])
    for k in res.real_in_fake:
        res.real_in_fake[k] = shard.any(res.real_in_fake[k])
    for k in res.real_ball_min_value:
        res.real_ball_min_value[k] = shard.min(res.real_ball_min_value[k])
