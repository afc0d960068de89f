"""Point sets ready for tile GEMMs, their rounding bounds, and the screen's pass offset.

Stage: first above :mod:`.bounds`, :mod:`.screen` and :mod:`.threads` (may call only those;
the chunks of rows of its preparation run in worker threads, :func:`.threads.each_rows`). A
:class:`PointSet` holds the rows as given (for exact float64 recomputation), the shared
centre (the real mean: centring keeps the GEMM identity accurate), the centred squared norms
in the compute dtype, optionally a centred working copy, and the bfloat16 screen rows where
the hardware multiplies bfloat16 natively. :func:`bound` is the rounding interval
(:class:`.bounds.Bound`) of the tile values of two sets; :func:`estimate_offset` and
:func:`screen_pays` choose the screen's offset and whether the screen is used for a pass.

Example:
    >>> import torch
    >>> x = torch.tensor([[0.0, 0.0], [3.0, 4.0]])
    >>> p = prepare(x, x.double().mean(0), torch.float32)
    >>> p.sq_norms.tolist(), p.screened is None
    ([6.25, 6.25], True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

import torch
from torch import Tensor

from lightning_prd.functional.knn.bounds import SCREEN_REL, Bound, tol_factor
from lightning_prd.functional.knn.screen import (
    Screened,
    screen,
    screen_available,
    screen_forced,
)
from lightning_prd.functional.knn.threads import each, each_rows

#: Extra candidates kept beyond k in running top-k lists, so that float64 refinement can
#: reorder near-ties without a second pass.
SLACK = 4
#: The same with the bfloat16 screen, whose rounding interval (with the pass's offset near
#: the k-th distances) holds about 17 neighbours of a 2,048-dimensional Gaussian sample.
SCREEN_SLACK = 16


@dataclass
class PointSet:
    """A point set ready for GEMM distances, centred block by block, or from a centred working
    copy during one pass when the set fits the tile budget (:func:`with_centred`).

    Attributes:
        original: the rows as given (used for exact float64 recomputation).
        centre: the shared centre, in the compute dtype.
        sq_norms: ``||row - centre||^2`` per row, compute dtype.
        centred: ``original - centre`` in the compute dtype, or None (blocks are centred as used).
        screened: the bfloat16 screen rows (:mod:`.screen`), or None: tiles are then GEMMs
            in the compute dtype.
    """

    original: Tensor
    centre: Tensor
    sq_norms: Tensor
    centred: Optional[Tensor] = None
    screened: Optional[Screened] = None

    def __len__(self) -> int:
        return self.original.shape[0]

    @property
    def dtype(self) -> torch.dtype:
        return self.centre.dtype

    @property
    def dim(self) -> int:
        return self.original.shape[1]

    def block(self, rows) -> Tensor:
        """``original[rows] - centre`` in the compute dtype."""
        if self.centred is not None:
            return self.centred[rows]
        return self.original[rows].to(self.dtype) - self.centre

    def left(self, rows) -> Tensor:
        """Rows as the left operand of a tile GEMM."""
        return self.block(rows) if self.screened is None else self.screened.rows[rows]

    def right(self, rows) -> Tensor:
        """Rows as the right operand of a tile GEMM."""
        return self.block(rows) if self.screened is None else self.screened.right(rows)

    @property
    def slack(self) -> int:
        """Candidates kept beyond k in running top-k lists over this set's tiles."""
        return SLACK if self.screened is None else SCREEN_SLACK

    def subset(self, rows: Tensor) -> PointSet:
        centred = None if self.centred is None else self.centred[rows]
        screened = None if self.screened is None else self.screened[rows]
        return PointSet(self.original[rows], self.centre, self.sq_norms[rows], centred, screened)


#: Values per chunk of the squared norms' temporaries (4-8 MB: they stay in cache).
NORM_CHUNK_VALUES = 2**20


def prepare(points: Tensor, centre: Tensor, dtype: torch.dtype, cache_bytes: int = 0, screens: bool = True) -> PointSet:
    """Wrap ``points`` for the GEMM pass: the centre in ``dtype`` and the centred squared norms
    (with a centred working copy when it takes at most ``cache_bytes``, see :func:`with_centred`),
    and the bfloat16 screen rows where the hardware multiplies bfloat16 natively
    (:func:`.screen.screen_available`) unless ``screens`` is False (passes that need float tiles)."""
    centre = centre.to(device=points.device, dtype=dtype)
    sq = torch.empty(points.shape[0], dtype=dtype, device=points.device)
    screened = screen(points, centre) if screens and screen_available(points.device, dtype, *points.shape) else None
    out = with_centred(PointSet(points, centre, sq, screened=screened), cache_bytes)

    def norms(rows: slice) -> None:
        sq[rows] = out.block(rows).pow(2).sum(1)

    each_rows(norms, points.shape[0], points.shape[1], points.device, NORM_CHUNK_VALUES)
    return out


def with_centred(points: PointSet, cache_bytes: int) -> PointSet:
    """``points`` with a centred working copy when it takes at most ``cache_bytes`` (else as is).

    Tiles then slice the copy instead of centring their rows again for every tile; a set larger
    than the budget (50,000 x 4,096 at the default) keeps being centred tile by tile, so memory
    stays bounded by the budget. The copy lives as long as the returned object (one pass).
    """
    if points.screened is not None:  # screened tiles never read the centred rows
        return points
    if points.centred is not None or len(points) * points.dim * points.centre.element_size() > cache_bytes:
        return points
    centred = torch.empty(points.original.shape, dtype=points.dtype, device=points.original.device)

    def centre(rows: slice) -> None:
        torch.sub(points.original[rows].to(points.dtype), points.centre, out=centred[rows])

    each_rows(centre, len(points), points.dim, points.original.device, NORM_CHUNK_VALUES)
    return replace(points, centred=centred)


def unscreened(points: PointSet, cache_bytes: int) -> PointSet:
    """``points`` with tiles in the compute dtype (and a centred copy where it fits)."""
    return points if points.screened is None else with_centred(replace(points, screened=None), cache_bytes)


def bound(a: PointSet, b: PointSet, rows, cols=slice(None)) -> Bound:
    """Rounding interval of the tile values of ``a[rows]`` against any of ``b[cols]``, one
    per row (the other side's largest norm and rounding: a conservative bound)."""
    if a.screened is None:
        sq_a, sq_b = a.sq_norms[rows].to(torch.float64), b.sq_norms[cols].to(torch.float64)
        # plus underflow: products and norms below the smallest normal lose up to its size each
        # (features of ~1e-30 square to nothing in float32)
        underflow = 4 * (a.dim + 2) * torch.finfo(a.dtype).tiny
        return Bound(0.0, None, tol_factor(a.dtype, a.dim) * (sq_a + sq_b.max()) + underflow)
    sa, sb = a.screened, b.screened
    if sa is None or sb is None:
        raise RuntimeError("a screened bound needs the screen rows of both point sets")
    offset = pass_offset(a, b)
    tol = 2 * tol_factor(torch.float32, sa.rows.shape[1])
    tau = tol * (sa.sq_norms[rows] + sb.sq_norms[cols].max() + abs(offset)) + 1e-30
    return Bound(SCREEN_REL, sa.rho[rows] + sb.rho[cols].max(), tau, offset)


def pass_offset(a: PointSet, b: PointSet) -> float:
    """The offset of screen tiles of ``a x b``: each side's norm parts carry a quarter of its own."""
    if a.screened is None or b.screened is None:
        return 0.0
    return (a.screened.offset + b.screened.offset) / 2


#: Rows sampled to estimate a pass's offset (:func:`estimate_offset`), and columns per block.
_OFFSET_SAMPLE = 256
_OFFSET_COLS = 512


def estimate_offset(a: PointSet, b: PointSet, k: int, exclude_self: bool) -> float:
    """Median, over up to 256 evenly spaced rows of ``a``, of the squared distance to their
    ``k``-th nearest row of ``b`` (float32 GEMM, itself a row when ``exclude_self``): the scale
    of the pass's decisions, used as the screen's offset (tightness only, not correctness)."""
    rows = torch.linspace(0, len(a) - 1, min(len(a), _OFFSET_SAMPLE), device=a.original.device).round().long()
    a_blk, a_sq = a.block(rows), a.sq_norms[rows, None]
    k = min(k + int(exclude_self), len(b))

    def smallest(c: int) -> Tensor:  # small float32 blocks: the estimate adds little memory
        cols = slice(c * _OFFSET_COLS, (c + 1) * _OFFSET_COLS)
        sq = torch.addmm(a_sq + b.sq_norms[None, cols], a_blk, b.block(cols).T, alpha=-2.0)
        return sq.topk(min(k, sq.shape[1]), dim=1, largest=False).values

    parts = each(smallest, -(-len(b) // _OFFSET_COLS), a.original.device, len(rows) * len(b) * a.dim)
    best = torch.cat(parts, 1).topk(k, dim=1, largest=False).values
    return float(best[:, -1].clamp(min=0).median())


#: Largest relative width ``2 e / d`` of the screen's interval at the offset's distance for
#: which a pass is screened. Wider (tight clusters far from the centre: a collapsed generator),
#: most k-th neighbours stay undecided and float32 tiles cost less. Measured, one self pass of
#: 10,000 x 1,024 in 10 clusters: width 4.9%: 1.9 s screened vs 0.8 s float32; width 1.6%:
#: 0.70 vs 0.75 s; Gaussian (0.5%): 0.47 vs 0.76 s.
SCREEN_MAX_WIDTH = 0.03


def screen_pays(a: PointSet, b: PointSet, offset: float) -> bool:
    """Whether the screen's interval is narrow at the pass's decisions (see ``SCREEN_MAX_WIDTH``)."""
    if screen_forced():
        return True
    if a.screened is None or b.screened is None:
        return False
    e = float(a.screened.rho.median() + b.screened.rho.median())
    return offset > 0 and 2 * e <= SCREEN_MAX_WIDTH * math.sqrt(offset)


def set_offset(offset: float, *sets: PointSet) -> None:
    """Write the screen rows of ``sets`` for the pass offset ``offset``."""
    for p in sets:
        if p.screened is not None:
            p.screened.set_offset(offset)
