"""The one interface of every reduction of the cross pass's tiles.

Stage: a reduction of a cross tile beside :mod:`.members` (may call :mod:`.members`, :mod:`.bounds`,
:mod:`.points`, :mod:`.shard`). Everything the cross pass computes from the real x fake tiles is a
:class:`TileReduction`: ball membership, counts and hits (:class:`.balls.BallMembers`), recall's
membership in the generated balls (:class:`.balls.RecallBalls`), per-ball minima of per-fake values
(:class:`.balls.BallMinimum`), realism (:class:`.realism.Realism`), the nearest lists and what is read
from them (:class:`.nearest.NearestLists`: nearest neighbours, PR-cover, the nearest soft products), the
soft products (:class:`.soft.Soft`), the Gaussian kernel sum (:class:`.kernel.CrossKernel`), clipped
counts (:class:`.clipped.ClippedBalls`) and the smallest ball (:class:`.smallest.SmallestBall`). The
tile loop knows none of them: it calls each reduction of its list, in order, on both of its paths:

* listed (CPU): :meth:`~TileReduction.start`, then per tile :meth:`~TileReduction.decide` (the tile's
  ball members, ambiguous pairs decided in float64; it may raise :class:`.members.Ambiguous`, and the
  tile is then decided again from the float rows) and :meth:`~TileReduction.commit` (the tile as it was
  finally decided is kept), then :meth:`~TileReduction.finish`;
* deferred (CUDA, no host synchronisation per tile): per tile :meth:`~TileReduction.update_deferred`
  adds the sure pairs and flags the ambiguous ones with its own ``bits`` question bits, and
  :meth:`~TileReduction.settle` decides the flagged pairs from their exact squared distances.

A tile comes as one :class:`Tile`. The real balls ``(k, open)`` that reductions name in
:attr:`~TileReduction.kinds` are decided once per tile (largest ``k`` first, each listed from the
wider one's pairs) and shared through :attr:`Tile.balls`. Each worker thread works on a shallow copy
(``copy.copy``) whose :meth:`~TileReduction.start` makes its own accumulators; :meth:`~TileReduction.finish`
combines them over the shard (threads and ranks). The result lands in :attr:`.cross.CrossResult.reduced`
under the reduction's :attr:`~TileReduction.key`, which holds its parameters (two reductions of one
kind at different ``k`` give two results), and :meth:`~TileReduction.record` may also file it under the
result's named fields (``fake_in_real[k]``, ``realism``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable, Mapping, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.knn.bounds import Bound
from lightning_prd.functional.knn.members import Members
from lightning_prd.functional.knn.points import PointSet
from lightning_prd.functional.knn.shard import Shard


@dataclass
class TilePass:
    """What a reduction may read of its pass: the point sets as tiled, their exact squared radii
    (float64 ``NND_k`` per k) and the pass's memory budget."""

    real: PointSet
    fake: PointSet
    real_sq_radii: Mapping[int, Tensor]
    fake_sq_radii: Mapping[int, Tensor]
    block_bytes: int

    @property
    def device(self) -> torch.device:
        return self.real.original.device


class Tile(NamedTuple):
    """One real x fake tile: squared distances ``sq`` of reals ``rs`` x fakes ``cs``, the rounding bounds
    of its rows and columns, the shared real balls per ``(k, open)`` (listed path only), the float64
    distances of given pairs of the tile (``exact_fn(r, c)``, local indices) and the number of ambiguous
    pairs past which a decision raises :class:`.members.Ambiguous` (None: no limit)."""

    sq: Tensor
    rs: slice
    cs: slice
    row_bound: Bound
    col_bound: Bound
    balls: Mapping[Tuple[int, bool], Members]
    exact_fn: Callable[[Tensor, Tensor], Tensor]
    limit: Optional[float]


class TileReduction:
    """One reduction of the cross tiles (module docstring); subclasses set :attr:`key` and :attr:`bits`
    and implement what they need (the defaults do nothing)."""

    #: question bits a pair of the deferred path needs (at most 31 over the whole pass)
    bits: int = 0
    #: the shared real balls ``(k, open)`` the listed path decides for it per tile
    kinds: Tuple[Tuple[int, bool], ...] = ()
    #: sums float values of every pair: the pass runs float tiles (no screen), in the calling thread,
    #: with the single-process tiles on every rank
    sums_tiles: bool = False

    @property
    def key(self) -> Hashable:
        """The key of the result in ``CrossResult.reduced``: the kind and its parameters."""
        raise NotImplementedError

    def scale(self, real_sq_radii: Mapping[int, Tensor]) -> Optional[Tuple[int, Tensor]]:
        """``(rank, squared radii)`` that set the scale of the pass's decisions (the screen's offset is
        the median of the highest-ranked), or None."""
        return None

    def start(self, tiles: TilePass) -> None:
        """Fresh accumulators for a pass (a rerun on the listing path starts again)."""

    def decide(self, tile: Tile) -> None:
        """Listed path: the tile's contribution, kept until :meth:`commit`."""

    def commit(self, tile: Tile) -> None:
        """Listed path: add the contribution of the tile as last decided."""

    def update_deferred(self, tile: Tile) -> Optional[Tensor]:
        """Deferred path: add a tile's sure pairs; returns int32 flags of its ambiguous pairs (values below
        ``1 << bits``), or None when it has none."""
        return None

    def settle(self, rows: Tensor, cols: Tensor, d2: Tensor, flags: Tensor, bit: int) -> None:
        """Decide the logged pairs whose flags hold ``bit << b`` for the reduction's bits ``b``."""

    def finish(self, shard: Optional[Shard]) -> Any:
        """The pass's result, combined over the shard."""
        raise NotImplementedError

    def record(self, value: Any, res: Any) -> None:
        """File the result ``value`` (already in ``res.reduced[key]``) under the named fields of ``res``
        too (default: none)."""


def flagged(rows: Tensor, cols: Tensor, d2: Tensor, flags: Tensor, bit: int) -> Tuple[Tensor, Tensor, Tensor]:
    """The logged pairs whose flags hold ``bit``: ``(rows, cols, d2)``."""
    sel = (flags & bit) != 0
    return rows[sel], cols[sel], d2[sel]
