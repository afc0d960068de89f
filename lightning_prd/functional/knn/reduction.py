"""The interface of a reduction of the cross pass's tiles over the members of the real balls.

Stage: a reduction of a cross tile beside :mod:`.members` (may call :mod:`.members`, :mod:`.bounds`,
:mod:`.shard`). A score that needs more of the real x fake tiles than the pass's fixed questions
(membership, counts, minima, nearest lists) brings one :class:`TileReduction`; the pass calls it on
both of its paths:

* listed (CPU): :meth:`~TileReduction.start`, then per tile :meth:`~TileReduction.decide` (the tile's
  ball members, ambiguous pairs already decided in float64) and :meth:`~TileReduction.commit` (the tile
  is kept), then :meth:`~TileReduction.finish`;
* deferred (CUDA, no host synchronisation per tile): per tile :meth:`~TileReduction.update_deferred`
  adds the sure pairs and flags the ambiguous ones with its own ``bits`` question bits, and
  :meth:`~TileReduction.settle` decides the flagged pairs from their exact squared distances.

Each worker thread works on a shallow copy (``copy.copy``) whose :meth:`~TileReduction.start` makes its
own accumulators; :meth:`~TileReduction.finish` combines them over the shard (threads and ranks). The
result lands in :attr:`.cross.CrossResult.reduced` under :attr:`~TileReduction.name`.
:class:`.clipped.ClippedBalls` (clipped density and coverage) and :class:`.smallest.SmallestBall`
(the rarity score) are the two built in.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.knn.bounds import Bound
from lightning_prd.functional.knn.members import Members
from lightning_prd.functional.knn.shard import Shard


class TileReduction:
    """One reduction of the cross tiles (module docstring); subclasses set :attr:`name` and :attr:`bits`."""

    #: the key of the result in ``CrossResult.reduced``
    name: str = ""
    #: question bits a pair of the deferred path needs (at most 31 over the whole pass)
    bits: int = 0

    def start(self, real_sq_radii: Mapping[int, Tensor], n: int, m: int, device: torch.device) -> None:
        """Fresh accumulators for ``n`` reals x ``m`` fakes (``real_sq_radii``: exact squared ``NND_k``)."""
        raise NotImplementedError

    def decide(
        self,
        sq: Tensor,
        rs: slice,
        balls: Mapping[Tuple[int, bool], Members],
        row_bound: Bound,
        exact_fn: Callable,
        limit: Optional[float],
    ) -> None:
        """Listed path: the tile's contribution, kept until :meth:`commit` (``balls``: the tile's members per
        ``(k, open)``; a kind not there is built from ``sq``, ``row_bound`` and ``exact_fn``)."""
        raise NotImplementedError

    def commit(self, rs: slice, cs: slice) -> None:
        """Add the contribution of the tile last decided (reals ``rs`` x fakes ``cs``)."""
        raise NotImplementedError

    def update_deferred(self, rs: slice, cs: slice, sq: Tensor, row_bound: Bound) -> Tensor:
        """Deferred path: add a tile's sure pairs; returns int32 flags of its ambiguous pairs (values below
        ``1 << bits``)."""
        raise NotImplementedError

    def settle(self, rows: Tensor, cols: Tensor, d2: Tensor, flags: Tensor, bit: int) -> None:
        """Decide the logged pairs whose flags hold ``bit << b`` for the reduction's bits ``b``."""
        raise NotImplementedError

    def finish(self, shard: Optional[Shard]) -> Any:
        """The pass's result, combined over the shard."""
        raise NotImplementedError
