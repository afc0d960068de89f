"""The self pass: exact ``NND_k`` radii of one set from the tiles on and above the diagonal.

Stage: above :mod:`.refine` (may call :mod:`.refine`, :mod:`.tiling`, :mod:`.points`,
:mod:`.lists`, :mod:`.shard`). Each off-diagonal tile updates the running top-``t`` lists of
its rows and, transposed, of its columns (half the GEMM work of a full pass); the diagonal is
masked by index, so an exact duplicate still counts at distance 0 (``NND_k(x)`` excludes
``x`` itself, ``DESIGN.md``). The lists are then made exact by :func:`.refine.refine_topk`.

Example:
    >>> import torch
    >>> from lightning_prd.functional.knn.points import prepare
    >>> x = torch.tensor([[0.0], [1.0], [3.0]])
    >>> self_knn(prepare(x, x.double().mean(0), torch.float32), [1])[1].tolist()
    [1.0, 1.0, 4.0]
"""

from __future__ import annotations

import math
from typing import Dict, Iterable, Optional

import torch
from torch import Tensor

from lightning_prd.functional.knn import tiling
from lightning_prd.functional.knn.lists import merge_tile
from lightning_prd.functional.knn.points import (
    PointSet,
    estimate_offset,
    pass_offset,
    screen_pays,
    set_offset,
    unscreened,
)
from lightning_prd.functional.knn.refine import refine_topk
from lightning_prd.functional.knn.shard import Shard

#: Minimum number of row blocks of a self pass (tiles on and above the diagonal only).
SELF_BLOCKS = 8


def self_knn(
    points: PointSet, ks: Iterable[int], block_bytes: int = tiling.DEFAULT_BLOCK_BYTES, shard: Optional[Shard] = None
) -> Dict[int, Tensor]:
    """``NND_k`` for every ``k`` in ``ks``: distance to the k-th nearest *other* row.

    Returns exact float64 *squared* distances, one ``[n]`` tensor per ``k`` (squared, so that
    ``d^2 <= r^2`` comparisons stay exact; ``.sqrt()`` for radii). With a ``shard``, this
    process computes its share of the tiles and the running lists are merged across the group.
    """
    ks = sorted(set(int(k) for k in ks))
    n = len(points)
    if points.screened is not None:
        offset = estimate_offset(points, points, ks[-1], True)
        if screen_pays(points, points, offset):
            set_offset(offset, points)
        else:
            points = unscreened(points, block_bytes)
    t = min(ks[-1] + points.slack, n - 1)
    dev, cdt = points.original.device, points.dtype
    vals = torch.full((n, t), math.inf, dtype=cdt, device=dev)
    idx = torch.zeros((n, t), dtype=torch.long, device=dev)
    side = max(1, int(math.isqrt(max(1, block_bytes // (points.centre.element_size() * tiling.TILE_TEMPORARIES)))))
    # diagonal tiles are computed whole, so the saved share of the GEMM is 1/2 - 1/(2 blocks):
    # at least SELF_BLOCKS blocks (56% of the full work with 8, 67% with 3; more blocks add
    # per-tile overhead: 16 and 32 measured slower at 10,000 x 2,048), tiles of >= 512 rows
    side = min(side, max(512, -(-n // SELF_BLOCKS)))
    if shard is not None:  # enough tiles (about 4 per rank or more) for an even split
        side = min(side, max(1, -(-n // (3 * shard.world))))
    buf = tiling.buffer(min(side, n) ** 2, points)
    number = -1
    for i0 in range(0, n, side):
        rows = slice(i0, min(i0 + side, n))
        a_blk, a_sq = None, points.sq_norms[rows, None]
        for j0 in range(i0, n, side):
            number += 1
            if shard is not None and not shard.owns(number):
                continue
            a_blk = points.left(rows) if a_blk is None else a_blk
            cols = slice(j0, min(j0 + side, n))
            b_blk = points.right(cols) if points.screened is not None or j0 != i0 else a_blk
            sq = tiling.sq_tile(buf, a_blk, a_sq, b_blk, points.sq_norms[cols], pass_offset(points, points))
            if j0 == i0:
                sq.fill_diagonal_(math.inf)
            merge_tile(vals, idx, rows, sq, 1, j0, t)
            if j0 != i0:
                merge_tile(vals, idx, cols, sq, 0, i0, t)
    if shard is not None:
        vals, idx = shard.merge_topk(vals, idx)
    refined = refine_topk(
        points, points, vals, idx, ks, True, truncated=t < n - 1, block_bytes=block_bytes, by_index=False, shard=shard
    )
    return {k: refined[k][0] for k in ks}
