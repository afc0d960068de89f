"""The one running top-k merge used by the k-NN engine and its DDP combination."""

from __future__ import annotations

from typing import Sequence, Tuple

import torch
from torch import Tensor


def merge_topk(vals: Sequence[Tensor], idx: Sequence[Tensor], t: int) -> Tuple[Tensor, Tensor]:
    """Per row, the ``t`` smallest of the concatenated candidate lists, sorted, with their indices."""
    all_v, all_i = torch.cat(list(vals), dim=1), torch.cat(list(idx), dim=1)
    top_v, pos = torch.topk(all_v, min(t, all_v.shape[1]), dim=1, largest=False, sorted=True)
    return top_v, torch.gather(all_i, 1, pos)
