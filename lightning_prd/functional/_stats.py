"""Float64 statistics of feature sets without a float64 copy of the whole set."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor


def mean64(x: Tensor, chunk: int = 4096) -> Tensor:
    """Float64 column mean of ``x``, summed in row chunks (``torch.mean(dtype=...)`` copies ``x``)."""
    total = torch.zeros(x.shape[1], dtype=torch.float64, device=x.device)
    for s in range(0, x.shape[0], chunk):
        total += x[s : s + chunk].to(torch.float64).sum(0)
    return total / x.shape[0]


def gram64(
    x: Tensor, *, centre: Optional[Tensor] = None, row_divisor: Optional[Tensor] = None, chunk: int = 4096
) -> Tensor:
    """Float64 ``[D, D]`` sum of ``z_i z_i^T`` over the rows ``z_i = (x_i - centre) / row_divisor_i``
    (each part optional), accumulated in row chunks (no float64 copy of ``x``)."""
    gram = torch.zeros(x.shape[1], x.shape[1], dtype=torch.float64, device=x.device)
    for s in range(0, x.shape[0], chunk):
        rows = x[s : s + chunk].to(torch.float64)
        if centre is not None:
            rows = rows - centre
        if row_divisor is not None:
            rows = rows / row_divisor[s : s + chunk, None]
        gram.addmm_(rows.T, rows)
    return gram
