"""PRD: precision and recall for distributions (Sajjadi et al., NeurIPS 2018).

Reference: M. S. M. Sajjadi, O. Bachem, M. Lucic, O. Bousquet, S. Gelly, "Assessing Generative
Models via Precision and Recall", NeurIPS 2018; code ``msmsajjadi/precision-recall-distributions``
(``prd_score.py``). P is the histogram of the **real** samples over clusters, Q the one of the
**fake** (generated) samples; precision ``alpha`` is about the fake samples, recall ``beta``
about the real ones. The reference code takes ``(eval_dist, ref_dist)`` = (fake, real)
positionally, and its README calls it in the opposite order, which swaps the two curves; here
both sets are keyword-named ``real`` and ``fake``.
"""

from __future__ import annotations

import math
from typing import Any, Tuple, Union

import torch
from torch import Tensor

from lightning_prd.functional.engine import kmeans
from lightning_prd.functional.engine.devices import to_compute_device
from lightning_prd.functional.engine.inputs import check_int, check_positive_int, check_real, check_seed
from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.sets import FeatureSets

_SUM_TOL = 1e-5  # how far from 1 a histogram's sum may be (rounding of float32 inputs)
_CHUNK = 2**22  # elements of one [angles, bins] block in prd_from_histograms


def _histogram(hist: Any, name: str) -> Tensor:
    h = hist if isinstance(hist, Tensor) else torch.as_tensor(hist)
    if h.dtype == torch.bool or h.is_complex():
        raise TypeError(f"Expected argument `{name}` to hold real numbers, but got dtype {h.dtype}")
    h = to_compute_device(h).to(torch.float64)
    if h.ndim != 1 or h.numel() == 0:
        raise ValueError(f"Expected argument `{name}` to be a non-empty 1-D histogram, but got shape {tuple(h.shape)}")
    if not bool(torch.isfinite(h).all()) or bool((h < 0).any()):
        raise ValueError(f"Expected argument `{name}` to hold finite non-negative values, but got {h[:10].tolist()}")
    total = float(h.sum())
    if abs(total - 1.0) > _SUM_TOL:
        raise ValueError(
            f"Expected argument `{name}` to be a probability vector summing to 1 (within {_SUM_TOL}), "
            f"but it sums to {total:.6g}; divide counts by their total first"
        )
    return h / total


def _check_num_angles(num_angles: Any) -> int:
    return check_int(num_angles, "num_angles", minimum=3, maximum=1_000_000)


def _check_epsilon(epsilon: Any) -> float:
    return check_real(epsilon, "epsilon", low=0.0, high=0.1, low_open=True, high_open=True)


@score_precision()
def prd_from_histograms(
    real_hist: Any, fake_hist: Any, *, num_angles: int = 1001, epsilon: float = 1e-10
) -> Tuple[Tensor, Tensor]:
    r"""PRD curve of two histograms over the same bins.

    .. math::
        \alpha(\lambda) = \sum_\omega \min\big(\lambda P(\omega), Q(\omega)\big), \qquad
        \beta(\lambda) = \frac{\alpha(\lambda)}{\lambda}, \qquad
        \lambda = \tan\theta,\ \theta \in \mathrm{linspace}(\varepsilon, \tfrac\pi2 - \varepsilon,
        \text{num\_angles}),

    with ``P = real_hist`` and ``Q = fake_hist``; precision is ``alpha``, recall ``beta``
    (Sajjadi et al. 2018, ``compute_prd`` in the reference code, whose ``(eval_dist,
    ref_dist)`` are our ``(fake_hist, real_hist)``). With an odd ``num_angles`` the middle
    index ``(num_angles - 1) // 2`` is ``lambda = 1``. Computed in float64; values above 1.001
    would be a bug and raise, smaller excesses from rounding are clipped to [0, 1].

    Args:
        real_hist: ``[B]`` probability vector of the real samples over ``B`` bins.
        fake_hist: ``[B]`` probability vector of the generated samples over the same bins.
        num_angles: number of points on the curve, an integer in ``[3, 1e6]``.
        epsilon: angles start at ``epsilon`` and stop at ``pi/2 - epsilon``; ``0 < epsilon < 0.1``.

    Histograms must be non-negative and sum to 1 within ``1e-5`` (counts are rejected rather
    than silently normalised); they are then divided by their float64 sum.

    Returns:
        ``(precision, recall)``, two float64 tensors of shape ``[num_angles]`` on the
        histograms' device.

    Example:
        The collapsed model of the course note's PRD example: data split over two clusters, model in one only.

        >>> precision, recall = prd_from_histograms([0.5, 0.5], [1.0, 0.0], num_angles=11)
        >>> float(precision.max()), float(recall.max())
        (1.0, 0.5)
        >>> round(float(precision[5]), 4), round(float(recall[5]), 4)  # lambda = 1
        (0.5, 0.5)
    """
    real_h, fake_h = _histogram(real_hist, "real_hist"), _histogram(fake_hist, "fake_hist")
    if real_h.shape != fake_h.shape:
        raise ValueError(
            "Expected `real_hist` and `fake_hist` to have the same number of bins, "
            f"but got {real_h.numel()} and {fake_h.numel()}"
        )
    num_angles, epsilon = _check_num_angles(num_angles), _check_epsilon(epsilon)
    fake_h = fake_h.to(real_h.device)
    angles = torch.linspace(epsilon, math.pi / 2 - epsilon, num_angles, dtype=torch.float64, device=real_h.device)
    slopes = torch.tan(angles)
    step = max(1, _CHUNK // real_h.numel())
    precision = torch.cat([torch.minimum(s.unsqueeze(1) * real_h, fake_h).sum(1) for s in slopes.split(step)])
    recall = precision / slopes
    if bool((precision > 1.001).any()) or bool((recall > 1.001).any()):
        raise RuntimeError("PRD values above 1.001: the histograms were not probability vectors")
    return precision.clamp(0, 1), recall.clamp(0, 1)


def _check_curve(x: Any, name: str) -> Tensor:
    t = to_compute_device(torch.as_tensor(x)).to(torch.float64)
    if t.numel() == 0:
        raise ValueError(f"Expected argument `{name}` to be a non-empty curve with values in [0, 1], but it is empty")
    if not bool(torch.isfinite(t).all()) or bool((t < 0).any()) or bool((t > 1).any()):
        bad = t[~(torch.isfinite(t) & (t >= 0) & (t <= 1))]
        raise ValueError(
            f"Expected argument `{name}` to be a curve with values in [0, 1], "
            f"but {bad.numel()} values are not, e.g. {float(bad[0])}"
        )
    return t


@score_precision()
def prd_f_beta(precision: Any, recall: Any, *, beta: float = 8) -> Tuple[Tensor, Tensor]:
    r"""Summaries of a PRD curve: the largest :math:`F_\beta` and :math:`F_{1/\beta}` along it.

    .. math::
        F_b(\alpha, \beta) = \frac{(1 + b^2)\,\alpha\beta}{b^2\alpha + \beta + 10^{-10}}

    (the ``1e-10`` as in the reference ``_prd_to_f_beta``). :math:`F_8` weighs recall and
    :math:`F_{1/8}` precision (Sajjadi et al. 2018, ``prd_to_max_f_beta_pair``): a model that
    covers half of the data perfectly has :math:`F_8 \approx 0.504`, :math:`F_{1/8} \approx 0.985`.

    Args:
        precision: curve of precision values in [0, 1].
        recall: curve of recall values in [0, 1], same shape as ``precision``.
        beta: ``b > 0``; 8 in the paper.

    Returns:
        ``(f_beta, f_inv_beta)``: 0-dim float64 tensors, max :math:`F_b` and max :math:`F_{1/b}`.

    Example:
        >>> precision, recall = prd_from_histograms([0.5, 0.5], [1.0, 0.0])
        >>> f_8, f_inv_8 = prd_f_beta(precision, recall, beta=8)
        >>> round(float(f_8), 4), round(float(f_inv_8), 4)
        (0.5039, 0.9848)
    """
    beta = check_beta(beta)
    p, r = _check_curve(precision, "precision"), _check_curve(recall, "recall")
    if p.shape != r.shape:
        raise ValueError(
            f"Expected `precision` and `recall` to have the same shape, but got {tuple(p.shape)} and {tuple(r.shape)}"
        )
    r = r.to(p.device)

    def f_max(b: float) -> Tensor:
        return ((1 + b**2) * p * r / (b**2 * p + r + 1e-10)).max()

    return f_max(float(beta)), f_max(1.0 / beta)


def _balance(real: Tensor, fake: Tensor, enforce_balance: Union[bool, str], seed: int) -> Tuple[Tensor, Tensor]:
    n_real, n_fake = real.shape[0], fake.shape[0]
    if n_real == n_fake or enforce_balance is False:
        return real, fake
    if enforce_balance is True:
        raise ValueError(
            f"Expected `real` and `fake` to hold the same number of samples (unequal sets bias the clustering), "
            f"but got {n_real} real and {n_fake} fake; pass `enforce_balance='subsample'` to subsample the larger "
            f"set, or `enforce_balance=False` to cluster them as they are"
        )
    gen = torch.Generator().manual_seed(seed)
    n = min(n_real, n_fake)
    if n_real > n:
        real = real[torch.randperm(n_real, generator=gen)[:n].sort().values.to(real.device)]
    else:
        fake = fake[torch.randperm(n_fake, generator=gen)[:n].sort().values.to(fake.device)]
    return real, fake


def check_beta(beta: Any) -> float:
    """``beta`` of an F-score: a positive finite number."""
    return check_real(beta, "beta", low=0.0, low_open=True)


def check_prd_options(
    num_clusters: Any, num_angles: Any, num_runs: Any, seed: Any, enforce_balance: Any
) -> Tuple[int, int, int, int, Union[bool, str]]:
    """Validate the options shared by :func:`prd_curve` and the ``PRDCurve`` metric; return them as Python ints."""
    if not (isinstance(enforce_balance, bool) or (isinstance(enforce_balance, str) and enforce_balance == "subsample")):
        raise ValueError(
            f"Expected argument `enforce_balance` to be True, False or 'subsample', but got {enforce_balance!r}"
        )
    return (
        check_positive_int(num_clusters, "num_clusters"),
        _check_num_angles(num_angles),
        check_positive_int(num_runs, "num_runs", maximum=10_000),
        check_seed(seed),
        enforce_balance,
    )


@score_precision()
def prd_curve(
    real: Any,
    fake: Any,
    *,
    num_clusters: int = 20,
    num_angles: int = 1001,
    num_runs: int = 10,
    seed: int = 0,
    enforce_balance: Union[bool, str] = True,
) -> Tuple[Tensor, Tensor]:
    r"""PRD curve of generated features ``fake`` against real features ``real``.

    The union of both sets is clustered with k-means into ``num_clusters`` clusters; the real
    and the generated labels give the histograms P and Q, and :func:`prd_from_histograms`
    gives the curve. This is repeated ``num_runs`` times with different clusterings and the
    **curves** (not the histograms) are averaged, as in Sajjadi et al. (2018),
    ``compute_prd_from_embedding``.

    Differences from the reference code: k-means runs in torch on the features' device and
    is seeded (per run: 10 k-means++ seedings compared on a 4,096-point subsample, then Lloyd
    to scikit-learn's tolerance on all points; the runs advance together), where the
    reference uses unseeded scikit-learn ``MiniBatchKMeans(n_init=10)`` and so changes from
    call to call; clustering runs in float32 (float64 if an input is float64 or the features'
    range leaves float32's, see ``compute_dtype``), the curves in float64. Results are
    reproducible for a seed, not identical to the reference's.

    Args:
        real: ``[N, D]`` real features (the reference distribution P).
        fake: ``[M, D]`` generated features (the model Q).
        num_clusters: number of k-means clusters (histogram bins), at most ``N + M``.
        num_angles: points on the curve, an integer in ``[3, 1e6]``.
        num_runs: clusterings whose curves are averaged.
        seed: seeds the clusterings (one generator for all runs, each run drawing its own
            seedings) and the ``'subsample'`` balancing.
        enforce_balance: unequal ``N`` and ``M`` bias the clustering, so ``True`` raises on
            them; ``'subsample'`` draws a seeded random subset of the larger set, of the
            smaller set's size; ``False`` clusters the sets as they are.

    Returns:
        ``(precision, recall)``: float64 tensors of shape ``[num_angles]``.

    Example:
        Two far-apart groups of real samples; the model only produces the first one.

        >>> import torch
        >>> real = torch.cat([torch.zeros(50, 8), torch.full((50, 8), 10.0)])
        >>> fake = torch.zeros(100, 8) + 0.01 * torch.randn(100, 8, generator=torch.Generator().manual_seed(0))
        >>> precision, recall = prd_curve(real, fake, num_clusters=2, num_runs=2)
        >>> precision.shape, round(float(precision.max()), 4), round(float(recall.max()), 4)
        (torch.Size([1001]), 1.0, 0.5)
        >>> f_8, f_inv_8 = prd_f_beta(precision, recall)
        >>> round(float(f_8), 3), round(float(f_inv_8), 3)
        (0.504, 0.985)
    """
    return prd_curve_of(
        FeatureSets.check(real, fake),
        num_clusters=num_clusters,
        num_angles=num_angles,
        num_runs=num_runs,
        seed=seed,
        enforce_balance=enforce_balance,
    )


def prd_curve_of(
    sets: FeatureSets,
    *,
    num_clusters: int = 20,
    num_angles: int = 1001,
    num_runs: int = 10,
    seed: int = 0,
    enforce_balance: Union[bool, str] = True,
) -> Tuple[Tensor, Tensor]:
    """The PRD curve of checked sets (see :func:`prd_curve`). The dtype of the clustering is the tile
    dtype of the two sets as given (float64 when their range leaves float32's), also when the
    larger set is subsampled."""
    num_clusters, num_angles, num_runs, seed, enforce_balance = check_prd_options(
        num_clusters, num_angles, num_runs, seed, enforce_balance
    )
    dtype = sets.compute_dtype(None)  # float64 for features outside float32's range
    real, fake = _balance(sets.real, sets.fake, enforce_balance, seed)
    n_real, total = real.shape[0], real.shape[0] + fake.shape[0]
    if num_clusters > total:
        raise ValueError(
            f"Expected argument `num_clusters` to be at most the number of samples ({total}), but got {num_clusters}"
        )
    data = kmeans.prepare(torch.cat([real.to(dtype), fake.to(dtype)]), inplace=True)
    labels = kmeans.fit(data, num_clusters, seed=seed, num_runs=num_runs).labels  # [num_runs, N + M]
    precision = torch.zeros(num_angles, dtype=torch.float64, device=real.device)
    recall = torch.zeros_like(precision)
    for run_labels in labels:
        real_hist = torch.bincount(run_labels[:n_real], minlength=num_clusters).to(torch.float64) / n_real
        fake_hist = torch.bincount(run_labels[n_real:], minlength=num_clusters).to(torch.float64) / (total - n_real)
        p, r = prd_from_histograms(real_hist, fake_hist, num_angles=num_angles)
        precision += p
        recall += r
    return precision / num_runs, recall / num_runs
