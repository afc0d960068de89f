"""Deferred float64 decisions: the cross pass on CUDA, with no host synchronisation per tile.

Stage: used by the cross pass (may call :mod:`.listing`, :mod:`.members`, :mod:`.exact`,
:mod:`.points`). On the CPU a tile's ambiguous pairs (tile value within the
rounding margin of a threshold, :mod:`.bounds`) are listed with ``nonzero`` and decided in
float64 at once; on CUDA each such listing makes the host wait for the tile. Here a tile is
reduced densely from its *sure* pairs (value beyond the margin: ``any`` / ``sum`` / ``amin``
over a mask, no data-dependent size), and its ambiguous pairs go to a device-side log
(:class:`PairLog`) with one bit per question they are ambiguous for: ball membership per
``(k, open)`` (precision, density, coverage, beta-recall's minima), recall per ``k``,
realism's near pairs, soft-ball copies. After the loop the log is read once (one
synchronisation), each logged pair's float64 distance is computed once, and every question
adds the pairs it finds inside (:meth:`DeferredDecisions.settle`): the same decisions as the
listing path, so the same results.

The log holds :func:`capacity` pairs. Degenerate data (many copies or exact ties, where most
pairs sit on a ball's edge) can overflow it; :meth:`DeferredDecisions.settle` then reports it
and the caller runs the pass again on the listing path.

Example:
    >>> import torch
    >>> log = PairLog(8, torch.device("cpu"))
    >>> log.add(torch.tensor([[0, 1], [4, 0]], dtype=torch.int32), 10, 20)
    >>> [t.tolist() for t in log.pairs()]
    [[10, 11], [21, 20], [1, 4]]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.knn.exact import exact_pairs
from lightning_prd.functional.knn.listing import TileQuestions
from lightning_prd.functional.knn.members import inside_ball, thresholds
from lightning_prd.functional.knn.points import bound


def capacity(n: int, m: int) -> int:
    """Pairs the log of an ``n x m`` pass holds: 32 per sample, at least 65,536 (16 bytes a
    pair: 51 MB at 50,000 x 50,000), never more than the pairs there are."""
    return min(n * m, max(1 << 16, 32 * (n + m)))


class PairLog:
    """Pairs of a tile loop with nonzero flags, appended on the device without reading a size.

    Each tile's flagged entries, in row-major order, are listed by ``torch.nonzero_static``
    (a fixed-size output, padded: no host synchronisation) and written after the running
    count (a device scalar); entries past the capacity go to one spare slot and are only
    counted, so :meth:`pairs` can tell that the log overflowed. Where ``nonzero_static`` has
    no kernel (CUDA before torch 2.6) positions come from a prefix sum over the whole tile
    instead: the same log, with more passes over the tile.
    """

    def __init__(self, size: int, device: torch.device) -> None:
        self.size = size
        # slot ``size`` takes every entry past the capacity (and the unflagged ones)
        self.lin = torch.zeros(size + 1, dtype=torch.long, device=device)
        self.tile = torch.zeros(size + 1, dtype=torch.long, device=device)
        self.flags = torch.zeros(size + 1, dtype=torch.int32, device=device)
        self.count = torch.zeros((), dtype=torch.long, device=device)
        self.origins: List[Tuple[int, int, int]] = []  # (first row, first col, columns) per tile
        self._arange = torch.arange(0, device=device)
        self._static = hasattr(torch, "nonzero_static")

    def add(self, flags: Tensor, i0: int, j0: int) -> None:
        """Log the entries of the tile ``flags`` (rows from ``i0``, columns from ``j0``) that are
        not 0, in row-major order."""
        flat = flags.reshape(-1)
        if self._static:
            try:
                self._add_listed(flat)
            except NotImplementedError:  # no nonzero_static kernel on this device
                self._static = False
        if not self._static:
            self._add_prefix_sum(flat)
        self.origins.append((i0, j0, flags.shape[1]))

    def _add_listed(self, flat: Tensor) -> None:
        """At most ``size`` entries listed by ``nonzero_static``; work past the listing is per slot."""
        lin = torch.nonzero_static(flat, size=self.size, fill_value=-1).squeeze(1)
        self._write(lin >= 0, lin, flat[lin.clamp(min=0)], self.size)
        self.count += torch.count_nonzero(flat)

    def _add_prefix_sum(self, flat: Tensor) -> None:
        """Every entry's position from a prefix sum of the flags (one pass per step over the tile)."""
        hit = flat != 0
        csum = torch.cumsum(hit, 0)
        self._write(hit, None, flat, flat.numel(), csum - 1)
        self.count += csum[-1]

    def _write(self, hit: Tensor, lin: Optional[Tensor], flags: Tensor, n: int, rank: Optional[Tensor] = None) -> None:
        """Write ``n`` candidate entries (tile positions ``lin``, default ``0..n-1``; ``hit``: logged)
        at ``count + rank`` (``rank`` default ``0..n-1``), the rest to the spare slot."""
        if self._arange.numel() < n:
            self._arange = torch.arange(n, device=flags.device)
        rank = self._arange[:n] if rank is None else rank
        pos = torch.where(hit, rank + self.count, self.size).clamp_(max=self.size)
        tile = torch.full((), len(self.origins), dtype=torch.long, device=flags.device)
        self.lin.scatter_(0, pos, self._arange[:n] if lin is None else lin)
        self.tile.scatter_(0, pos, tile.expand(n))
        self.flags.scatter_(0, pos, flags)

    def pairs(self) -> Optional[Tuple[Tensor, Tensor, Tensor]]:
        """``(rows, cols, flags)`` of every logged pair, or None when the log overflowed."""
        n = int(self.count)  # the one synchronisation of the loop
        if n > self.size:
            return None
        dev = self.lin.device
        origins = torch.tensor(self.origins, dtype=torch.long, device=dev).reshape(-1, 3)[self.tile[:n]]
        lin = self.lin[:n]
        return origins[:, 0] + lin // origins[:, 2], origins[:, 1] + lin % origins[:, 2], self.flags[:n]


@dataclass
class DeferredDecisions(TileQuestions):
    """The cross pass's reductions of each tile (:class:`.listing.TileQuestions`; float tiles:
    CUDA never screens), sure pairs at once, ambiguous ones deferred."""

    def __post_init__(self) -> None:
        self.log = PairLog(capacity(len(self.real), len(self.fake)), self.real.original.device)
        questions = len(self.kinds) + len(self.recall_ks) + 2 + sum(r.bits for r in self.reducers)
        if questions > 31:
            raise ValueError(f"a deferred cross pass decides at most 31 questions per pair, got {questions}")

    def update(self, rs: slice, cs: slice, sq: Tensor, i0: int, j0: int) -> Tensor:
        """Reduce a tile (reals ``rs`` x fakes ``cs``) from its sure pairs, log the ambiguous
        ones; returns the tile."""
        res, dt = self.res, sq.dtype
        # margins use the tile's largest norm on the other side: a conservative bound
        row_bound, col_bound = bound(self.real, self.fake, rs, cs), bound(self.fake, self.real, cs, rs)
        flags = torch.zeros(sq.shape, dtype=torch.int32, device=sq.device)
        bit = 1
        for k, open_ in self.kinds:  # balls of the tile's rows
            lo, hi = thresholds(self.real_sq_radii[k][rs], row_bound, dt)
            sure = inside_ball(sq, lo[:, None], open_)
            flags.add_((sq <= hi[:, None]) & ~sure, alpha=bit)
            bit <<= 1
            if k in res.fake_in_real and open_ == self.strict:
                res.fake_in_real[k][cs] |= sure.any(0)
                res.fake_ball_count[k][cs] += sure.sum(0)
                res.real_ball_hit[k][rs] |= sure.any(1)
            if k in res.real_ball_min_value and not open_:
                best = res.real_ball_min_value[k]
                values = self.fake_values[cs] if self.fake_values is not None else best.new_zeros(sq.shape[1])
                best[rs] = torch.minimum(best[rs], torch.where(sure, values[None, :], math.inf).amin(1))
        for k in self.recall_ks:  # balls of the tile's columns; rows already inside one need nothing
            lo, hi = thresholds(self.fake_sq_radii[k][cs], col_bound, dt)
            done = res.real_in_fake[k][rs] | inside_ball(sq, lo[None, :], self.strict).any(1)
            res.real_in_fake[k][rs] = done
            flags.add_((sq <= hi[None, :]) & ~done[:, None], alpha=bit)
            bit <<= 1
        shift = bit << 2  # each reduction's bits after the realism and soft ones
        for reducer in self.reducers:
            flags.add_(reducer.update_deferred(rs, cs, sq, row_bound), alpha=shift)
            shift <<= reducer.bits
        if self.realism is not None:
            flags.add_(self.realism.update_deferred(rs, cs, sq, i0), alpha=bit)
        if self.soft is not None:
            self.soft.update(rs, cs, sq, row_bound, None, sync_free=True)
            flags.add_(sq <= self.soft.copy_limit(row_bound, dt)[:, None], alpha=bit << 1)
        self.log.add(flags, i0, j0)
        return sq

    def settle(self) -> bool:
        """Decide the logged pairs in float64 and add them; False when the log overflowed
        (nothing is added: the caller runs the pass on the listing path)."""
        pairs = self.log.pairs()
        if pairs is None:
            return False
        rows, cols, flags = pairs
        d2 = exact_pairs(self.real.original, self.fake.original, rows, cols)
        res, bit = self.res, 1

        def asked(bit: int) -> Tuple[Tensor, Tensor, Tensor]:
            sel = (flags & bit) != 0
            return rows[sel], cols[sel], d2[sel]

        for k, open_ in self.kinds:
            r, c, d = asked(bit)
            bit <<= 1
            ok = inside_ball(d, self.real_sq_radii[k][r], open_)
            r, c = r[ok], c[ok]
            if k in res.fake_in_real and open_ == self.strict:
                res.fake_in_real[k].index_fill_(0, c, True)
                res.fake_ball_count[k].index_add_(0, c, torch.ones_like(c))
                res.real_ball_hit[k].index_fill_(0, r, True)
            if k in res.real_ball_min_value and not open_:
                best = res.real_ball_min_value[k]
                values = self.fake_values[c] if self.fake_values is not None else torch.zeros_like(best[r])
                best.scatter_reduce_(0, r, values.to(best.dtype), reduce="amin")
        for k in self.recall_ks:
            r, c, d = asked(bit)
            bit <<= 1
            res.real_in_fake[k].index_fill_(0, r[inside_ball(d, self.fake_sq_radii[k][c], self.strict)], True)
        shift = bit << 2
        for reducer in self.reducers:
            reducer.settle(rows, cols, d2, flags, shift)
            shift <<= reducer.bits
        if self.realism is not None:
            self.realism.add_near(*asked(bit))
        if self.soft is not None:
            self.soft.add_copies(*asked(bit << 1))
        return True
