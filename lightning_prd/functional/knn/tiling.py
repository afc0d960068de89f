"""Tile planning and the tile GEMM: squared distances of two point sets, block by block.

Stage: above :mod:`.points` (may call :mod:`.points`, :mod:`.screen`, :mod:`.shapes`, :mod:`.shard`). One
tile is ``||a||^2 + ||b||^2 - 2 a.b`` (one GEMM on centred rows, clamped at 0) or one
bfloat16 screen GEMM (:func:`.screen.screen_tile`); no ``N x M`` matrix ever exists: the
tile shape follows a memory budget (:data:`DEFAULT_BLOCK_BYTES`) and the machine's GEMM (the
smallest efficient tile side, :func:`.shapes.min_side`), and one buffer serves every tile of a
pass. :func:`block_shape` plans the cross pass's tiles, :func:`self_shape` and
:func:`strip_chunks` the self pass's (row strips of a few wide tiles on and above the
diagonal). :func:`tile_progress` reports each computed tile (progress bars).
:func:`ieee_float32` keeps float32 GEMMs in IEEE float32 while a pass runs: the rounding
bounds (:mod:`.bounds`) assume it, and reduced-precision modes (TF32 on CUDA, bfloat16 passes
on CPU, ``torch.set_float32_matmul_precision("high" | "medium")``) would break them.

Example:
    >>> import torch
    >>> from lightning_prd.functional.knn.points import prepare
    >>> x = torch.tensor([[0.0, 0.0], [3.0, 4.0]])
    >>> p = prepare(x, x.double().mean(0), torch.float32)
    >>> [sq.tolist() for _, _, sq in tiles(p, p, DEFAULT_BLOCK_BYTES)]
    [[[0.0, 25.0], [25.0, 0.0]]]
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.knn.points import PointSet, pass_offset
from lightning_prd.functional.knn.screen import screen_tile
from lightning_prd.functional.knn.shapes import DEFAULT_MIN_SIDE, min_side
from lightning_prd.functional.knn.shard import Shard

#: Default memory budget, in bytes, for one distance tile and its temporaries.
DEFAULT_BLOCK_BYTES = 256 * 2**20
#: Number of temporaries of tile size alive at once (distance tile, masks, ratios).
TILE_TEMPORARIES = 6
#: Widest cross-pass tile (columns).
MAX_COLS = 8192
#: Minimum number of row strips of a self pass (tiles on and above the diagonal only).
SELF_BLOCKS = 8
#: Tile sides are multiples of this where the plan allows (16 float32 values: one cache line).
ALIGN = 16
#: Called once per computed tile when set (see :func:`tile_progress`).
_ON_TILE: Optional[Callable[[], None]] = None


@contextmanager
def tile_progress(callback: Callable[[], None]) -> Iterator[None]:
    """Call ``callback()`` after every distance tile computed inside the ``with`` block (progress bars).

    Example:
        >>> import torch
        >>> from lightning_prd.functional import precision_recall
        >>> from lightning_prd.functional.knn import tile_progress
        >>> ticks = []
        >>> with tile_progress(lambda: ticks.append(1)):
        ...     _ = precision_recall(torch.randn(20, 2), torch.randn(20, 2))
        >>> len(ticks) > 0
        True
    """
    global _ON_TILE
    previous, _ON_TILE = _ON_TILE, callback
    try:
        yield
    finally:
        _ON_TILE = previous


def _budget(itemsize: int, block_bytes: int) -> int:
    """Elements of one tile so that ``TILE_TEMPORARIES`` tiles fit ``block_bytes``."""
    return max(1, block_bytes // (itemsize * TILE_TEMPORARIES))


def aligned(n: int) -> int:
    """``n`` rounded up to a multiple of :data:`ALIGN`."""
    return -(-n // ALIGN) * ALIGN


def even(n: int, size: int) -> int:
    """The size of near-equal blocks, at most ``size``, that cover ``n`` in as few blocks as
    ``size`` does (no thin last block), rounded up to a multiple of :data:`ALIGN` where that
    stays within ``size`` and ``n``: a tile side (and the row length of the tile buffer) that
    is a whole number of cache lines keeps the GEMM at its full rate (an odd side such as 625
    costs float32 GEMMs up to a quarter of their speed). 10,000 by at most 8,192 gives two
    blocks of 5,008 and 4,992; 5,000 by at most 640 gives eight blocks, seven of 640.

    Example:
        >>> even(10000, 8192), even(10000, 2236), even(5000, 640), even(5000, 625), even(7, 100)
        (5008, 2000, 640, 625, 7)
    """
    size = max(1, min(n, size))
    equal = -(-n // -(-n // size))
    return aligned(equal) if aligned(equal) <= size else equal


def block_shape(
    n_rows: int, n_cols: int, itemsize: int, block_bytes: int, side: int = DEFAULT_MIN_SIDE
) -> Tuple[int, int]:
    """Rows and columns of a cross-pass tile: ``TILE_TEMPORARIES`` tiles fit ``block_bytes``,
    at most :data:`MAX_COLS` columns, rows at least ``side`` (the smallest efficient GEMM side)
    where the budget allows, both split evenly.

    Example:
        >>> block_shape(10000, 10000, 4, 256 * 2**20)
        (2000, 5008)
    """
    elements = _budget(itemsize, block_bytes)
    cols = min(n_cols, MAX_COLS, elements)
    if n_rows * cols > elements:  # the budget limits the rows: keep them >= side where it can
        cols = min(cols, max(1, elements // min(n_rows, side)))
    cols = even(n_cols, cols)
    return even(n_rows, elements // cols), cols


def self_shape(
    n: int, itemsize: int, block_bytes: int, side: int = DEFAULT_MIN_SIDE, parts: int = 1
) -> Tuple[int, int]:
    """Height of the row strips of a self pass and the widest tile of a strip.

    The diagonal tiles are computed whole, so the GEMM work is ``(b + 1) / 2b`` of the full
    square for ``b`` strips: at least :data:`SELF_BLOCKS` strips (56% with 8) of at least
    :data:`.shapes.DEFAULT_MIN_SIDE` rows. Where squares of that height are efficient GEMMs
    (``height >= side``, the machine's smallest efficient side), the tiles are those squares
    (small tiles stay in cache for the reductions that follow). Where they are not, each strip
    is computed as a few wide tiles of up to the width returned (at least twice the height,
    within the budget): efficient GEMMs with the same work. With ``parts`` > 1 (a DDP split) the
    tiles are squares, about three per process or more, so that the round-robin split is even.

    Example:
        >>> self_shape(10000, 4, 256 * 2**20, side=512), self_shape(10000, 4, 256 * 2**20, side=2048)
        ((1264, 1264), (1264, 8848))
    """
    elements = _budget(itemsize, block_bytes)
    want = max(DEFAULT_MIN_SIDE, aligned(-(-n // SELF_BLOCKS)))
    if parts > 1 or want >= min(side, n):
        h = min(max(1, math.isqrt(elements)), want)
        if parts > 1:
            h = min(h, max(1, -(-n // (3 * parts))))
        h = even(n, h)
        return h, h
    h = even(n, min(max(1, math.isqrt(elements // 2)), want))
    return h, min(n, max(h, elements // h))


def strip_chunks(i0: int, n: int, height: int, width: int) -> List[Tuple[int, int]]:
    """Column ranges ``[j0, j1)`` of the tiles of the strip whose rows start at ``i0``: the
    columns ``i0 .. n`` split evenly into tiles of at most ``width``; the first holds the
    diagonal square. With ``width < 2 height``, squares of side ``height``.

    Example:
        >>> strip_chunks(0, 10, 3, 6), strip_chunks(3, 10, 3, 3)
        ([(0, 5), (5, 10)], [(3, 6), (6, 9), (9, 10)])
    """
    if width < 2 * height:
        return [(j0, min(j0 + height, n)) for j0 in range(i0, n, height)]
    w = even(n - i0, width)
    return [(j0, min(j0 + w, n)) for j0 in range(i0, n, w)]


def buffer(elements: int, points: PointSet) -> Tuple[Tensor, Optional[Tensor]]:
    """Reused tile storage of one pass: the tile in the compute dtype, and the bfloat16 GEMM
    output when ``points`` is screened."""
    dev = points.original.device
    low = torch.empty(elements, dtype=torch.bfloat16, device=dev) if points.screened is not None else None
    return torch.empty(elements, dtype=points.dtype, device=dev), low


def gemm_dtype(points: PointSet) -> torch.dtype:
    """The dtype of the tile GEMMs of ``points``: bfloat16 when screened, else the compute dtype."""
    return torch.bfloat16 if points.screened is not None else points.dtype


@contextmanager
def ieee_float32() -> Iterator[None]:
    """float32 matrix products in IEEE float32 inside the block, whatever the caller set, and
    the caller's setting restored after it.

    Either API of PyTorch may hold the setting: ``torch.set_float32_matmul_precision`` (its
    value is readable) or the per-backend ``fp32_precision`` of the CUDA and oneDNN matmuls
    (PyTorch 2.9 and later; reading the first raises once those were set). The block sets and
    restores the one in use. It is process-wide state: float32 products of other threads during
    the block are IEEE too.
    """
    try:
        before = torch.get_float32_matmul_precision()
    except RuntimeError:  # the per-backend settings are in use
        before = None
    if before == "highest":
        yield
        return
    if before is not None:
        torch.set_float32_matmul_precision("highest")
        try:
            yield
        finally:
            torch.set_float32_matmul_precision(before)
        return
    with ieee_settings([torch.backends.cuda.matmul, torch.backends.mkldnn.matmul]):  # type: ignore[attr-defined]
        yield


@contextmanager
def ieee_settings(settings: Sequence[Any]) -> Iterator[None]:
    """Per-backend settings (objects with ``fp32_precision``: the CUDA and oneDNN matmuls, cuDNN's and oneDNN's
    convolutions) set to ``"ieee"`` inside the block, each restored to its own value after it."""
    saved = [s.fp32_precision for s in settings]
    try:
        for s in settings:
            s.fp32_precision = "ieee"
        yield
    finally:
        for s, value in zip(settings, saved):
            s.fp32_precision = value


def sq_tile(
    buf: Tuple[Tensor, Optional[Tensor]], a_blk: Tensor, a_sq: Tensor, b_blk: Tensor, b_sq: Tensor, offset: float = 0.0
) -> Tensor:
    """``||a||^2 + ||b||^2 - 2 a.b`` clamped at 0, written into (a view of) the reused ``buf``:
    one allocation per pass instead of one per tile. The tile is valid until the next call.
    Screen rows (bfloat16) carry their norms: one bfloat16 GEMM gives the tile (:mod:`.screen`)."""
    shape = (a_blk.shape[0], b_blk.shape[0])
    out = buf[0][: shape[0] * shape[1]].view(shape)
    if a_blk.dtype == torch.bfloat16:
        scratch = buf[1]
        if scratch is None:
            raise RuntimeError("a screened tile needs the scratch buffer of its pass")
        screen_tile(out, scratch[: shape[0] * shape[1]].view(shape), a_blk, b_blk, offset)
    else:
        torch.add(a_sq, b_sq[None, :], out=out)
        out.addmm_(a_blk, b_blk.T, alpha=-2.0).clamp_(min=0.0)
    if _ON_TILE is not None:
        _ON_TILE()
    return out


@dataclass
class Switch:
    """Float rows for the later tiles of a running :func:`tiles` (same layout): while ``sets``
    is None the tiles come from the pass's own rows; once set, from ``sets`` (no offset)."""

    sets: Optional[Tuple[PointSet, PointSet]] = None


def tiles(
    a: PointSet, b: PointSet, block_bytes: int, shard: Optional[Shard] = None, switch: Optional[Switch] = None
) -> Iterator[Tuple[int, int, Tensor]]:
    """Yield ``(row0, col0, squared_distance_tile)`` covering ``a x b`` in blocks (only this
    process's tiles when ``shard`` is given; from ``switch.sets`` once that is set). With a ``shard``
    whose ``even_split`` is set the row blocks are cut smaller for an even split; without it the
    tiles are the single-process ones (their values then do not depend on the number of processes)."""
    number = -1
    side = min_side(a.dim, gemm_dtype(a), a.original.device, len(a) * len(b) * a.dim)
    rows, cols = block_shape(len(a), len(b), a.centre.element_size(), block_bytes, side)
    if shard is not None and shard.even_split:  # enough row blocks (4 per rank) for an even split
        rows = even(len(a), min(rows, max(1, -(-len(a) // (4 * shard.world)))))
    b_blocks = [b.right(slice(j0, j0 + cols)) for j0 in range(0, len(b), cols)] if len(b) <= cols else None
    buf = buffer(min(rows, len(a)) * min(cols, len(b)), a)
    for i0 in range(0, len(a), rows):
        a_blk = a.left(slice(i0, i0 + rows))
        a_sq = a.sq_norms[i0 : i0 + rows, None]
        for j0 in range(0, len(b), cols):
            number += 1
            if shard is not None and not shard.owns(number):
                continue
            if switch is not None and switch.sets is not None:
                fa, fb = switch.sets
                r, c = slice(i0, i0 + rows), slice(j0, j0 + cols)
                yield i0, j0, sq_tile(buf, fa.left(r), fa.sq_norms[r, None], fb.right(c), fb.sq_norms[c])
                continue
            b_blk = b_blocks[0] if b_blocks is not None else b.right(slice(j0, j0 + cols))
            yield i0, j0, sq_tile(buf, a_blk, a_sq, b_blk, b.sq_norms[j0 : j0 + cols], pass_offset(a, b))
