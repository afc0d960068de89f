"""Deferred float64 decisions: the cross pass on CUDA, with no host synchronisation per tile.

Stage: used by the cross pass (may call :mod:`.listing`, :mod:`.reduction`, :mod:`.exact`,
:mod:`.points`). On the CPU a tile's ambiguous pairs (tile value within the
rounding margin of a threshold, :mod:`.bounds`) are listed with ``nonzero`` and decided in
float64 at once; on CUDA each such listing makes the host wait for the tile. Here a tile is
reduced densely from its *sure* pairs (value beyond the margin: ``any`` / ``sum`` / ``amin``
over a mask, no data-dependent size), and its ambiguous pairs go to a device-side log
(:class:`PairLog`) with one bit per question they are ambiguous for: each reduction of the pass
(:class:`.reduction.TileReduction`) flags its ambiguous pairs under its own ``bits`` (ball
membership, recall, beta-recall's minima, realism's near pairs, soft-ball copies, ...). After the
loop the log is read once (one synchronisation), each logged pair's float64 distance is computed
once, and every reduction adds the pairs it finds inside (:meth:`DeferredDecisions.settle`): the
same decisions as the listing path, so the same results.

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

from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.knn.exact import exact_pairs
from lightning_prd.functional.knn.listing import TileQuestions
from lightning_prd.functional.knn.points import bound
from lightning_prd.functional.knn.reduction import Tile


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
        questions = sum(reduction.bits for reduction in self.reductions)
        if questions > 31:
            raise ValueError(f"a deferred cross pass decides at most 31 questions per pair, got {questions}")

    def update(self, rs: slice, cs: slice, sq: Tensor, i0: int, j0: int) -> None:
        """Reduce a tile (reals ``rs`` x fakes ``cs``) from its sure pairs, log the ambiguous
        ones, each reduction's flags under its own question bits."""
        # margins use the tile's largest norm on the other side: a conservative bound
        row_bound, col_bound = bound(self.real, self.fake, rs, cs), bound(self.fake, self.real, cs, rs)
        real, fake = self.real.original, self.fake.original

        def exact_fn(r: Tensor, c: Tensor) -> Tensor:
            return exact_pairs(real, fake, i0 + r, j0 + c)

        tile = Tile(sq, rs, cs, row_bound, col_bound, {}, exact_fn, None)
        flags = torch.zeros(sq.shape, dtype=torch.int32, device=sq.device)
        bit = 1
        for reduction in self.reductions:  # (a tile-overwriting sum comes last)
            found = reduction.update_deferred(tile)
            if found is not None:
                flags.add_(found, alpha=bit)
            bit <<= reduction.bits
        self.log.add(flags, i0, j0)

    def settle(self) -> bool:
        """Decide the logged pairs in float64 and add them; False when the log overflowed
        (nothing is added: the caller runs the pass on the listing path)."""
        pairs = self.log.pairs()
        if pairs is None:
            return False
        rows, cols, flags = pairs
        d2 = exact_pairs(self.real.original, self.fake.original, rows, cols)
        bit = 1
        for reduction in self.reductions:
            reduction.settle(rows, cols, d2, flags, bit)
            bit <<= reduction.bits
        return True
