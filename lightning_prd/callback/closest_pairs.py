"""The grid of ``log_closest_pairs``: the generated samples nearest to a real one, each beside that real sample.

The metric picks the pairs (``GenerativeMetrics(closest_pairs=n)``: ``closest_fake_index`` and
``closest_real_index``, rows of the gathered sets, smallest ratio of the distance to the real sample's own
``NND_1`` first). Nothing but those rows is kept: each rank holds its generated samples of the evaluation
until the pairs are known, then re-reads its block of ``real`` up to the last real row it must show (a
tensor is only indexed), and the chosen rows go to rank 0 in one ``all_gather_object`` (every rank takes part).

**Grid** (:func:`pair_grid`): one pair per row, the generated sample on the left, its nearest real sample on
the right. Integer images are divided by 255; when a value then lies outside ``[0, 1]`` both columns are
min-max scaled together (one scale, so a copy looks like its original); one channel is repeated to three;
a real image of another size is resized to the generated size (bilinear, antialiased).

Example:
    >>> import torch
    >>> fakes, reals = [torch.zeros(1, 2, 2)], [torch.ones(1, 2, 2)]
    >>> grid = pair_grid(fakes, reals, pad=1)
    >>> grid.shape, float(grid[1, 1, 0]), float(grid[1, 4, 0])
    ((4, 7, 3), 0.0, 1.0)
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor

from lightning_prd.functional.knn.collectives import object_device_context

#: the result entries that name the pairs
PAIR_KEYS = ("closest_fake_index", "closest_real_index")


def gather_pairs(
    result: Mapping[str, Any],
    fakes: Sequence[Tensor],
    real_rows: Callable[[], Iterator[Tensor]],
    num_real: int,
    rank: int,
    world: int,
) -> Optional[Tuple[List[Tensor], List[Tensor]]]:
    """On rank 0, the generated and real samples of the pairs ``result`` names, in its order; ``None`` on the
    other ranks, when ``result`` names no pairs, or when a process group is missing under ``world > 1``.

    ``fakes``: this rank's generated samples of the evaluation, in order; ``real_rows()``: its real rows in
    order (``num_real`` of them, what it gave the metric). Every rank must call it (one collective)."""
    if any(k not in result for k in PAIR_KEYS):
        return None
    distributed = world > 1 and dist.is_available() and dist.is_initialized()
    if world > 1 and not distributed:
        return None
    local = torch.cat([f.detach().cpu() for f in fakes]) if fakes else torch.empty(0)
    counts: List[Any] = [(local.shape[0], num_real)]
    if distributed:
        counts = [None] * world
        with object_device_context():
            dist.all_gather_object(counts, (local.shape[0], num_real))
    fake_at, real_at = sum(c[0] for c in counts[:rank]), sum(c[1] for c in counts[:rank])
    fake_index, real_index = result[PAIR_KEYS[0]].tolist(), result[PAIR_KEYS[1]].tolist()
    mine_fake = {j: local[g - fake_at].clone() for j, g in enumerate(fake_index) if 0 <= g - fake_at < local.shape[0]}
    wanted = {j: r - real_at for j, r in enumerate(real_index) if 0 <= r - real_at < num_real}
    mine = (mine_fake, _pick_rows(real_rows, wanted))
    parts: List[Any] = [mine]
    if distributed:
        parts = [None] * world
        with object_device_context():
            dist.all_gather_object(parts, mine)
    if rank != 0:
        return None
    got_fake: Dict[int, Tensor] = {}
    got_real: Dict[int, Tensor] = {}
    for part_fake, part_real in parts:
        got_fake.update(part_fake)
        got_real.update(part_real)
    n = len(fake_index)
    if sorted(got_fake) != list(range(n)) or sorted(got_real) != list(range(n)):
        return None
    return [got_fake[j] for j in range(n)], [got_real[j] for j in range(n)]


def _pick_rows(real_rows: Callable[[], Iterator[Tensor]], wanted: Mapping[int, int]) -> Dict[int, Tensor]:
    """``{pair: row}`` for the local real rows ``wanted`` (pair -> row number), read up to the last one."""
    found: Dict[int, Tensor] = {}
    if not wanted:
        return found
    last, at = max(wanted.values()), 0
    for chunk in real_rows():
        for j, i in wanted.items():
            if at <= i < at + chunk.shape[0]:
                found[j] = chunk[i - at].detach().cpu().clone()
        at += chunk.shape[0]
        if at > last:
            break
    return found


def _is_image(x: Tensor) -> bool:
    return x.ndim == 3 and x.shape[0] in (1, 3)


def pair_grid(fakes: Sequence[Tensor], reals: Sequence[Tensor], pad: int = 2) -> Optional[np.ndarray]:
    """A ``[H, W, 3]`` float grid in ``[0, 1]``: row ``i`` holds ``fakes[i]`` on the left and ``reals[i]`` on the
    right (module docstring); ``None`` when they are not images ``[1 or 3, h, w]``."""
    if not fakes or len(fakes) != len(reals) or not all(_is_image(x) for x in [*fakes, *reals]):
        return None
    h, w = fakes[0].shape[-2:]

    def shown(x: Tensor) -> Tensor:
        y = x.detach().cpu()
        y = y.double() / 255.0 if not (y.is_floating_point() or y.dtype == torch.bool) else y.double()
        if y.shape[-2:] != (h, w):
            y = F.interpolate(y[None], size=(h, w), mode="bilinear", align_corners=False, antialias=True)[0]
        return y.expand(3, h, w) if y.shape[0] == 1 else y

    cells = torch.stack([shown(x) for x in [*fakes, *reals]])
    lo, hi = float(cells.min()), float(cells.max())
    if lo < 0.0 or hi > 1.0:
        cells = (cells - lo) / (hi - lo) if hi > lo else torch.zeros_like(cells)
    n = len(fakes)
    grid = torch.ones(3, n * (h + pad) + pad, 2 * w + 3 * pad, dtype=torch.float64)
    for i in range(n):
        top = pad + i * (h + pad)
        grid[:, top : top + h, pad : pad + w] = cells[i]
        grid[:, top : top + h, 2 * pad + w : 2 * pad + 2 * w] = cells[n + i]
    return grid.permute(1, 2, 0).numpy()
