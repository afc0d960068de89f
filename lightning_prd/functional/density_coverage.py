"""Density and coverage (Naeem et al., ICML 2020).

Reference: M. F. Naeem, S. J. Oh, Y. Uh, Y. Choi, J. Yoo, "Reliable Fidelity and Diversity
Metrics for Generative Models", ICML 2020. Closed balls ``d <= r`` by default; ``ball="open"``
gives the ``prdc`` package's (the paper's code) strict ``d < r``; the two agree on data without
ties. ``NND_k`` excludes the point itself, k = 5.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional import knn
from lightning_prd.functional.engine.inputs import check_positive_int
from lightning_prd.functional.engine.one_pass import PassResult, run_pass
from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.engine.sets import FeatureSets


def density_from_pass(res: PassResult, k: int) -> Tensor:
    """``(1 / kM) * sum_j #{i : y_j in B(x_i, NND_k(x_i))}``."""
    total = res.cross.fake_ball_count[k].sum().to(torch.float64)
    return (total / (k * res.num_fake)).to(res.dtype)


def coverage_from_pass(res: PassResult, k: int) -> Tensor:
    """Share of real samples whose own ``NND_k`` ball holds at least one generated sample."""
    return res.cross.real_ball_hit[k].to(torch.float64).mean().to(res.dtype)


@score_precision()
def density_coverage(
    real: Any,
    fake: Any,
    *,
    k: int = 5,
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = knn.DEFAULT_BLOCK_BYTES,
    ball: str = "closed",
) -> Tuple[Tensor, Tensor]:
    r"""Density and coverage of generated samples ``fake`` against real samples ``real``.

    .. math::
        \text{density} = \frac{1}{kM} \sum_{j=1}^M \sum_{i=1}^N
            \mathbb 1\big[y_j \in B(x_i, \mathrm{NND}_k(x_i))\big], \qquad
        \text{coverage} = \frac1N \sum_{i=1}^N
            \mathbb 1\big[\exists j:\ y_j \in B(x_i, \mathrm{NND}_k(x_i))\big].

    Only balls around real samples are used, so generated outliers cannot inflate either
    score. Density is 1 in expectation when the model equals the data and is unbounded
    above. With closed balls an exact copy of the real set gives exactly ``(k + 1) / k`` when
    no real sample has a tie at its k-th neighbour distance (each ball then holds the copy of
    its centre and of its k neighbours); such a tie adds the tied copies and raises it.

    ``ball="open"`` uses open balls, :math:`\lVert y_j - x_i \rVert < \mathrm{NND}_k(x_i)`, as the
    ``prdc`` package (the authors' code), to reproduce numbers published with it: a copy of the
    real set then gives density exactly 1 (the k-th neighbour's copy sits on the radius, outside),
    and a set of identical points gives 0 for both scores (every radius is 0) instead of
    density ``M / k`` and coverage 1.

    Args:
        real: ``[N, D]`` real features (the reference distribution P).
        fake: ``[M, D]`` generated features (the model Q).
        k: neighbourhood size (5 in the paper).
        dtype: GEMM dtype, float32 by default (float64 if an input is float64).
        block_bytes: memory budget of one distance tile (and of each set's centred working
            copy, made when the set fits it: peak extra memory is at most about 3x this).
        ball: ``"closed"`` (``d <= r``) or ``"open"`` (``d < r``, ``prdc``).

    Returns:
        ``(density, coverage)`` as 0-dim tensors.

    Example:
        >>> import torch
        >>> real = torch.tensor([[0.0], [1.0], [2.0], [3.0]])
        >>> fake = torch.tensor([[0.2], [0.8], [1.1], [7.0]])
        >>> d, c = density_coverage(real, fake, k=1)
        >>> float(d), float(c)
        (1.5, 0.75)
        >>> copy = torch.tensor([[0.0], [1.0], [3.0], [7.0]])  # no ties at the radii
        >>> [float(density_coverage(copy, copy, k=1, ball=b)[0]) for b in ("closed", "open")]
        [2.0, 1.0]
    """
    k = check_positive_int(k, "k")
    sets = FeatureSets.check(real, fake)
    res = run_pass(sets, PassRequest(member_ks=(k,), ball=ball), dtype=dtype, block_bytes=block_bytes)
    return density_from_pass(res, k), coverage_from_pass(res, k)
