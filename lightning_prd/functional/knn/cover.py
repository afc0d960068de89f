r"""Is the ``k``-th nearest sample of the other set inside a sample's own ball? Decided exactly.

Stage: used by the cross pass (may call :mod:`.points`, :mod:`.refine`, :mod:`.lists`,
:mod:`.shard`; the exact radii come in as a callable). PR-cover (Cheema & Urner 2023) asks,
per sample, whether its closed own-set ball of squared radius ``r^2`` (``NND_{k'}``, ``k' = C k``) holds at least
``k`` samples of the other set. That count reaches ``k`` exactly when the ``k``-th smallest
cross distance is at most ``r``:

.. math::
    \#\{j : d(q, o_j) \le r\} \ge k \iff d_{(k)}(q) \le r,

so the cross pass keeps running nearest lists (the lists of authenticity's nearest
neighbours) instead of counting every pair inside wide balls. Both sides of the comparison
start as intervals that hold the exact value: the own radius from the self pass
(:func:`.self_pass.self_radii`), the ``k``-th cross distance from the ``k``-th listed tile value
``v`` (``[low(v), high(v)]`` of its :class:`.bounds.Bound`: at most ``k - 1`` samples have a
smaller tile value, and the first ``k`` listed are at most ``v``). Disjoint intervals decide a
row. Otherwise the ``k``-th cross distance is made exact from the lists
(:func:`.refine.refine_topk`), and where the radius interval still holds it, the radius too
(from the self pass's lists, :meth:`.self_pass.LooseRadius.exact`).

Example:
    >>> import torch
    >>> from lightning_prd.functional.knn.lists import RunningNearest
    >>> from lightning_prd.functional.knn.points import prepare
    >>> a, b = torch.tensor([[0.0], [5.0]]), torch.tensor([[1.0], [2.0], [9.0]])
    >>> c = torch.zeros(1, dtype=torch.float64)
    >>> pa, pb = prepare(a, c, torch.float32), prepare(b, c, torch.float32)
    >>> near = RunningNearest(2, 3, torch.float32, a.device)
    >>> near.update(slice(0, 2), torch.cdist(a, b).square(), 1, 0)
    >>> # own squared radii 4 and 9 (exact: equal ends): a 0 holds b 0 and b 1, a 5 holds none within 3
    >>> radius = torch.tensor([[4.0, 4.0], [9.0, 9.0]], dtype=torch.float64)
    >>> within_kth(pa, pb, near, 2, radius, lambda rows: radius[rows, 0]).tolist()
    [True, False]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch import Tensor

from lightning_prd.functional.knn.lists import RunningNearest
from lightning_prd.functional.knn.points import PointSet, bound
from lightning_prd.functional.knn.refine import refine_topk
from lightning_prd.functional.knn.shard import Shard
from lightning_prd.functional.knn.tiling import DEFAULT_BLOCK_BYTES


@dataclass
class Cover:
    """What PR-cover asks of a cross pass: does each sample's own ``NND_{k'}`` ball (closed) hold
    ``k`` samples of the other set? ``real_radius`` / ``fake_radius``: ``[N, 2]`` / ``[M, 2]``
    float64 intervals holding the exact squared radii (:func:`.self_pass.self_radii`);
    ``real_exact`` / ``fake_exact``: the exact squared radii of given rows (the same on every
    rank), computed with the share of the pass that asks (its shard, or None), asked only where
    an interval does not decide."""

    k: int
    real_radius: Tensor
    fake_radius: Tensor
    real_exact: Callable[[Tensor, Optional[Shard]], Tensor]
    fake_exact: Callable[[Tensor, Optional[Shard]], Tensor]


def within_kth(
    a: PointSet,
    b: PointSet,
    near: RunningNearest,
    k: int,
    radius: Tensor,
    exact_radius: Callable[[Tensor, Optional[Shard]], Tensor],
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    shard: Optional[Shard] = None,
) -> Tensor:
    """Per row of ``a``: its ``k``-th nearest row of ``b`` lies within the row's closed own ball.

    Args:
        near: running lists of ``a`` against every row of ``b`` (merged across the group
            already: the same on every rank).
        radius: ``[len(a), 2]`` float64 interval holding the exact squared radius of each own
            ball (equal ends when exact).
        exact_radius: the exact squared radius of given rows (with ``shard``), where the interval
            does not decide.

    Returns:
        ``[len(a)]`` bool, the same on every rank.
    """
    r_lo, r_hi = radius[:, 0], radius[:, 1]
    v = near.vals[:, k - 1].to(torch.float64)
    bnd = bound(a, b, slice(None))
    inside = bnd.high(v) <= r_lo
    rows = (~inside & (bnd.low(v) <= r_hi)).nonzero(as_tuple=True)[0]
    if rows.numel() == 0:
        return inside
    truncated = near.t < len(b)
    d_k = refine_topk(
        a, b, near.vals[rows], near.idx[rows], [k], False, truncated, block_bytes, False, shard, rows=rows
    )[k][0]
    inside[rows] = d_k <= r_lo[rows]
    open_ = (d_k > r_lo[rows]) & (d_k <= r_hi[rows])  # the radius itself is needed
    if bool(open_.any()):
        sel = open_.nonzero(as_tuple=True)[0]
        inside[rows[sel]] = d_k[sel] <= exact_radius(rows[sel], shard)
    return inside
