r"""Clipped density and clipped coverage (Salvy et al., ICLR 2026).

Reference: N. Salvy, H. Talbot, B. Thirion, "Enhanced Generative Model Evaluation with Clipped
Density and Coverage", ICLR 2026 (code: ``nicolassalvy/ClippedDensityCoverage``,
``ClippedDensityCoverage/metrics/Clipped_Density_Coverage.py``). Density and coverage made
bounded and robust to outliers: no sample counts for more than ``k`` balls, no real ball is
larger than the median one (clipped density), and each score is calibrated so that it reads as
the equivalent share of good generated samples.

Convention. The official code's definitions, ``k = 5``; the calibration of clipped coverage
as there (``_f_coverage`` and ``_g``: the expected value is 0 below ``k`` generated samples
and the score is a count over ``M + 1`` sample sizes), computed in ``O(M k)`` instead of
``O(M^2)``. Clipped density's balls are closed (``d <= r``), as in the official code: its
normaliser counts each real ball's own ``k``-th neighbour, which lies on the radius, so open
balls would change it on any data. Clipped coverage's balls follow ``ball``: closed by default
(the package's convention), ``ball="open"`` for the official ``d < r``; the two differ only when
a generated sample lies exactly on a radius, and the cap at ``k`` absorbs the usual case (a
copy of the real set scores the same). The balls' members are sets: every sample within the
radius counts (the official normaliser takes the ``k`` listed neighbours, which leaves out
samples tied with the ``k``-th). ``NND_k`` excludes the point itself, duplicates count.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional import knn
from lightning_prd.functional.engine.inputs import check_ball, check_positive_int
from lightning_prd.functional.engine.one_pass import PassResult, run_pass
from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.functional.knn.clipped import ClippedBalls, real_ball_counts


def check_clipped_sizes(num_real: int, num_fake: int, k: int, k_name: str = "k") -> None:
    """The real radii need ``k + 1`` real samples, the calibration ``k`` generated ones."""
    if num_real < k + 1:
        raise ValueError(
            f"Expected argument `real` to hold at least {k_name} + 1 = {k + 1} samples for clipped density and "
            f"coverage's k-NN radii, but got {num_real}"
        )
    if num_fake < k:
        raise ValueError(
            f"Expected argument `fake` to hold at least {k_name} = {k} samples for clipped coverage's calibration, "
            f"but got {num_fake}"
        )


def pass_options(k: int, num_real: int) -> Tuple[list, list]:
    """``(member_ks, real_ks)`` the pass needs: the ``NND_k`` balls, and the real radii and
    neighbours ``1 .. k + 1`` (the last only where the set has a ``(k + 1)``-th neighbour)."""
    return [k], list(range(1, min(k + 1, num_real - 1) + 1))


def coverage_calibration(k: int, num_real: int, num_fake: int) -> Tensor:
    r"""The official code's ``f`` (``_f_coverage``): for ``m = 0 .. M``, the expected unnormalised
    clipped coverage when ``m`` generated samples follow the real distribution, float64 ``[M + 1]``.

    The share of the real distribution inside a real ``NND_k`` ball is
    :math:`\mathrm{Beta}(k, N - k)`, so the number ``J`` of ``m`` good samples inside it is
    beta-binomial, and :math:`f(m) = E[\min(J, k)] / k = 1 - \sum_{j < k} (1 - j/k) P(J = j)`
    (``m >= k``; 0 below ``k``, as the official code sets it).
    """
    f64 = torch.float64
    m = torch.arange(k, num_fake + 1, dtype=f64)[:, None]
    j = torch.arange(k, dtype=f64)[None, :]
    n, kk = float(num_real), float(k)

    def lbeta(a: Tensor, b: Tensor) -> Tensor:
        return torch.lgamma(a) + torch.lgamma(b) - torch.lgamma(a + b)

    log_p = (
        torch.lgamma(m + 1)
        - torch.lgamma(j + 1)
        - torch.lgamma(m - j + 1)
        + lbeta(j + kk, m - j + n - kk)
        - lbeta(torch.tensor(kk, dtype=f64), torch.tensor(n - kk, dtype=f64))
    )
    tail = ((1.0 - j / kk) * log_p.exp()).sum(1)
    return torch.cat([torch.zeros(k, dtype=f64), 1.0 - tail])


def clipped_from_pass(res: PassResult, k: int, block_bytes: int = knn.DEFAULT_BLOCK_BYTES) -> Tuple[Tensor, Tensor]:
    """``(clipped_density, clipped_coverage)`` from a pass run with :func:`pass_options` and a
    :class:`~lightning_prd.functional.knn.clipped.ClippedBalls` of ``k``."""
    counts = res.cross.clipped
    if counts is None or counts.k != k:
        raise RuntimeError(f"the k-NN pass did not count clipped balls of k = {k}: pass `clipped` to run_pass")
    side, n, m = res.real, res.num_real, res.num_fake
    held = real_ball_counts(side.prepared, side.sq_radii, side.neighbours, k, counts.clip_sq, block_bytes)
    f64 = torch.float64
    fake_part = counts.fake_count.clamp(max=k).sum().to(f64) * n  # sum_j min(c_j, k) / (M k), times N M k
    real_part = held.clamp(max=k).sum().to(f64) * m  # sum_i min(c_i, k) / (N k), times N M k
    density = torch.where(real_part > 0, fake_part / real_part.clamp(min=1), (fake_part > 0).to(f64)).clamp(max=1)
    y = counts.real_count.clamp(max=k).sum().to(f64) / (n * k)
    f = coverage_calibration(k, n, m).to(y.device)
    coverage = (f < y).sum().to(f64) / (m + 1)
    return density.to(res.dtype), coverage.to(res.dtype)


@score_precision()
def clipped_density_coverage(
    real: Any,
    fake: Any,
    *,
    k: int = 5,
    ball: str = "closed",
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = knn.DEFAULT_BLOCK_BYTES,
) -> Tuple[Tensor, Tensor]:
    r"""Clipped density and clipped coverage of generated samples ``fake`` against real samples ``real``.

    With :math:`r_i = \mathrm{NND}_k(x_i)`, the clipped radii
    :math:`\tilde r_i = \min(r_i, \operatorname{median}_l r_l)` and closed balls
    :math:`B(c, r) = \{z : \lVert z - c \rVert \le r\}`:

    .. math::
        \text{clipped density} = \min\Big(1,\ \frac{\frac1M \sum_j \min\big(1, \frac1k
            \#\{i : y_j \in B(x_i, \tilde r_i)\}\big)}{\frac1N \sum_l \min\big(1, \frac1k
            \#\{i \ne l : x_l \in B(x_i, \tilde r_i)\}\big)}\Big),

    the share of generated samples' clipped ball counts relative to what the real samples
    themselves score; and, with
    :math:`c = \frac1N \sum_i \min\big(1, \frac1k \#\{j : y_j \in B(x_i, r_i)\}\big)`,

    .. math::
        \text{clipped coverage} = \frac{\#\{m \in \{0, \dots, M\} : f(m) < c\}}{M + 1},

    where :math:`f(m)` is the expected value of :math:`c` when ``m`` of the generated samples
    follow the real distribution (:func:`coverage_calibration`; beta-binomial counts). Both lie in
    ``[0, 1]`` and fall about linearly as good generated samples are replaced by bad ones: an
    outlier real sample cannot vouch for many generated samples (its ball is clipped), a
    generated sample piled into many balls counts once. See the module docstring for the
    convention (the official code's, with set membership of the balls).

    A copy of the real set scores 1 for both; a model that piles its samples into a few balls
    cannot raise clipped density above 1 (density can, without bound), and a real outlier's
    large ball does not vouch for the generated samples around it.

    Args:
        real: ``[N, D]`` real features (the reference distribution P), at least ``k + 1``.
        fake: ``[M, D]`` generated features (the model Q), at least ``k``.
        k: neighbourhood size (5 in the paper).
        ball: clipped coverage's balls, ``"closed"`` (``d <= r``) or ``"open"`` (``d < r``, the
            official code); clipped density's are closed either way.
        dtype: GEMM dtype, float32 by default (float64 if an input is float64).
        block_bytes: memory budget of one distance tile.

    Returns:
        ``(clipped_density, clipped_coverage)`` as 0-dim tensors.

    Example:
        >>> import torch
        >>> real = torch.arange(10.0)[:, None]
        >>> fake = torch.tensor([0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 50.0, 60.0])[:, None]  # two far away
        >>> cd, cc = clipped_density_coverage(real, fake, k=2)
        >>> round(float(cd), 4), round(float(cc), 4)
        (0.8889, 1.0)
    """
    k = check_positive_int(k, "k")
    ball = check_ball(ball)
    sets = FeatureSets.check(real, fake)
    check_clipped_sizes(sets.num_real, sets.num_fake, k)
    member_ks, real_ks = pass_options(k, sets.num_real)
    clipped = ClippedBalls(k, strict=ball == "open")
    res = run_pass(
        sets,
        PassRequest(member_ks=tuple(member_ks), real_ks=tuple(real_ks), clipped=clipped, ball=ball),
        dtype=dtype,
        block_bytes=block_bytes,
    )
    return clipped_from_pass(res, k, block_bytes)
