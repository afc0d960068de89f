"""Splitting the k-NN tile work across the processes of a group, and combining the results.

Stage: beside the tiles; may call :mod:`.lists` (the top-k merge) and ``torch.distributed``.

After a Metric's sync every rank holds all features. Instead of every rank computing every
tile, rank ``r`` of ``W`` computes the tiles whose running number ``c`` has ``c % W == r``;
per-sample accumulators are then combined by all-reduce (any: max, counts: sum, minima:
min, maxima: max) and running top-k lists by all-gather and merge; the exact refinement of
the merged lists is split by rows and gathered. Every rank ends with the same, complete
result (no rank-0-only collective). Every collective runs on the group's device
(:func:`.collectives.to_group`: this process's GPU under NCCL, even for tensors on the CPU) and its
result comes back on the device of the tensors given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

import torch
import torch.distributed as dist
from torch import Tensor

from lightning_prd.functional.knn.collectives import to_group
from lightning_prd.functional.knn.lists import merge_topk


@dataclass
class Shard:
    """This process's share: tile ``c`` is computed here when ``c % world == rank``. With ``even_split``
    (the default) a pass may cut its tiles smaller so that every rank gets a similar share; without it
    the tiles are the single-process ones (kernel sums, whose float32 rounding depends on the shapes)."""

    rank: int
    world: int
    group: Optional[Any] = None
    even_split: bool = True

    def owns(self, tile_number: int) -> bool:
        return tile_number % self.world == self.rank

    def _reduce(self, t: Tensor, op: Any) -> Tensor:
        """``t`` reduced over the ranks (in place when ``t`` is on the group's device)."""
        if t.dtype == torch.bool:
            return self._reduce(t.to(torch.uint8), op).bool()
        on_group = to_group(t, self.group)
        dist.all_reduce(on_group, op=op, group=self.group)
        if on_group is t:
            return t
        return t.copy_(on_group)

    def any(self, t: Tensor) -> Tensor:
        return self._reduce(t, dist.ReduceOp.MAX)

    def sum(self, t: Tensor) -> Tensor:
        return self._reduce(t, dist.ReduceOp.SUM)

    def min(self, t: Tensor) -> Tensor:
        return self._reduce(t, dist.ReduceOp.MIN)

    def max(self, t: Tensor) -> Tensor:
        return self._reduce(t, dist.ReduceOp.MAX)

    def row_share(self, n: int) -> slice:
        """This rank's contiguous share of ``n`` rows (for work after the lists are merged)."""
        size = -(-n // self.world)
        return slice(min(n, self.rank * size), min(n, (self.rank + 1) * size))

    def gather_rows(self, part: Tensor, n: int) -> Tensor:
        """The ``n`` rows whose :meth:`row_share` each rank computed (``part``), on every rank."""
        if part.dtype == torch.bool:
            return self.gather_rows(part.to(torch.uint8), n).bool()
        padded = to_group(pad_rows(part, -(-n // self.world)), self.group)
        pieces = [torch.empty_like(padded) for _ in range(self.world)]
        dist.all_gather(pieces, padded, group=self.group)
        return torch.cat(pieces)[:n].to(part.device)

    def merge_topk(self, vals: Tensor, idx: Tensor) -> Tuple[Tensor, Tensor]:
        """Merge every rank's running ``t`` smallest (values, indices) per row."""
        home = vals.device
        v, i = to_group(vals.contiguous(), self.group), to_group(idx.contiguous(), self.group)
        all_v = [torch.empty_like(v) for _ in range(self.world)]
        all_i = [torch.empty_like(i) for _ in range(self.world)]
        dist.all_gather(all_v, v, group=self.group)
        dist.all_gather(all_i, i, group=self.group)
        return merge_topk([t.to(home) for t in all_v], [t.to(home) for t in all_i], vals.shape[1])


def pad_rows(part: Tensor, size: int) -> Tensor:
    """``part`` with zero rows appended up to ``size`` rows (equal blocks for a row gather)."""
    padded = part.new_zeros((size,) + tuple(part.shape[1:]))
    padded[: part.shape[0]] = part
    return padded


def current_shard(group: Optional[Any] = None) -> Optional[Shard]:
    """The shard of this process in ``group`` when a process group with >1 ranks is running."""
    if not (dist.is_available() and dist.is_initialized()):
        return None
    world = dist.get_world_size(group)
    return Shard(dist.get_rank(group), world, group) if world > 1 else None
