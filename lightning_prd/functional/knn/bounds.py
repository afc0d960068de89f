"""Rounding intervals of tile squared distances: the rule every k-NN decision follows.

Stage: bottom (imports only torch). Every decision of the engine (a k-th neighbour,
``d^2 <= r^2``, a nearest neighbour, a realism maximum) is taken on a tile value ``v`` only
when the whole interval ``[low(v), high(v)]`` that can hold the exact squared distance lies on
one side of the threshold; other pairs are recomputed in float64 (:mod:`.exact`).
:class:`Bound` is that interval for the two ways tiles are computed:

* **float GEMM** (``||a||^2 + ||b||^2 - 2 a.b`` on centred rows): ``[v - tau, v + tau]`` with
  ``tau = (2 sqrt(D + 1) + 8) eps (||a||^2 + ||b||^2)`` (:func:`tol_factor`), an empirical
  margin several times the measured error, plus the underflow of products below the
  smallest normal number.
* **bfloat16 screen** (:mod:`.screen`): a relative error ``rel`` of ``|v - offset|``, the
  float32 addition of the offset, ``tau``, and the inputs' rounding ``e`` in distance units:
  ``d`` lies in ``[sqrt(max(0, v - s(v))) - e, sqrt(v + s(v)) + e]`` with
  ``s(v) = rel |v - c| + 2^-23 v + tau``.

The reductions that sum many tile values (soft ball products, kernel sums) share one blocked
sum, :func:`block_sums`: short runs in the tile's dtype, the run sums in float64, with a
bound of its rounding (:func:`block_sum_error`).

Example:
    >>> import torch
    >>> b = Bound(0.0, None, torch.tensor(0.5))
    >>> float(b.low(torch.tensor(2.0))), float(b.high(torch.tensor(2.0)))
    (1.5, 2.5)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

#: Unit roundoff of bfloat16 (8 significant bits) and the relative error bound of a value
#: recovered from its rounded form.
_U = 2.0**-8
SCREEN_REL = _U / (1 - _U)


def block_sums(y: Tensor, dim: int, block: int, dtype: torch.dtype) -> Tensor:
    r"""Float64 sums of ``y`` along ``dim``: runs of ``block`` consecutive terms summed in
    ``dtype`` (one pass at that dtype's cost), the run sums and the last partial run (fewer
    than ``block`` terms) added in float64.

    A float32 sum of ``b <= B`` terms in ``[0, 1]``, in any order, is within
    :math:`\gamma_{B-1} b`, :math:`\gamma_j = j u / (1 - j u)`, ``u = 2^-24`` (Higham, *Accuracy
    and Stability of Numerical Algorithms*, 2nd ed., (4.4)); over ``n`` terms the runs make
    at most :func:`block_sum_error`, and the float64 sum of the runs adds ``n / B`` float64
    roundings of run sums.

    Example:
        >>> import torch
        >>> block_sums(torch.ones(3, 130), 1, 64, torch.float32).tolist()
        [130.0, 130.0, 130.0]
    """
    n = y.shape[dim]
    full = n - n % block
    total = y.narrow(dim, full, n - full).sum(dim, dtype=torch.float64)  # the last partial run
    if full:
        runs = y.narrow(dim, 0, full).unflatten(dim, (full // block, block)).sum(dim + 1, dtype=dtype)
        total += runs.sum(dim, dtype=torch.float64)
    return total


def block_sum_error(n: int, block: int) -> float:
    """Bound of the rounding error of :func:`block_sums` in float32 over ``n`` terms in
    ``[0, 1]``: ``(n + B) gamma_{B-1}`` with ``B = min(block, n)`` (its docstring)."""
    size = max(1, min(block, n))
    u = 2.0**-24
    return (n + size) * (size - 1) * u / (1 - (size - 1) * u)


def tol_factor(dtype: torch.dtype, dim: int) -> float:
    """Relative rounding margin of a float GEMM squared distance with ``dim`` accumulated terms.

    The dot product's rounding error grows like ``sqrt(D) * eps`` (random-walk accumulation;
    blocked BLAS kernels do better), the norms and additions add a few ``eps``. Measured
    on Gaussian and offset data the error stays below ``0.07 * sqrt(D + 1) * eps *
    (||a||^2 + ||b||^2)`` at D = 2,048 and below ``1 * sqrt(D + 1) * eps * (...)`` at D = 8;
    the margin is several times larger in both regimes.
    """
    return (2.0 * math.sqrt(dim + 1) + 8.0) * torch.finfo(dtype).eps


@dataclass
class Bound:
    """Interval ``[low(v), high(v)]`` holding the exact float64 squared distance of a pair whose
    tile value is ``v`` (module docstring). ``e`` and ``tau`` broadcast against ``v``.

    With the screen, ``v`` carries a relative error ``rel`` of ``|v - offset|`` (the bfloat16
    output) and ``2^-23`` of ``v`` (the float32 sum that adds the offset back), then ``tau``;
    ``e`` bounds the inputs' rounding in distance units. Without it (``e`` None) the interval
    is ``[v - tau, v + tau]``.
    """

    rel: float
    e: Optional[Tensor]
    tau: Tensor
    offset: float = 0.0

    #: relative rounding of the float32 addition of the offset (two units in the last place)
    _ADD = 2.0**-23

    def col(self) -> Bound:
        """The same bound as a column (``[n, 1]``), to broadcast along tile rows."""
        return Bound(self.rel, None if self.e is None else self.e[:, None], self.tau[:, None], self.offset)

    def widest(self) -> Bound:
        """One bound for every row: the largest rounding terms."""
        return Bound(self.rel, None if self.e is None else self.e.max(), self.tau.max(), self.offset)

    def _spread(self, v: Tensor) -> Tensor:
        return self.rel * (v - self.offset).abs() + self._ADD * v.abs() + self.tau

    def low(self, v: Tensor) -> Tensor:
        if self.e is None:
            return v - self.tau
        return ((v - self._spread(v)).clamp(min=0).sqrt() - self.e).clamp(min=0).square()

    def high(self, v: Tensor) -> Tensor:
        if self.e is None:
            return v + self.tau
        return ((v + self._spread(v)).sqrt() + self.e).square()

    def sure_below(self, thr: Tensor) -> Tensor:
        """Largest tile value whose exact distance is surely ``<= thr`` (``high(v) <= thr``)."""
        if self.e is None:
            return thr - self.tau
        root = thr.sqrt() - self.e
        target = root.square() - self.tau  # v + rel |v - c| + add v <= target, v >= 0
        c, r, a = self.offset, self.rel, self._ADD
        v = torch.where(target >= c * (1 + a), (target + r * c) / (1 + a + r), (target - r * c) / (1 + a - r))
        return torch.where(root > 0, v, -math.inf)

    def maybe_below(self, thr: Tensor) -> Tensor:
        """Largest tile value whose exact distance may be ``<= thr`` (``low(v) <= thr``)."""
        if self.e is None:
            return thr + self.tau
        target = (thr.sqrt() + self.e).square() + self.tau  # v - rel |v - c| - add v <= target
        c, r, a = self.offset, self.rel, self._ADD
        return torch.where(target >= c * (1 - a), (target - r * c) / (1 - a - r), (target + r * c) / (1 - a + r))
