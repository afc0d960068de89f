r"""FD∞: the Fréchet distance extrapolated to infinitely many generated samples.

Reference: M. J. Chong, D. Forsyth, "Effectively Unbiased FID and Inception Score and where to find
them", CVPR 2020; the defaults and the procedure of dgm-eval's ``compute_FD_infinity``
(``layer6ai-labs/dgm-eval``, ``dgm_eval/metrics/fd.py``).

The Fréchet distance of ``N`` generated samples is biased upwards, and its bias is, to first order,
linear in ``1/N`` (Chong & Forsyth, eq. 4): :math:`\mathrm{FD}_N = \mathrm{FD}_\infty + k / N`. FD∞
evaluates :math:`\mathrm{FD}_N` at ``num_points`` sizes, fits that line by least squares in
:math:`1/N` and reads it off at :math:`1/N = 0`.

Conventions (dgm-eval's, unless stated):

* sizes ``linspace(min_size, max_size, num_points)`` truncated to integers, ``num_points = 15``,
  ``min_size = min(5000, max(M // 10, 2))``, ``max_size = M`` (the paper's 5,000 to 50,000 at
  ``M = 50,000``);
* for each size, a fresh subset of the generated set drawn without replacement; only the generated
  set is sub-sampled, the real statistics come from all ``N`` real samples (their own finite-sample
  bias is not removed, as in the paper and dgm-eval);
* ordinary least squares of :math:`\mathrm{FD}_N` on :math:`1/N` (scikit-learn's
  ``LinearRegression``), intercept returned unclamped: an extrapolation can fall slightly below 0
  when the two distributions are equal.
* Differences: the draws come from a CPU ``torch.Generator`` seeded with ``seed`` (dgm-eval's
  ``numpy.random.default_rng()`` is unseeded), subset ``i`` being
  ``torch.randperm(M, generator=g)[:sizes[i]]`` in order of increasing size; each
  :math:`\mathrm{FD}_N` is :func:`~lightning_prd.functional.frechet.frechet_distance`'s float64
  formula (eigenvalues of the symmetric :math:`\Sigma_r^{1/2}\Sigma_f\Sigma_r^{1/2}`, unbiased
  covariances), where dgm-eval takes ``scipy.linalg.sqrtm`` of the product; the square root of the
  real covariance is formed once for all sizes.

**KID needs no such extrapolation.** KID's MMD² estimate
(:func:`~lightning_prd.functional.kid.kernel_inception_distance`) is the unbiased U-statistic of
Bińkowski et al. (2018): its expected value is the population MMD² at every subset size, so the
line through :math:`\mathrm{KID}_N` against :math:`1/N` has slope 0 in expectation and its
intercept is KID itself, with more noise. Chong & Forsyth extrapolate FID and the Inception Score,
whose estimators are biased, and not KID.
"""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional

import torch
from torch import Tensor

from lightning_prd.functional.engine.inputs import check_int, check_seed
from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.functional.engine.stats import gram64, mean64, row_chunks, unit_scale

#: dgm-eval's number of sizes (``compute_FD_infinity(num_points=15)``)
NUM_POINTS = 15
#: dgm-eval's smallest size is ``min(MIN_SIZE_CAP, max(M // 10, 2))``
MIN_SIZE_CAP = 5000


class FrechetReference(NamedTuple):
    """The real side of FD∞, formed once: float64 mean ``[D]``, the symmetric square root ``[D, D]`` of
    ``scale² Σ_r`` (:math:`\\Sigma_r` the unbiased covariance) and ``Tr Σ_r``."""

    mean: Tensor
    root: Tensor
    trace: Tensor
    scale: float


def fd_infinity_sizes(
    num_fake: int, *, num_points: int = NUM_POINTS, min_size: Optional[int] = None, max_size: Optional[int] = None
) -> Tensor:
    """The ``[num_points]`` int64 sizes FD∞ evaluates (checked; see :func:`frechet_distance_infinity`).

    Example:
        >>> fd_infinity_sizes(10_000).tolist()[:4]
        [1000, 1642, 2285, 2928]
        >>> fd_infinity_sizes(100, num_points=3, min_size=20).tolist()
        [20, 60, 100]
    """
    num_points = check_int(num_points, "num_points", minimum=2)
    if max_size is None:
        max_size = num_fake
    max_size = check_int(max_size, "max_size", minimum=2)
    if max_size > num_fake:
        raise ValueError(
            f"Expected argument `max_size` to be at most the number of generated samples M = {num_fake}, "
            f"but got {max_size}"
        )
    if min_size is None:
        min_size = min(MIN_SIZE_CAP, max(num_fake // 10, 2), max_size)
    min_size = check_int(min_size, "min_size", minimum=2)
    if min_size >= max_size:
        raise ValueError(
            f"Expected argument `min_size` to be below `max_size` = {max_size} (the fit needs two sizes), "
            f"but got {min_size}"
        )
    grid = torch.linspace(float(min_size), float(max_size), num_points, dtype=torch.float64)
    return grid.to(torch.int64)  # truncation, as numpy's astype("int32")


def frechet_reference(real: Tensor, spread: float) -> FrechetReference:
    """The :class:`FrechetReference` of checked real features ``[N, D]`` (``N >= 2``) of range ``spread``
    (:meth:`FeatureSets.spread_of`). The features are scaled by an exact power of two first when their range is
    extreme (:func:`~lightning_prd.functional.engine.stats.unit_scale`), as the Fréchet distance does."""
    if real.shape[0] < 2:
        raise ValueError(
            f"Expected argument `real` to hold at least 2 samples for a covariance, but got {real.shape[0]}"
        )
    mu = mean64(real)
    scale = unit_scale(spread)
    cov = gram64(real, centre=mu, scale=scale) / (real.shape[0] - 1)
    ev, vec = torch.linalg.eigh(cov)
    root = (vec * ev.clamp(min=0).sqrt()) @ vec.T
    return FrechetReference(mu, (root + root.T) / 2, torch.trace(cov) / scale / scale, scale)


def _fd_of_subset(ref: FrechetReference, fake: Tensor, rotated: Tensor, idx: Tensor, scale_f: float) -> Tensor:
    """:math:`\\mathrm{FD}` between the reference and the generated rows ``idx``; ``rotated`` holds
    ``scale_f (y - c) R`` for every generated row (``R`` the reference's root, ``c`` a fixed centre)."""
    n = idx.shape[0]
    rows = fake[idx]
    mu_f = mean64(rows)
    z = rotated[idx]
    z = z - z.mean(0)
    # scale_r^2 scale_f^2 R_r Σ_f R_r = z^T z / (n - 1); z z^T has the same non-zero eigenvalues
    inner = (z @ z.T if n < z.shape[1] else z.T @ z) / (n - 1)
    tr_sqrt = torch.linalg.eigvalsh((inner + inner.T) / 2).clamp(min=0).sqrt().sum()
    cov_trace = sum(float(r.sub_(mu_f).mul_(scale_f).square_().sum()) for _, r in row_chunks(rows))
    cov_trace = cov_trace / (n - 1) / scale_f / scale_f
    diff = ref.mean - mu_f
    unit = unit_scale(float(diff.abs().max()))
    mean_term = (diff * unit).dot(diff * unit) / unit / unit
    return mean_term + ref.trace + cov_trace - 2 * tr_sqrt / ref.scale / scale_f


def frechet_infinity_from_reference(
    ref: FrechetReference, fake: Tensor, sizes: Tensor, *, seed: int, spread: float
) -> Dict[str, Tensor]:
    """FD∞ of checked generated features ``fake`` (range ``spread``) against a :class:`FrechetReference`, at
    checked ``sizes`` (:func:`fd_infinity_sizes`); the outputs of :func:`frechet_distance_infinity`."""
    scale_f = unit_scale(spread)
    centre = mean64(fake)
    rotated = torch.empty(fake.shape[0], fake.shape[1], dtype=torch.float64, device=fake.device)
    for s, rows in row_chunks(fake):
        rotated[s : s + rows.shape[0]] = rows.sub_(centre).mul_(scale_f) @ ref.root
    gen = torch.Generator().manual_seed(seed)
    values = torch.empty(sizes.shape[0], dtype=torch.float64, device=fake.device)
    for i, n in enumerate(sizes.tolist()):
        idx = torch.randperm(fake.shape[0], generator=gen)[:n].to(fake.device)
        values[i] = _fd_of_subset(ref, fake, rotated, idx, scale_f)
    if not bool(torch.isfinite(values).all()):
        raise ValueError(
            "Expected features whose Fréchet distance lies within float64's range; multiply both sets by one "
            "common factor c (the distance scales by c^2)"
        )
    x = 1.0 / sizes.to(device=fake.device, dtype=torch.float64)
    xc, yc = x - x.mean(), values - values.mean()
    slope = (xc * yc).sum() / (xc * xc).sum()
    intercept = values.mean() - slope * x.mean()
    return {
        "frechet_distance_infinity": intercept,
        "frechet_distance_infinity_slope": slope,
        "frechet_distance_infinity_sizes": sizes.to(fake.device),
        "frechet_distance_infinity_values": values,
    }


@score_precision()
def frechet_distance_infinity(
    real: Any,
    fake: Any,
    *,
    num_points: int = NUM_POINTS,
    min_size: Optional[int] = None,
    max_size: Optional[int] = None,
    seed: int = 0,
) -> Dict[str, Tensor]:
    r"""FD∞ (Chong & Forsyth, CVPR 2020): the Fréchet distance extrapolated to infinitely many generated samples.

    With :math:`\mathrm{FD}_{N_i}` the Fréchet distance between all real samples and a random subset of
    :math:`N_i` generated samples (:func:`~lightning_prd.functional.frechet.frechet_distance`'s formula),

    .. math::
        (\mathrm{FD}_\infty, k) = \arg\min_{a, b} \sum_i \big(\mathrm{FD}_{N_i} - a - b / N_i\big)^2,

    the intercept of the least-squares line in :math:`1/N` (the bias of :math:`\mathrm{FD}_N` is
    :math:`k/N` to first order). Sizes, draws and fit follow dgm-eval's ``compute_FD_infinity``
    (module docstring): ``num_points = 15`` sizes from ``min(5000, max(M // 10, 2))`` to ``M``,
    each a fresh subset without replacement, seeded here. Lower is better; use it to compare models
    evaluated on different numbers of samples. KID needs no such extrapolation: its estimator is
    already unbiased at every subset size (module docstring).

    Cost: one ``D x D`` eigendecomposition, a float64 copy of the generated set rotated by the real
    root (``M x D``), then per size one GEMM and one symmetric eigenvalue problem (of size
    ``min(N_i, D)``).

    Args:
        real: ``[N, D]`` real features (the reference P), ``N >= 2``; all of them form the real statistics.
        fake: ``[M, D]`` generated features (the model Q), ``M >= 3``.
        num_points: number of sizes of the fit, at least 2.
        min_size: smallest subset size (at least 2); None for dgm-eval's ``min(5000, max(M // 10, 2))``.
        max_size: largest subset size (at most ``M``); None for ``M``.
        seed: seed of the subset draws.

    Returns:
        dict of float64 tensors: ``frechet_distance_infinity`` (0-dim, the intercept, not clamped),
        ``frechet_distance_infinity_slope`` (0-dim, :math:`k`), ``frechet_distance_infinity_sizes``
        (``[num_points]`` int64) and ``frechet_distance_infinity_values`` (``[num_points]``,
        :math:`\mathrm{FD}_{N_i}`).

    Raises:
        ValueError: on sizes outside ``[2, M]``, ``min_size >= max_size``, or distances beyond float64's range.

    Example:
        >>> import torch
        >>> g = torch.Generator().manual_seed(0)
        >>> real, fake = torch.randn(4000, 8, generator=g), torch.randn(2000, 8, generator=g) + 0.5
        >>> out = frechet_distance_infinity(real, fake, num_points=5, seed=0)
        >>> out["frechet_distance_infinity_sizes"].tolist()
        [200, 650, 1100, 1550, 2000]
        >>> fd_inf, fd_m = float(out["frechet_distance_infinity"]), float(out["frechet_distance_infinity_values"][-1])
        >>> round(fd_inf, 2), round(fd_m, 2)  # FD∞ below FD_M = FD of all 2,000; the population value is 8 * 0.5**2 = 2
        (2.08, 2.13)
    """
    seed = check_seed(seed)
    sets = FeatureSets.check(real, fake)
    sizes = fd_infinity_sizes(sets.num_fake, num_points=num_points, min_size=min_size, max_size=max_size)
    ref = frechet_reference(sets.real, sets.spread_of("real"))
    return frechet_infinity_from_reference(ref, sets.fake, sizes, seed=seed, spread=sets.spread_of("fake"))


__all__ = [
    "FrechetReference",
    "fd_infinity_sizes",
    "frechet_distance_infinity",
    "frechet_infinity_from_reference",
    "frechet_reference",
]
