"""Fréchet distance between Gaussians fitted to two feature sets (the FID formula).

Reference: M. Heusel et al., "GANs Trained by a Two Time-Scale Update Rule Converge to a
Local Nash Equilibrium", NeurIPS 2017. Computed in float64 from features; covariances use the
unbiased ``1 / (n - 1)`` normalisation, as ``numpy.cov`` and torchmetrics' FID do. Features of
extreme range (beyond ``2^±100``) are scaled by an exact power of two before their moments are
formed, so any finite features whose distance fits float64 give it; the rest raise ``ValueError``.

**Covariances given as numbers** (a statistics file, :func:`check_statistics`,
:func:`frechet_distance_from_moments`) must be covariances up to rounding
(:func:`~lightning_prd.functional.engine.stats.covariance_defect`):
symmetric within ``COVARIANCE_TOLERANCE`` (1e-6) of their largest entry, and no eigenvalue below
``-COVARIANCE_TOLERANCE`` times their trace (float32 rounding of a stored or computed covariance moves its
eigenvalues by about 1e-9 of the trace); anything else raises ``ValueError``. Within that tolerance the
negative eigenvalues of ``Σ_r`` are taken as 0. A result below 0 is reported as 0 only within the rounding of
the formula, ``D (√ε (Tr Σ_r + Tr Σ_f) + 1e-6 Tr Σ_f)`` (ε: float64's machine epsilon; rank-deficient equal
covariances come out near ``-1e-7 (Tr Σ_r + Tr Σ_f)``); below that it raises ``ValueError``: a clamped
defect is never a score.
"""

from __future__ import annotations

from typing import Any, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.engine.devices import to_compute_device
from lightning_prd.functional.engine.inputs import value_range
from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.functional.engine.stats import COVARIANCE_TOLERANCE, covariance_defect, gram64, mean64, unit_scale

_SQRT_EPS = float(torch.finfo(torch.float64).eps) ** 0.5


def _mean_cov(x: Tensor, name: str, spread: float) -> Tuple[Tensor, Tensor, float]:
    """Float64 mean ``mu``, the unbiased covariance of ``s x`` and ``s``, accumulated in row chunks
    (no float64 copy of ``x``). ``s`` is a power of two (exact) that brings the features' range
    near 1 when it is extreme (:func:`~lightning_prd.functional.engine.stats.unit_scale`), so the
    covariance neither overflows nor underflows; 1 for ordinary features. ``spread``: the set's
    range ``R`` (:meth:`FeatureSets.spread_of`)."""
    if x.shape[0] < 2:
        raise ValueError(
            f"Expected argument `{name}` to hold at least 2 samples for a covariance, but got {x.shape[0]}"
        )
    mu = mean64(x)
    if not bool(torch.isfinite(mu).all()):  # values near float64's maximum: their sum overflows
        raise ValueError(
            f"Expected argument `{name}` to have a mean within float64's range, but its values reach "
            f"{float(x.abs().max()):.3g}; multiply both sets by one common factor c (the distance scales by c^2)"
        )
    if spread == 0:  # identical rows: the covariance is 0 (the rounded mean would leave ulps behind)
        return mu, torch.zeros(x.shape[1], x.shape[1], dtype=torch.float64, device=x.device), 1.0
    scale = unit_scale(spread)
    return mu, gram64(x, centre=mu, scale=scale) / (x.shape[0] - 1), scale


def frechet_distance_from_moments(
    mu_r: Tensor, cov_r: Tensor, mu_f: Tensor, cov_f: Tensor, scale_r: float = 1.0, scale_f: float = 1.0
) -> Tensor:
    r"""``||mu_r - mu_f||^2 + Tr(S_r + S_f - 2 (S_r S_f)^{1/2})`` in float64.

    ``cov_r`` and ``cov_f`` are the covariances of the features multiplied by ``scale_r`` and
    ``scale_f`` (``S = cov / scale^2``; each term is unscaled separately, so the two sets may
    differ in scale). The trace of the matrix square root is the sum of square roots of the
    eigenvalues of the symmetric PSD matrix ``S_r^{1/2} S_f S_r^{1/2}`` (same spectrum as
    ``S_r S_f``), which avoids the complex-valued ``sqrtm`` of a non-symmetric product.

    Raises:
        ValueError: ``cov_r`` or ``cov_f`` is no covariance beyond rounding
            (:func:`~lightning_prd.functional.engine.stats.covariance_defect`), or
            the result is below 0 beyond the rounding of the formula (module docstring; within it, 0).
    """
    for cov, name in ((cov_r, "cov_r"), (cov_f, "cov_f")):
        defect = covariance_defect(cov)
        if defect is not None:
            raise ValueError(f"Expected argument `{name}` to be a covariance matrix, but it {defect}")
    return _distance(mu_r, cov_r, mu_f, cov_f, scale_r, scale_f)


def _distance(mu_r: Tensor, cov_r: Tensor, mu_f: Tensor, cov_f: Tensor, scale_r: float, scale_f: float) -> Tensor:
    """:func:`frechet_distance_from_moments` of covariances known to be ones up to rounding (formed from features,
    or a statistics file's, checked when read), so they are not checked again on every evaluation."""
    ev, vec = torch.linalg.eigh((cov_r + cov_r.T) / 2)
    ev = ev.clamp(min=0)  # negative eigenvalues within the rounding tolerance are 0
    root_r = (vec * ev.sqrt()) @ vec.T
    inner = root_r @ cov_f @ root_r
    tr_sqrt = torch.linalg.eigvalsh((inner + inner.T) / 2).clamp(min=0).sqrt().sum()
    diff = mu_r - mu_f
    unit = unit_scale(float(diff.abs().max()))  # |diff|^2 without overflow or underflow
    mean_term = (diff * unit).dot(diff * unit) / unit / unit
    trace_r = ev.sum() / scale_r / scale_r
    trace_f = torch.trace(cov_f) / scale_f / scale_f
    total = mean_term + trace_r + trace_f - 2 * (tr_sqrt / scale_r / scale_f)
    if not bool(torch.isfinite(total)):
        variance = max(float(cov.diagonal().max()) / s / s for cov, s in ((cov_r, scale_r), (cov_f, scale_f)))
        raise ValueError(
            "Expected features whose Fréchet distance lies within float64's range, but the means differ by "
            f"{float(diff.abs().max()):.3g} and the variances are up to {variance:.3g}; "
            "multiply both sets by one common factor c (the distance scales by c^2)"
        )
    if float(total) < 0:
        dim = cov_r.shape[0]
        slack = dim * (_SQRT_EPS * float(trace_r + trace_f) + COVARIANCE_TOLERANCE * float(trace_f.abs()))
        if float(total) < -slack:
            raise ValueError(
                f"Expected a Fréchet distance of at least 0 up to rounding ({-slack:.3g}), but the formula gives "
                f"{float(total):.3g}: the covariances are no pair of covariance matrices"
            )
    return total.clamp(min=0)


@score_precision()
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
        0-dim float64 tensor; a value below 0 within the formula's rounding (module docstring) is 0.

    Raises:
        ValueError: when a mean or the distance itself lies beyond float64's range. Features of
            any other finite scale are fine: each set's covariance is formed on its features
            scaled by an exact power of two.

    Example:
        >>> import torch
        >>> real = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0], [2.0, 2.0]])
        >>> round(float(frechet_distance(real, real + 1.0)), 6)
        2.0
    """
    return frechet_of(FeatureSets.check(real, fake))


def frechet_of(sets: FeatureSets) -> Tensor:
    """The Fréchet distance of checked sets (see :func:`frechet_distance`)."""
    mu_r, cov_r, scale_r = _mean_cov(sets.real, "real", sets.spread_of("real"))
    mu_f, cov_f, scale_f = _mean_cov(sets.fake, "fake", sets.spread_of("fake"))
    return _distance(mu_r, cov_r, mu_f, cov_f, scale_r, scale_f)


def check_statistics(mean: Any, cov: Any, name: str = "real") -> Tuple[Tensor, Tensor]:
    """A set's float64 mean ``[D]`` and covariance ``[D, D]`` (finite, a covariance up to rounding:
    :func:`covariance_defect`), as a statistics file holds them, on
    :func:`~lightning_prd.functional.engine.devices.compute_device` of their device; errors name the set ``name``."""
    mu = to_compute_device(torch.as_tensor(mean).detach()).to(torch.float64)
    sigma = to_compute_device(torch.as_tensor(cov).detach()).to(torch.float64)
    if mu.ndim != 1 or mu.shape[0] == 0 or sigma.shape != (mu.shape[0], mu.shape[0]):
        raise ValueError(
            f"Expected the statistics of `{name}` to be a mean [D] and a covariance [D, D], but got shapes "
            f"{tuple(mu.shape)} and {tuple(sigma.shape)}"
        )
    if not (bool(torch.isfinite(mu).all()) and bool(torch.isfinite(sigma).all())):
        raise ValueError(f"Expected the statistics of `{name}` to be finite, but they hold NaN or Inf")
    defect = covariance_defect(sigma)
    if defect is not None:
        raise ValueError(f"Expected the covariance of `{name}` to be a covariance matrix, but it {defect}")
    return mu, (sigma + sigma.T) / 2


def frechet_to_statistics(mean: Tensor, cov: Tensor, fake: Tensor, source: str = "") -> Tensor:
    """The Fréchet distance between a real set given by its float64 ``mean`` and ``cov`` (as a statistics file
    holds them, e.g. pytorch-fid's ``mu``/``sigma``: :func:`check_statistics`) and checked generated features
    ``fake`` ``[M, D]`` (their covariance unbiased, ``M - 1``, as pytorch-fid and torch-fidelity compute it).
    ``source``: where the statistics came from (e.g. ``"ref.npz (fid-stats)"``), named in a width error.

    Example:
        >>> import torch
        >>> fake = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0], [2.0, 2.0]])
        >>> real = fake + 1.0
        >>> mean, cov = real.double().mean(0), torch.cov(real.double().T)
        >>> round(float(frechet_to_statistics(mean, cov, fake)), 6)  # = frechet_distance(real, fake)
        2.0
    """
    if fake.shape[1] != mean.shape[0]:
        raise ValueError(
            f"Expected the generated features to have the {mean.shape[0]} features of the real statistics, "
            f"but got {fake.shape[1]}" + (f" (the real set is given as {source})" if source else "")
        )
    mu_f, cov_f, scale_f = _mean_cov(fake, "fake", value_range(fake))
    mean, cov = mean.to(fake.device), cov.to(fake.device)
    return _distance(mean, cov, mu_f, cov_f, 1.0, scale_f)
