"""Fréchet distance between Gaussians fitted to two feature sets (the FID formula).

Reference: M. Heusel et al., "GANs Trained by a Two Time-Scale Update Rule Converge to a
Local Nash Equilibrium", NeurIPS 2017. Computed in float64 from features; covariances use the
unbiased ``1 / (n - 1)`` normalisation, as ``numpy.cov`` and torchmetrics' FID do.
"""

from __future__ import annotations

from typing import Any, Tuple

import torch
from torch import Tensor

from lightning_prd.functional._stats import gram64, mean64
from lightning_prd.functional._validation import as_features, check_pair


def _mean_cov(x: Tensor, name: str) -> Tuple[Tensor, Tensor]:
    """Float64 mean and unbiased covariance, accumulated in row chunks (no float64 copy of ``x``)."""
    if x.shape[0] < 2:
        raise ValueError(
            f"Expected argument `{name}` to hold at least 2 samples for a covariance, but got {x.shape[0]}"
        )
    mu = mean64(x)
    return mu, gram64(x, centre=mu) / (x.shape[0] - 1)


def frechet_distance_from_moments(mu_r: Tensor, cov_r: Tensor, mu_f: Tensor, cov_f: Tensor) -> Tensor:
    r"""``||mu_r - mu_f||^2 + Tr(S_r + S_f - 2 (S_r S_f)^{1/2})`` in float64.

    The trace of the matrix square root is the sum of square roots of the eigenvalues of the
    symmetric PSD matrix ``S_r^{1/2} S_f S_r^{1/2}`` (same spectrum as ``S_r S_f``), which
    avoids the complex-valued ``sqrtm`` of a non-symmetric product.
    """
    ev, vec = torch.linalg.eigh(cov_r)
    root_r = (vec * ev.clamp(min=0).sqrt()) @ vec.T
    inner = root_r @ cov_f @ root_r
    tr_sqrt = torch.linalg.eigvalsh((inner + inner.T) / 2).clamp(min=0).sqrt().sum()
    diff = mu_r - mu_f
    return diff.dot(diff) + torch.trace(cov_r) + torch.trace(cov_f) - 2 * tr_sqrt


def frechet_distance(real: Any, fake: Any) -> Tensor:
    r"""Fréchet distance of Gaussians fitted to ``real`` and ``fake`` features.

    .. math::
        \lVert \mu_r - \mu_f \rVert^2 + \mathrm{Tr}\big(\Sigma_r + \Sigma_f - 2(\Sigma_r\Sigma_f)^{1/2}\big)

    One number for fidelity and diversity together: two models failing in opposite ways can
    share it (the two Gaussians of the course note "Precision and recall for generative
    models", ``N(0, 0.3^2 I)`` and ``N(0, 1.7^2 I)`` against ``N(0, I)`` in 2-D, both 0.98).
    Use it next to precision/recall, not instead.

    Args:
        real: ``[N, D]`` real features, ``N >= 2``.
        fake: ``[M, D]`` generated features, ``M >= 2``.

    Returns:
        0-dim float64 tensor.

    Example:
        >>> import torch
        >>> real = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0], [2.0, 2.0]])
        >>> round(float(frechet_distance(real, real + 1.0)), 6)
        2.0
    """
    real = as_features(real, "real")
    fake = as_features(fake, "fake")
    check_pair(real, fake)
    return frechet_distance_from_moments(*_mean_cov(real, "real"), *_mean_cov(fake, "fake"))
