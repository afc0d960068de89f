r"""Soft ball products of a cross tile (probabilistic precision and recall), float64-exact.

Stage: a reduction of the cross tiles (:class:`Soft`; may call :mod:`.bounds`, :mod:`.lists`,
:mod:`.points`, :mod:`.reduction`, :mod:`.refine`, :mod:`.shard`, :mod:`.workspace`; the tiles' exact
distances come in as a callable). With one radius ``R`` per direction, a query ``q`` gets
:math:`1 - \prod_i (1 - p_i)`, :math:`p_i = \max(0, 1 - d(q, x_i) / R)`: the product is
:math:`\exp L` with :math:`L = \sum_{i: d_i < R} \log(d_i / R)`, a sum of logs over the tiles.

Each tile adds to every query an upper bound of ``L``, from the tile values' rounding interval
(:class:`.bounds.Bound`, ``log y <= y - 1``, the tile dtype's rounding), and notes whether a
pair may lie inside ``R``; pairs that may be at distance 0 are settled in float64
(``exact_fn``), so an exact copy (``d = 0``, ``p = 1``) is counted apart and gives probability
exactly 1, never ``log(0)``. The bounds' sums run in float32 blocks with their rounding error
added (:func:`_block_sum`), and a direction whose queries all have a bound below
:data:`SATURATED` (``p = 1`` in float64) skips its later tiles (their terms are ``<= 0``).
After the pass a query takes its float64 value without further work when it is settled: a copy
(1), no pair possibly inside (0), or ``exp L`` below float64's resolution of 1 (``1 - exp L``
rounds to 1; high dimensions, where distances concentrate and most pairs lie inside ``R``).
Any other query is recomputed in float64 from its direct distances to the whole other set
(:func:`exact_soft`), so every value is the float64 one and none depends on the tile
layout or the process split.

Example:
    >>> import torch
    >>> from lightning_prd.functional.knn.bounds import Bound, block_sum_error, block_sums
    >>> sq = torch.tensor([[1.0, 16.0], [0.25, 6.25]], dtype=torch.float64)  # 2 reals x 2 fakes
    >>> acc = SoftProducts(2, 2, 4.0, 4.0, sq.device)
    >>> acc.update(slice(0, 2), slice(0, 2), sq, Bound(0.0, None, torch.zeros(2, dtype=torch.float64)), None)
    >>> real, fake = torch.tensor([[0.0], [1.5]]), torch.tensor([[1.0], [4.0]])  # the rows of sq
    >>> p_fake, p_real = acc.finish(real, fake)
    >>> p_fake.tolist()  # fake 0: 1 - (1/2)(1/4) (recomputed); fake 1: d = 4 and 2.5 are not inside R = 2
    [0.875, 0.0]
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.knn.bounds import Bound, block_sum_error, block_sums
from lightning_prd.functional.knn.lists import RunningNearest
from lightning_prd.functional.knn.points import PointSet
from lightning_prd.functional.knn.reduction import Tile, TilePass, TileReduction, flagged
from lightning_prd.functional.knn.refine import refine_topk
from lightning_prd.functional.knn.shard import Shard
from lightning_prd.functional.knn.workspace import scratch

#: Queries recomputed per chunk of direct float64 distances.
_CHUNK = 256

#: Terms per float32 block sum of a tile's bound (:func:`_block_sum`).
_BLOCK = 256

#: A query whose bound of ``L`` is below this has ``p = 1`` in float64 (``exp(-40) < 2^-54``,
#: so ``1 - exp L`` rounds to 1), and every further tile only adds terms ``log(d / R) <= 0``:
#: its later tiles are skipped (adding 0 keeps the bound an upper bound of ``L``).
SATURATED = -40.0


def nearest_products(
    real: PointSet,
    fake: PointSet,
    near_fake: RunningNearest,
    near_real: RunningNearest,
    k: int,
    sq_radii: Tuple[float, float],
    block_bytes: int,
    shard: Optional[Shard] = None,
) -> Tuple[Tensor, Tensor]:
    """The authors' script's variant: each product over the ``k`` nearest reference samples
    only (its ``k`` largest terms), from the cross pass's running nearest lists (``near_fake``:
    reals near each fake, ``near_real``: fakes near each real, merged across the group), made
    exact float64 ``k``-nearest distances. ``sq_radii``: ``(R_real^2, R_fake^2)``.

    Returns the probabilities per fake (P-precision's terms) and per real (P-recall's)."""
    out = []
    for near, rows, cols, thr in ((near_fake, fake, real, sq_radii[0]), (near_real, real, fake, sq_radii[1])):
        ks = list(range(1, k + 1))
        sq = refine_topk(rows, cols, near.vals, near.idx, ks, False, near.t < len(cols), block_bytes, False, shard)
        d2 = torch.stack([sq[j][0] for j in ks], 1)  # exact float64, [queries, k]
        if thr > 0:
            keep = torch.where(d2 < thr, (d2 / thr).sqrt(), 1.0)  # 1 - p = min(1, d / R)
        else:
            keep = torch.where(d2 == 0, 0.0, 1.0).to(torch.float64)
        out.append(1.0 - keep.prod(1))
    return out[0], out[1]


class SoftProducts:
    """Running upper bounds of ``L`` and "a pair may be inside ``R``", per real sample (rows,
    radius of the fake side) and per fake sample (columns, radius of the real side), with the
    exact copies counted apart.

    Args:
        n, m: number of real and fake samples.
        r_sq_real: squared radius of the real balls (P-precision: one per fake query).
        r_sq_fake: squared radius of the fake balls (P-recall: one per real query).
    """

    def __init__(self, n: int, m: int, r_sq_real: float, r_sq_fake: float, device: torch.device) -> None:
        self.thr = (float(r_sq_real), float(r_sq_fake))

        def zeros(size: int, dtype: torch.dtype) -> Tensor:
            return torch.zeros(size, dtype=dtype, device=device)

        # upper bound of L, "some pair may be inside R", "holds an exact copy"
        self.cols = [zeros(m, torch.float64), zeros(m, torch.bool), zeros(m, torch.bool)]
        self.rows = [zeros(n, torch.float64), zeros(n, torch.bool), zeros(n, torch.bool)]

    def update(
        self, rs: slice, cs: slice, sq: Tensor, row_bound: Bound, exact_fn: Optional[Callable], sync_free: bool = False
    ) -> None:
        """Add the tile ``sq`` (reals ``rs`` x fakes ``cs``) whose rows' rounding is ``row_bound``.

        ``sync_free`` (CUDA): no host synchronisation; every tile is added (no saturation
        shortcut) and the possible copies are left to the caller (:meth:`copy_limit`,
        :meth:`add_copies`)."""
        # a direction is open while some query's bound is above SATURATED (or at R = 0: copies only)
        open_ = [
            sync_free or thr <= 0 or bool((acc[0][sl] > SATURATED).any())
            for acc, sl, thr in ((self.cols, cs, self.thr[0]), (self.rows, rs, self.thr[1]))
        ]
        if not any(open_):  # every query of the tile is settled at p = 1
            return
        dt, rb = sq.dtype, row_bound
        f64, eps = torch.float64, torch.finfo(sq.dtype).eps
        row_min = sq.amin(1)
        if not sync_free:
            maybe_zero = self.copy_limit(rb, dt)
            if bool((row_min <= maybe_zero).any()):  # may be a copy: settle in float64 (few pairs but for copies)
                r, c = (sq <= maybe_zero[:, None]).nonzero(as_tuple=True)
                d2 = exact_fn(r, c) if exact_fn is not None else sq[r, c].to(f64)
                self.add_copies(r + rs.start, c + cs.start, d2)
        for acc, sl, thr, dim in ((self.cols, cs, self.thr[0], 0), (self.rows, rs, self.thr[1], 1)):
            if thr <= 0 or not open_[dim == 1]:  # R = 0: only copies (p = 1, the limit of max(0, 1 - d / R))
                continue
            col_min = sq.amin(0) if dim == 0 else row_min
            # "some pair may be inside R", from the tile's minima (per column: the widest row's limit)
            limit = _widen(rb.maybe_below(torch.tensor(thr, dtype=f64)), thr, dt)
            acc[1][sl] |= col_min <= (limit.max() if dim == 0 else limit)
            # log(d / R) = log(y) / 2 <= (y - 1) / 2 with y = d^2 / R^2 <= alpha v + beta (per row);
            # the pairs outside R are clamped at y = 1 and add 0
            alpha, beta = _affine(rb, thr)
            # (y >= 0 raises the bound of a term that rounding left below 0: still an upper bound)
            y = scratch("soft", sq.numel(), dt, sq.device).view(sq.shape)  # the pass's buffer: no page faults
            torch.addcmul(beta.to(dt)[:, None], sq, alpha.to(dt)[:, None], out=y).clamp_(0.0, 1.0)
            n_other = sq.shape[dim]
            total, sum_err = _block_sum(y, dim)
            # float rounding: each term below 1 within 4 eps (products, sums, the dtype of alpha, beta)
            acc[0][sl] += 0.5 * (total - n_other + 4 * eps * n_other + sum_err)

    def copy_limit(self, row_bound: Bound, dtype: torch.dtype) -> Tensor:
        """Per row, the tile value at or below which a pair may be at distance 0 (a copy)."""
        return _widen(row_bound.maybe_below(torch.zeros((), dtype=torch.float64)), 0.0, dtype)

    def add_copies(self, rows: Tensor, cols: Tensor, dist: Tensor) -> None:
        """Pairs that may be copies (real ``rows``, fake ``cols``, exact squared distances)."""
        copy = dist == 0
        self.rows[2].index_fill_(0, rows[copy], True)
        self.cols[2].index_fill_(0, cols[copy], True)

    def finish(self, real: Tensor, fake: Tensor, shard: Optional[Shard] = None) -> Tuple[Tensor, Tensor]:
        """Probabilities per fake (P-precision's terms) and per real (P-recall's), float64;
        ``real`` / ``fake`` are the original rows, for the float64 recomputation."""
        out = []
        for acc, queries, refs, thr in ((self.cols, fake, real, self.thr[0]), (self.rows, real, fake, self.thr[1])):
            high, maybe_inside, copy = acc
            if shard is not None:
                high, maybe_inside, copy = shard.sum(high), shard.any(maybe_inside), shard.any(copy)
            p = 0.0 - torch.expm1(high.clamp(max=0.0))
            settled = copy | ~maybe_inside | (p == 1.0)
            p = (copy | (p == 1.0)).to(torch.float64)
            idx = (~settled).nonzero(as_tuple=True)[0]
            if idx.numel():
                mine = shard.row_share(len(idx)) if shard is not None else slice(None)
                part = exact_soft(queries, refs, idx[mine], thr)
                p[idx] = shard.gather_rows(part, len(idx)) if shard is not None else part
            out.append(p)
        return out[0], out[1]


def _block_sum(y: Tensor, dim: int) -> Tuple[Tensor, float]:
    """Sum of ``y`` (terms in ``[0, 1]``) along ``dim`` as float32 runs of at most
    :data:`_BLOCK` terms added in float64 (:func:`.bounds.block_sums`), and a bound of its
    rounding error (:func:`.bounds.block_sum_error`); the float64 sum of the runs is within
    the ``4 eps`` per term of the caller."""
    return block_sums(y, dim, _BLOCK, torch.float32), block_sum_error(y.shape[dim], _BLOCK)


def _widen(value: Tensor, thr: float, dtype: torch.dtype) -> Tensor:
    """A float64 tile threshold in the tile's dtype, rounded outward (a few of its ulps of ``thr``)."""
    return (value + 4 * torch.finfo(dtype).eps * thr + torch.finfo(dtype).tiny).to(dtype)


def _affine(rb: Bound, thr: float) -> Tuple[Tensor, Tensor]:
    """Per row ``(alpha, beta)`` with ``high(v) / thr <= alpha v + beta`` for every tile value
    ``v >= 0``, a little wider than float64 (it is used in the tile's dtype).

    Float tiles: ``high(v) = v + tau``. Screen tiles: ``high(v) = (sqrt(w) + e)^2`` with
    ``w = v + rel |v - c| + add v + tau <= (1 + rel + add) v + rel |c| + tau``, and
    ``2 e sqrt(w) <= e (w / R + R)`` (AM-GM at ``R = sqrt(thr)``, tight at the ball's edge).
    """
    if rb.e is None:
        alpha, beta = torch.full_like(rb.tau, 1.0 / thr), rb.tau / thr
    else:
        r = math.sqrt(thr)
        a1, b1 = 1 + rb.rel + rb._ADD, rb.rel * abs(rb.offset) + rb.tau
        grow = 1 + rb.e / r
        alpha, beta = a1 * grow / thr, (b1 * grow + rb.e * r + rb.e.square()) / thr
    return alpha * (1 + 1e-6), beta * (1 + 1e-6) + 1e-30


def exact_soft(queries: Tensor, refs: Tensor, idx: Tensor, r_sq: float) -> Tensor:
    r"""float64 :math:`1 - \prod_i \max(0, 1 - d_i / R)` of ``queries[idx]`` against every row of
    ``refs``, from direct float64 distances (differences, no GEMM: ``torch.cdist`` without the
    matrix-product path, each pair on its own); 1 exactly with a copy (also at ``R = 0``, the
    limit of ``max(0, 1 - d / R)``)."""
    f64 = torch.float64
    out = torch.empty(idx.numel(), dtype=f64, device=queries.device)
    refs64 = refs.to(f64)
    r = math.sqrt(r_sq) if r_sq > 0 else 0.0
    for s in range(0, idx.numel(), _CHUNK):
        d = torch.cdist(queries[idx[s : s + _CHUNK]].to(f64), refs64, compute_mode="donot_use_mm_for_euclid_dist")
        inside = (d < r) & (d > 0)
        log_sum = torch.where(inside, torch.log(d / r) if r > 0 else d, 0.0).sum(1)
        out[s : s + _CHUNK] = torch.where((d == 0).any(1), 1.0, 0.0 - torch.expm1(log_sum))
    return out


class Soft(TileReduction):
    """The soft products over every reference sample (:class:`SoftProducts`), as a reduction of the
    cross tiles: :meth:`finish` gives the probabilities per fake and per real (float64).

    Args:
        sq_radii: ``(R_real^2, R_fake^2)`` of the soft balls.
    """

    bits = 1

    def __init__(self, sq_radii: Tuple[float, float]) -> None:
        self.sq_radii = (float(sq_radii[0]), float(sq_radii[1]))

    @property
    def key(self) -> Tuple[str, float, float]:
        return ("soft", *self.sq_radii)

    def start(self, tiles: TilePass) -> None:
        self.real, self.fake = tiles.real.original, tiles.fake.original
        self.products = SoftProducts(len(tiles.real), len(tiles.fake), *self.sq_radii, tiles.device)

    def commit(self, tile: Tile) -> None:
        self.products.update(tile.rs, tile.cs, tile.sq, tile.row_bound, tile.exact_fn)

    def update_deferred(self, tile: Tile) -> Tensor:
        self.products.update(tile.rs, tile.cs, tile.sq, tile.row_bound, None, sync_free=True)
        return tile.sq <= self.products.copy_limit(tile.row_bound, tile.sq.dtype)[:, None]

    def settle(self, rows: Tensor, cols: Tensor, d2: Tensor, flags: Tensor, bit: int) -> None:
        self.products.add_copies(*flagged(rows, cols, d2, flags, bit))

    def finish(self, shard: Optional[Shard]) -> Tuple[Tensor, Tensor]:
        return self.products.finish(self.real, self.fake, shard)

    def record(self, value: Any, res: Any) -> None:
        res.fake_soft, res.real_soft = value
