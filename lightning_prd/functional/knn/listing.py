"""The listing path of the cross pass: each tile's ambiguous pairs listed and decided at once.

Stage: used by the cross pass (may call :mod:`.members`, :mod:`.exact`, :mod:`.tiling`,
:mod:`.points`, :mod:`.reduction`). The CPU's path (CUDA defers the ambiguous pairs instead,
:mod:`.deferred`): per tile, the real balls the reductions share (:attr:`.reduction.TileReduction.kinds`,
:class:`.Members`, largest ``k`` first, each listed from the wider one's pairs) are decided, then every
reduction of the pass decides its part (:meth:`~.reduction.TileReduction.decide`: the pairs that may lie
inside a ball are listed with ``nonzero``, those within the rounding margin decided in float64), then
every reduction keeps the tile (:meth:`~.reduction.TileReduction.commit`). A screened tile with more
ambiguous pairs than :data:`AMBIGUOUS_SHARE` of its entries (any decision raising
:class:`.members.Ambiguous`) is recomputed from the float rows and decided again; once more than half of
a process's screened tiles were, the later tiles come from the float rows directly (``switch``: same
layout, so no value depends on it).

Example:
    >>> import torch
    >>> from lightning_prd.functional.knn.balls import BallMembers
    >>> from lightning_prd.functional.knn.points import prepare
    >>> from lightning_prd.functional.knn.reduction import TilePass
    >>> real, fake = torch.tensor([[0.0], [2.0]]), torch.tensor([[0.5], [9.0]])
    >>> r, f = prepare(real, real.double().mean(0), torch.float32), prepare(fake, real.double().mean(0), torch.float32)
    >>> radii = {1: torch.tensor([4.0, 4.0], dtype=torch.float64)}
    >>> ball = BallMembers(1)
    >>> ball.start(TilePass(r, f, radii, {}, 1 << 20))
    >>> tiles = ListedDecisions(r, f, radii, [ball])
    >>> tiles.update(slice(0, 2), slice(0, 2), torch.tensor([[0.25, 81.0], [2.25, 49.0]]), 0, 0)
    >>> ball.finish(None).fake_ball_count.tolist()
    [2, 0]
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Dict, List, Mapping, Optional, Tuple

from torch import Tensor

from lightning_prd.functional.knn import tiling
from lightning_prd.functional.knn.exact import exact_pairs
from lightning_prd.functional.knn.members import Ambiguous, Members
from lightning_prd.functional.knn.points import PointSet, bound
from lightning_prd.functional.knn.reduction import Tile, TileReduction

#: A screened cross tile with more ambiguous pairs than this share is recomputed in the
#: compute dtype (a float64 pair costs about as much as 100 pairs of a float32 GEMM).
AMBIGUOUS_SHARE = 1 / 256


@dataclass
class TileQuestions:
    """What the cross pass asks of every tile: its reductions (:class:`.reduction.TileReduction`), in
    order, on the pass's point sets ``real`` and ``fake`` (``real_sq_radii``: the real balls' exact
    squared radii per k); both paths (:class:`ListedDecisions`, the CPU's, and
    :class:`.deferred.DeferredDecisions`, CUDA's) answer it."""

    real: PointSet
    fake: PointSet
    real_sq_radii: Mapping[int, Tensor]
    reductions: List[TileReduction] = field(default_factory=list)


@dataclass
class ListedDecisions(TileQuestions):
    """The cross pass's reductions of each tile, its ambiguous pairs decided as they come
    (:class:`TileQuestions`; ``switch``: the tile generator's switch to the float rows, for
    screened passes)."""

    switch: Optional[tiling.Switch] = None

    def __post_init__(self) -> None:
        # the real balls the reductions share, largest k first (closed before open at one k): a
        # smaller ball of the same centre lies inside, so its pairs are among those listed
        kinds = {kind for reduction in self.reductions for kind in reduction.kinds}
        self.kinds = sorted(kinds, key=lambda kind: (-kind[0], kind[1]))
        self.plain = (replace(self.real, screened=None), replace(self.fake, screened=None))
        self.seen = self.recomputed = 0

    def update(self, rs: slice, cs: slice, sq: Tensor, i0: int, j0: int) -> None:
        """Reduce a tile (reals ``rs`` x fakes ``cs``), recomputed from the float rows when the
        screened values left too many pairs ambiguous."""
        real, fake = self.real, self.fake

        def exact_fn(r: Tensor, c: Tensor) -> Tensor:
            return exact_pairs(real.original, fake.original, i0 + r, j0 + c)

        plain_tile = self.switch is None or self.switch.sets is not None
        used = self.plain if plain_tile else (real, fake)
        self.seen += not plain_tile
        try:
            limit = None if plain_tile else sq.numel() * AMBIGUOUS_SHARE
            tile = self._decide(rs, cs, sq, *used, limit, exact_fn)
        except Ambiguous:
            self.recomputed += 1
            if 2 * self.recomputed > self.seen and self.switch is not None:
                self.switch.sets = self.plain
            p_real, p_fake = self.plain
            left, right = p_real.left(rs), p_fake.right(cs)
            sq = tiling.sq_tile((sq.reshape(-1), None), left, p_real.sq_norms[rs, None], right, p_fake.sq_norms[cs])
            tile = self._decide(rs, cs, sq, *self.plain, None, exact_fn)
        for reduction in self.reductions:  # (a tile-overwriting sum comes last)
            reduction.commit(tile)

    def _decide(
        self, rs: slice, cs: slice, sq: Tensor, a: PointSet, b: PointSet, limit: Optional[float], exact_fn
    ) -> Tile:
        # margins use the tile's largest norm on the other side: a conservative bound
        row_bound, col_bound = bound(a, b, rs, cs), bound(b, a, cs, rs)
        balls: Dict[Tuple[int, bool], Members] = {}
        wider: Optional[Members] = None
        for k, open_ in self.kinds:
            thr = self.real_sq_radii[k][rs]
            balls[k, open_] = wider = Members(sq, thr, row_bound, exact_fn, wider, limit, open_)
        tile = Tile(sq, rs, cs, row_bound, col_bound, balls, exact_fn, limit)
        for reduction in self.reductions:
            reduction.decide(tile)
        return tile
