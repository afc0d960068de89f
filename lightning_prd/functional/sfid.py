r"""sFID (Nash et al., ICML 2021): the Fréchet distance of spatial Inception features.

Reference: C. Nash, J. Menick, S. Dieleman, P. W. Battaglia, "Generating Images with Sparse
Representations", ICML 2021; the evaluator of openai/guided-diffusion (``evaluations/evaluator.py``),
whose ``sFID`` the diffusion papers' tables report. The features are the first 7 channels of the
TF Inception graph's ``mixed_6/conv`` tensor (17 x 17 at 299 px), flattened: 17 · 17 · 7 = 2,023
values per image; the distance is the FID formula on them.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.functional.frechet import frechet_of

#: channels of ``mixed_6/conv`` kept, and the width of the flattened features at 299 px
SPATIAL_CHANNELS = 7
SPATIAL_DIM = 17 * 17 * SPATIAL_CHANNELS


@score_precision()
def spatial_frechet_distance(real: Any, fake: Any) -> Tensor:
    r"""sFID: the Fréchet distance of the real and generated spatial Inception features.

    .. math::
        \lVert \mu_r - \mu_f \rVert^2 + \mathrm{Tr}\big(\Sigma_r + \Sigma_f - 2(\Sigma_r\Sigma_f)^{1/2}\big)

    on the ``[N, 2023]`` features ``spatial`` of the FID Inception network (the first 7 channels of
    ``mixed_6/conv``, flattened; Nash et al., "Generating Images with Sparse Representations",
    ICML 2021). FID averages the last block over the image; these features keep where things are,
    so sFID also sees spatial structure (layout, repeated or misplaced parts) that the pool
    features average away. Lower is better. It is
    :func:`~lightning_prd.functional.frechet_distance` on these features, with its numerics: means
    and unbiased covariances in float64 and the trace of the square root from the eigenvalues of
    the symmetric :math:`\Sigma_r^{1/2}\Sigma_f\Sigma_r^{1/2}`, clamped at 0.

    guided-diffusion's evaluator computes the same formula with three differences: the means are
    float32 (``np.mean`` of float32 activations; the covariances are float64, ``np.cov``), the
    square root is ``scipy.linalg.sqrtm`` of the product (its real part; ``1e-6`` added to both
    diagonals only when it is not finite), and the result is not clamped. Any order of flattening
    gives the same distance, provided both sets use the same one (the distance does not change
    when the same permutation is applied to both sets' features): guided-diffusion's channels-last
    order and a channels-first one agree. Reference statistics (``mu_s``, ``sigma_s`` of its
    reference batches) are a mean and a covariance, not features.

    Args:
        real: ``[N, D]`` real spatial features (``D = 2023`` for the FID network at 299 px), ``N >= 2``.
        fake: ``[M, D]`` generated spatial features, ``M >= 2``.

    Returns:
        0-dim float64 tensor, clamped at 0.

    Raises:
        ValueError: as :func:`~lightning_prd.functional.frechet_distance` (sets of different width,
            NaN or Inf, fewer than 2 samples, a distance beyond float64's range).

    Example:
        >>> import torch
        >>> g = torch.Generator().manual_seed(0)
        >>> real = torch.randn(300, 28, generator=g)  # (a small stand-in for the 2,023 values)
        >>> same = spatial_frechet_distance(real, torch.randn(250, 28, generator=g))
        >>> shifted = spatial_frechet_distance(real, torch.randn(250, 28, generator=g) + 0.5)
        >>> bool(same < shifted), round(float(shifted - same), 0)  # the mean shift adds ~28 · 0.5²
        (True, 7.0)
    """
    return frechet_of(FeatureSets.check(real, fake))
