"""Running nearest lists of the cross tiles and what is read from them: a reduction of the cross pass.

Stage: a reduction of a cross tile beside :mod:`.cover` and :mod:`.soft` (may call :mod:`.cover`,
:mod:`.soft`, :mod:`.refine`, :mod:`.exact`, :mod:`.lists`, :mod:`.points`, :mod:`.reduction`,
:mod:`.shard`). One running list per direction (the reals nearest each generated sample, the generated
samples nearest each real one) serves every neighbour wanted across the sets, as long as the longest
asks: the exact nearest neighbour (authenticity, data copying, the symmetric scores), the ``k``-th
neighbour inside a sample's own ball (PR-cover, :mod:`.cover`) and the products over the ``k`` nearest
reference samples (probabilistic precision and recall, :func:`.soft.nearest_products`). The tiles'
values are merged per tile (no decision there); after the loop the lists are merged across the shard,
sorted, and made exact in float64 where a result is read from them. Exact ties (equidistant samples)
go to the lowest index, as numpy's argmin: authenticity depends on which tied real sample is nearest.

Example:
    >>> import torch
    >>> from lightning_prd.functional.knn.points import prepare
    >>> from lightning_prd.functional.knn.reduction import Tile, TilePass
    >>> real, fake = torch.tensor([[0.0], [2.0]]), torch.tensor([[1.5], [9.0]])
    >>> c = real.double().mean(0)
    >>> r, f = prepare(real, c, torch.float32), prepare(fake, c, torch.float32)
    >>> near = NearestLists("fake")
    >>> near.start(TilePass(r, f, {}, {}, 1 << 20))
    >>> sq = torch.cdist(r.original, f.original).square()
    >>> near.commit(Tile(sq, slice(0, 2), slice(0, 2), None, None, {}, None, None))
    >>> found = near.finish(None)
    >>> found.fake_nn_index.tolist(), found.fake_nn_sq_dist.tolist()
    ([1, 1], [0.25, 49.0])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple, Union

from torch import Tensor

from lightning_prd.functional.knn.cover import Cover, within_kth
from lightning_prd.functional.knn.exact import lowest_identical
from lightning_prd.functional.knn.lists import RunningNearest
from lightning_prd.functional.knn.points import PointSet
from lightning_prd.functional.knn.reduction import Tile, TilePass, TileReduction
from lightning_prd.functional.knn.refine import refine_topk
from lightning_prd.functional.knn.shard import Shard
from lightning_prd.functional.knn.soft import nearest_products


@dataclass
class Nearest:
    """What :class:`NearestLists` gives (None where not asked).

    Attributes:
        fake_nn_index, fake_nn_sq_dist: nearest real sample of each fake (exact float64 squared distance).
        real_nn_index, real_nn_sq_dist: nearest fake sample of each real.
        real_covered, fake_covered: ``[N]`` / ``[M]`` bool: the sample's own ball holds ``k`` samples of
            the other set (PR-cover).
        fake_soft, real_soft: ``[M]`` / ``[N]`` float64 soft-ball probabilities over the ``k`` nearest.
    """

    fake_nn_index: Optional[Tensor] = None
    fake_nn_sq_dist: Optional[Tensor] = None
    real_nn_index: Optional[Tensor] = None
    real_nn_sq_dist: Optional[Tensor] = None
    real_covered: Optional[Tensor] = None
    fake_covered: Optional[Tensor] = None
    fake_soft: Optional[Tensor] = None
    real_soft: Optional[Tensor] = None


class NearestLists(TileReduction):
    """The running nearest lists of a cross pass and what is read from them (module docstring).

    Args:
        nearest: exact nearest neighbours: True for both directions, ``"fake"`` for the nearest real
            sample of each fake only, False for none.
        cover: PR-cover's question (:class:`.cover.Cover`), or None.
        soft: ``(k, (R_real^2, R_fake^2))``: the soft products over the ``k`` nearest reference samples,
            or None.
    """

    def __init__(
        self,
        nearest: Union[bool, str] = False,
        cover: Optional[Cover] = None,
        soft: Optional[Tuple[int, Tuple[float, float]]] = None,
    ) -> None:
        if nearest not in (False, True, "fake"):
            raise ValueError(f"Expected argument `nearest` to be True, False or 'fake', but got {nearest!r}")
        self.nearest, self.cover, self.soft = nearest, cover, soft
        cover_k, soft_k = cover.k if cover is not None else 0, soft[0] if soft is not None else 0
        self.t_fake = max(1 if nearest else 0, cover_k, soft_k)  # reals near each fake
        self.t_real = max(1 if nearest is True else 0, cover_k, soft_k)  # fakes near each real

    @property
    def key(self) -> Tuple[str]:
        return ("nearest",)

    def scale(self, real_sq_radii: Any) -> Optional[Tuple[int, Tensor]]:
        # below every ball's rank: the real balls' radii set the scale when there are any
        return (0, self.cover.real_radius[:, 1]) if self.cover is not None else None

    def start(self, tiles: TilePass) -> None:
        real, fake = tiles.real, tiles.fake
        n, m, cdt, dev = len(real), len(fake), real.dtype, tiles.device
        self.real, self.fake, self.block_bytes = real, fake, tiles.block_bytes
        self.near_fake = RunningNearest(m, min(self.t_fake + real.slack, n), cdt, dev) if self.t_fake else None
        self.near_real = RunningNearest(n, min(self.t_real + real.slack, m), cdt, dev) if self.t_real else None

    def _update(self, tile: Tile, sync_free: bool) -> None:
        if self.near_fake is not None:
            self.near_fake.update(tile.cs, tile.sq, 0, tile.rs.start, sync_free)
        if self.near_real is not None:
            self.near_real.update(tile.rs, tile.sq, 1, tile.cs.start, sync_free)

    def commit(self, tile: Tile) -> None:
        self._update(tile, False)

    def update_deferred(self, tile: Tile) -> None:
        self._update(tile, True)

    def finish(self, shard: Optional[Shard]) -> Nearest:
        real, fake, block_bytes = self.real, self.fake, self.block_bytes
        near_fake, near_real = self.near_fake, self.near_real
        for near in (near_fake, near_real):  # sorted lists for the stages below (merged lists come sorted)
            if near is not None and shard is not None:
                near.vals, near.idx = shard.merge_topk(near.vals, near.idx)
            elif near is not None:
                near.sort()
        out = Nearest()
        if self.soft is not None and near_fake is not None and near_real is not None:
            k, sq_radii = self.soft
            out.fake_soft, out.real_soft = nearest_products(
                real, fake, near_fake, near_real, k, sq_radii, block_bytes, shard
            )
        cover = self.cover
        if cover is not None and near_fake is not None and near_real is not None:
            k = cover.k
            out.fake_covered = within_kth(
                fake, real, near_fake, k, cover.fake_radius, cover.fake_exact, block_bytes, shard
            )
            out.real_covered = within_kth(
                real, fake, near_real, k, cover.real_radius, cover.real_exact, block_bytes, shard
            )
        if near_real is not None and self.nearest is True:
            out.real_nn_sq_dist, out.real_nn_index = _nearest(real, fake, near_real, len(fake), block_bytes, shard)
        if near_fake is not None and self.nearest:
            out.fake_nn_sq_dist, out.fake_nn_index = _nearest(fake, real, near_fake, len(real), block_bytes, shard)
        return out

    def record(self, value: Any, res: Any) -> None:
        for name, found in vars(value).items():
            if found is not None:
                setattr(res, name, found)


def _nearest(
    rows: PointSet, cols: PointSet, near: RunningNearest, num_cols: int, block_bytes: int, shard: Optional[Shard]
) -> Tuple[Tensor, Tensor]:
    """Exact squared distance and index of each row's nearest ``cols`` sample, from its running list."""
    dist, index = refine_topk(
        rows, cols, near.vals, near.idx, [1], False, truncated=near.t < num_cols, block_bytes=block_bytes, shard=shard
    )[1]
    return dist, lowest_identical(cols.original, index, dist)
