r"""Kernel Inception Distance (Bińkowski et al., ICLR 2018): unbiased MMD² with a polynomial kernel.

Reference: M. Bińkowski, D. J. Sutherland, M. Arbel, A. Gretton, "Demystifying MMD GANs",
ICLR 2018. The estimator and defaults are those of torchmetrics' ``KernelInceptionDistance``:
``subsets`` random subsets of ``subset_size`` real and ``subset_size`` generated samples,
each drawn without replacement by ``torch.randperm`` (real, then generated, per subset); the
unbiased MMD² of each pair of subsets with :math:`k(x, y) = (\gamma\, x^\top y + c)^d`; the mean
and the population standard deviation (``unbiased=False``) over the subsets. Two differences:
the draws come from a ``torch.Generator`` seeded with ``seed`` (on the CPU, so the same indices
on every device; torchmetrics uses the global generator, and ``torch.manual_seed(seed)`` before
its ``compute()`` gives the very same subsets), and every subset's MMD² is computed in float64
(torchmetrics computes in the features' dtype).
"""

from __future__ import annotations

import math
from typing import Any, List, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.engine.inputs import check_int, check_positive_int, check_real, check_seed
from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.functional.engine.stats import row_chunks, unit_scale
from lightning_prd.functional.knn.shard import Shard


def check_kid_options(
    subsets: Any, subset_size: Any, degree: Any, gamma: Any, coef: Any, seed: Any
) -> Tuple[int, int, int, Optional[float], float, int]:
    """Validated ``(subsets, subset_size, degree, gamma, coef, seed)``; bad values raise ``ValueError``."""
    subsets = check_positive_int(subsets, "subsets")
    subset_size = check_int(subset_size, "subset_size", minimum=2)
    degree = check_positive_int(degree, "degree")
    gamma = None if gamma is None else check_real(gamma, "gamma", low=0, low_open=True)
    coef = check_real(coef, "coef", low=0)
    return subsets, subset_size, degree, gamma, coef, check_seed(seed)


def check_kid_sizes(num_real: int, num_fake: int, subset_size: int) -> None:
    """Each set must hold at least ``subset_size`` samples (subsets are drawn without replacement)."""
    if min(num_real, num_fake) < subset_size:
        raise ValueError(
            f"Expected argument `subset_size` to be at most the size of each set (N = {num_real} real, "
            f"M = {num_fake} generated samples), but got {subset_size}; pass `subset_size={min(num_real, num_fake)}` "
            "or more samples"
        )


def _subset_indices(
    num_real: int, num_fake: int, subsets: int, subset_size: int, seed: int
) -> List[Tuple[Tensor, Tensor]]:
    """The (real, generated) CPU index tensors of each subset, drawn as torchmetrics draws them."""
    gen = torch.Generator().manual_seed(seed)
    draws = []
    for _ in range(subsets):
        real_idx = torch.randperm(num_real, generator=gen)[:subset_size]
        fake_idx = torch.randperm(num_fake, generator=gen)[:subset_size]
        draws.append((real_idx, fake_idx))
    return draws


def _kernel_sum(a: Tensor, b: Tensor, degree: int, gamma: float, coef: float, *, off_diagonal: bool) -> Tensor:
    """Sum of :math:`(\\gamma a_i^\\top b_j + c)^d` over all pairs (over ``i != j`` with ``off_diagonal``)."""
    kernel = (a @ b.T).mul_(gamma).add_(coef).pow_(degree)
    total = kernel.sum()
    return total - kernel.diagonal().sum() if off_diagonal else total


def poly_mmd2(
    real: Tensor, fake: Tensor, *, degree: int = 3, gamma: Optional[float] = None, coef: float = 1.0
) -> Tensor:
    r"""Unbiased MMD² of two sets of equal size ``m`` with the polynomial kernel, in float64.

    .. math::
        \frac{1}{m(m-1)}\sum_{i \ne j}\big(k(x_i, x_j) + k(y_i, y_j)\big) - \frac{2}{m^2}\sum_{i, j} k(x_i, y_j)

    with :math:`k(x, y) = (\gamma\, x^\top y + c)^d` and :math:`\gamma = 1/D` when ``gamma`` is None
    (Bińkowski et al. 2018, eq. 3 as in their code and torchmetrics' ``poly_mmd``).
    """
    m = real.shape[0]
    gamma = 1.0 / real.shape[1] if gamma is None else gamma
    x, y = real.to(torch.float64), fake.to(torch.float64)
    same = _kernel_sum(x, x, degree, gamma, coef, off_diagonal=True) + _kernel_sum(
        y, y, degree, gamma, coef, off_diagonal=True
    )
    cross = _kernel_sum(x, y, degree, gamma, coef, off_diagonal=False)
    return same / (m * (m - 1)) - 2 * cross / (m * m)


def _row_norms(x: Tensor) -> Tensor:
    """Float64 L2 row norms of ``x`` (inf where one overflows), in row chunks."""
    return torch.cat([rows.norm(dim=1) for _, rows in row_chunks(x)])


def check_kernel_range(
    real_norms: Tensor, fake_norms: Tensor, *, subset_size: int, degree: int, gamma: float, coef: float
) -> None:
    r"""Raise ``ValueError`` when a subset's kernel sums could overflow float64.

    Every kernel value is at most :math:`(\gamma B^2 + c)^d` in magnitude, with :math:`B` the
    largest row norm of the two sets (Cauchy-Schwarz; the diagonal of a set's own kernel
    reaches it), and each MMD² sums ``3 m^2`` of them. The same on every rank."""
    (largest, name) = max((float(real_norms.max()), "real"), (float(fake_norms.max()), "fake"))
    base = gamma * largest * largest + coef  # inf when it overflows
    log_bound = degree * math.log(base) if base > 0 else -math.inf
    if log_bound + math.log(3 * subset_size * subset_size) > math.log(torch.finfo(torch.float64).max):
        raise ValueError(
            f"Expected features whose polynomial kernel (gamma x.y + coef)^degree fits float64's range, but the "
            f"largest row norm of `{name}` is {largest:.3g} (gamma = {gamma:.3g}, coef = {coef:g}, "
            f"degree = {degree}), so the kernel reaches ~1e{log_bound / math.log(10):.0f}; scale the features "
            "down (KID, unlike the k-NN scores, depends on their scale)"
        )


def _pair_mean(a: Tensor, b: Tensor, terms: List[float]) -> float:
    """Mean over all pairs ``(i, j)`` of ``sum_p terms[p] (a_i b_j)^p``: separable, so
    ``sum_p terms[p] mean(a^p) mean(b^p)`` in ``O(len(a) + len(b))``."""
    return sum(t * float(a.pow(p).mean()) * float(b.pow(p).mean()) for p, t in enumerate(terms) if t)


def mmd_rounding(real_norms: Tensor, fake_norms: Tensor, *, degree: int, gamma: float, coef: float, dim: int) -> float:
    r"""A bound on the float64 rounding error of one subset's MMD² (row norms of its samples).

    With :math:`t = \gamma |x||y|`, a product :math:`x^\top y` is off by at most
    :math:`D \epsilon |x||y|`, which moves the kernel value by at most
    :math:`d (t + c)^{d-1} t D \epsilon`, and summing :math:`m^2` values adds at most
    :math:`2 \log_2(m) \epsilon` times their magnitudes :math:`(t + c)^d`. Both are polynomials
    in :math:`|x||y|`, so their means over the pairs follow from the power means of the norms.
    The MMD weighs the two same-set means by ``m / (m - 1)`` and the cross mean by 2."""
    eps, m = torch.finfo(torch.float64).eps, real_norms.shape[0]
    # coefficients of (t + c)^(d-1) t and of (t + c)^d as polynomials in |x||y| (t = gamma |x||y|)
    moved = [0.0] + [math.comb(degree - 1, k) * coef ** (degree - 1 - k) * gamma ** (k + 1) for k in range(degree)]
    size = [math.comb(degree, k) * coef ** (degree - k) * gamma**k for k in range(degree + 1)]
    moved = [degree * dim * eps * t for t in moved]
    size = [2 * math.log2(max(2, m)) * eps * t for t in size]
    terms = [u + v for u, v in zip(moved, size)]
    same = _pair_mean(real_norms, real_norms, terms) + _pair_mean(fake_norms, fake_norms, terms)
    return same * m / (m - 1) + 2 * _pair_mean(real_norms, fake_norms, terms)


#: the subsets' MMD² values must exceed their worst-case rounding bound this many times over (on
#: average). Below it not even their sign is guaranteed; the worst case (every product off by
#: ``D eps |x||y|`` in the same direction) is 3 or more orders above the errors seen in practice
RESOLUTION = 1.0


def check_resolution(values: Tensor, rounding: Tensor, sets: FeatureSets) -> None:
    """Raise ``ValueError`` when the subsets' MMD² values are not clearly above their rounding
    bounds (:func:`mmd_rounding`; features with a large common offset or scale, whose kernel
    values dwarf the differences the MMD is made of): mean ``|value|`` below
    :data:`RESOLUTION` times the mean bound. Unless every row of both sets is the same: then
    every kernel value is equal and the values are exactly 0 (tested only in that case)."""
    size, bound = float(values.abs().mean()), float(rounding.mean())
    if size < RESOLUTION * bound and sets.spread != 0:
        raise ValueError(
            f"Expected features whose KID float64 can resolve, but the subsets' MMD² values (mean |value| "
            f"{size:.3g}) are within {RESOLUTION:g}x of their rounding bound (mean {bound:.3g}): the polynomial "
            "kernel's values dwarf their differences (features with a large common offset, or a scale far from 1); "
            "KID depends on both, so compare features of ordinary range"
        )


def kid_summary(values: Tensor) -> Tuple[Tensor, Tensor]:
    """Mean and population standard deviation of the subsets' MMD² values, formed on values
    scaled by an exact power of two so that their squares cannot overflow."""
    scale = unit_scale(float(values.abs().max()))
    scaled = values * scale
    return scaled.mean() / scale, scaled.std(correction=0) / scale


def kid_scores(
    sets: FeatureSets,
    *,
    subsets: int,
    subset_size: int,
    degree: int,
    gamma: Optional[float],
    coef: float,
    seed: int,
    shard: Optional[Shard] = None,
) -> Tensor:
    """The ``[subsets]`` float64 MMD² values of the subsets on checked sets (sizes checked).

    With ``shard`` (every rank holding all features, after a metric's sync), rank ``r`` of ``W``
    computes the subsets ``s`` with ``s % W == r`` and the values are summed across the ranks
    (each value is one rank's, the others add 0): every rank gets the single-process values.
    """
    real, fake = sets.real, sets.fake
    check_kid_sizes(real.shape[0], fake.shape[0], subset_size)
    kernel_gamma = 1.0 / real.shape[1] if gamma is None else gamma  # (poly_mmd2's default)
    real_norms, fake_norms = _row_norms(real), _row_norms(fake)
    check_kernel_range(real_norms, fake_norms, subset_size=subset_size, degree=degree, gamma=kernel_gamma, coef=coef)
    draws = _subset_indices(real.shape[0], fake.shape[0], subsets, subset_size, seed)
    out = torch.zeros(2, subsets, dtype=torch.float64, device=real.device)  # values, rounding bounds
    for s, (ri, fi) in enumerate(draws):
        if shard is None or shard.owns(s):
            ri, fi = ri.to(real.device), fi.to(fake.device)
            out[0, s] = poly_mmd2(real[ri], fake[fi], degree=degree, gamma=gamma, coef=coef)
            out[1, s] = mmd_rounding(
                real_norms[ri], fake_norms[fi], degree=degree, gamma=kernel_gamma, coef=coef, dim=real.shape[1]
            )
    out = out if shard is None else shard.sum(out)
    check_resolution(out[0], out[1], sets)
    return out[0]


@score_precision()
def kernel_inception_distance(
    real: Any,
    fake: Any,
    *,
    subsets: int = 100,
    subset_size: int = 1000,
    degree: int = 3,
    gamma: Optional[float] = None,
    coef: float = 1.0,
    seed: int = 0,
) -> Tuple[Tensor, Tensor]:
    r"""Kernel Inception Distance: mean and spread of the unbiased MMD² over random subsets.

    For each of ``subsets`` draws, ``subset_size`` real samples :math:`x` and ``subset_size``
    generated samples :math:`y` are drawn without replacement and

    .. math::
        \mathrm{MMD}^2_u = \frac{1}{m(m-1)}\sum_{i \ne j}\big(k(x_i, x_j) + k(y_i, y_j)\big)
        - \frac{2}{m^2}\sum_{i, j} k(x_i, y_j), \qquad k(x, y) = (\gamma\, x^\top y + c)^d,

    with :math:`m` = ``subset_size`` and :math:`\gamma = 1/D` by default (Bińkowski et al.,
    "Demystifying MMD GANs", ICLR 2018). 0 when the two distributions are equal (in expectation:
    the estimator is unbiased, so a single value may be slightly negative); lower is better.
    Unlike FID it needs no Gaussian assumption and its estimate does not depend on the sample
    size on average. Same estimator and defaults as torchmetrics' ``KernelInceptionDistance``
    (whose ``kid_mean``, ``kid_std`` it equals on the same subsets: seed torch's global generator
    with ``seed`` before its ``compute()``); every MMD² is computed in float64.

    Args:
        real: ``[N, D]`` real features (the reference P), ``N >= subset_size``.
        fake: ``[M, D]`` generated features (the model Q), ``M >= subset_size``.
        subsets: number of subsets averaged.
        subset_size: samples of each set per subset (at least 2).
        degree: degree :math:`d` of the polynomial kernel.
        gamma: scale :math:`\gamma`; None for :math:`1/D`.
        coef: constant :math:`c` of the kernel (non-negative).
        seed: seed of the subset draws.

    Returns:
        ``(mean, std)`` 0-dim float64 tensors: the mean MMD² over subsets and its population
        standard deviation over subsets (not the standard error of the mean).

    Raises:
        ValueError: when the kernel values could overflow float64, or when the MMD² values are
            not clearly above float64's rounding of the kernel sums (:func:`mmd_rounding`;
            features with a large common offset, or a scale far from 1 with ``coef = 1``).

    Example:
        >>> import torch
        >>> g = torch.Generator().manual_seed(0)
        >>> real = torch.randn(200, 8, generator=g)
        >>> same = kernel_inception_distance(real, torch.randn(150, 8, generator=g), subsets=20, subset_size=100)
        >>> shifted = kernel_inception_distance(real, torch.randn(150, 8, generator=g) + 1, subsets=20, subset_size=100)
        >>> [round(float(v), 2) for v in same], [round(float(v), 2) for v in shifted]
        ([0.07, 0.05], [6.78, 0.56])
    """
    subsets, subset_size, degree, gamma, coef, seed = check_kid_options(subsets, subset_size, degree, gamma, coef, seed)
    values = kid_scores(
        FeatureSets.check(real, fake),
        subsets=subsets,
        subset_size=subset_size,
        degree=degree,
        gamma=gamma,
        coef=coef,
        seed=seed,
    )
    return kid_summary(values)
