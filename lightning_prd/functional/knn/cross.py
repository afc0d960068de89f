"""The cross pass: one pass over the real x fake tiles, each tile reduced by a list of reductions.

Stage: top of the engine (may call every stage below: :mod:`.listing` and :mod:`.deferred`,
:mod:`.reduction` and the reductions, :mod:`.tiling`, :mod:`.points`, :mod:`.lists`, :mod:`.shard`,
:mod:`.threads`). Each tile is reduced while it is in memory by every :class:`.reduction.TileReduction`
the pass is given, in order, through that one interface: the tile loop knows no question. The built-in
reductions are fake membership in the real balls, ball counts and hits (precision, density, coverage:
:class:`.balls.BallMembers`), real membership in the fake balls (recall: :class:`.balls.RecallBalls`),
per-ball minima of per-fake values (beta-recall: :class:`.balls.BallMinimum`), realism
(:class:`.realism.Realism`), running nearest-neighbour lists made exact at the end (authenticity, PR-cover
and the nearest soft products: :class:`.nearest.NearestLists`), soft ball products (probabilistic
precision and recall: :class:`.soft.Soft`), the Gaussian kernel sum (:class:`.kernel.CrossKernel`, which
needs float tiles: such a pass is not screened), clipped counts (:class:`.clipped.ClippedBalls`) and
the smallest ball (:class:`.smallest.SmallestBall`). Each result lands in :attr:`CrossResult.reduced`
under its reduction's key, and under the named fields below for the built-in ones. Pairs within a
decision's rounding margin are decided in float64: listed per tile on the CPU (:mod:`.listing`),
deferred to the end of the loop on CUDA, where listing would make the host wait for every tile
(:mod:`.deferred`).

Example:
    >>> import torch
    >>> from lightning_prd.functional.knn.balls import BallMembers
    >>> from lightning_prd.functional.knn.points import prepare
    >>> from lightning_prd.functional.knn.self_pass import self_knn
    >>> real, fake = torch.tensor([[0.0], [1.0], [3.0]]), torch.tensor([[0.5], [9.0]])
    >>> c = real.double().mean(0)
    >>> r, f = prepare(real, c, torch.float32), prepare(fake, c, torch.float32)
    >>> cross_pass(r, f, self_knn(r, [1]), {}, [BallMembers(1)]).fake_in_real[1].tolist()
    [True, False]
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any, Dict, Hashable, List, Optional, Sequence

import torch
from torch import Tensor

from lightning_prd.functional.knn import threads, tiling
from lightning_prd.functional.knn.clipped import ClippedCounts
from lightning_prd.functional.knn.deferred import DeferredDecisions
from lightning_prd.functional.knn.listing import ListedDecisions
from lightning_prd.functional.knn.lists import sync_free
from lightning_prd.functional.knn.points import PointSet, estimate_offset, screen_pays, set_offset, unscreened
from lightning_prd.functional.knn.reduction import TilePass, TileReduction
from lightning_prd.functional.knn.shard import Shard


@dataclass
class CrossResult:
    """Everything the k-NN metrics need from the real x fake tiles.

    Keys of the dicts are the ``k`` of the radii used.

    Attributes:
        fake_in_real: ``[M]`` bool per k: fake inside some real ball (precision).
        fake_ball_count: ``[M]`` int64 per k: number of real balls holding the fake (density).
        real_ball_hit: ``[N]`` bool per k: real sample's own ball holds a fake (coverage).
        real_in_fake: ``[N]`` bool per k: real inside some fake ball (recall).
        realism: ``[M]`` float64 realism scores, or None.
        fake_nn_index, fake_nn_sq_dist: nearest real sample of each fake (exact float64
            squared distance, comparable with the squared radii without rounding).
        real_nn_index, real_nn_sq_dist: nearest fake sample of each real.
        real_ball_min_value: ``[N]`` per k: minimum of ``fake_values`` over the fakes inside
            the real sample's ball (``inf`` when none), used by beta-recall.
        real_covered: ``[N]`` bool: the real sample's own ``NND_{k'}`` ball holds ``k`` fakes
            (recall-cover), or None.
        fake_covered: ``[M]`` bool: the fake sample's own ``NND_{k'}`` ball holds ``k`` reals
            (precision-cover), or None.
        fake_soft, real_soft: ``[M]`` / ``[N]`` float64 soft-ball probabilities of each fake
            against the real balls / each real against the fake balls (probabilistic P&R).
        clipped: the counts of clipped density and coverage (:mod:`.clipped`), or None.
        kernel: the 0-dim float64 Gaussian kernel sum over the real x fake pairs (:mod:`.kernel`), or None.
        reduced: what each tile reduction of the pass gave (:meth:`.reduction.TileReduction.finish`), by
            the reduction's key (its kind and parameters).
    """

    fake_in_real: Dict[int, Tensor] = field(default_factory=dict)
    fake_ball_count: Dict[int, Tensor] = field(default_factory=dict)
    real_ball_hit: Dict[int, Tensor] = field(default_factory=dict)
    real_in_fake: Dict[int, Tensor] = field(default_factory=dict)
    realism: Optional[Tensor] = None
    fake_nn_index: Optional[Tensor] = None
    fake_nn_sq_dist: Optional[Tensor] = None
    real_nn_index: Optional[Tensor] = None
    real_nn_sq_dist: Optional[Tensor] = None
    real_ball_min_value: Dict[int, Tensor] = field(default_factory=dict)
    real_covered: Optional[Tensor] = None
    fake_covered: Optional[Tensor] = None
    fake_soft: Optional[Tensor] = None
    real_soft: Optional[Tensor] = None
    clipped: Optional[ClippedCounts] = None
    kernel: Optional[Tensor] = None
    reduced: Dict[Hashable, Any] = field(default_factory=dict)


def cross_pass(
    real: PointSet,
    fake: PointSet,
    real_sq_radii: Dict[int, Tensor],
    fake_sq_radii: Dict[int, Tensor],
    reductions: Sequence[TileReduction],
    *,
    block_bytes: int = tiling.DEFAULT_BLOCK_BYTES,
    shard: Optional[Shard] = None,
    deferred: Optional[bool] = None,
) -> CrossResult:
    """One pass over the real x fake tiles, each reduced by every one of ``reductions``.

    Args:
        real_sq_radii / fake_sq_radii: exact float64 squared ``NND_k`` per k (what the reductions read).
        reductions: the tile reductions (:class:`.reduction.TileReduction`), each one's result in
            ``reduced[key]``; two with the same key raise ``ValueError``. Those that overwrite the tile
            with their sums (:attr:`~.reduction.TileReduction.sums_tiles`) run last.
        shard: compute only this process's tiles and combine the accumulators across the group.
        deferred: decide the ambiguous pairs after the loop (:mod:`.deferred`); None: on CUDA
            (no host synchronisation per tile), False: listed per tile.
    """
    keys = [r.key for r in reductions]
    if len(set(keys)) != len(keys):
        raise ValueError(f"Expected tile reductions with distinct keys, but got {keys}")
    reductions = sorted(reductions, key=lambda r: r.sums_tiles)  # (a stable sort)
    sums = any(r.sums_tiles for r in reductions)
    no_sync = sync_free(real.original.device) if deferred is None else deferred
    # one set too small to be screened, kernel values wanted (float tiles), or the CUDA path
    if (real.screened is None) != (fake.screened is None) or sums or no_sync:
        real, fake = unscreened(real, block_bytes), unscreened(fake, block_bytes)
    screened = real.screened is not None
    if screened:  # the scale of the decisions: the real balls' radii, or the nearest distances
        scales = [s for s in (r.scale(real_sq_radii) for r in reductions) if s is not None]
        top = max(rank for rank, _ in scales) if scales else None
        radii = [sq_radii for rank, sq_radii in scales if rank == top]
        offset = float(radii[0].median()) if radii else estimate_offset(fake, real, 1, False)
        if screen_pays(real, fake, offset):
            set_offset(offset, real, fake)
        else:
            real, fake = unscreened(real, block_bytes), unscreened(fake, block_bytes)
            screened = False
    count = 1 if no_sync or sums else threads.workers(real.original.device, len(real) * len(fake) * real.dim)
    if count > 1:  # listed per tile; each thread its own accumulators (a private copy of each reduction)

        def share(s: Shard) -> CrossResult:
            mine = [copy.copy(r) for r in reductions]
            out = _reduce(real, fake, real_sq_radii, fake_sq_radii, screened, False, block_bytes // count, s, mine)
            if out is None:
                raise RuntimeError("a listed cross pass never defers its decisions")
            return out

        return threads.run(share, count, shard)
    res = _reduce(real, fake, real_sq_radii, fake_sq_radii, screened, no_sync, block_bytes, shard, reductions)
    if res is None:  # an overflowing log of deferred decisions on some rank: listed per tile
        res = _reduce(real, fake, real_sq_radii, fake_sq_radii, screened, False, block_bytes, shard, reductions)
        if res is None:
            raise RuntimeError("a listed cross pass never defers its decisions")
    return res


def _reduce(
    real: PointSet,
    fake: PointSet,
    real_sq_radii: Dict[int, Tensor],
    fake_sq_radii: Dict[int, Tensor],
    screened: bool,
    no_sync: bool,
    block_bytes: int,
    shard: Optional[Shard],
    reductions: List[TileReduction],
) -> Optional[CrossResult]:
    """The tiles and the reductions of :func:`cross_pass` on sets whose offset is set (None: the
    deferred decisions overflowed their log, the pass must be listed)."""
    tiles = TilePass(real, fake, real_sq_radii, fake_sq_radii, block_bytes)
    for reduction in reductions:  # fresh accumulators (a rerun on the listing path starts again)
        reduction.start(tiles)
    switch = tiling.Switch() if screened else None
    balls = (
        DeferredDecisions(real, fake, real_sq_radii, reductions)
        if no_sync
        else ListedDecisions(real, fake, real_sq_radii, reductions, switch)
    )
    # sums of float tile values need the single-process tiles on every rank (their sums depend on the shapes)
    sums = any(r.sums_tiles for r in reductions)
    split = shard if shard is None or not sums else replace(shard, even_split=False)
    for i0, j0, sq in tiling.tiles(real, fake, block_bytes, split, switch):
        balls.update(slice(i0, i0 + sq.shape[0]), slice(j0, j0 + sq.shape[1]), sq, i0, j0)

    if isinstance(balls, DeferredDecisions):  # the ambiguous pairs, in float64
        settled = balls.settle()  # an overflowing log on any rank: listed
        if shard is not None:
            settled = not bool(shard.any(torch.tensor([not settled], device=real.original.device)))
        if not settled:
            return None
    res = CrossResult()
    for reduction in reductions:
        value = res.reduced[reduction.key] = reduction.finish(shard)
        reduction.record(value, res)
    return res
