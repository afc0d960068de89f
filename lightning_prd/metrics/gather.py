"""All-gather of feature states that survives uneven and idle ranks.

torchmetrics' default ``gather_all_tensors`` assumes every rank holds a tensor with the same
number of dimensions. A rank that received no samples contributes the placeholder
``torch.tensor([])`` (shape ``(0,)``, the metric's default dtype) while the others hold
``[n, D]`` features: the shape exchange then mismatches and the job crashes or hangs. This
gather exchanges ``(rows, width, dtype)`` first, reshapes empty placeholders to ``(0, D)``,
promotes every rank to the widest floating dtype (int64 class labels stay int64), pads to the
largest row count, gathers, and trims.

The collectives run on the process group's device
(:func:`lightning_prd.functional.knn.collectives.group_device`: this process's GPU under NCCL) and the
gathered rows come back on the device of the states, so states kept on the CPU
(``compute_on_cpu=True``) can be gathered by NCCL.
"""

from __future__ import annotations

from typing import Any, List, Optional

import torch
import torch.distributed as dist
from torch import Tensor

from lightning_prd.functional.knn import collectives

_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64]


def _code(dtype: torch.dtype) -> int:
    return _DTYPES.index(dtype) if dtype in _DTYPES else 0


def gather_features(x: Tensor, group: Optional[Any] = None) -> List[Tensor]:
    """Gather a ``[n_r, D]`` (or empty ``(0,)``) tensor from every rank; returns one tensor per rank.
    Ranks holding no rows do not count in the width check."""
    world = dist.get_world_size(group)
    home = x.device
    device = collectives.group_device(group, home)
    empty = x.numel() == 0 and x.ndim != 2
    rows = 0 if empty else int(x.shape[0])
    # a rank without rows has no width (an empty batch does not fix it, as in a single process)
    width = -1 if rows == 0 else (int(x.shape[1]) if x.ndim == 2 else int(x.reshape(rows, -1).shape[1]))
    meta = collectives.place(torch.tensor([rows, width, _code(x.dtype)], dtype=torch.long, device=device), device)
    metas = [torch.zeros_like(meta) for _ in range(world)]
    dist.all_gather(metas, meta, group=group)
    table: List[List[int]] = torch.stack(metas).tolist()  # one transfer to the host
    widths = {int(m[1]) for m in table if int(m[1]) >= 0}
    if len(widths) > 1:
        raise ValueError(
            f"Expected every rank to hold features of one width, but the ranks hold widths {sorted(widths)}"
        )
    if not widths:  # nothing anywhere: keep torchmetrics' empty placeholder
        return [x.new_zeros((0,)) for _ in range(world)]
    dim = widths.pop()
    held = {_DTYPES[int(m[2])] for m in table if int(m[0]) > 0}
    if held == {torch.int64}:  # class labels: kept exact
        dtype = torch.int64
    else:
        dtype = torch.float64 if any(_DTYPES[int(m[2])] == torch.float64 for m in table) else torch.float32
    x = x.reshape(rows, dim).to(dtype)
    counts = [int(m[0]) for m in table]
    padded = collectives.place(torch.zeros((max(counts), dim), dtype=dtype, device=device), device)
    padded[:rows] = x
    out = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(out, padded.contiguous(), group=group)
    return [o[:c].to(home) for o, c in zip(out, counts)]
