"""Tile planning and the tile GEMM: squared distances of two point sets, block by block.

Stage: above :mod:`.points` (may call :mod:`.points`, :mod:`.screen`, :mod:`.shard`). One
tile is ``||a||^2 + ||b||^2 - 2 a.b`` (one GEMM on centred rows, clamped at 0) or one
bfloat16 screen GEMM (:func:`.screen.screen_tile`); no ``N x M`` matrix ever exists: the
tile shape follows a memory budget (:data:`DEFAULT_BLOCK_BYTES`), and one buffer serves every
tile of a pass. :func:`tile_progress` reports each computed tile (progress bars).

Example:
    >>> import torch
    >>> from lightning_prd.functional.knn.points import prepare
    >>> x = torch.tensor([[0.0, 0.0], [3.0, 4.0]])
    >>> p = prepare(x, x.double().mean(0), torch.float32)
    >>> [sq.tolist() for _, _, sq in tiles(p, p, DEFAULT_BLOCK_BYTES)]
    [[[0.0, 25.0], [25.0, 0.0]]]
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.knn.points import PointSet, pass_offset
from lightning_prd.functional.knn.screen import screen_tile
from lightning_prd.functional.knn.shard import Shard

#: Default memory budget, in bytes, for one distance tile and its temporaries.
DEFAULT_BLOCK_BYTES = 256 * 2**20
#: Number of temporaries of tile size alive at once (distance tile, masks, ratios).
TILE_TEMPORARIES = 6
#: Called once per computed tile when set (see :func:`tile_progress`).
_ON_TILE: Optional[Callable[[], None]] = None


@contextmanager
def tile_progress(callback: Callable[[], None]) -> Iterator[None]:
    """Call ``callback()`` after every distance tile computed inside the ``with`` block (progress bars).

    Example:
        >>> import torch
        >>> from lightning_prd.functional import precision_recall
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


def block_shape(n_rows: int, n_cols: int, itemsize: int, block_bytes: int) -> Tuple[int, int]:
    """Rows and columns of a tile so that ``TILE_TEMPORARIES`` tiles fit ``block_bytes``."""
    elements = max(1, block_bytes // (itemsize * TILE_TEMPORARIES))
    cols = max(1, min(n_cols, 8192, elements))
    rows = max(1, min(n_rows, elements // cols))
    return rows, cols


def buffer(elements: int, points: PointSet) -> Tuple[Tensor, Optional[Tensor]]:
    """Reused tile storage of one pass: the tile in the compute dtype, and the bfloat16 GEMM
    output when ``points`` is screened."""
    dev = points.original.device
    low = torch.empty(elements, dtype=torch.bfloat16, device=dev) if points.screened is not None else None
    return torch.empty(elements, dtype=points.dtype, device=dev), low


def sq_tile(
    buf: Tuple[Tensor, Optional[Tensor]], a_blk: Tensor, a_sq: Tensor, b_blk: Tensor, b_sq: Tensor, offset: float = 0.0
) -> Tensor:
    """``||a||^2 + ||b||^2 - 2 a.b`` clamped at 0, written into (a view of) the reused ``buf``:
    one allocation per pass instead of one per tile. The tile is valid until the next call.
    Screen rows (bfloat16) carry their norms: one bfloat16 GEMM gives the tile (:mod:`.screen`)."""
    shape = (a_blk.shape[0], b_blk.shape[0])
    out = buf[0][: shape[0] * shape[1]].view(shape)
    if a_blk.dtype == torch.bfloat16:
        screen_tile(out, buf[1][: shape[0] * shape[1]].view(shape), a_blk, b_blk, offset)
    else:
        torch.add(a_sq, b_sq[None, :], out=out)
        out.addmm_(a_blk, b_blk.T, alpha=-2.0).clamp_(min=0.0)
    if _ON_TILE is not None:
        _ON_TILE()
    return out


def tiles(
    a: PointSet, b: PointSet, block_bytes: int, shard: Optional[Shard] = None
) -> Iterator[Tuple[int, int, Tensor]]:
    """Yield ``(row0, col0, squared_distance_tile)`` covering ``a x b`` in blocks (only this
    process's tiles when ``shard`` is given)."""
    number = -1
    rows, cols = block_shape(len(a), len(b), a.centre.element_size(), block_bytes)
    if shard is not None:  # enough row blocks (4 per rank) for an even split
        rows = min(rows, max(1, -(-len(a) // (4 * shard.world))))
    b_blocks = [b.right(slice(j0, j0 + cols)) for j0 in range(0, len(b), cols)] if len(b) <= cols else None
    buf = buffer(min(rows, len(a)) * min(cols, len(b)), a)
    for i0 in range(0, len(a), rows):
        a_blk = a.left(slice(i0, i0 + rows))
        a_sq = a.sq_norms[i0 : i0 + rows, None]
        for j0 in range(0, len(b), cols):
            number += 1
            if shard is not None and not shard.owns(number):
                continue
            b_blk = b_blocks[0] if b_blocks is not None else b.right(slice(j0, j0 + cols))
            yield i0, j0, sq_tile(buf, a_blk, a_sq, b_blk, b.sq_norms[j0 : j0 + cols], pass_offset(a, b))
