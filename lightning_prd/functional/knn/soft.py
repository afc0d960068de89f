r"""Soft ball products of a cross tile (probabilistic precision and recall), float64-exact.

Stage: used by the cross pass (may call :mod:`.bounds`, :mod:`.shard`; exact distances come in
as a callable). With one radius ``R`` per direction, a query ``q`` gets
:math:`1 - \prod_i (1 - p_i)`, :math:`p_i = \max(0, 1 - d(q, x_i) / R)`: the product is
:math:`\exp L` with :math:`L = \sum_{i: d_i < R} \log(d_i / R)`, a sum of logs over the tiles.

Each tile adds to every query's ``L`` a lower and an upper bound, from the tile values'
rounding interval (:class:`.bounds.Bound`) and the float32 log's own rounding; pairs whose
interval reaches 0 are recomputed in float64 (``exact_fn``), so an exact copy (``d = 0``,
``p = 1``) is counted apart and gives probability exactly 1, never ``log(0)``. After the pass
a query whose two bounds give different float64 probabilities is recomputed in float64 from
its direct distances to the whole other set (one ``cdist`` per query, whatever the tiles), so
every value is the float64 one and none depends on the tile layout or the process split. A
query with many pairs inside ``R`` (high dimensions, where distances concentrate) has
``exp L`` far below float64's resolution of 1, so both bounds give exactly 1; a query with no
pair inside gives exactly 0; the others (few pairs: low dimensions, sets apart) are
recomputed, ``N`` (or ``M``) float64 distances each.

Example:
    >>> import torch
    >>> from lightning_prd.functional.knn.bounds import Bound
    >>> sq = torch.tensor([[1.0, 16.0], [0.25, 4.0]], dtype=torch.float64)  # 2 reals x 2 fakes
    >>> acc = SoftProducts(2, 2, 4.0, 4.0, sq.device)
    >>> acc.update(slice(0, 2), slice(0, 2), sq, Bound(0.0, None, torch.zeros(2, dtype=torch.float64)), None)
    >>> p_fake, p_real = acc.finish(None, None)
    >>> p_fake.tolist()  # fake 0: 1 - (1/2)(1/4); fake 1: d = 4 and 2 are not inside R = 2
    [0.875, 0.0]
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.knn.bounds import Bound
from lightning_prd.functional.knn.shard import Shard

#: Queries recomputed per chunk of direct float64 distances.
_CHUNK = 256


class SoftProducts:
    """Running bounds of ``L`` per real sample (rows, radius of the fake side) and per fake
    sample (columns, radius of the real side), with the exact copies counted apart.

    Args:
        n, m: number of real and fake samples.
        r_sq_real: squared radius of the real balls (P-precision: one per fake query).
        r_sq_fake: squared radius of the fake balls (P-recall: one per real query).
    """

    def __init__(self, n: int, m: int, r_sq_real: float, r_sq_fake: float, device: torch.device) -> None:
        self.thr = (float(r_sq_real), float(r_sq_fake))

        def zeros(size: int, dtype: torch.dtype = torch.float64) -> Tensor:
            return torch.zeros(size, dtype=dtype, device=device)

        # [lower, upper] of L, and "holds an exact copy", per fake (cols) and per real (rows)
        self.cols = [zeros(m), zeros(m), zeros(m, torch.bool)]
        self.rows = [zeros(n), zeros(n), zeros(n, torch.bool)]

    def update(self, rs: slice, cs: slice, sq: Tensor, row_bound: Bound, exact_fn: Optional[Callable]) -> None:
        """Add the tile ``sq`` (reals ``rs`` x fakes ``cs``) whose rows' rounding is ``row_bound``."""
        # the bound in the tile's dtype (tile-sized temporaries, not float64 ones), a little wider
        dt, rb = sq.dtype, row_bound
        e = None if rb.e is None else (rb.e * (1 + 1e-6)).to(dt)[:, None]
        b = Bound(rb.rel, e, (rb.tau * (1 + 1e-6)).to(dt)[:, None], rb.offset)
        lo, hi = b.low(sq), b.high(sq)
        zero = lo <= 0
        if bool(zero.any()):  # may be a copy: settle in float64 (few pairs but for copies)
            r, c = zero.nonzero(as_tuple=True)
            d2 = exact_fn(r, c) if exact_fn is not None else sq[r, c].to(torch.float64)
            copy = d2 == 0
            self.rows[2][rs].index_fill_(0, r[copy], True)
            self.cols[2][cs].index_fill_(0, c[copy], True)
            # copies leave the sums (counted apart); the others take their float64 value
            v = torch.where(copy, math.inf, d2).to(dt)
            lo[r, c], hi[r, c] = v, v
        eps = torch.finfo(dt).eps
        for acc, sl, thr, dim in ((self.cols, cs, self.thr[0], 0), (self.rows, rs, self.thr[1], 1)):
            inside = lo < thr
            # log(d^2 / R^2) bounds; each pair's float rounding (division, log) is below eps * (|log| + 2)
            s_lo = torch.where(inside, torch.log(lo / thr), 0.0)
            s_hi = torch.where(inside, torch.log(hi.clamp(max=thr) / thr), 0.0)
            count = inside.sum(dim, dtype=torch.float64)
            sum_lo, sum_hi = s_lo.sum(dim, dtype=torch.float64), s_hi.sum(dim, dtype=torch.float64)
            acc[0][sl] += 0.5 * (sum_lo - eps * (2 * count - sum_lo))
            acc[1][sl] += 0.5 * (sum_hi + eps * (2 * count - sum_hi))

    def finish(
        self, real: Optional[Tensor], fake: Optional[Tensor], shard: Optional[Shard] = None
    ) -> Tuple[Tensor, Tensor]:
        """Probabilities per fake (P-precision's terms) and per real (P-recall's), float64.

        ``real`` / ``fake``: the original rows, for the float64 recomputation of wide queries
        (None only when no query can be wide: float64 tiles given exactly, as in the example).
        """
        out = []
        for acc, queries, refs, thr in ((self.cols, fake, real, self.thr[0]), (self.rows, real, fake, self.thr[1])):
            low, high, copy = acc
            if shard is not None:
                low, high, copy = shard.sum(low), shard.sum(high), shard.any(copy)
            high = high.clamp(max=0.0)
            p_low, p_high = 0.0 - torch.expm1(high), 0.0 - torch.expm1(low)
            p = torch.where(copy, 1.0, p_low)
            wide = (p_high != p_low) & ~copy
            idx = wide.nonzero(as_tuple=True)[0]
            if idx.numel() and queries is not None and refs is not None:
                mine = shard.row_share(len(idx)) if shard is not None else slice(None)
                part = exact_soft(queries, refs, idx[mine], thr)
                p[idx] = shard.gather_rows(part, len(idx)) if shard is not None else part
            out.append(p)
        return out[0], out[1]


def exact_soft(queries: Tensor, refs: Tensor, idx: Tensor, r_sq: float) -> Tensor:
    r"""float64 :math:`1 - \prod_i \max(0, \ldots)` of ``queries[idx]`` against every row of
    ``refs``, from direct distances (``sum((q - x)^2)``, no GEMM): 1 exactly with a copy."""
    out = torch.empty(idx.numel(), dtype=torch.float64, device=queries.device)
    refs64 = refs.to(torch.float64)
    log_r = 0.5 * math.log(r_sq) if r_sq > 0 else -math.inf
    for s in range(0, idx.numel(), _CHUNK):
        q = queries[idx[s : s + _CHUNK]].to(torch.float64)
        d = torch.cdist(q, refs64, compute_mode="donot_use_mm_for_euclid_dist")
        inside = (d.square() < r_sq) & (d > 0)
        log_sum = torch.where(inside, torch.log(d) - log_r, 0.0).sum(1)
        # a copy has p = 1 (also at R = 0, the limit of max(0, 1 - d / R))
        out[s : s + _CHUNK] = torch.where((d == 0).any(1), 1.0, 0.0 - torch.expm1(log_sum))
    return out
