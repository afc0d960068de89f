"""Improved precision and recall, and the realism score (Kynkäänniemi et al., NeurIPS 2019).

Reference: T. Kynkäänniemi, T. Karras, S. Laine, J. Lehtinen, T. Aila, "Improved Precision
and Recall Metric for Assessing Generative Models", NeurIPS 2019; matches the official code's
conventions (closed balls ``d <= r``, ``NND_k`` excluding the point itself, k = 3);
``ball="open"`` gives the ``prdc`` package's strict ``d < r``.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional import knn
from lightning_prd.functional.engine.inputs import check_positive_int
from lightning_prd.functional.engine.one_pass import PassResult, requested, run_pass
from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.engine.sets import FeatureSets


def precision_from_pass(res: PassResult, k: int) -> Tensor:
    """Share of generated samples inside the union of real ``NND_k`` balls."""
    return res.cross.fake_in_real[k].to(torch.float64).mean().to(res.dtype)


def recall_from_pass(res: PassResult, k: int) -> Tensor:
    """Share of real samples inside the union of generated ``NND_k`` balls."""
    return res.cross.real_in_fake[k].to(torch.float64).mean().to(res.dtype)


@score_precision()
def precision_recall(
    real: Any,
    fake: Any,
    *,
    k: int = 3,
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = knn.DEFAULT_BLOCK_BYTES,
    ball: str = "closed",
) -> Tuple[Tensor, Tensor]:
    r"""k-NN precision and recall of generated samples ``fake`` against real samples ``real``.

    .. math::
        \text{precision} = \frac1M \sum_j f(y_j, X), \qquad
        \text{recall} = \frac1N \sum_i f(x_i, Y),

    where :math:`f(\varphi, \Phi) = 1` when :math:`\varphi` lies in some closed ball
    :math:`B(\varphi', \mathrm{NND}_k(\varphi'))`, :math:`\varphi' \in \Phi`. ``NND_k`` is the
    distance to the k-th nearest neighbour in the same set, the point itself excluded (an
    exact duplicate counts at distance 0). Precision is about the generated samples, recall
    about the real ones. With ``ball="open"`` the balls are open,
    :math:`\lVert \varphi - \varphi' \rVert < \mathrm{NND}_k(\varphi')`, as in the ``prdc``
    package; the two differ only on ties (a sample exactly on a radius: copies, duplicates,
    integer-valued features).

    Args:
        real: ``[N, D]`` real features (the reference distribution P).
        fake: ``[M, D]`` generated features (the model Q).
        k: neighbourhood size (3 in the paper).
        dtype: GEMM dtype, float32 by default (float64 if an input is float64).
        block_bytes: memory budget of one distance tile (and of each set's centred working
            copy, made when the set fits it: peak extra memory is at most about 3x this).
        ball: ``"closed"`` (``d <= r``, the paper's code) or ``"open"`` (``d < r``, ``prdc``).

    Returns:
        ``(precision, recall)`` as 0-dim tensors.

    Example:
        >>> import torch
        >>> real = torch.tensor([[0.0], [1.0], [2.0], [3.0]])
        >>> fake = torch.tensor([[0.2], [0.8], [1.1], [7.0]])
        >>> p, r = precision_recall(real, fake, k=1)
        >>> float(p), float(r)
        (0.75, 1.0)
        >>> p, r = precision_recall(real, real, k=1, ball="open")  # a copy: every sample on its own ball
        >>> float(p), float(r)
        (1.0, 1.0)
    """
    k = check_positive_int(k, "k")
    sets = FeatureSets.check(real, fake)
    res = run_pass(sets, PassRequest(member_ks=(k,), recall_ks=(k,), ball=ball), dtype=dtype, block_bytes=block_bytes)
    return precision_from_pass(res, k), recall_from_pass(res, k)


@score_precision()
def realism_score(
    real: Any,
    fake: Any,
    *,
    k: int = 3,
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = knn.DEFAULT_BLOCK_BYTES,
) -> Tensor:
    r"""Realism score of each generated sample (Kynkäänniemi et al. 2019, Sec. 5).

    .. math::
        R(y) = \max_{i:\ \mathrm{NND}_k(x_i) \le \operatorname{median}}
               \frac{\mathrm{NND}_k(x_i)}{\lVert y - x_i \rVert}

    The real balls larger than the median radius are pruned, as in the official code (there
    they get radius 0). Plain distances, as in the paper's text (the official code uses a
    ratio of *squared* distances, roughly the square of this; the threshold at 1 is the same).
    ``R(y) >= 1`` means ``y`` lies in a kept real ball; a generated sample at distance 0 from a
    kept real sample (a copy) scores ``inf``, even at large offsets in float32. Every score is
    the float64 value of the formula, whatever the tiles (float32, float64, bfloat16 screen):
    per generated sample the real samples with the largest approximate ratios are listed while
    the tiles pass, the candidates that may hold the maximum are recomputed in float64, and a
    sample the list cannot settle is recomputed against every kept real sample. It is returned
    in the compute dtype (float32 by default: the float64 value rounded once, the same on every
    machine), and agrees with precision's exact ``inside`` test at ``R = 1`` (closed balls;
    the score does not depend on the ``ball`` option of precision and recall).

    Args:
        real: ``[N, D]`` real features.
        fake: ``[M, D]`` generated features.
        k: neighbourhood size of the real radii (3 in the paper).

    Returns:
        ``[M]`` tensor of scores, one per generated sample.

    Example:
        >>> import torch
        >>> real = torch.tensor([[0.0], [1.0], [2.0], [3.0]])
        >>> fake = torch.tensor([[0.5], [7.0]])
        >>> realism_score(real, fake, k=1)
        tensor([2.0000, 0.2500])
    """
    k = check_positive_int(k, "k")
    res = run_pass(FeatureSets.check(real, fake), PassRequest(realism_k=k), dtype=dtype, block_bytes=block_bytes)
    return requested(res.cross.realism, "realism").to(res.dtype)
