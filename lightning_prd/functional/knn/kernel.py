r"""Gaussian kernel sums over the distance tiles: the reduction behind the kernel distances (CMMD).

Stage: beside :mod:`.members` (imports only torch, ``torch.distributed``, :mod:`.bounds`, :mod:`.collectives`,
:mod:`.reduction` and :mod:`.shard`); called by
:mod:`.self_pass` on each tile, and a reduction of the cross tiles (:class:`CrossKernel`, the last of
the pass's list: the tile is overwritten). :class:`KernelSum` accumulates, in float64,

.. math::
    G = \sum_{\text{pairs}} g(d^2), \qquad g(d^2) = 1 - e^{-\gamma d^2}, \quad \gamma = \frac{1}{2\sigma^2},

over the pairs of the tiles it is given: ``1 - k`` rather than the kernel ``k`` itself, so
that the constant 1, which cancels in an MMD, is never summed (with :math:`\sigma` large
compared with the distances, as CMMD's :math:`\sigma = 10` on unit-norm CLIP embeddings,
:math:`k \approx 0.99` and :math:`1 - k` keeps the digits the MMD is made of).

Accuracy. Each tile value is a float32 GEMM distance (``||a||^2 + ||b||^2 - 2 a.b`` on rows
centred by the real mean) with an error ``delta`` of a few float32 units of the squared norms;
``g`` carries ``gamma |delta|`` of it (its derivative is ``gamma e^{-gamma d^2} <= gamma``).
``g`` is computed in place in the tile dtype (``expm1``: relative accuracy at small
arguments) and summed in blocks of :data:`CHUNK` values before a float64 sum (a float32 sum of
64 terms, then float64: as accurate as a float64 sum at the cost of a float32 one). The tiles'
float64 sums are kept one per tile and added at the end by :func:`math.fsum` (the correctly
rounded sum, whatever their order), so a pass split across processes, whose tiles have the
same shapes and each of which one process computes, gives the single-process total bit for bit. An MMD
combines the three sums with weights of total 4, so its worst-case error is
``4 gamma max|delta|``; the per-row part of ``delta`` (the rounding of each squared norm)
cancels to first order in an MMD (a term ``f(x) + f(y)`` added to every squared distance is a
kernel whose MMD is 0), and the per-pair part has no sign preference, so the measured error is
far below the worst case (see :func:`lightning_prd.functional.cmmd.cmmd`).

The bfloat16 screen's tile values (:mod:`.screen`) are intervals about 2^-8 wide, not
float32-accurate distances: a pass that sums kernels runs float32 (or float64) tiles.

Example:
    >>> import torch
    >>> acc = KernelSum(0.5, torch.device("cpu"))
    >>> acc.add(torch.tensor([[0.0, 2.0], [2.0, 0.0]]))
    >>> round(float(acc.total), 6)  # 2 (1 - e^-1)
    1.264241
"""

from __future__ import annotations

import math
from typing import Any, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch import Tensor

from lightning_prd.functional.knn.bounds import block_sums
from lightning_prd.functional.knn.collectives import object_device_context
from lightning_prd.functional.knn.reduction import Tile, TilePass, TileReduction
from lightning_prd.functional.knn.shard import Shard

#: Values summed in the tile dtype before the float64 sum (a float32 sum of 64 values has a
#: relative error of a few units; the float64 sum of the partial sums adds none).
CHUNK = 64


def chunked_sum(x: Tensor) -> Tensor:
    """Float64 sum of a 2-D tile (or a column slice of one): runs of :data:`CHUNK` columns
    summed in ``x``'s dtype, the run sums in float64 (:func:`.bounds.block_sums`).

    Example:
        >>> import torch
        >>> float(chunked_sum(torch.ones(3, 130)))
        390.0
    """
    return block_sums(x, 1, CHUNK, x.dtype).sum()


class KernelSum:
    """Float64 sum of ``1 - exp(-gamma d^2)`` over the pairs of the tiles it is given (one float64
    sum per tile, added correctly rounded: :attr:`total`).

    Args:
        gamma: ``1 / (2 sigma^2)`` of the Gaussian kernel ``exp(-gamma d^2)``.
        device: where the running sum lives (the tiles' device).
    """

    def __init__(self, gamma: float, device: torch.device) -> None:
        if not (gamma > 0 and math.isfinite(gamma)):
            raise ValueError(f"Expected argument `gamma` to be a positive finite number, but got {gamma!r}")
        self.gamma = float(gamma)
        self.device = device
        self._tiles: List[Tensor] = []  # one 0-dim float64 sum per tile given here
        self._total: Optional[Tensor] = None  # after :meth:`reduce`: the sum over every process's tiles

    @property
    def total(self) -> Tensor:
        """The 0-dim float64 sum: of every process's tiles after :meth:`reduce`, else of the tiles given here."""
        if self._total is not None:
            return self._total
        return torch.tensor(math.fsum(self._values()), dtype=torch.float64, device=self.device)

    def _values(self) -> List[float]:
        return torch.stack(self._tiles).tolist() if self._tiles else []

    def _sum(self, sq: Tensor, split: int = 0) -> Tensor:
        """Float64 sums of ``-g = expm1(-gamma d^2)`` over the columns ``[:split]`` and
        ``[split:]`` of the tile ``sq``, written over it (its values are lost).

        Three whole-tile operations (scale, ``expm1``, sum): cutting the tile into cache-sized
        row blocks measured up to 18x slower on a loaded 2-core machine (one thread barrier per
        small operation), and no faster at low load."""
        g = sq.mul_(-self.gamma).expm1_()
        total = torch.zeros(2, dtype=torch.float64, device=sq.device)
        if split:
            total[0] = chunked_sum(g[:, :split])
        total[1] = chunked_sum(g[:, split:])
        return total

    def add(self, sq: Tensor) -> None:
        """Add every pair of a cross tile of squared distances (overwritten)."""
        self._tiles.append(-self._sum(sq)[1])

    def add_self(self, sq: Tensor, n_rows: int, diagonal: bool) -> None:
        """Add a self-pass tile (overwritten) so that the total counts every *ordered* pair
        ``i != j`` of the set once.

        The tiles lie on and above the diagonal: a tile beyond the diagonal counts twice (its
        mirror is never computed); in the tile holding the diagonal (``diagonal``) the square
        ``sq[:, :n_rows]`` holds both orders of its pairs and its diagonal (a point with
        itself) is excluded, the rest counts twice.
        """
        if diagonal:
            sq.diagonal().zero_()  # g(0) = 0: the point with itself adds nothing
        square, rest = self._sum(sq, n_rows if diagonal else 0)
        self._tiles.append(-(square + 2 * rest))

    def reduce(self, shard: Optional[Shard]) -> None:
        """Fix :attr:`total`: with ``shard``, the correctly rounded sum of every rank's tile sums (each
        tile computed by one rank), so every rank gets the single-process value."""
        values = self._values()
        if shard is not None:
            every: List[List[float]] = [[] for _ in range(shard.world)]
            with object_device_context(shard.group, self.device):
                dist.all_gather_object(every, values, group=shard.group)
            values = [v for part in every for v in part]
        self._total = torch.tensor(math.fsum(values), dtype=torch.float64, device=self.device)


class CrossKernel(TileReduction):
    """The kernel sum of every real x fake pair (:class:`KernelSum`) as a reduction of the cross tiles,
    the last of the pass's list (it overwrites the tile); :meth:`finish` gives the 0-dim float64 total."""

    sums_tiles = True

    def __init__(self, gamma: float) -> None:
        self.gamma = float(gamma)

    @property
    def key(self) -> Tuple[str, float]:
        return ("kernel", self.gamma)

    def start(self, tiles: TilePass) -> None:
        self.sum = KernelSum(self.gamma, tiles.device)

    def commit(self, tile: Tile) -> None:
        self.sum.add(tile.sq)

    def update_deferred(self, tile: Tile) -> None:
        self.sum.add(tile.sq)

    def finish(self, shard: Optional[Shard]) -> Tensor:
        self.sum.reduce(shard)
        return self.sum.total

    def record(self, value: Any, res: Any) -> None:
        res.kernel = value
