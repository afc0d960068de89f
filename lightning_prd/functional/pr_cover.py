r"""Precision-recall cover (Cheema & Urner, AISTATS 2023).

Reference: F. Cheema, R. Urner, "Precision Recall Cover: A Method For Assessing Generative
Models", AISTATS 2023 (PMLR 206). A sample is covered when its own-set ball of radius
``NND_{k'}`` with ``k' = C k`` holds at least ``k`` samples of the other set: the ball is
sized by the sample's own set, the count asked of the other.

Convention. Closed balls (``d <= r``, as the authors' ``PR_Cover_Indicator``), ``NND_{k'}``
excluding the point itself (their k-d tree query drops the first neighbour), ``C = 3``. Without
``k`` the default of the authors' setting is used, ``k' = C k >= ln N + 6`` (``C_0 = 6``), i.e.
``k = ceil((ln N + 6) / C)`` with ``N`` the number of real samples (k = 6 at N = 10,000). Roles:
precision-cover is about generated samples, recall-cover about real ones.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional import knn
from lightning_prd.functional.engine.inputs import check_min_samples, check_positive_int
from lightning_prd.functional.engine.one_pass import PassResult, requested, run_pass
from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.engine.sets import FeatureSets

#: ``C_0`` of the default ``k' = C k >= ln N + C_0``
COVER_C0 = 6.0


def check_cover_options(k: Any, C: Any, prefix: str = "") -> Tuple[Optional[int], int]:
    """``k`` (None or a positive integer) and ``C`` (a positive integer), validated."""
    C = check_positive_int(C, f"{prefix}C")
    return (None if k is None else check_positive_int(k, f"{prefix}k")), C


def cover_k(k: Optional[int], C: Any, num_real: int) -> Tuple[int, int]:
    """``(k, C)`` validated, ``k`` from the default rule when None (module docstring)."""
    k, C = check_cover_options(k, C)
    if k is None:
        k = max(1, math.ceil((math.log(max(num_real, 1)) + COVER_C0) / C))
    return k, C


def check_cover_sizes(real: Tensor, fake: Tensor, k: int, C: int, k_name: str = "k") -> None:
    """Both sets need ``C k + 1`` samples for their ``NND_{Ck}`` radii."""
    name = f"C * {k_name}"
    check_min_samples(real, C * k, "real", name)
    check_min_samples(fake, C * k, "fake", name)


def cover_from_pass(res: PassResult, k: int, C: int) -> Tuple[Tensor, Tensor]:
    """``(precision_cover, recall_cover)``: shares of samples whose ``NND_{Ck}`` ball holds ``k`` of the other set."""
    precision = requested(res.cross.fake_covered, "fake_covered").to(torch.float64).mean()
    recall = requested(res.cross.real_covered, "real_covered").to(torch.float64).mean()
    return precision.to(res.dtype), recall.to(res.dtype)


@score_precision()
def precision_recall_cover(
    real: Any,
    fake: Any,
    *,
    k: Optional[int] = None,
    C: int = 3,
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = knn.DEFAULT_BLOCK_BYTES,
) -> Tuple[Tensor, Tensor]:
    r"""Precision cover and recall cover of generated samples ``fake`` against real samples ``real``.

    With :math:`k' = Ck` and closed balls :math:`B(z, r) = \{u : \lVert u - z\rVert \le r\}`:

    .. math::
        \text{precision-cover} = \frac1M \sum_{j=1}^M \mathbb 1\Big[
            \#\{i : x_i \in B(y_j, \mathrm{NND}_{k'}(y_j))\} \ge k\Big], \qquad
        \text{recall-cover} = \frac1N \sum_{i=1}^N \mathbb 1\Big[
            \#\{j : y_j \in B(x_i, \mathrm{NND}_{k'}(x_i))\} \ge k\Big],

    where :math:`\mathrm{NND}_{k'}(y_j)` is taken in the generated set and
    :math:`\mathrm{NND}_{k'}(x_i)` in the real set. A sample counts only when its neighbourhood
    holds *enough* samples of the other set (k of them, not one), so an isolated outlier of
    either set neither covers nor is covered; when both sets come from one distribution a
    ball of ``k'`` own-set neighbours holds about ``k'`` others, well above ``k``.

    Args:
        real: ``[N, D]`` real features (the reference distribution P).
        fake: ``[M, D]`` generated features (the model Q).
        k: samples of the other set a ball must hold; None: ``ceil((ln N + 6) / C)``.
        C: ball size factor, ``k' = C k`` (3 in the paper).
        dtype: GEMM dtype, float32 by default (float64 if an input is float64).
        block_bytes: memory budget of one distance tile.

    Returns:
        ``(precision_cover, recall_cover)`` as 0-dim tensors.

    Example:
        >>> import torch
        >>> real = torch.tensor([[0.0], [1.0], [2.0], [3.0], [4.0]])
        >>> fake = torch.tensor([[0.5], [1.5], [20.0], [20.5], [21.0]])  # three far from the data
        >>> pc, rc = precision_recall_cover(real, fake, k=1, C=2)
        >>> round(float(pc), 4), round(float(rc), 4)
        (0.4, 0.6)
    """
    sets = FeatureSets.check(real, fake)
    real, fake = sets.real, sets.fake
    k, C = cover_k(k, C, real.shape[0])
    check_cover_sizes(real, fake, k, C)
    res = run_pass(sets, PassRequest(cover=(k, C * k)), dtype=dtype, block_bytes=block_bytes)
    return cover_from_pass(res, k, C)
