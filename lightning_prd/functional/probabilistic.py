r"""Probabilistic precision and recall (Park & Kim, ICCV 2023).

Reference: D. Park, S. Kim, "Probabilistic Precision and Recall Towards Reliable Evaluation of
Generative Models", ICCV 2023 (code: ``kdst-team/Probablistic_precision_recall``).

Convention. The paper's formula over *all* reference samples (``terms="all"``). The authors'
working script (root ``compute_pp_pr.py``, ``a = 1.5`` there) keeps only the ``k`` largest terms
of each product (``terms="nearest"``), and their ``a = 1.2`` copies (``metric/pp_pr.py``) do
not run (``get_scoring_rule_psr`` uses an undefined name); ptfid implements the full product with ``a = 1.2``, as here.
Radii are the exact ``NND_k`` (the point itself excluded, duplicates at 0).
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional import knn
from lightning_prd.functional.engine.inputs import check_min_samples, check_positive_int, check_real
from lightning_prd.functional.engine.one_pass import PassResult, requested, run_pass
from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.engine.sets import FeatureSets

#: what each product runs over: every reference sample (the paper) or the k nearest (the authors' script)
TERMS = ("all", "nearest")


def check_probabilistic(k: Any, a: Any, terms: Any = "all") -> Tuple[int, float, str]:
    """Validate ``k`` (a positive integer), ``a`` (a positive finite number) and ``terms``."""
    if not (isinstance(terms, str) and terms in TERMS):
        raise ValueError(f"Expected argument `terms` to be one of {TERMS}, but got {terms!r}")
    return check_positive_int(k, "k"), check_real(a, "a", low=0.0, low_open=True), terms


def probabilistic_from_pass(res: PassResult) -> Tuple[Tensor, Tensor]:
    """``(p_precision, p_recall)``: the means of the pass's soft-ball probabilities."""
    fake_soft = requested(res.cross.fake_soft, "fake_soft")
    real_soft = requested(res.cross.real_soft, "real_soft")
    return fake_soft.mean().to(res.dtype), real_soft.mean().to(res.dtype)


@score_precision()
def probabilistic_precision_recall(
    real: Any,
    fake: Any,
    *,
    k: int = 4,
    a: float = 1.2,
    terms: str = "all",
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = knn.DEFAULT_BLOCK_BYTES,
) -> Tuple[Tensor, Tensor]:
    r"""P-precision and P-recall of generated samples ``fake`` against real samples ``real``.

    Each real sample :math:`x_i` spreads a linear kernel of one shared radius
    :math:`R_X = a \cdot \frac1N \sum_i \mathrm{NND}_k(x_i)`, and each generated sample one of
    :math:`R_Y = a \cdot \frac1M \sum_j \mathrm{NND}_k(y_j)`:

    .. math::
        \text{P-precision} = \frac1M \sum_{j=1}^M \Big(1 - \prod_{i=1}^N
            \big(1 - p(y_j \mid x_i)\big)\Big), \quad
        p(y \mid x_i) = \max\big(0,\ 1 - \lVert y - x_i \rVert / R_X\big),

    and P-recall symmetrically (real queries, generated kernels of radius :math:`R_Y`). The
    product runs over every reference sample (the paper's formula; the authors' working code
    keeps only the k largest terms, see the module docstring). One shared radius makes the
    scores robust to outliers (no sample gets a large ball of its own); the soft membership
    makes them smooth in the data.

    Computed from the shared k-NN tiles: the product is a sum of ``log(d / R)`` over the
    pairs inside ``R``; every sample's probability is the float64 value, from rigorous bounds
    where they agree and from direct float64 distances where they do not
    (:mod:`lightning_prd.functional.knn.soft`); a generated sample equal to a real one
    (``p = 1``) scores exactly 1. In high dimensions distances concentrate and most pairs
    fall inside ``R``, so both scores approach 1 unless the sets differ clearly.

    Args:
        real: ``[N, D]`` real features (the reference distribution P).
        fake: ``[M, D]`` generated features (the model Q).
        k: neighbourhood size of the mean radius (4 in the paper).
        a: radius scale (1.2 in the paper's experiments; the authors' script uses 1.5).
        terms: ``"all"``: each product over every reference sample (the paper's formula);
            ``"nearest"``: over the k nearest reference samples only (the k largest terms), as
            the authors' working script (with ``a=1.5`` it reproduces that script).
        dtype: GEMM dtype, float32 by default (float64 if an input is float64).
        block_bytes: memory budget of one distance tile.

    Returns:
        ``(p_precision, p_recall)`` as 0-dim tensors.

    Example:
        >>> import torch
        >>> real = torch.tensor([[0.0], [1.0], [2.0], [3.0]])
        >>> fake = torch.tensor([[0.5], [1.0], [9.0]])
        >>> pp, pr = probabilistic_precision_recall(real, fake, k=1, a=1.0)
        >>> round(float(pp), 4), round(float(pr), 4)
        (0.5833, 0.8056)
    """
    k, a, terms = check_probabilistic(k, a, terms)
    real_t, fake_t = torch.as_tensor(real), torch.as_tensor(fake)
    if real_t.ndim == 2 and fake_t.ndim == 2:
        check_min_samples(real_t, k, "real")
        check_min_samples(fake_t, k, "fake")
    sets = FeatureSets.check(real, fake)
    res = run_pass(sets, PassRequest(soft=(k, a, terms == "nearest")), dtype=dtype, block_bytes=block_bytes)
    return probabilistic_from_pass(res)
