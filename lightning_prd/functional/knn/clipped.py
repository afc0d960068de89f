r"""Clipped density and coverage's counts (Salvy et al. 2026), decided exactly.

Stage: a reduction of a cross tile beside :mod:`.members` (may call :mod:`.members`,
:mod:`.bounds`, :mod:`.points`, :mod:`.exact`, :mod:`.tiling`, :mod:`.shard`). With
:math:`r_i = \mathrm{NND}_k(x_i)` and the radii clipped at their median,
:math:`\tilde r_i = \min(r_i, \operatorname{median}_l r_l)`, the cross pass counts

* per generated sample, the closed real balls :math:`B(x_i, \tilde r_i)` holding it (clipped density),
* per real sample, the generated samples inside its own ball :math:`B(x_i, r_i)` (clipped
  coverage), closed (``d <= r``) or open (``d < r``, ``strict``) like the pass's other balls.

Each tile's pairs come from the members of the ``NND_k`` balls (:class:`.members.Members`): a
clipped ball lies inside, so its pairs are among those already listed; pairs within the
rounding margin are decided in float64. On the deferred path (:mod:`.deferred`) a tile adds its sure pairs and
logs the ambiguous ones under two question bits. :func:`real_ball_counts` counts, per real
sample, the *other* real samples' clipped balls that hold it (the normaliser of clipped
density) from the self pass's exact neighbour lists.

Example:
    >>> import torch
    >>> from lightning_prd.functional.knn.bounds import Bound
    >>> from lightning_prd.functional.knn.points import prepare
    >>> from lightning_prd.functional.knn.reduction import Tile, TilePass
    >>> pts = prepare(torch.zeros(2, 1), torch.zeros(1, dtype=torch.float64), torch.float32)  # (their sizes)
    >>> radii = {1: torch.tensor([1.0, 9.0], dtype=torch.float64)}  # squared NND_1 of two reals
    >>> balls = ClippedBalls(1)
    >>> balls.start(TilePass(pts, pts, radii, {}, 1 << 20))
    >>> sq = torch.tensor([[0.25, 4.0], [3.0, 8.0]])  # 2 reals x 2 fakes, squared distances
    >>> none = Bound(0.0, None, torch.zeros(2, dtype=torch.float64))
    >>> tile = Tile(sq, slice(0, 2), slice(0, 2), none, none, {}, None, None)
    >>> balls.decide(tile)
    >>> balls.commit(tile)
    >>> out = balls.finish(None)
    >>> out.clip_sq.tolist(), out.fake_count.tolist(), out.real_count.tolist()
    ([1.0, 4.0], [2, 0], [1, 2])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.knn.exact import exact_pairs
from lightning_prd.functional.knn.members import Members, inside_ball, thresholds
from lightning_prd.functional.knn.points import PointSet, bound, unscreened
from lightning_prd.functional.knn.reduction import Tile, TilePass, TileReduction
from lightning_prd.functional.knn.shard import Shard
from lightning_prd.functional.knn.tiling import DEFAULT_BLOCK_BYTES, tiles


@dataclass
class ClippedCounts:
    r"""The counts of one cross pass (module docstring).

    Attributes:
        k: the ``k`` of the radii.
        strict: open ``NND_k`` balls (``d < r``); the clipped balls are closed.
        clip_sq: ``[N]`` float64 squared clipped radii :math:`\tilde r_i^2`.
        fake_count: ``[M]`` int64: closed clipped real balls holding each generated sample.
        real_count: ``[N]`` int64: generated samples inside each real sample's ``NND_k`` ball
            (open when ``strict``).
    """

    k: int
    strict: bool
    clip_sq: Tensor
    fake_count: Tensor
    real_count: Tensor


def clipped_sq_radii(sq_radii: Tensor) -> Tensor:
    """``min(r, median(r))^2`` per sample from exact squared radii ``r^2``; the median of the plain
    radii as numpy's (the mean of the two middle values for an even count); unclipped radii keep
    their exact squares."""
    r = sq_radii.sqrt()
    med = torch.quantile(r, 0.5)
    return torch.where(r <= med, sq_radii, med * med)


def _row_counts(members: Members) -> Tensor:
    """Members per row (ball) of a tile."""
    if members.mask is not None:
        return members.mask.sum(1)
    return torch.bincount(members.rows, minlength=members.shape[0])


class ClippedBalls(TileReduction):
    """What clipped density and coverage ask of a cross pass: the counts of :class:`ClippedCounts`.

    Args:
        k: the ``k`` of the real radii (the pass needs ``NND_k`` of the real set).
        strict: open ``NND_k`` balls (``d < r``) for the coverage counts; the cross pass's
            ``strict`` should match, so that the tiles' ``NND_k`` balls are reused. The clipped
            balls are closed either way: their normaliser (:func:`real_ball_counts`) counts each
            ball's own ``k``-th neighbour, which lies on the radius.
    """

    bits = 2

    def __init__(self, k: int, strict: bool = False) -> None:
        self.k, self.strict = int(k), bool(strict)
        self.pending: Optional[Tuple[Tensor, Tensor]] = None

    @property
    def key(self) -> Tuple[str, int, bool]:
        return ("clipped", self.k, self.strict)

    def start(self, tiles: TilePass) -> None:
        """Fresh counts for a pass (``tiles.real_sq_radii[k]``: the exact squared ``NND_k`` of the reals)."""
        self.own_sq = tiles.real_sq_radii[self.k]
        self.clip_sq = clipped_sq_radii(self.own_sq)
        self.fake_count = torch.zeros(len(tiles.fake), dtype=torch.long, device=tiles.device)
        self.real_count = torch.zeros(len(tiles.real), dtype=torch.long, device=tiles.device)
        self.pending = None

    def decide(self, tile: Tile) -> None:
        """The counts of a tile (listing path), kept until :meth:`commit` (the tile's ``NND_k`` ball
        of this kind is reused when the pass shares it)."""
        sq, rs = tile.sq, tile.rs
        own = tile.balls.get((self.k, self.strict))
        if own is None:
            own = Members(sq, self.own_sq[rs], tile.row_bound, tile.exact_fn, None, tile.limit, self.strict)
        clip = Members(sq, self.clip_sq[rs], tile.row_bound, tile.exact_fn, own, tile.limit, False)
        self.pending = (clip.count_per_col(), _row_counts(own))

    def commit(self, tile: Tile) -> None:
        """Add the counts of the tile last decided."""
        if self.pending is not None:
            self.fake_count[tile.cs] += self.pending[0]
            self.real_count[tile.rs] += self.pending[1]
            self.pending = None

    def update_deferred(self, tile: Tile) -> Tensor:
        """Deferred path: add a tile's sure pairs; returns its ambiguous pairs' flags (1: the
        clipped ball, 2: the ``NND_k`` ball), to be decided by :meth:`settle`."""
        sq, rs, cs, row_bound = tile.sq, tile.rs, tile.cs, tile.row_bound
        flags = torch.zeros(sq.shape, dtype=torch.int32, device=sq.device)
        for value, thr, strict in ((1, self.clip_sq[rs], False), (2, self.own_sq[rs], self.strict)):
            lo, hi = thresholds(thr, row_bound, sq.dtype)
            sure = inside_ball(sq, lo[:, None], strict)
            if value == 1:
                self.fake_count[cs] += sure.sum(0)
            else:
                self.real_count[rs] += sure.sum(1)
            flags.add_((sq <= hi[:, None]) & ~sure, alpha=value)
        return flags

    def settle(self, rows: Tensor, cols: Tensor, d2: Tensor, flags: Tensor, bit: int) -> None:
        """Decide the logged pairs (exact squared distances ``d2``) whose flags hold ``bit``
        (clipped balls) or ``bit << 1`` (``NND_k`` balls)."""
        sel = (flags & bit) != 0
        r, c, d = rows[sel], cols[sel], d2[sel]
        c = c[inside_ball(d, self.clip_sq[r], False)]
        self.fake_count.index_add_(0, c, torch.ones_like(c))
        sel = (flags & (bit << 1)) != 0
        r, d = rows[sel], d2[sel]
        r = r[inside_ball(d, self.own_sq[r], self.strict)]
        self.real_count.index_add_(0, r, torch.ones_like(r))

    def finish(self, shard: Optional[Shard]) -> ClippedCounts:
        """The pass's counts, summed over the process group."""
        fake, real = self.fake_count, self.real_count
        if shard is not None:
            fake, real = shard.sum(fake), shard.sum(real)
        return ClippedCounts(self.k, self.strict, self.clip_sq, fake, real)

    def record(self, value: Any, res: Any) -> None:
        res.clipped = value


def real_ball_counts(
    points: PointSet,
    sq_radii: Mapping[int, Tensor],
    neighbours: Mapping[int, Tensor],
    k: int,
    clip_sq: Tensor,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> Tensor:
    r"""Per real sample :math:`x_l`, the number of closed clipped balls :math:`B(x_i, \tilde r_i)`,
    :math:`i \ne l`, holding it.

    A clipped ball lies inside the ``NND_k`` ball of its centre, so its members are among the
    centre's ``k`` nearest other samples (``neighbours[t]``: the index of the ``t``-th, exact
    squared distance ``sq_radii[t]``, from the self pass), except for a ball that keeps its full
    radius while samples beyond the ``k``-th sit on it (``NND_{k+1} = NND_k``): those balls,
    and any whose lists repeat an index, are recomputed against every real sample.

    Args:
        points: the real set as the pass prepared it (its float rows are tiled for the recomputation).
        sq_radii, neighbours: exact squared ``NND_t`` and the neighbours' indices for
            ``t = 1 .. k`` (and ``sq_radii[k + 1]`` when the set holds more than ``k + 1`` samples).
        clip_sq: ``[N]`` float64 squared clipped radii.
    """
    n, dev = len(points), clip_sq.device
    d2 = torch.stack([sq_radii[t] for t in range(1, k + 1)], 1)
    idx = torch.stack([neighbours[t] for t in range(1, k + 1)], 1)
    inside = d2 <= clip_sq[:, None]
    srt = idx.sort(1).values
    redo = (srt[:, 1:] == srt[:, :-1]).any(1)
    if k + 1 in sq_radii:
        redo |= sq_radii[k + 1] <= clip_sq
    counts = torch.bincount(idx[inside & ~redo[:, None]], minlength=n)
    rows = redo.nonzero(as_tuple=True)[0]
    if rows.numel():
        cols = _members(points, rows, clip_sq[rows], block_bytes)
        counts += torch.bincount(cols, minlength=n)
    return counts.to(dev)


def _members(points: PointSet, rows: Tensor, thr: Tensor, block_bytes: int) -> Tensor:
    """The indices ``j != rows[i]`` with ``d(x_rows[i], x_j)^2 <= thr[i]``, over every row, as one
    flat tensor: float tiles, the pairs that may be inside decided in float64."""
    plain = unscreened(points, 0)
    sub = plain.subset(rows)
    found = []
    for i0, j0, sq in tiles(sub, plain, block_bytes):
        n_r, n_c = sq.shape
        rs = slice(i0, i0 + n_r)
        maybe = sq.to(torch.float64) <= bound(sub, plain, rs, slice(j0, j0 + n_c)).maybe_below(thr[rs])[:, None]
        r_loc, c_loc = maybe.nonzero(as_tuple=True)
        keep = rows[i0 + r_loc] != j0 + c_loc
        r_loc, c_loc = r_loc[keep], c_loc[keep]
        if r_loc.numel() == 0:
            continue
        d = exact_pairs(sub.original, plain.original, i0 + r_loc, j0 + c_loc)
        found.append((j0 + c_loc)[d <= thr[i0 + r_loc]])
    return torch.cat(found) if found else torch.zeros(0, dtype=torch.long, device=rows.device)
