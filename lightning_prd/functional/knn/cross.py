"""The cross pass: one pass over the real x fake tiles, reduced in both directions.

Stage: top of the engine (may call every stage below: :mod:`.listing` and :mod:`.deferred`,
:mod:`.realism`, :mod:`.soft`, :mod:`.cover`, :mod:`.refine`, :mod:`.exact`, :mod:`.tiling`,
:mod:`.points`, :mod:`.lists`, :mod:`.shard`). Each tile is reduced while it is in memory:
fake membership in the real balls, ball counts and hits (precision, density, coverage), real
membership in the fake balls (recall), per-ball minima of per-fake values (beta-recall),
realism, and running nearest-neighbour lists made exact at the end (authenticity; the same
lists decide PR-cover, :mod:`.cover`), soft ball products (probabilistic precision and recall,
:mod:`.soft`) and the Gaussian kernel sum (:mod:`.kernel`, which needs float tiles: such a pass
is not screened). ``strict`` makes the balls of precision, recall, density and coverage open
(``d < r``, as the ``prdc`` package); the balls of beta-recall and PR-cover stay closed. Pairs
within a decision's rounding margin are decided in float64: listed per tile on the CPU
(:mod:`.listing`), deferred to the end of the loop on CUDA, where listing would make the host
wait for every tile (:mod:`.deferred`).

Example:
    >>> import torch
    >>> from lightning_prd.functional.knn.points import prepare
    >>> from lightning_prd.functional.knn.self_pass import self_knn
    >>> real, fake = torch.tensor([[0.0], [1.0], [3.0]]), torch.tensor([[0.5], [9.0]])
    >>> c = real.double().mean(0)
    >>> r, f = prepare(real, c, torch.float32), prepare(fake, c, torch.float32)
    >>> cross_pass(r, f, self_knn(r, [1]), {}, member_ks=[1]).fake_in_real[1].tolist()
    [True, False]
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from lightning_prd.functional.knn import threads, tiling
from lightning_prd.functional.knn.clipped import ClippedBalls, ClippedCounts
from lightning_prd.functional.knn.cover import Cover, within_kth
from lightning_prd.functional.knn.deferred import DeferredDecisions
from lightning_prd.functional.knn.exact import lowest_identical
from lightning_prd.functional.knn.kernel import KernelSum
from lightning_prd.functional.knn.listing import ListedDecisions, TileQuestions
from lightning_prd.functional.knn.lists import RunningNearest, sync_free
from lightning_prd.functional.knn.points import (
    PointSet,
    estimate_offset,
    screen_pays,
    set_offset,
    unscreened,
)
from lightning_prd.functional.knn.realism import RealismLists, exact_realism
from lightning_prd.functional.knn.reduction import TileReduction
from lightning_prd.functional.knn.refine import refine_topk
from lightning_prd.functional.knn.shard import Shard
from lightning_prd.functional.knn.soft import SoftProducts, nearest_products


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
        reduced: what each further tile reduction of the pass gave (:class:`.reduction.TileReduction`:
            its ``finish``), by the reduction's name.
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
    reduced: Dict[str, Any] = field(default_factory=dict)


def cross_pass(
    real: PointSet,
    fake: PointSet,
    real_sq_radii: Dict[int, Tensor],
    fake_sq_radii: Dict[int, Tensor],
    *,
    member_ks: Sequence[int] = (),
    recall_ks: Sequence[int] = (),
    realism_k: Optional[int] = None,
    nearest: Union[bool, str] = False,
    fake_values: Optional[Tensor] = None,
    value_ks: Sequence[int] = (),
    cover: Optional[Cover] = None,
    soft_sq_radii: Optional[Tuple[float, float]] = None,
    soft_nearest: Optional[int] = None,
    block_bytes: int = tiling.DEFAULT_BLOCK_BYTES,
    shard: Optional[Shard] = None,
    strict: bool = False,
    kernel: Optional[KernelSum] = None,
    clipped: Optional[ClippedBalls] = None,
    reductions: Sequence[TileReduction] = (),
    deferred: Optional[bool] = None,
) -> CrossResult:
    """One pass over the real x fake tiles, reduced in both directions.

    Args:
        real_sq_radii / fake_sq_radii: exact float64 squared ``NND_k`` per k.
        member_ks: real-ball radii k for which fake membership, counts and coverage are wanted.
        recall_ks: fake-ball radii k for which real membership is wanted.
        realism_k: real radii k for realism (median-pruned, plain-distance ratio), or None.
        nearest: exact nearest neighbours across the sets: True for both directions, ``"fake"``
            for the nearest real sample of each fake only (what authenticity needs).
        fake_values, value_ks: per-fake values whose minimum over each real ball (radius k
            in ``value_ks``) is wanted.
        cover: whether each sample's own ``NND_{k'}`` ball (closed) holds ``k`` samples of the
            other set (PR-cover, :class:`.cover.Cover`), or None.
        soft_sq_radii: ``(R_real^2, R_fake^2)`` of the soft balls (:mod:`.soft`), or None.
        soft_nearest: k: each soft product over the k nearest reference samples only (the
            authors' script), or None: over all of them (the paper).
        shard: compute only this process's tiles and combine the accumulators across the group.
        strict: open balls (``d < r``) for ``member_ks`` and ``recall_ks``; closed (``d <= r``)
            otherwise. The balls of ``value_ks`` are closed either way.
        kernel: a Gaussian kernel sum every real x fake pair is added to.
        clipped: count the clipped real balls holding each fake and the fakes inside each
            real ``NND_k`` ball (:mod:`.clipped`; its ``k`` should be in ``member_ks``).
        reductions: further reductions of the tiles' ball members (:class:`.reduction.TileReduction`),
            each one's result in ``reduced[name]``.
        deferred: decide the ambiguous pairs after the loop (:mod:`.deferred`); None: on CUDA
            (no host synchronisation per tile), False: listed per tile.
    """
    no_sync = sync_free(real.original.device) if deferred is None else deferred
    # one set too small to be screened, kernel values wanted (float tiles), or the CUDA path
    if (real.screened is None) != (fake.screened is None) or kernel is not None or no_sync:
        real, fake = unscreened(real, block_bytes), unscreened(fake, block_bytes)
    screened = real.screened is not None
    if screened:  # the scale of the decisions: the real balls' radii, or the nearest distances
        ks = set(member_ks) | set(value_ks) | ({realism_k} if realism_k is not None else set())
        radii = [real_sq_radii[k] for k in sorted(ks)]
        radii = radii or ([cover.real_radius[:, 1]] if cover is not None else [])
        offset = float(radii[-1].median()) if radii else estimate_offset(fake, real, 1, False)
        if screen_pays(real, fake, offset):
            set_offset(offset, real, fake)
        else:
            real, fake = unscreened(real, block_bytes), unscreened(fake, block_bytes)
            screened = False
    asks: Dict[str, Any] = dict(
        member_ks=member_ks,
        recall_ks=recall_ks,
        realism_k=realism_k,
        nearest=nearest,
        fake_values=fake_values,
        value_ks=value_ks,
        cover=cover,
        soft_sq_radii=soft_sq_radii,
        soft_nearest=soft_nearest,
        strict=strict,
        kernel=kernel,
    )
    if nearest not in (False, True, "fake"):
        raise ValueError(f"Expected argument `nearest` to be True, False or 'fake', but got {nearest!r}")
    count = (
        1 if no_sync or kernel is not None else threads.workers(real.original.device, len(real) * len(fake) * real.dim)
    )
    reducers = ([clipped] if clipped is not None else []) + list(reductions)
    if count > 1:  # listed per tile; each thread its own accumulators (a private copy of each reduction)

        def share(s: Shard) -> CrossResult:
            mine = [copy.copy(r) for r in reducers]
            out = _reduce(
                real, fake, real_sq_radii, fake_sq_radii, screened, False, block_bytes // count, s, mine, **asks
            )
            if out is None:
                raise RuntimeError("a listed cross pass never defers its decisions")
            return out

        return threads.run(share, count, shard)
    res = _reduce(real, fake, real_sq_radii, fake_sq_radii, screened, no_sync, block_bytes, shard, reducers, **asks)
    if res is None:  # an overflowing log of deferred decisions on some rank: listed per tile
        res = _reduce(real, fake, real_sq_radii, fake_sq_radii, screened, False, block_bytes, shard, reducers, **asks)
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
    reducers: List[TileReduction],
    *,
    member_ks: Sequence[int],
    recall_ks: Sequence[int],
    realism_k: Optional[int],
    nearest: Union[bool, str],
    fake_values: Optional[Tensor],
    value_ks: Sequence[int],
    cover: Optional[Cover],
    soft_sq_radii: Optional[Tuple[float, float]],
    soft_nearest: Optional[int],
    strict: bool,
    kernel: Optional[KernelSum],
) -> Optional[CrossResult]:
    """The tiles and the reductions of :func:`cross_pass` on sets whose offset is set (None: the
    deferred decisions overflowed their log, the pass must be listed)."""
    n, m = len(real), len(fake)
    dev, cdt = real.original.device, real.dtype
    res = CrossResult()
    for k in member_ks:
        res.fake_in_real[k] = torch.zeros(m, dtype=torch.bool, device=dev)
        res.fake_ball_count[k] = torch.zeros(m, dtype=torch.long, device=dev)
        res.real_ball_hit[k] = torch.zeros(n, dtype=torch.bool, device=dev)
    for k in recall_ks:
        res.real_in_fake[k] = torch.zeros(n, dtype=torch.bool, device=dev)
    for k in value_ks:
        res.real_ball_min_value[k] = torch.full((n,), math.inf, dtype=torch.float64, device=dev)
    soft = SoftProducts(n, m, *soft_sq_radii, dev) if soft_sq_radii is not None and soft_nearest is None else None
    soft_near = soft_nearest if soft_sq_radii is not None else None
    realism = None
    if realism_k is not None:
        r_sq = real_sq_radii[realism_k]
        keep = r_sq.sqrt() <= torch.quantile(r_sq.sqrt(), 0.5)
        # ratio r^2 / d^2 by one division: pruned balls get -1 (never the maximum of a kept
        # ball, whose ratios are >= 0); a kept ball of radius 0 gives 0 / d^2 = 0 to every
        # sample not on it, and (from the exact distance) inf to a copy of its centre
        realism = RealismLists(real, fake, torch.where(keep, r_sq, -1.0))
    # the balls of each tile: (k, strict) for membership and counts, (k, closed) for per-ball minima
    kinds = {(k, strict) for k in member_ks} | {(k, False) for k in value_ks}
    # one running nearest list per direction serves every k-th neighbour wanted across the sets
    cover_k = cover.k if cover is not None else 0
    t_fake = max(1 if nearest else 0, cover_k, soft_near or 0)  # reals near each fake
    t_real = max(1 if nearest is True else 0, cover_k, soft_near or 0)  # fakes near each real
    near_fake = RunningNearest(m, min(t_fake + real.slack, n), cdt, dev) if t_fake else None
    near_real = RunningNearest(n, min(t_real + real.slack, m), cdt, dev) if t_real else None

    # the balls, recall, realism and soft products of each tile; CUDA: no host synchronisation
    switch = tiling.Switch() if screened else None
    for reducer in reducers:  # fresh accumulators (a rerun on the listing path starts again)
        reducer.start(real_sq_radii, n, m, dev)
    asked = TileQuestions(
        res,
        real,
        fake,
        sorted(kinds),
        list(recall_ks),
        strict,
        real_sq_radii,
        fake_sq_radii,
        fake_values,
        realism,
        soft,
        reducers,
    )
    balls = DeferredDecisions(**vars(asked)) if no_sync else ListedDecisions(**vars(asked), switch=switch)
    # kernel sums need the single-process tiles on every rank (their float32 sums depend on the shapes)
    split = shard if shard is None or kernel is None else replace(shard, even_split=False)
    for i0, j0, sq in tiling.tiles(real, fake, block_bytes, split, switch):
        rs, cs = slice(i0, i0 + sq.shape[0]), slice(j0, j0 + sq.shape[1])
        sq = balls.update(rs, cs, sq, i0, j0)  # (a screened tile may come back from the float rows)
        if near_fake is not None:
            near_fake.update(cs, sq, 0, i0, no_sync)
        if near_real is not None:
            near_real.update(rs, sq, 1, j0, no_sync)
        if kernel is not None:  # last: it overwrites the tile
            kernel.add(sq)

    if isinstance(balls, DeferredDecisions):  # the ambiguous pairs, in float64
        settled = balls.settle()  # an overflowing log on any rank: listed
        if shard is not None:
            settled = not bool(shard.any(torch.tensor([not settled], device=dev)))
        if not settled:
            return None
    if kernel is not None:
        kernel.reduce(shard)
    for reducer in reducers:
        res.reduced[reducer.name] = reducer.finish(shard)
    res.clipped = res.reduced.get(ClippedBalls.name)
    for near in (near_fake, near_real):  # sorted lists for the stages below (merged lists come sorted)
        if near is not None and shard is not None:
            near.vals, near.idx = shard.merge_topk(near.vals, near.idx)
        elif near is not None:
            near.sort()
    if shard is not None:
        _combine(res, shard)
    if soft is not None:
        res.fake_soft, res.real_soft = soft.finish(real.original, fake.original, shard)
    if soft_near and soft_sq_radii is not None and near_fake is not None and near_real is not None:
        res.fake_soft, res.real_soft = nearest_products(
            real, fake, near_fake, near_real, soft_near, soft_sq_radii, block_bytes, shard
        )
    if cover is not None and near_fake is not None and near_real is not None:
        k = cover.k
        res.fake_covered = within_kth(fake, real, near_fake, k, cover.fake_radius, cover.fake_exact, block_bytes, shard)
        res.real_covered = within_kth(real, fake, near_real, k, cover.real_radius, cover.real_exact, block_bytes, shard)
    if realism is not None:
        best, unsafe = realism.finish(shard)
        if unsafe.numel():  # ties the lists cannot settle: every kept real sample, in float64
            mine = shard.row_share(len(unsafe)) if shard is not None else slice(None)
            part = exact_realism(real, fake, unsafe[mine], realism.num, block_bytes)
            best[unsafe] = shard.gather_rows(part, len(unsafe)) if shard is not None else part
        res.realism = best.clamp(min=0).sqrt()
    # nearest neighbours: exact ties (equidistant samples) go to the lowest index, as numpy's
    # argmin; authenticity depends on which tied real sample is i*
    if near_real is not None and nearest is True:
        res.real_nn_sq_dist, res.real_nn_index = _nearest(real, fake, near_real, m, block_bytes, shard)
    if near_fake is not None and nearest:
        res.fake_nn_sq_dist, res.fake_nn_index = _nearest(fake, real, near_fake, n, block_bytes, shard)
    return res


def _nearest(
    rows: PointSet, cols: PointSet, near: RunningNearest, num_cols: int, block_bytes: int, shard: Optional[Shard]
) -> Tuple[Tensor, Tensor]:
    """Exact squared distance and index of each row's nearest ``cols`` sample, from its running list."""
    dist, index = refine_topk(
        rows, cols, near.vals, near.idx, [1], False, truncated=near.t < num_cols, block_bytes=block_bytes, shard=shard
    )[1]
    return dist, lowest_identical(cols.original, index, dist)


def _combine(res: CrossResult, shard: Shard) -> None:
    """All-reduce the per-sample accumulators of a sharded cross pass."""
    for k in res.fake_in_real:
        res.fake_in_real[k] = shard.any(res.fake_in_real[k])
        res.fake_ball_count[k] = shard.sum(res.fake_ball_count[k])
        res.real_ball_hit[k] = shard.any(res.real_ball_hit[k])
    for k in res.real_in_fake:
        res.real_in_fake[k] = shard.any(res.real_in_fake[k])
    for k in res.real_ball_min_value:
        res.real_ball_min_value[k] = shard.min(res.real_ball_min_value[k])
