r"""Symmetric precision and recall (Khayatkhoei & AbdAlmageed, ICML 2023).

Reference: M. Khayatkhoei, W. AbdAlmageed, "Emergent Asymmetry of Precision and Recall for
Measuring Fidelity and Diversity of Generative Models in High Dimensions", ICML 2023 (code:
``mahyarkoy/emergent_asymmetry_pr``, ``manifmetric/manifmetric.py``: ``sym_precision``,
``sym_recall``). In high dimensions k-NN precision and recall stop being symmetric: the
``NND_k`` balls of the more spread-out set cover the other set far more readily than the other
way round, so a model can score high precision (or recall) without matching the data. Each
score is therefore paired with its mirror image, the same question asked with the balls of the
other set, and the smaller of the two is kept.

Convention. The authors' code: ``k = 5`` for all four parts, ``NND_k`` excluding the point
itself. Balls are closed (``d <= r``) by default, as in the package and the re-implementation in
``nicolassalvy/ClippedDensityCoverage`` (``metrics/older_metrics_faster_code.py``, ``sym=True``);
``ball="open"`` gives the authors' strict ``d < r``. The two agree on data without ties.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional import knn
from lightning_prd.functional.engine.inputs import check_ball, check_min_samples, check_positive_int
from lightning_prd.functional.engine.one_pass import PassResult, requested, run_pass
from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.engine.sets import FeatureSets


def symmetric_from_pass(res: PassResult, k: int, ball: str = "closed") -> Tuple[Tensor, Tensor]:
    """``(sym_precision, sym_recall)`` from a pass with ``k`` in ``member_ks`` and ``recall_ks``,
    ``nearest="fake"`` (or True) and the same ``ball``."""
    f64 = torch.float64
    precision = res.cross.fake_in_real[k].to(f64).mean()
    nearest = requested(res.cross.fake_nn_sq_dist, "fake_nn_sq_dist")  # each fake's nearest real, squared
    fake_r = res.fake_sq_radii[k]
    holds_real = nearest < fake_r if ball == "open" else nearest <= fake_r  # the fake's own ball holds a real
    recall = res.cross.real_in_fake[k].to(f64).mean()
    coverage = res.cross.real_ball_hit[k].to(f64).mean()
    sym_precision = torch.minimum(precision, holds_real.to(f64).mean())
    return sym_precision.to(res.dtype), torch.minimum(recall, coverage).to(res.dtype)


@score_precision()
def symmetric_precision_recall(
    real: Any,
    fake: Any,
    *,
    k: int = 5,
    ball: str = "closed",
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = knn.DEFAULT_BLOCK_BYTES,
) -> Tuple[Tensor, Tensor]:
    r"""Symmetric precision and recall of generated samples ``fake`` against real samples ``real``.

    With :math:`B_k(z)` the closed ball around ``z`` of radius its ``NND_k`` in its own set:

    .. math::
        \text{sym-precision} &= \min\Big(\frac1M \sum_j \mathbb 1\big[\exists i: y_j \in B_k(x_i)\big],\
            \frac1M \sum_j \mathbb 1\big[\exists i: x_i \in B_k(y_j)\big]\Big), \\
        \text{sym-recall} &= \min\Big(\frac1N \sum_i \mathbb 1\big[\exists j: x_i \in B_k(y_j)\big],\
            \frac1N \sum_i \mathbb 1\big[\exists j: y_j \in B_k(x_i)\big]\Big).

    The first term of each is k-NN precision / recall (Kynkäänniemi et al. 2019) at this ``k``;
    the second is its mirror: the share of generated samples whose own ball holds a real sample
    (the paper's complement precision) and the share of real samples whose own ball holds a
    generated sample (coverage, Naeem et al. 2020). Both terms are about the same samples
    (precision about the generated ones, recall about the real ones), so the minimum keeps the
    roles; it corrects the asymmetry that lets the larger set's balls cover the other set in
    high dimensions.

    Args:
        real: ``[N, D]`` real features (the reference distribution P).
        fake: ``[M, D]`` generated features (the model Q).
        k: neighbourhood size of every ball (5 in the paper's code).
        ball: ``"closed"`` (``d <= r``) or ``"open"`` (``d < r``, the authors' code).
        dtype: GEMM dtype, float32 by default (float64 if an input is float64).
        block_bytes: memory budget of one distance tile.

    Returns:
        ``(sym_precision, sym_recall)`` as 0-dim tensors.

    Example:
        >>> import torch
        >>> from lightning_prd.functional import precision_recall
        >>> real = torch.tensor([[0.0], [1.0], [2.0], [3.0]])
        >>> fake = torch.tensor([[0.5], [10.0], [20.0], [30.0]])  # spread out: huge balls of their own
        >>> float(precision_recall(real, fake, k=1)[1])  # every real sample is inside a generated ball
        1.0
        >>> sp, sr = symmetric_precision_recall(real, fake, k=1)  # half the real balls hold a generated sample
        >>> float(sp), float(sr)
        (0.25, 0.5)
    """
    k = check_positive_int(k, "k")
    ball = check_ball(ball)
    sets = FeatureSets.check(real, fake)
    check_min_samples(sets.real, k, "real")
    check_min_samples(sets.fake, k, "fake")
    request = PassRequest(member_ks=(k,), recall_ks=(k,), nearest="fake", ball=ball)
    res = run_pass(sets, request, dtype=dtype, block_bytes=block_bytes)
    return symmetric_from_pass(res, k, ball)
