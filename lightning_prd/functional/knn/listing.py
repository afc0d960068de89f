"""The listing path of the cross pass: each tile's ambiguous pairs listed and decided at once.

Stage: used by the cross pass (may call :mod:`.members`, :mod:`.exact`, :mod:`.tiling`,
:mod:`.points`, :mod:`.realism`, :mod:`.soft`, :mod:`.reduction`). The CPU's path (CUDA defers the ambiguous pairs
instead, :mod:`.deferred`): per tile, the pairs that may lie inside a ball (:class:`.Members`
for the real balls, largest ``k`` first, :func:`.rows_inside` for recall's fake balls) are
listed with ``nonzero``, those within the rounding margin decided in float64, and the lists
reduced; the soft products and the realism lists take the tile next. A screened tile with
more ambiguous pairs than :data:`AMBIGUOUS_SHARE` of its entries is recomputed from the float
rows; once more than half of a process's screened tiles were, the later tiles come from the
float rows directly (``switch``: same layout, so no value depends on it).

Example:
    >>> import torch
    >>> from lightning_prd.functional.knn.cross import CrossResult
    >>> from lightning_prd.functional.knn.points import prepare
    >>> real, fake = torch.tensor([[0.0], [2.0]]), torch.tensor([[0.5], [9.0]])
    >>> r, f = prepare(real, real.double().mean(0), torch.float32), prepare(fake, real.double().mean(0), torch.float32)
    >>> res = CrossResult(fake_in_real={1: torch.zeros(2, dtype=torch.bool)},
    ...                   fake_ball_count={1: torch.zeros(2, dtype=torch.long)},
    ...                   real_ball_hit={1: torch.zeros(2, dtype=torch.bool)})
    >>> radii = {1: torch.tensor([4.0, 4.0], dtype=torch.float64)}
    >>> tiles = ListedDecisions(res, r, f, [(1, False)], [], False, radii, {}, None, None, None)
    >>> sq = torch.tensor([[0.25, 81.0], [2.25, 49.0]])
    >>> _ = tiles.update(slice(0, 2), slice(0, 2), sq, 0, 0)
    >>> res.fake_ball_count[1].tolist()
    [2, 0]
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.knn import tiling
from lightning_prd.functional.knn.exact import exact_pairs
from lightning_prd.functional.knn.members import Ambiguous, Members, rows_inside
from lightning_prd.functional.knn.points import PointSet, bound
from lightning_prd.functional.knn.realism import RealismLists
from lightning_prd.functional.knn.reduction import TileReduction
from lightning_prd.functional.knn.soft import SoftProducts

#: A screened cross tile with more ambiguous pairs than this share is recomputed in the
#: compute dtype (a float64 pair costs about as much as 100 pairs of a float32 GEMM).
AMBIGUOUS_SHARE = 1 / 256


@dataclass
class TileQuestions:
    """What the cross pass asks of every tile; both paths (:class:`ListedDecisions`, the CPU's,
    and :class:`.deferred.DeferredDecisions`, CUDA's) answer it.

    Args:
        res: the pass's accumulators (:class:`.cross.CrossResult`), updated in place; a
            ``(k, strict)`` ball kind is reduced for precision, density and coverage when
            ``res.fake_in_real`` has ``k``, a closed one for beta-recall's minima when
            ``res.real_ball_min_value`` has it.
        real, fake: the pass's point sets.
        kinds: the real balls ``(k, open)`` of each tile.
        recall_ks / strict: the fake balls' k of recall, open when ``strict``.
        real_sq_radii / fake_sq_radii: float64 squared radii per k.
        fake_values: per-fake values for beta-recall's minima, or None.
        realism / soft: the pass's realism lists and soft products, or None.
        reducers: further reductions of the tiles' ball members (:mod:`.reduction`).
    """

    res: Any
    real: PointSet
    fake: PointSet
    kinds: List[Tuple[int, bool]]
    recall_ks: List[int]
    strict: bool
    real_sq_radii: Dict[int, Tensor]
    fake_sq_radii: Dict[int, Tensor]
    fake_values: Optional[Tensor]
    realism: Optional[RealismLists]
    soft: Optional[SoftProducts]
    reducers: List[TileReduction] = field(default_factory=list)


@dataclass
class ListedDecisions(TileQuestions):
    """The cross pass's reductions of each tile, its ambiguous pairs decided as they come
    (:class:`TileQuestions`; ``switch``: the tile generator's switch to the float rows, for
    screened passes)."""

    switch: Optional[tiling.Switch] = None

    def __post_init__(self) -> None:
        # largest k first (closed before open at one k): a smaller ball of the same centre lies
        # inside, so its pairs are among those listed
        self.kinds = sorted(self.kinds, key=lambda kind: (-kind[0], kind[1]))
        self.plain = (replace(self.real, screened=None), replace(self.fake, screened=None))
        self.seen = self.recomputed = 0

    def update(self, rs: slice, cs: slice, sq: Tensor, i0: int, j0: int) -> Tensor:
        """Reduce a tile (reals ``rs`` x fakes ``cs``); returns it, recomputed from the float
        rows when the screened values left too many pairs ambiguous."""
        res, real, fake = self.res, self.real, self.fake

        def exact_fn(r: Tensor, c: Tensor) -> Tensor:
            return exact_pairs(real.original, fake.original, i0 + r, j0 + c)

        plain_tile = self.switch is None or self.switch.sets is not None
        used = self.plain if plain_tile else (real, fake)
        self.seen += not plain_tile
        try:
            limit = None if plain_tile else sq.numel() * AMBIGUOUS_SHARE
            balls, inside = self._decide(rs, cs, sq, *used, limit, exact_fn)
        except Ambiguous:
            self.recomputed += 1
            if 2 * self.recomputed > self.seen and self.switch is not None:
                self.switch.sets = self.plain
            p_real, p_fake = used = self.plain
            left, right = p_real.left(rs), p_fake.right(cs)
            sq = tiling.sq_tile((sq.reshape(-1), None), left, p_real.sq_norms[rs, None], right, p_fake.sq_norms[cs])
            balls, inside = self._decide(rs, cs, sq, *used, None, exact_fn)
        for (k, open_), members in balls.items():
            if k in res.fake_in_real and open_ == self.strict:
                res.fake_in_real[k][cs] |= members.any_per_col()
                res.fake_ball_count[k][cs] += members.count_per_col()
                res.real_ball_hit[k][rs] |= members.any_per_row()
            if k in res.real_ball_min_value and not open_:
                best = res.real_ball_min_value[k]
                values = self.fake_values if self.fake_values is not None else best.new_zeros(0)
                best[rs] = torch.minimum(best[rs], members.min_per_row(values[cs]))
        for reducer in self.reducers:
            reducer.commit(rs, cs)
        if self.soft is not None:
            self.soft.update(rs, cs, sq, bound(*used, rs, cs), exact_fn)
        for k, rows_in in inside.items():
            res.real_in_fake[k][rs] |= rows_in
        if self.realism is not None:  # (the screen's bound holds for recomputed tiles too)
            self.realism.update(rs, cs, sq, i0, exact_fn)
        return sq

    def _decide(
        self, rs: slice, cs: slice, sq: Tensor, a: PointSet, b: PointSet, limit: Optional[float], exact_fn
    ) -> Tuple[Dict[Tuple[int, bool], Members], Dict[int, Tensor]]:
        # margins use the tile's largest norm on the other side: a conservative bound
        row_bound, col_bound = bound(a, b, rs, cs), bound(b, a, cs, rs)
        balls: Dict[Tuple[int, bool], Members] = {}
        wider: Optional[Members] = None
        for k, open_ in self.kinds:
            balls[k, open_] = wider = Members(sq, self.real_sq_radii[k][rs], row_bound, exact_fn, wider, limit, open_)
        for reducer in self.reducers:  # inside the NND_k balls: from their members
            reducer.decide(sq, rs, balls, row_bound, exact_fn, limit)
        done = self.res.real_in_fake
        inside = {
            k: rows_inside(sq, self.fake_sq_radii[k][cs], col_bound, exact_fn, done[k][rs], limit, strict=self.strict)
            for k in self.recall_ks
        }
        return balls, inside
