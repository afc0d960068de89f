r"""The balls of precision, recall, density, coverage and beta-recall: reductions of the cross tiles.

Stage: a reduction of a cross tile beside :mod:`.members` (may call :mod:`.members`, :mod:`.reduction`,
:mod:`.shard`). With :math:`r_i = \mathrm{NND}_k(x_i)` of the reals and :math:`s_j = \mathrm{NND}_k(y_j)`
of the generated samples:

* :class:`BallMembers`: per generated sample, whether some real ball holds it (precision) and how many
  do (density); per real sample, whether its ball holds a generated one (coverage);
* :class:`RecallBalls`: per real sample, whether some generated ball holds it (recall);
* :class:`BallMinimum`: per real sample, the minimum of given per-fake values over the generated
  samples inside its closed ball (beta-recall).

Balls are closed (``d <= r``) or open (``d < r``, ``strict``); a pair within the tile's rounding margin
is decided in float64 like every decision of the pass (:mod:`.members`).

Example:
    >>> import torch
    >>> from lightning_prd.functional.knn.bounds import Bound
    >>> from lightning_prd.functional.knn.members import Members
    >>> from lightning_prd.functional.knn.points import prepare
    >>> from lightning_prd.functional.knn.reduction import Tile, TilePass
    >>> real, fake = torch.tensor([[0.0], [2.0]]), torch.tensor([[0.5], [9.0]])
    >>> c = real.double().mean(0)
    >>> r, f = prepare(real, c, torch.float32), prepare(fake, c, torch.float32)
    >>> ball = BallMembers(1)
    >>> ball.start(TilePass(r, f, {1: torch.tensor([4.0, 4.0], dtype=torch.float64)}, {}, 1 << 20))
    >>> sq, none = torch.tensor([[0.25, 81.0], [2.25, 49.0]]), Bound(0.0, None, torch.zeros(2, dtype=torch.float64))
    >>> balls = {(1, False): Members(sq, torch.tensor([4.0, 4.0], dtype=torch.float64), none, None)}
    >>> ball.commit(Tile(sq, slice(0, 2), slice(0, 2), none, none, balls, None, None))
    >>> ball.finish(None).fake_ball_count.tolist()
    [2, 0]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.knn.members import inside_ball, rows_inside, thresholds
from lightning_prd.functional.knn.reduction import Tile, TilePass, TileReduction, flagged
from lightning_prd.functional.knn.shard import Shard


@dataclass
class MemberCounts:
    """What :class:`BallMembers` gives: ``fake_in_real`` ``[M]`` bool (inside some real ball),
    ``fake_ball_count`` ``[M]`` int64 (real balls holding it), ``real_ball_hit`` ``[N]`` bool (own ball
    holds a generated sample)."""

    fake_in_real: Tensor
    fake_ball_count: Tensor
    real_ball_hit: Tensor


class BallMembers(TileReduction):
    """The generated members of the real ``NND_k`` balls (module docstring); ``strict``: open balls."""

    bits = 1

    def __init__(self, k: int, strict: bool = False) -> None:
        self.k, self.strict = int(k), bool(strict)
        self.kinds = ((self.k, self.strict),)

    @property
    def key(self) -> Tuple[str, int, bool]:
        return ("members", self.k, self.strict)

    def scale(self, real_sq_radii: Mapping[int, Tensor]) -> Optional[Tuple[int, Tensor]]:
        return self.k, real_sq_radii[self.k]

    def start(self, tiles: TilePass) -> None:
        n, m, dev = len(tiles.real), len(tiles.fake), tiles.device
        self.own_sq = tiles.real_sq_radii[self.k]
        self.fake_in_real = torch.zeros(m, dtype=torch.bool, device=dev)
        self.fake_ball_count = torch.zeros(m, dtype=torch.long, device=dev)
        self.real_ball_hit = torch.zeros(n, dtype=torch.bool, device=dev)

    def commit(self, tile: Tile) -> None:
        members = tile.balls[self.kinds[0]]
        self.fake_in_real[tile.cs] |= members.any_per_col()
        self.fake_ball_count[tile.cs] += members.count_per_col()
        self.real_ball_hit[tile.rs] |= members.any_per_row()

    def update_deferred(self, tile: Tile) -> Tensor:
        sq, rs, cs = tile.sq, tile.rs, tile.cs
        lo, hi = thresholds(self.own_sq[rs], tile.row_bound, sq.dtype)
        sure = inside_ball(sq, lo[:, None], self.strict)
        self.fake_in_real[cs] |= sure.any(0)
        self.fake_ball_count[cs] += sure.sum(0)
        self.real_ball_hit[rs] |= sure.any(1)
        return (sq <= hi[:, None]) & ~sure

    def settle(self, rows: Tensor, cols: Tensor, d2: Tensor, flags: Tensor, bit: int) -> None:
        r, c, d = flagged(rows, cols, d2, flags, bit)
        ok = inside_ball(d, self.own_sq[r], self.strict)
        r, c = r[ok], c[ok]
        self.fake_in_real.index_fill_(0, c, True)
        self.fake_ball_count.index_add_(0, c, torch.ones_like(c))
        self.real_ball_hit.index_fill_(0, r, True)

    def finish(self, shard: Optional[Shard]) -> MemberCounts:
        out = MemberCounts(self.fake_in_real, self.fake_ball_count, self.real_ball_hit)
        if shard is not None:
            out = MemberCounts(
                shard.any(out.fake_in_real), shard.sum(out.fake_ball_count), shard.any(out.real_ball_hit)
            )
        return out

    def record(self, value: Any, res: Any) -> None:
        res.fake_in_real[self.k] = value.fake_in_real
        res.fake_ball_count[self.k] = value.fake_ball_count
        res.real_ball_hit[self.k] = value.real_ball_hit


class BallMinimum(TileReduction):
    """Per real sample, the minimum of ``values`` (float64 ``[M]``, one per generated sample) over the
    generated samples inside its closed ``NND_k`` ball: float64 ``[N]``, ``inf`` for an empty ball."""

    bits = 1

    def __init__(self, k: int, values: Optional[Tensor]) -> None:
        self.k, self.fake_values = int(k), values
        self.kinds = ((self.k, False),)

    @property
    def key(self) -> Tuple[str, int]:
        return ("minimum", self.k)

    def scale(self, real_sq_radii: Mapping[int, Tensor]) -> Optional[Tuple[int, Tensor]]:
        return self.k, real_sq_radii[self.k]

    def start(self, tiles: TilePass) -> None:
        n, dev = len(tiles.real), tiles.device
        self.own_sq = tiles.real_sq_radii[self.k]
        self.best = torch.full((n,), math.inf, dtype=torch.float64, device=dev)
        zeros = torch.zeros(len(tiles.fake), dtype=torch.float64, device=dev)
        self.values = self.fake_values if self.fake_values is not None else zeros

    def commit(self, tile: Tile) -> None:
        best, rs = self.best, tile.rs
        best[rs] = torch.minimum(best[rs], tile.balls[self.kinds[0]].min_per_row(self.values[tile.cs]))

    def update_deferred(self, tile: Tile) -> Tensor:
        sq, rs = tile.sq, tile.rs
        lo, hi = thresholds(self.own_sq[rs], tile.row_bound, sq.dtype)
        sure = inside_ball(sq, lo[:, None], False)
        values = self.values[tile.cs]
        self.best[rs] = torch.minimum(self.best[rs], torch.where(sure, values[None, :], math.inf).amin(1))
        return (sq <= hi[:, None]) & ~sure

    def settle(self, rows: Tensor, cols: Tensor, d2: Tensor, flags: Tensor, bit: int) -> None:
        r, c, d = flagged(rows, cols, d2, flags, bit)
        ok = inside_ball(d, self.own_sq[r], False)
        r, c = r[ok], c[ok]
        self.best.scatter_reduce_(0, r, self.values[c].to(self.best.dtype), reduce="amin")

    def finish(self, shard: Optional[Shard]) -> Tensor:
        return shard.min(self.best) if shard is not None else self.best

    def record(self, value: Any, res: Any) -> None:
        res.real_ball_min_value[self.k] = value


class RecallBalls(TileReduction):
    """Per real sample, whether some generated ``NND_k`` ball holds it (``[N]`` bool); ``strict``: open
    balls. A real sample already inside a ball needs no further work."""

    bits = 1

    def __init__(self, k: int, strict: bool = False) -> None:
        self.k, self.strict = int(k), bool(strict)
        self.pending: Optional[Tensor] = None

    @property
    def key(self) -> Tuple[str, int, bool]:
        return ("recall", self.k, self.strict)

    def start(self, tiles: TilePass) -> None:
        self.thr = tiles.fake_sq_radii[self.k]
        self.done = torch.zeros(len(tiles.real), dtype=torch.bool, device=tiles.device)
        self.pending = None

    def decide(self, tile: Tile) -> None:
        done = self.done[tile.rs]
        thr = self.thr[tile.cs]
        self.pending = rows_inside(tile.sq, thr, tile.col_bound, tile.exact_fn, done, tile.limit, strict=self.strict)

    def commit(self, tile: Tile) -> None:
        if self.pending is not None:
            self.done[tile.rs] |= self.pending
            self.pending = None

    def update_deferred(self, tile: Tile) -> Tensor:
        sq, rs = tile.sq, tile.rs
        lo, hi = thresholds(self.thr[tile.cs], tile.col_bound, sq.dtype)
        done = self.done[rs] | inside_ball(sq, lo[None, :], self.strict).any(1)
        self.done[rs] = done
        return (sq <= hi[None, :]) & ~done[:, None]

    def settle(self, rows: Tensor, cols: Tensor, d2: Tensor, flags: Tensor, bit: int) -> None:
        r, c, d = flagged(rows, cols, d2, flags, bit)
        self.done.index_fill_(0, r[inside_ball(d, self.thr[c], self.strict)], True)

    def finish(self, shard: Optional[Shard]) -> Tensor:
        return shard.any(self.done) if shard is not None else self.done

    def record(self, value: Any, res: Any) -> None:
        res.real_in_fake[self.k] = value
