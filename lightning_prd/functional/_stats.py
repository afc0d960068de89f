"""Float64 statistics of feature sets without a float64 copy of the whole set."""

from __future__ import annotations

import torch
from torch import Tensor


def mean64(x: Tensor, chunk: int = 4096) -> Tensor:
    """Float64 column mean of ``x``, summed in row chunks (``torch.mean(dtype=...)`` copies ``x``)."""
    total = torch.zeros(x.shape[1], dtype=torch.float64, device=x.device)
    for s in range(0, x.shape[0], chunk):
        total += x[s : s + chunk].to(torch.float64).sum(0)
    return total / x.shape[0]
