"""Realism (Kynkaanniemi et al. 2019, eq. 3), float64-exact from running candidate lists.

Stage: a reduction of the cross tiles (:class:`Realism`; may call :mod:`.exact`, :mod:`.tiling`,
:mod:`.points`, :mod:`.lists`, :mod:`.bounds`, :mod:`.reduction`, :mod:`.shard`).
``R(g) = max_i r_i / d(g, x_i)`` over the real balls whose radius is at most the median (pruned balls
never count); computed on squared values, ``r_i^2 / d^2``, and a copy of a kept ball's centre is
``inf`` (even at radius 0).

Example:
    >>> import torch
    >>> exact_ratio(torch.tensor([4.0, 4.0, -1.0]), torch.tensor([1.0, 0.0, 2.0])).tolist()
    [4.0, inf, -0.5]
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.knn.exact import exact_pairs
from lightning_prd.functional.knn.lists import RunningNearest, merge_topk, padded
from lightning_prd.functional.knn.points import PointSet, bound, unscreened
from lightning_prd.functional.knn.reduction import Tile, TilePass, TileReduction, flagged
from lightning_prd.functional.knn.shard import Shard
from lightning_prd.functional.knn.tiling import tiles

#: Length of the realism lists: ratios spread less than distances, so the largest ones need a
#: longer list to be proven (33: no sample recomputed at 10,000 x 2,048 screened; 17: 57).
REALISM_LIST = 33
#: The same for float32 / float64 tiles, whose interval is narrow: the list only has to hold
#: the ratios within the tiles' rounding of the largest (a longer list costs more per tile).
REALISM_LIST_FLOAT = 4


class RealismLists:
    """Realism from tiles of any kind (float32, float64, bfloat16 screen), exact in float64.

    Per generated sample, a running list of the ``t`` reals with the largest approximate ratio
    ``r^2 / v`` (``v`` the tile value) is kept; pairs closer than ``s0`` (64 rounding radii:
    near-copies, where a tile's relative error is large) are decided exactly as they come.
    At the end, the listed pairs whose ratio interval reaches the best lower bound are
    recomputed in float64 (a few per sample) and the largest exact ratio is the realism.
    Beyond ``s0`` a tile value ``v`` is within a factor ``F(v) = v / low(v)`` of the exact
    squared distance, so no unlisted real can beat the listed ones once the best exact ratio is
    at least ``F`` times the last listed approximate one; samples where that fails are
    recomputed by the caller in float64 over every kept real sample (:func:`exact_realism`).
    Per tile, while a list is not full: every ratio (one division) merged into the lists (on
    CUDA always, by a ``topk`` of the tile, which needs no host synchronisation:
    :meth:`update_deferred`, whose near pairs :mod:`.deferred` decides after the loop). Once full, a
    pair can only enter if ``num / v`` beats its list's floor ``f``, so ``v < max(num) / f``:
    one comparison of the tile with that per-column threshold (widened to the near-pair
    threshold) finds a superset of the entering and near pairs; only those are divided, and
    only the lists that gain an entry are merged: the same lists, at a fraction of the cost.
    """

    def __init__(self, real: PointSet, fake: PointSet, num: Tensor) -> None:
        t = min(REALISM_LIST if real.screened is not None else REALISM_LIST_FLOAT, len(real))
        m, dev = len(fake), real.original.device
        cdt = real.dtype  # of the tiles (float32 for the screen's)
        self.real, self.fake, self.num = real, fake, num  # float64, -1 for pruned balls
        self.neg_num = (-num).to(cdt)
        bnd = bound(real, fake, slice(None))
        # per real row; at least 4x the largest value that may still be a copy (the offset's
        # rounding can leave a copy well above 0), so that beyond s0 every distance is positive
        zero = torch.zeros_like(bnd.tau)
        s0 = torch.maximum(64 * bnd.tau, 4 * bnd.maybe_below(zero))
        self.s0 = s0 if bnd.e is None else torch.maximum(4096 * bnd.e.square(), s0)
        # pruned balls never need the exact path: a negative threshold, one comparison per tile
        self.s0_kept = torch.where(num >= 0, self.s0, -1.0).to(cdt)
        # one bound for every row (the largest rounding terms), applied from the smallest
        # squared distance an unlisted pair can have (see :meth:`finish`)
        self.bound = bnd.widest()
        self.bound_no_offset = replace(self.bound, offset=0.0)
        kept = num >= 0
        # unlisted pairs of kept balls are above their row's tile-dtype threshold, hence above this
        self.s0_min = self.s0_kept[kept].min().to(torch.float64) if bool(kept.any()) else self.s0.min()
        self.num_min = num[kept].min() if bool(kept.any()) else torch.zeros((), dtype=num.dtype, device=dev)
        self.listed = RunningNearest(m, t, cdt, dev)
        self.near_best = torch.full((m,), -math.inf, dtype=torch.float64, device=dev)
        self._bufs: Dict[torch.dtype, Tensor] = {}

    def update(self, rs: slice, cs: slice, sq: Tensor, i0: int, exact_fn: Callable) -> None:
        """Merge a tile (real rows ``rs`` x generated columns ``cs``) into the lists."""
        thr = self.listed.vals[cs].amax(1)  # per generated sample: the t-th largest ratio, negated
        if bool(torch.isinf(thr).any()):  # lists not yet full (first tiles)
            self._update_full(rs, cs, sq, i0, exact_fn)
        else:
            self._update_below_floor(rs, cs, sq, i0, exact_fn, thr)

    def update_deferred(self, rs: slice, cs: slice, sq: Tensor, i0: int) -> Tensor:
        """Merge every ratio of a tile into the lists without a host synchronisation (CUDA);
        returns the mask of its near pairs, to be decided later by :meth:`add_near`."""
        neg_ratio = torch.div(self.neg_num[rs, None], sq, out=self._buffer(sq.numel(), sq.dtype).view(sq.shape))
        near = sq <= self.s0_kept[rs, None]
        neg_ratio.masked_fill_(near, math.inf)  # decided exactly: never listed
        self.listed.update(cs, neg_ratio, 0, i0, sync_free=True)
        return near

    def add_near(self, rows: Tensor, cols: Tensor, dist: Tensor) -> None:
        """Near pairs (real ``rows``, generated ``cols``, exact squared distances), decided exactly."""
        self.near_best.scatter_reduce_(0, cols, exact_ratio(self.num[rows], dist), reduce="amax")

    def _update_below_floor(self, rs: slice, cs: slice, sq: Tensor, i0: int, exact_fn: Callable, thr: Tensor) -> None:
        """Full lists: only the pairs that may beat a list's floor, or be near pairs, are taken.

        Gives the lists of :meth:`_update_full` (the same entries, by the same division)."""
        # A pair enters a list only if its ratio num / sq beats the list's floor f = -thr > 0,
        # so sq < num / f <= max(num) / f; a near pair has sq <= s0. One comparison of the tile
        # with a per-column threshold finds both kinds (a superset, tested exactly below);
        # the margin covers the float32 rounding of num and of the division.
        num, s0 = self.num[rs], self.s0_kept[rs]
        floor = -thr.to(torch.float64)
        col = torch.where(floor > 0, num.max().clamp(min=0) / floor.clamp(min=1e-300) * (1 + 1e-5), math.inf)
        s0_max = s0.max()
        col = torch.maximum(col, s0_max.to(torch.float64)).to(sq.dtype)
        mask = torch.le(sq, col[None, :], out=self._buffer(sq.numel(), torch.bool).view(sq.shape))
        flat = mask.view(-1).nonzero().squeeze(1)  # row-major positions of the candidates
        if flat.numel() == 0:
            return
        n_c = sq.shape[1]
        v, r = sq.view(-1)[flat], flat // n_c
        neg = self.neg_num[rs][r] / v  # the float division a whole tile of ratios would make
        if bool(v.min() <= s0_max):  # near pairs (copies, near-copies): decided exactly
            near = v <= s0[r]
            r0, c0 = r[near], flat[near] % n_c
            if r0.numel():
                self.add_near(rs.start + r0, cs.start + c0, exact_fn(r0, c0))
                neg[near] = math.inf  # never listed
        enter = (neg < thr[flat % n_c]).nonzero().squeeze(1)
        if enter.numel() == 0:
            return
        # merge only the lists that gain an entry: entries grouped by list (column-major key)
        key, order = torch.sort((flat[enter] % n_c) * sq.shape[0] + r[enter])
        c, neg = key // sq.shape[0], neg[enter][order]
        cols, ent = torch.unique_consecutive(c, return_inverse=True)
        pad_v, pad_i = padded(ent, neg, key - c * sq.shape[0] + i0, len(cols))
        cols, lst = cols + cs.start, self.listed
        lst.vals[cols], lst.idx[cols] = merge_topk([lst.vals[cols], pad_v], [lst.idx[cols], pad_i], lst.t, sort=False)

    def _buffer(self, numel: int, dtype: torch.dtype) -> Tensor:
        """Reused tile-size storage (a fresh tile-size allocation per tile costs page faults)."""
        buf = self._bufs.get(dtype)
        if buf is None or buf.numel() < numel:
            buf = self._bufs[dtype] = torch.empty(numel, dtype=dtype, device=self.num.device)
        return buf[:numel]

    def _update_full(self, rs: slice, cs: slice, sq: Tensor, i0: int, exact_fn: Callable) -> None:
        """Every ratio of the tile: while lists are not full."""
        neg_ratio = torch.div(self.neg_num[rs, None], sq, out=self._buffer(sq.numel(), sq.dtype).view(sq.shape))
        s0 = self.s0_kept[rs]
        # rows with a near pair first: one reduction instead of a tile-size mask
        near = (sq.amin(1) <= s0).nonzero(as_tuple=True)[0]
        r0, c0 = (sq[near] <= s0[near, None]).nonzero(as_tuple=True) if near.numel() else (near, near)
        r0 = near[r0]
        if r0.numel():
            self.add_near(rs.start + r0, cs.start + c0, exact_fn(r0, c0))
            neg_ratio[r0, c0] = math.inf  # decided exactly: never listed
        self.listed.update(cs, neg_ratio, 0, i0)

    def finish(self, shard: Optional[Shard]) -> Tuple[Tensor, Tensor]:
        """Exact ratio maxima (float64) and the indices of the unsafe generated samples."""
        if shard is not None:  # (merged lists come sorted)
            self.listed.vals, self.listed.idx = shard.merge_topk(self.listed.vals, self.listed.idx)
            self.near_best = shard.max(self.near_best)
        else:
            self.listed.sort()
        # each rank settles a share of the generated samples (every rank has the merged lists)
        mine = shard.row_share(len(self.fake)) if shard is not None else slice(None)
        vals, idx, near_best = self.listed.vals[mine], self.listed.idx[mine], self.near_best[mine]
        num, listed = self.num[idx], torch.isfinite(vals)
        # the tile values back from the listed ratios (float32 division: within 1e-6), their
        # intervals, and the listed pairs whose ratio may still be the largest
        q = -vals.to(torch.float64)
        v = torch.where(q > 0, num / q, math.inf)
        floor, ceiling = ratio_interval(num, self.bound.low(v * (1 - 1e-6)), self.bound.high(v * (1 + 1e-6)))
        floor = torch.where(listed, floor, -math.inf)
        best = torch.maximum(near_best, floor.amax(1))
        f, j = (listed & (num >= 0) & (ceiling >= best[:, None])).nonzero(as_tuple=True)
        # those pairs exactly (float64); the largest exact ratio beats every other listed one
        first = 0 if shard is None else mine.start
        self._bufs.clear()  # the tile buffers
        dist = exact_pairs(self.real.original, self.fake.original, idx[f, j], f + first)
        best = near_best.scatter_reduce(0, f, exact_ratio(num[f, j], dist), reduce="amax")
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


def exact_realism(real: PointSet, fake: PointSet, fakes: Tensor, num: Tensor, block_bytes: int) -> Tensor:
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
        bnd, v = bound(sub, reals, rs, slice(j0, j0 + n_c)).col(), sq.to(torch.float64)
        nums = num[None, j0 : j0 + n_c]
        floor, ceiling = ratio_interval(nums, bnd.low(v), bnd.high(v))
        floor_best[rs] = torch.maximum(floor_best[rs], floor.amax(1))
        r, c = (ceiling >= floor_best[rs, None]).nonzero(as_tuple=True)  # a superset of the final
        pairs.append((i0 + r, j0 + c, ceiling[r, c]))
    f, j, ceiling = (torch.cat(p) for p in zip(*pairs))
    keep = ceiling >= floor_best[f]
    f, j = f[keep], j[keep]
    ratio = exact_ratio(num[j], exact_pairs(real.original, fake.original, j, fakes[f]))
    out = torch.full((len(fakes),), -math.inf, dtype=torch.float64, device=dev)
    return out.scatter_reduce(0, f, ratio, reduce="amax")


def ratio_interval(num: Tensor, low: Tensor, high: Tensor) -> Tuple[Tensor, Tensor]:
    """Bounds of a kept ball's ratio ``num / d^2`` from bounds ``[low, high]`` of ``d^2``: a pair
    that may be at distance 0 may be a copy (``inf``); pruned balls (``num < 0``) get ``-inf``."""
    kept = num >= 0
    floor = torch.where(kept, num / high, -math.inf)
    ceiling = torch.where(kept, torch.where(low > 0, num / low, math.inf), -math.inf)
    return floor, ceiling


def exact_ratio(num: Tensor, dist: Tensor) -> Tensor:
    """``num / dist`` with the realism conventions: a copy of a kept ball's centre is ``inf``
    (even when the radius is 0), a pruned ball (``num < 0``) stays negative."""
    return torch.where((dist == 0) & (num >= 0), math.inf, num / dist)


class Realism(TileReduction):
    """Realism over the real ``NND_k`` balls whose radius is at most the median (module docstring), as a
    reduction of the cross tiles: :meth:`finish` gives float64 ``[M]``."""

    bits = 1

    def __init__(self, k: int) -> None:
        self.k = int(k)

    @property
    def key(self) -> Tuple[str, int]:
        return ("realism", self.k)

    def scale(self, real_sq_radii: Mapping[int, Tensor]) -> Optional[Tuple[int, Tensor]]:
        return self.k, real_sq_radii[self.k]

    def start(self, tiles: TilePass) -> None:
        r_sq = tiles.real_sq_radii[self.k]
        keep = r_sq.sqrt() <= torch.quantile(r_sq.sqrt(), 0.5)
        # ratio r^2 / d^2 by one division: pruned balls get -1 (never the maximum of a kept
        # ball, whose ratios are >= 0); a kept ball of radius 0 gives 0 / d^2 = 0 to every
        # sample not on it, and (from the exact distance) inf to a copy of its centre
        self.lists = RealismLists(tiles.real, tiles.fake, torch.where(keep, r_sq, -1.0))
        self.block_bytes = tiles.block_bytes

    def commit(self, tile: Tile) -> None:  # (the screen's bound holds for recomputed tiles too)
        self.lists.update(tile.rs, tile.cs, tile.sq, tile.rs.start, tile.exact_fn)

    def update_deferred(self, tile: Tile) -> Tensor:
        return self.lists.update_deferred(tile.rs, tile.cs, tile.sq, tile.rs.start)

    def settle(self, rows: Tensor, cols: Tensor, d2: Tensor, flags: Tensor, bit: int) -> None:
        self.lists.add_near(*flagged(rows, cols, d2, flags, bit))

    def finish(self, shard: Optional[Shard]) -> Tensor:
        lists = self.lists
        best, unsafe = lists.finish(shard)
        if unsafe.numel():  # ties the lists cannot settle: every kept real sample, in float64
            mine = shard.row_share(len(unsafe)) if shard is not None else slice(None)
            part = exact_realism(lists.real, lists.fake, unsafe[mine], lists.num, self.block_bytes)
            best[unsafe] = shard.gather_rows(part, len(unsafe)) if shard is not None else part
        return best.clamp(min=0).sqrt()

    def record(self, value: Any, res: Any) -> None:
        res.realism = value
