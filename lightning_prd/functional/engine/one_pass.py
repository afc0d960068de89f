"""Plans one shared k-NN evaluation from what the metrics ask for, and caches the real side.

:func:`run_pass` takes checked sets (:class:`FeatureSets`; :func:`knn_pass` checks raw inputs first),
finds the radii each requested score needs, runs the three tile passes of :mod:`.knn` once, and
returns the raw per-sample results (and, when asked, the Gaussian kernel sums of the three tile
families, :class:`KernelSums`). The public functions and the Metric classes turn those into scores.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from lightning_prd.functional import knn
from lightning_prd.functional.engine.inputs import check_ball, check_block_bytes, check_min_samples, same_features
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.functional.engine.stats import mean64
from lightning_prd.functional.knn.balls import BallMembers, BallMinimum, RecallBalls
from lightning_prd.functional.knn.cover import Cover
from lightning_prd.functional.knn.kernel import CrossKernel, KernelSum
from lightning_prd.functional.knn.nearest import NearestLists
from lightning_prd.functional.knn.points import unscreened
from lightning_prd.functional.knn.realism import Realism
from lightning_prd.functional.knn.reduction import TileReduction
from lightning_prd.functional.knn.self_pass import LooseRadius
from lightning_prd.functional.knn.shard import Shard
from lightning_prd.functional.knn.soft import Soft
from lightning_prd.functional.knn.workspace import pass_workspace


@dataclass
class RealSide:
    """Real-side work that does not depend on the generated set: reuse it across evaluations.

    Attributes:
        points: the real features (as validated).
        centre: float64 mean of ``points``; both sets are centred by it.
        prepared: the real rows, centre and centred norms for the GEMM pass.
        sq_radii: exact float64 squared ``NND_k`` per k computed so far.
        sq_radius_bounds: per k asked only as an interval (PR-cover's wide balls), a
            :class:`.knn.self_pass.LooseRadius`: ``[N, 2]`` float64 bounds of the exact squared
            ``NND_k``, made exact on demand (:func:`.knn.self_radii`).
        kernel_sums: float64 sum of ``1 - exp(-gamma d^2)`` over the ordered real pairs
            ``i != j``, per ``gamma`` computed so far (:mod:`.knn.kernel`).
        neighbours: per k of ``sq_radii``, the index of each point's k-th nearest other point.
    """

    points: Tensor
    centre: Tensor
    prepared: knn.PointSet
    sq_radii: Dict[int, Tensor] = field(default_factory=dict)
    sq_radius_bounds: Dict[int, LooseRadius] = field(default_factory=dict)
    kernel_sums: Dict[float, Tensor] = field(default_factory=dict)
    neighbours: Dict[int, Tensor] = field(default_factory=dict)

    @classmethod
    def build(cls, points: Tensor, dtype: torch.dtype, screens: bool = True) -> RealSide:
        centre = mean64(points)
        return cls(points=points, centre=centre, prepared=knn.prepare(points, centre, dtype, screens=screens))

    def matches(self, points: Tensor, dtype: torch.dtype) -> bool:
        """True when this cache was built from exactly ``points`` (same object or same values)."""
        return self.prepared.dtype == dtype and same_features(self.points, points)

    def ensure_radii(
        self,
        ks: Sequence[int],
        block_bytes: int,
        shard: Optional[Shard] = None,
        work: Optional[knn.PointSet] = None,
        gamma: Optional[float] = None,
        loose_ks: Sequence[int] = (),
    ) -> None:
        """Compute the missing radii (on ``work``, this side's points with a centred working copy, if given),
        the missing intervals of ``loose_ks`` and the kernel sum of ``gamma`` if it is missing (in
        the same self pass)."""
        missing = sorted(set(ks) - set(self.sq_radii))
        loose = sorted(set(loose_ks) - set(self.sq_radii) - set(self.sq_radius_bounds) - set(missing))
        kernel = None if gamma is None or gamma in self.kernel_sums else KernelSum(gamma, self.points.device)
        if missing or loose or kernel is not None:
            points = work if work is not None else self.prepared
            exact, bounds = knn.self_radii(points, missing, loose, block_bytes, shard, kernel, self.neighbours)
            self.sq_radii.update(exact)
            self.sq_radius_bounds.update(bounds)
        if kernel is not None and gamma is not None:
            self.kernel_sums[gamma] = kernel.total


def _radius(
    exact: Dict[int, Tensor], loose: Dict[int, LooseRadius], k: int, block_bytes: int
) -> Tuple[Tensor, Callable[[Tensor, Optional[Shard]], Tensor]]:
    """An ``[n, 2]`` interval holding the exact squared ``NND_k`` (equal ends when it is exact)
    and the exact values of given rows (computed with the asking pass's shard)."""
    if k in exact:
        return torch.stack([exact[k], exact[k]], 1), lambda rows, shard: exact[k][rows]
    return loose[k].interval, lambda rows, shard: loose[k].exact(rows, block_bytes, shard)


@dataclass
class KernelSums:
    """Float64 sums of ``g = 1 - exp(-gamma d^2)`` over the pairs of each tile family.

    Attributes:
        gamma: ``1 / (2 sigma^2)``.
        real: over the ordered real pairs ``i != j`` (``N (N - 1)`` terms).
        fake: over the ordered generated pairs ``i != j`` (``M (M - 1)`` terms).
        cross: over the real x generated pairs (``N M`` terms).
    """

    gamma: float
    real: Tensor
    fake: Tensor
    cross: Tensor


@dataclass
class PassResult:
    """Raw results of one evaluation: radii of both sets and the cross-pass reductions."""

    real: RealSide
    fake_sq_radii: Dict[int, Tensor]
    cross: knn.CrossResult
    dtype: torch.dtype
    num_real: int
    num_fake: int
    kernel: Optional[KernelSums] = None
    #: the checked sets the pass ran on, and its ``fake_values`` (float64) when given
    sets: Optional[FeatureSets] = None
    fake_values: Optional[Tensor] = None


def requested(value: Optional[Tensor], name: str) -> Tensor:
    """A reduction of the pass that the caller asked for (``knn_pass`` leaves the others ``None``)."""
    if value is None:
        raise RuntimeError(f"the k-NN pass did not compute `{name}`: request it in knn_pass")
    return value


def knn_pass(
    real: Any,
    fake: Any,
    *,
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = knn.DEFAULT_BLOCK_BYTES,
    real_cache: Optional[RealSide] = None,
    shard: Optional[Shard] = None,
    **fields: Any,
) -> PassResult:
    """Check ``real`` and ``fake`` (:meth:`FeatureSets.check`) and run :func:`run_pass` on them with the
    request of ``fields`` (:class:`~.request.PassRequest`'s fields).

    Example:
        >>> import torch
        >>> res = knn_pass(torch.arange(4.0)[:, None], torch.tensor([[0.2], [7.0]]), member_ks=[1])
        >>> res.real.sq_radii[1].tolist(), res.cross.fake_in_real[1].tolist()
        ([1.0, 1.0, 1.0, 1.0], [True, False])
    """
    sets = FeatureSets.check(real, fake)
    return run_pass(
        sets, PassRequest(**fields), dtype=dtype, block_bytes=block_bytes, real_cache=real_cache, shard=shard
    )


def tile_reductions(
    request: PassRequest,
    cover: Optional[Cover],
    soft_sq_radii: Optional[Tuple[float, float]],
    fake_values: Optional[Tensor],
    strict: bool,
) -> List[TileReduction]:
    """The reductions of the cross tiles that ``request`` asks for, in the pass's order (``cover``,
    ``soft_sq_radii``, ``fake_values``: its questions made concrete from the self passes; ``strict``:
    open balls of ``member_ks`` and ``recall_ks``)."""
    out: List[TileReduction] = [BallMembers(k, strict) for k in request.member_ks]
    out += [RecallBalls(k, strict) for k in request.recall_ks]
    out += [BallMinimum(k, fake_values) for k in request.value_ks]
    out += [Realism(request.realism_k)] if request.realism_k is not None else []
    soft = request.soft
    out += [Soft(soft_sq_radii)] if soft is not None and soft_sq_radii is not None and not soft[2] else []
    near_soft = (soft[0], soft_sq_radii) if soft is not None and soft_sq_radii is not None and soft[2] else None
    if request.nearest not in (False, True, "fake"):
        raise ValueError(f"Expected argument `nearest` to be True, False or 'fake', but got {request.nearest!r}")
    if request.nearest or cover is not None or near_soft is not None:
        out.append(NearestLists(request.nearest, cover, near_soft))
    out += [request.clipped] if request.clipped is not None else []
    out += list(request.reductions)
    out += [CrossKernel(request.kernel_gamma)] if request.kernel_gamma is not None else []
    return out


@knn.ieee_float32()  # the tiles' rounding bounds assume IEEE float32 products
@pass_workspace()  # scratch buffers kept for the whole pass (no page faults per chunk)
def run_pass(
    sets: FeatureSets,
    request: PassRequest,
    *,
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = knn.DEFAULT_BLOCK_BYTES,
    real_cache: Optional[RealSide] = None,
    shard: Optional[Shard] = None,
) -> PassResult:
    """Run the k-NN passes that ``request`` needs, once, on checked sets (no validation here).

    The request (:class:`~.request.PassRequest`) names the radii and the questions of the cross tiles;
    here its questions become the pass's tile reductions (:func:`tile_reductions`), each result in
    ``cross.reduced[key]`` (and the named fields of :class:`~.knn.CrossResult`).

    Args:
        sets: the ``[N, D]`` real and ``[M, D]`` generated features, checked.
        request: what to compute. A ``kernel_gamma`` pass runs float tiles (never the bfloat16 screen,
            whose values are intervals); ``ball`` applies to the balls of ``member_ks`` and ``recall_ks``
            (radii, realism, nearest neighbours and the balls of ``value_ks`` are the same either way).
        dtype: compute dtype of the GEMM tiles (float32 default, float64 option).
        block_bytes: memory budget of one tile and its temporaries, and of each set's centred
            working copy for the pass (made only when the set fits it).
        real_cache: a :class:`RealSide` from an earlier call, reused when it matches ``real``.
        shard: split the tile work across a process group (every rank must call with the
            same features; each gets the full result).
    """
    member_ks, recall_ks, realism_k = request.member_ks, request.recall_ks, request.realism_k
    extra_real_ks, fake_values, value_ks, cover = request.real_ks, request.fake_values, request.value_ks, request.cover
    soft, kernel_gamma = request.soft, request.kernel_gamma
    real, fake = sets.real, sets.fake
    block_bytes = check_block_bytes(block_bytes)
    ball = check_ball(request.ball)
    cdt = sets.compute_dtype(dtype)
    if kernel_gamma is not None and kernel_gamma > torch.finfo(cdt).max:  # sigma below ~4e-20: float64 tiles
        cdt = torch.float64
    soft_ks = {soft[0]} if soft is not None else set()
    real_ks = sorted(
        set(member_ks) | set(extra_real_ks) | set(value_ks) | soft_ks | ({realism_k} if realism_k else set())
    )
    fake_ks = sorted(set(recall_ks) | soft_ks)
    if cover is not None:
        for name, points in (("real", real), ("fake", fake)):
            check_min_samples(points, cover[1], name)
    for k in real_ks:
        check_min_samples(real, k, "real")
    for k in fake_ks:
        check_min_samples(fake, k, "fake")

    screens = kernel_gamma is None  # kernel sums need float tiles: no screen rows to build
    side = (
        real_cache if real_cache is not None and real_cache.matches(real, cdt) else RealSide.build(real, cdt, screens)
    )
    real_set = knn.with_centred(side.prepared, block_bytes)  # working copies for this pass only
    fake_set = knn.prepare(fake, side.centre, cdt, cache_bytes=block_bytes, screens=screens)
    fake_kernel = None
    if kernel_gamma is not None:  # kernel values need float tiles (one centred copy per set)
        real_set, fake_set = unscreened(real_set, block_bytes), unscreened(fake_set, block_bytes)
        fake_kernel = KernelSum(kernel_gamma, fake.device)
    wide = [cover[1]] if cover is not None else []
    side.ensure_radii(real_ks, block_bytes, shard, work=real_set, gamma=kernel_gamma, loose_ks=wide)
    fake_sq_radii: Dict[int, Tensor] = {}
    fake_bounds: Dict[int, LooseRadius] = {}
    if fake_ks or wide or fake_kernel is not None:
        fake_sq_radii, fake_bounds = knn.self_radii(fake_set, fake_ks, wide, block_bytes, shard, kernel=fake_kernel)
    cover_spec = None
    if cover is not None:
        real_r = _radius(side.sq_radii, side.sq_radius_bounds, cover[1], block_bytes)
        fake_r = _radius(fake_sq_radii, fake_bounds, cover[1], block_bytes)
        cover_spec = Cover(cover[0], real_r[0], fake_r[0], real_r[1], fake_r[1])
    if fake_values is not None:
        fake_values = torch.as_tensor(fake_values, dtype=torch.float64, device=fake.device)
    soft_sq_radii = None
    if soft is not None:  # R = a * mean NND_k (plain distances), one radius per set
        k, a = soft[0], soft[1]
        soft_sq_radii = (
            (a * float(side.sq_radii[k].sqrt().mean())) ** 2,
            (a * float(fake_sq_radii[k].sqrt().mean())) ** 2,
        )
    reductions = tile_reductions(request, cover_spec, soft_sq_radii, fake_values, ball == "open")
    cross = knn.cross_pass(
        real_set, fake_set, side.sq_radii, fake_sq_radii, reductions, block_bytes=block_bytes, shard=shard
    )
    sums = None
    if kernel_gamma is not None and fake_kernel is not None and cross.kernel is not None:
        sums = KernelSums(kernel_gamma, side.kernel_sums[kernel_gamma], fake_kernel.total, cross.kernel)
    return PassResult(side, fake_sq_radii, cross, cdt, real.shape[0], fake.shape[0], sums, sets, fake_values)
