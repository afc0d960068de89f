"""The bfloat16 screen of the k-NN tiles: cheaper tiles with a rigorous, wider interval.

Stage: beside :mod:`.bounds` (may call :mod:`.threads`, which builds its rows in worker
threads); the rows it builds are tiled by :mod:`.tiling` and bounded by :class:`.bounds.Bound`.

Where the CPU multiplies bfloat16 natively (about 4x the float32 GEMM rate on AVX512-BF16 /
AMX), tiles of float32 sets are one bfloat16 GEMM each. Each centred row ``a`` is rounded to bfloat16, ``~a``, and
augmented so that one bfloat16 GEMM with float32 accumulation returns
``(c - ||~a - ~b||^2) / 2`` directly (row ``[~a, -h1, -h2, -h3, 1, 1, 1]`` times column
``[~b, 1, 1, 1, -g1, -g2, -g3]``, where ``h1 + h2 + h3 = ||~a||^2 / 2 - c / 4`` in three
bfloat16 parts); ``c``, the pass's *offset*, is a squared distance near its decisions (the
median real radius, or an estimate of the k-th neighbour distance), and the tile value is
``v = c - 2 * output`` in float32. Four rigorous error terms bound the exact ``d = ||a - b||``:

- the output is rounded to bfloat16: relative error ``u' = u / (1 - u)`` (``u = 2^-8``) of
  ``|v - c|``, small near the decisions;
- float32 accumulation (and the three-part norm split): ``tau``, the float32 margin
  above, doubled, on the norms of the rounded rows and the offset;
- the float32 addition of the offset: ``2^-23 v``;
- the rounding of the inputs: ``| ||~a - ~b|| - d | <= rho_a + rho_b`` (triangle
  inequality), with ``rho`` bounding ``||~a - a||`` per row (its exact float32 residual
  plus the float32 centring).

So with ``s(v) = u' |v - c| + 2^-23 v + tau`` and ``e = rho_a + rho_b``, ``d`` lies in
``[sqrt(max(0, v - s(v))) - e, sqrt(v + s(v)) + e]``. A copy (``~a = ~b``) gets accumulation
noise inside the interval of 0, so its distance is always recomputed: exactly 0.

The screen only chooses which pairs are recomputed: decisions and values are the float64
ones either way (tests run both paths). It is used for float32 features on CPUs with native
bfloat16 (see :func:`screen_available`); ``LIGHTNING_PRD_SCREEN=0`` turns it off,
``=1`` forces it (slow without hardware support).

Example:
    >>> import torch
    >>> x = torch.tensor([[0.0, 1.0], [2.0, 0.0]])
    >>> s = screen(x, x.double().mean(0))
    >>> out, scratch = torch.empty(2, 2), torch.empty(2, 2, dtype=torch.bfloat16)
    >>> screen_tile(out, scratch, s.rows, s.right(slice(None)))[0, 1].item()
    5.0
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from typing import Optional, Union

import torch
from torch import Tensor

from lightning_prd.functional.knn.threads import each_rows

#: Columns added to each row (three norm parts, three ones), rounded up for aligned GEMM rows.
_EXTRA = 6
_ALIGN = 32
#: Smallest normal float32: bfloat16 GEMM kernels flush smaller inputs and products to 0.
_TINY = 2.0**-126


@cache
def _cpu_has_native_bf16() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="ignore") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return "avx512_bf16" in flags or "amx_bf16" in flags
    except OSError:
        pass
    return False


#: Sets screened by default: at least this many rows, and rows x dimension at least
#: :data:`SCREEN_MIN_ELEMENTS`. Below, the candidates' recomputation (per row, not per pair)
#: costs more than the cheaper GEMM saves. Measured on 2 cores with AVX512-BF16, every k-NN
#: score, screen vs float32 tiles: 5,000 x 1,024 0.73 vs 0.78 s, 10,000 x 512 1.58 vs 1.72 s,
#: 10,000 x 2,048 3.7 vs 5.1 s; 20,000 x 256 even; 5,000 x 512 0.52 vs 0.48 s, 3,000 x 2,048
#: 0.61 vs 0.57 s, 3,000 x 4,096 1.33 vs 1.09 s.
SCREEN_MIN_ROWS = 5000
SCREEN_MIN_ELEMENTS = 5 * 10**6


def _forced() -> Optional[bool]:
    """``LIGHTNING_PRD_SCREEN``: ``"1"`` forces the screen, ``"0"`` turns it off, else None."""
    forced = os.environ.get("LIGHTNING_PRD_SCREEN", "").strip()
    return forced == "1" if forced in ("0", "1") else None


def screen_forced() -> bool:
    """True when ``LIGHTNING_PRD_SCREEN=1`` asks for the screen whatever the data."""
    return _forced() is True


def screen_available(device: torch.device, dtype: torch.dtype, rows: int = 0, dim: int = 0) -> bool:
    """True when a set of ``rows x dim`` features of ``dtype`` on ``device`` is screened in bfloat16.

    Float32 on a CPU with native bfloat16 (AVX512-BF16 or AMX), for sets large enough to
    gain (:data:`SCREEN_MIN_ROWS`, :data:`SCREEN_MIN_ELEMENTS`); never float64, never CUDA
    (cuBLAS may reduce bfloat16 products in reduced precision, which the bound does not
    cover). ``LIGHTNING_PRD_SCREEN=0`` / ``=1`` overrides the detection and the size rule (and
    ``=1`` the width rule of :mod:`.points`, which keeps float32 tiles where the screen's interval
    would be too wide to decide).
    """
    if dtype != torch.float32 or device.type != "cpu":
        return False
    forced = _forced()
    if forced is not None:
        return forced
    return rows >= SCREEN_MIN_ROWS and rows * dim >= SCREEN_MIN_ELEMENTS and _cpu_has_native_bf16()


@dataclass
class Screened:
    """The bfloat16 rows of a point set, as the left operand of the screen GEMM.

    Attributes:
        rows: ``[n, D']`` bfloat16 ``[~a, -h1, -h2, -h3, 1, 1, 1, 0...]`` with
            ``h1 + h2 + h3 = ||~a||^2 / 2 - offset / 4``.
        rho: ``[n]`` float64 ``||~a - a||`` (``a`` the exactly centred row).
        sq_norms: ``[n]`` float64 ``||~a||^2``.
        offset: a squared distance ``c`` near the pass's decisions: tiles of two sets with the
            same offset come out of the GEMM as ``c - ||~a - ~b||^2`` halved, so the output's
            rounding is relative to ``|d^2 - c|`` (small near the decisions) instead of ``d^2``.
    """

    rows: Tensor
    rho: Tensor
    sq_norms: Tensor
    dim: int
    offset: float = 0.0

    def __getitem__(self, index: Union[slice, Tensor]) -> Screened:
        return Screened(self.rows[index], self.rho[index], self.sq_norms[index], self.dim, self.offset)

    def set_offset(self, offset: float) -> None:
        """Write the norm parts for ``offset`` (in place: a pass sets it before its tiles)."""
        half = self.sq_norms / 2 - offset / 4
        for j in range(3):  # three bfloat16 parts carry it to float32 accuracy
            part = half.to(torch.float32).to(torch.bfloat16)
            self.rows[:, self.dim + j] = -part
            half = half - part.to(torch.float64)
        self.offset = float(offset)

    def with_offset(self, offset: float) -> Screened:
        """A copy written for ``offset`` (the rows copied: this object, which running passes may
        read, is left as it is)."""
        out = Screened(self.rows.clone(), self.rho, self.sq_norms, self.dim, self.offset)
        out.set_offset(offset)
        return out

    def right(self, index: Union[slice, Tensor]) -> Tensor:
        """Rows ``index`` as the right operand: the three norm parts and the ones swapped."""
        left = self.rows[index]
        out = left.clone()
        out[:, self.dim : self.dim + 3] = 1.0
        out[:, self.dim + 3 : self.dim + 6] = left[:, self.dim : self.dim + 3]
        return out


#: Values per chunk of rows when the screen rows are built (about 1 MB of float32: the chunk's
#: temporaries stay in cache, and the chunks spread evenly over the worker threads).
SCREEN_CHUNK_VALUES = 2**18


def screen(original: Tensor, centre: Tensor) -> Screened:
    """The bfloat16 screen rows of ``original - centre`` (see the module docstring).

    ``rho`` bounds ``||~a - a||`` for the exactly centred ``a``: the residual of the bfloat16
    rounding of the float32 centred row (exact in float32) plus the rounding of the float32
    centring (at most ``u`` of each element), each widened for its float32 summation. The
    chunks of rows are built in worker threads (:func:`.threads.each_rows`); every value is
    computed row by row, the same in any thread.
    """
    n, dim = original.shape
    width = -(-(dim + _EXTRA) // _ALIGN) * _ALIGN
    rows = torch.zeros((n, width), dtype=torch.bfloat16, device=original.device)
    rho = torch.empty(n, dtype=torch.float64, device=original.device)
    sq = torch.empty(n, dtype=torch.float64, device=original.device)
    centre32 = centre.to(torch.float32)
    u32 = 2.0**-24
    widen = 1 + (dim + 2) * u32  # float32 sums of squares: relative error at most (D - 1) u, doubled

    def fill(s: slice) -> None:
        x = original[s].to(torch.float32) - centre32
        low = x.to(torch.bfloat16)
        low.masked_fill_(low.abs() < _TINY, 0.0)  # what the kernels see (they flush subnormals)
        back = low.to(torch.float32)
        x_norm = torch.linalg.vector_norm(x, dim=1).to(torch.float64)
        resid = torch.linalg.vector_norm(x.sub_(back), dim=1).to(torch.float64)  # exact residuals
        rho[s] = (resid + u32 * x_norm) * widen**2 + 1e-37
        sq[s] = back.square().sum(1, dtype=torch.float64)  # products exact, summed in float64
        rows[s, :dim] = low
        rows[s, dim + 3 : dim + 6] = 1.0

    each_rows(fill, n, dim, original.device, SCREEN_CHUNK_VALUES, least=16)
    out = Screened(rows, rho, sq, dim)
    out.set_offset(0.0)
    return out


def screen_tile(out: Tensor, scratch: Tensor, left: Tensor, right: Tensor, offset: float = 0.0) -> Tensor:
    """``||~a - ~b||^2`` (float32, clamped at 0) of screen rows ``left`` x ``right`` into ``out``
    (both written for ``offset``: the GEMM gives ``(offset - d^2) / 2``)."""
    torch.mm(left, right.T, out=scratch)
    if offset == 0:
        return torch.mul(scratch, -2.0, out=out).clamp_(min=0.0)
    # in float32 (a mixed-dtype add with a broadcast offset measured 5x slower than these)
    return out.copy_(scratch).mul_(-2.0).add_(offset).clamp_(min=0.0)
