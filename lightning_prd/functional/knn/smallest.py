r"""Per generated sample, the smallest real ``NND_k`` ball that holds it: the rarity score's reduction.

Stage: a reduction of a cross tile beside :mod:`.members` (may call :mod:`.members`, :mod:`.reduction`,
:mod:`.bounds`, :mod:`.shard`). With :math:`r_i = \mathrm{NND}_k(x_i)` the cross pass finds, for each
generated sample :math:`y_j`,

.. math:: s_j = \min \{ r_i^2 : \lVert y_j - x_i \rVert < r_i \}

(``inf`` when no ball holds it). Balls are open, as the rarity score's official code tests
``r - d > 0``; a pair on the radius is decided in float64 like every ball of the pass.

Example:
    >>> import torch
    >>> from lightning_prd.functional.knn.bounds import Bound
    >>> from lightning_prd.functional.knn.points import prepare
    >>> from lightning_prd.functional.knn.reduction import Tile, TilePass
    >>> centre = torch.zeros(1, dtype=torch.float64)
    >>> reals = prepare(torch.zeros(2, 1), centre, torch.float32)  # (their sizes)
    >>> fakes = prepare(torch.zeros(3, 1), centre, torch.float32)
    >>> radii = {1: torch.tensor([1.0, 9.0], dtype=torch.float64)}  # squared NND_1 of two reals
    >>> ball = SmallestBall(1)
    >>> ball.start(TilePass(reals, fakes, radii, {}, 1 << 20))
    >>> sq = torch.tensor([[0.25, 4.0, 1.0], [3.0, 8.0, 9.5]])  # 2 reals x 3 fakes, squared distances
    >>> exact = lambda r, c: sq[r, c].double()  # the float64 distances of the pairs on a radius
    >>> none = Bound(0.0, None, torch.zeros(2, dtype=torch.float64))
    >>> tile = Tile(sq, slice(0, 2), slice(0, 3), none, none, {}, exact, None)
    >>> ball.decide(tile)
    >>> ball.commit(tile)
    >>> ball.finish(None).tolist()  # the third fake sits on the first radius and outside the second ball
    [1.0, 9.0, inf]
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.knn.members import Members, inside_ball, thresholds
from lightning_prd.functional.knn.reduction import Tile, TilePass, TileReduction
from lightning_prd.functional.knn.shard import Shard


def min_per_col(members: Members, row_values: Tensor) -> Tensor:
    """Minimum of ``row_values`` over each column's member rows of a tile (``inf`` where a column has none)."""
    if members.mask is not None:
        return torch.where(members.mask, row_values[:, None], math.inf).amin(0)
    out = torch.full((members.shape[1],), math.inf, dtype=row_values.dtype, device=row_values.device)
    return out.scatter_reduce_(0, members.cols, row_values[members.rows], reduce="amin")


class SmallestBall(TileReduction):
    """The squared radius of the smallest open real ``NND_k`` ball holding each generated sample
    (module docstring); :meth:`finish` gives float64 ``[M]``, ``inf`` for a sample in no ball."""

    bits = 1

    def __init__(self, k: int) -> None:
        self.k = int(k)
        self.pending: Optional[Tensor] = None

    @property
    def key(self) -> Tuple[str, int]:
        return ("smallest_ball", self.k)

    def start(self, tiles: TilePass) -> None:
        self.own_sq = tiles.real_sq_radii[self.k]
        self.best = torch.full((len(tiles.fake),), math.inf, dtype=torch.float64, device=tiles.device)
        self.pending = None

    def decide(self, tile: Tile) -> None:
        own = tile.balls.get((self.k, True))
        if own is None:  # the open balls lie inside the closed ones of the same radii, where listed
            thr, within = self.own_sq[tile.rs], tile.balls.get((self.k, False))
            own = Members(tile.sq, thr, tile.row_bound, tile.exact_fn, within, tile.limit, True)
        self.pending = min_per_col(own, self.own_sq[tile.rs])

    def commit(self, tile: Tile) -> None:
        if self.pending is not None:
            self.best[tile.cs] = torch.minimum(self.best[tile.cs], self.pending)
            self.pending = None

    def update_deferred(self, tile: Tile) -> Tensor:
        sq, cs, thr = tile.sq, tile.cs, self.own_sq[tile.rs]
        lo, hi = thresholds(thr, tile.row_bound, sq.dtype)
        sure = inside_ball(sq, lo[:, None], True)
        self.best[cs] = torch.minimum(self.best[cs], torch.where(sure, thr[:, None], math.inf).amin(0))
        return ((sq <= hi[:, None]) & ~sure).to(torch.int32)

    def settle(self, rows: Tensor, cols: Tensor, d2: Tensor, flags: Tensor, bit: int) -> None:
        sel = (flags & bit) != 0
        r, c, d = rows[sel], cols[sel], d2[sel]
        ok = inside_ball(d, self.own_sq[r], True)
        self.best.scatter_reduce_(0, c[ok], self.own_sq[r[ok]], reduce="amin")

    def finish(self, shard: Optional[Shard]) -> Tensor:
        return shard.min(self.best) if shard is not None else self.best
