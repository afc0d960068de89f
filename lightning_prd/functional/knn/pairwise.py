"""Blocked float64 squared distances of every pair, row block by row block (FLD's kernel density).

A Gaussian mixture's log-likelihood sums a kernel of *every* distance, so these tiles hold every
pair, each ``||a||^2 + ||b||^2 - 2 a.b`` by one float64 GEMM on rows centred by the mean of ``b``,
clamped at 0. The GEMM's error is at most about ``2 (D + 2) eps (||a||^2 + ||b||^2)`` (centred
norms): negligible for most pairs, but not for copies and near-copies, whose fitted bandwidths can
shrink to ``exp(-40)``. Every pair whose tile value is within :data:`EXACT_MARGIN` times that bound
is therefore recomputed as ``sum((a - b)^2)`` from the rows (:func:`.exact.exact_pairs`): a copy is
at distance exactly 0, and every other value is within ``2^-30`` of its own size.

Stage: beside the k-NN stages (imports torch, :mod:`.tiling`'s memory budget and :mod:`.exact`);
used by :mod:`lightning_prd.functional.fld`. A block holds at most ``block_bytes`` of float64 values;
the caller decides whether to keep the blocks (FLD's fit reads the train x generated distances about
50 times) or to reduce each one as it comes.

Example:
    >>> import torch
    >>> a = torch.tensor([[0.0, 0.0], [3.0, 4.0]], dtype=torch.float64)
    >>> [(start, block.tolist()) for start, block in sq_distance_blocks(a, a[:1])]
    [(0, [[0.0], [25.0]])]
"""

from __future__ import annotations

from typing import Iterator, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.knn.exact import exact_pairs
from lightning_prd.functional.knn.tiling import DEFAULT_BLOCK_BYTES

#: pairs whose tile value is below this multiple of the GEMM's error bound are recomputed exactly
EXACT_MARGIN = 2.0**30


def sq_distance_blocks(a: Tensor, b: Tensor, *, block_bytes: int = DEFAULT_BLOCK_BYTES) -> Iterator[Tuple[int, Tensor]]:
    """``(first row, [rows, len(b)] float64 tile of |a_i - b_j|^2)`` for consecutive row blocks of ``a``.

    Both sets are widened to float64 and centred by the float64 mean of ``b`` once; each tile is one
    GEMM, clamped at 0, of at most ``block_bytes`` (at least one row), with its small values recomputed
    exactly (module docstring)."""
    a64, b64 = a.to(torch.float64), b.to(torch.float64)
    centre = b64.mean(0)
    bc = b64 - centre
    b_sq = (bc * bc).sum(1)
    tol = EXACT_MARGIN * 2 * (a.shape[1] + 2) * torch.finfo(torch.float64).eps
    rows = max(1, block_bytes // (8 * max(1, b.shape[0])))
    for s in range(0, a.shape[0], rows):
        ac = a64[s : s + rows] - centre
        a_sq = (ac * ac).sum(1)
        tile = torch.addmm(b_sq[None, :], ac, bc.T, alpha=-2.0).add_(a_sq[:, None]).clamp_(min=0.0)
        ia, ib = torch.nonzero(tile <= tol * (a_sq[:, None] + b_sq[None, :]), as_tuple=True)
        if ia.numel():
            tile[ia, ib] = exact_pairs(a64[s : s + rows], b64, ia, ib)
        yield s, tile


__all__ = ["sq_distance_blocks"]
