r"""The rarity score (Han et al., ICLR 2023): how uncommon each generated sample is on the real manifold.

Reference: J. Han, H. Choi, Y. Choi, J. Kim, J.-W. Ha, J. Choi, "Rarity Score: A New Metric to Evaluate
the Uncommonness of Synthesized Images", ICLR 2023 (code: ``hichoe95/Rarity-Score``, ``rarity_score.py``,
``MANIFOLD.rarity``). With :math:`r_i = \mathrm{NND}_k(x_i)` the real k-NN radii,

.. math:: \mathrm{rarity}(y_j) = \min \{ r_i : \lVert y_j - x_i \rVert < r_i \}

the radius of the smallest real ball that holds the generated sample: a sample that only large
balls (sparse regions of the real data) hold is rare, one that a small ball holds is common.

Convention. The official code's: ``k = 3``, ``NND_k`` the k-th neighbour with the sample itself
excluded (a duplicate counts, at distance 0), open balls (``r - d > 0``), plain (not squared)
distances, and a sample in no ball scores 0. ``rarity_mean`` averages over the samples inside some
ball only (NaN when none is); the share of samples inside a ball is precision with open ``k = 3``
balls. The radii and memberships are decided exactly (float64 for every pair near a radius), so the
per-sample scores are the float64 radii themselves. The score ranks nothing by itself (rarer is not
better): dashboards and ``lightning-prd runs`` show it without a direction.

The family's record (:mod:`lightning_prd.functional.families.rarity`) is registered through the public
:func:`lightning_prd.register_family` in its short form (``pass_asks`` / ``from_pass``),
so ``rarity=True`` or ``rarity={"k": 5}`` switches it on in :func:`~lightning_prd.functional.generative_metrics`,
:class:`~lightning_prd.GenerativeMetrics`, the callback's
``metric=`` dict and ``lightning-prd evaluate --rarity [k=5]``.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional import knn
from lightning_prd.functional.engine.inputs import check_min_samples, check_positive_int
from lightning_prd.functional.engine.one_pass import PassResult, run_pass
from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.functional.knn.smallest import SmallestBall

#: the official code's k
K = 3


def check_rarity_options(options: Dict[str, Any]) -> Dict[str, Any]:
    """The options of ``rarity=`` checked: ``k`` a positive integer."""
    return {"k": check_positive_int(options["k"], "k")}


def rarity_from_pass(res: PassResult, k: int) -> Dict[str, Tensor]:
    """``rarity`` (float64 ``[M]``) and ``rarity_mean`` from a pass run with a :class:`SmallestBall` of ``k``."""
    smallest = res.cross.reduced.get(SmallestBall(k).key)
    if smallest is None:
        raise RuntimeError(f"the k-NN pass found no smallest balls of k = {k}: pass a SmallestBall to run_pass")
    inside = torch.isfinite(smallest)
    scores = torch.where(inside, smallest, 0.0).sqrt()
    mean = scores[inside].mean() if bool(inside.any()) else scores.new_tensor(float("nan"))
    return {"rarity": scores, "rarity_mean": mean}


@score_precision()
def rarity_score(
    real: Any,
    fake: Any,
    *,
    k: int = K,
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = knn.DEFAULT_BLOCK_BYTES,
) -> Tuple[Tensor, Tensor]:
    r"""The rarity score of each generated sample and its mean over the samples inside a real ball.

    :math:`\mathrm{rarity}(y_j) = \min \{ \mathrm{NND}_k(x_i) : \lVert y_j - x_i \rVert < \mathrm{NND}_k(x_i) \}`
    (Han et al., ICLR 2023; module docstring: the official code's conventions), 0 for a sample in no ball.

    Args:
        real: ``[N, D]`` real features (the reference distribution P), ``N > k``.
        fake: ``[M, D]`` generated features (the model Q).
        k: k of the real radii (3, the official code's).
        dtype: GEMM dtype of the k-NN pass (float32 default; the decisions are exact either way).
        block_bytes: memory budget of one distance tile.

    Returns:
        ``(rarity, rarity_mean)``: float64 ``[M]`` per generated sample, and the mean over the samples
        inside some ball (NaN when none is).

    Example:
        >>> import torch
        >>> real = torch.tensor([[0.0], [1.0], [3.0], [7.0]])  # NND_1 radii 1, 1, 2, 4
        >>> fake = torch.tensor([[0.5], [2.5], [6.0], [20.0]])
        >>> scores, mean = rarity_score(real, fake, k=1)
        >>> scores.tolist(), float(mean)
        ([1.0, 2.0, 4.0, 0.0], 2.3333333333333335)
    """
    sets = FeatureSets.check(real, fake)
    k = check_positive_int(k, "k")
    check_min_samples(sets.real, k, "real", "k")
    res = run_pass(sets, PassRequest(real_ks=(k,), reductions=(SmallestBall(k),)), dtype=dtype, block_bytes=block_bytes)
    out = rarity_from_pass(res, k)
    return out["rarity"], out["rarity_mean"]
