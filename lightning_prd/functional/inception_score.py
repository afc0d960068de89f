r"""Inception Score (Salimans et al., NeurIPS 2016) of generated samples' class logits.

Reference: T. Salimans, I. Goodfellow, W. Zaremba, V. Cheung, A. Radford, X. Chen, "Improved
Techniques for Training GANs", NeurIPS 2016. The estimator, its splits, its shuffle and its defaults
are torch-fidelity's (``torch_fidelity.metric_isc.isc_features_to_metric``, v0.4.0): the rows are
permuted by ``numpy.random.RandomState(seed).permutation(N)`` (``seed=2020``, its ``rng_seed``),
split into ``splits`` consecutive parts ``[i N // splits, (i + 1) N // splits)``, and every part's
score is computed from a float64 softmax; the result is the mean and the population standard
deviation (``numpy.std``, ``ddof=0``) over the parts.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np
import torch
from torch import Tensor

from lightning_prd.functional.engine.devices import to_compute_device
from lightning_prd.functional.engine.inputs import as_features, check_int, check_positive_int
from lightning_prd.functional.engine.precision import score_precision

#: torch-fidelity's defaults: ``isc_splits``, ``samples_shuffle``, ``rng_seed``
SPLITS = 10
SHUFFLE = True
SEED = 2020
#: the largest seed ``numpy.random.RandomState`` accepts
MAX_NUMPY_SEED = 2**32 - 1


def check_inception_score_options(splits: Any, shuffle: Any, seed: Any) -> Tuple[int, bool, int]:
    """Validated ``(splits, shuffle, seed)``; bad values raise ``ValueError``."""
    splits = check_positive_int(splits, "splits")
    if not isinstance(shuffle, (bool, np.bool_)):
        raise ValueError(f"Expected argument `shuffle` to be a bool, but got {shuffle!r}")
    seed = check_int(seed, "seed", minimum=0, maximum=MAX_NUMPY_SEED)
    return splits, bool(shuffle), seed


def check_logits(logits: Any, splits: int, name: str = "logits") -> Tensor:
    """``logits`` as a finite floating ``[N, C]`` tensor holding at least ``splits`` samples."""
    x = to_compute_device(as_features(logits, name))  # the float64 scores need a device that has float64
    if x.shape[0] < splits:
        raise ValueError(
            f"Expected argument `{name}` to hold at least `splits` = {splits} samples (one per split), "
            f"but got {x.shape[0]}; pass `splits={x.shape[0]}` or more samples"
        )
    return x


def split_scores(logits: Tensor, *, splits: int = SPLITS, shuffle: bool = SHUFFLE, seed: int = SEED) -> Tensor:
    r"""The ``[splits]`` float64 scores :math:`\exp(\frac{1}{n}\sum_x \mathrm{KL}(p(y|x)\,\|\,\hat p(y)))` of the
    parts of checked ``logits`` (``N >= splits``), permuted and split as torch-fidelity does.

    Each part is computed on its own (the softmax is row by row, so the values are those of one softmax
    of the whole set; the float64 working set is one part, not ``N x C``). A class whose mean
    probability underflows to 0 in a part (its softmax is 0 in every row, logits ~745 below the
    row's largest) adds 0, the limit of :math:`p \log p`; torch-fidelity gives NaN there."""
    n = logits.shape[0]
    order: Optional[Tensor] = None
    if shuffle:
        order = torch.from_numpy(np.random.RandomState(seed).permutation(n)).to(logits.device)
    scores = torch.empty(splits, dtype=torch.float64)
    for i in range(splits):
        lo, hi = i * n // splits, (i + 1) * n // splits
        part = (logits[lo:hi] if order is None else logits[order[lo:hi]]).to(torch.float64)
        p, log_p = part.softmax(dim=1), part.log_softmax(dim=1)
        q = p.mean(dim=0, keepdim=True)
        # a class whose mean underflows to 0 has p = 0 in every row of the part: its terms are 0
        log_q = torch.where(q > 0, q, 1.0).log()
        scores[i] = (p * (log_p - log_q)).sum(dim=1).mean().exp().cpu()
    return scores


@score_precision()
def inception_score(
    logits: Any, *, splits: int = SPLITS, shuffle: bool = SHUFFLE, seed: int = SEED
) -> Tuple[Tensor, Tensor]:
    r"""Inception Score of generated samples from their class logits: mean and spread over splits.

    .. math::
        \mathrm{IS} = \exp\Big(\mathbb{E}_x\, \mathrm{KL}\big(p(y \mid x)\,\|\,p(y)\big)\Big),
        \qquad p(y \mid x) = \mathrm{softmax}(\ell(x)), \quad p(y) = \mathbb{E}_x\, p(y \mid x),

    estimated on each of ``splits`` parts of the samples (the marginal :math:`p(y)` is the part's
    mean) (Salimans et al., "Improved Techniques for Training GANs", NeurIPS 2016). High when
    each sample is confidently one class and the classes are evenly used; between 1 and ``C``;
    higher is better. It needs no real samples: it says nothing about whether the samples look
    like the data, only like ImageNet classes, so read it next to FID and precision/recall.

    Convention: torch-fidelity's ``isc_features_to_metric`` exactly (and its defaults,
    ``splits=10``, ``shuffle=True``, ``seed=2020``): the rows permuted by
    ``numpy.random.RandomState(seed).permutation(N)``, parts ``[i N // splits, (i + 1) N // splits)``,
    a float64 softmax, and the mean and population standard deviation (``ddof=0``) of the parts'
    scores; on the same logits the value is torch-fidelity's to float64 rounding (tested). The
    logits are the TF Inception graph's 1,008 logits *without* the bias (torch-fidelity's
    ``logits_unbiased``, the graph's ``softmax/logits/MatMul`` that the original improved-gan code
    and guided-diffusion's evaluator use). ``shuffle=False`` gives the original code's consecutive
    parts (and, with 50,000 samples, guided-diffusion's parts of 5,000; both compute in float32
    and guided-diffusion reports the mean only). torchmetrics' ``InceptionScore`` differs: it
    permutes with torch's unseeded global generator, splits with ``torch.chunk`` (parts of
    ``ceil(N / splits)``, fewer parts when ``N`` is small), computes in the logits' dtype (float32)
    and returns the sample standard deviation (``ddof=1``).

    Args:
        logits: ``[N, C]`` class logits of the generated samples, ``N >= splits``.
        splits: number of parts the score is averaged over.
        shuffle: permute the samples before splitting (as torch-fidelity does).
        seed: seed of the permutation, in ``[0, 2**32 - 1]`` (NumPy's ``RandomState``).

    Returns:
        ``(mean, std)`` 0-dim float64 tensors: the mean of the parts' scores and their population
        standard deviation.

    Raises:
        ValueError: when ``logits`` is not 2-D, holds NaN or Inf, or fewer than ``splits`` samples.
        TypeError: when ``logits`` does not hold floating-point values.

    Example:
        >>> import torch
        >>> confident = 50 * torch.eye(10).repeat(20, 1)  # 200 samples, each sure of its class
        >>> mean, std = inception_score(confident, splits=4, shuffle=False)  # every class 5 times a part
        >>> round(float(mean), 6), round(float(std), 6)  # confident and even: C = 10
        (10.0, 0.0)
        >>> mean, std = inception_score(confident, splits=4)  # shuffled: parts use the classes unevenly
        >>> bool(9 < mean < 10), bool(std > 0)
        (True, True)
        >>> round(float(inception_score(torch.zeros(200, 10), splits=4)[0]), 6)  # no opinion: 1
        1.0
    """
    splits, shuffle, seed = check_inception_score_options(splits, shuffle, seed)
    scores = split_scores(check_logits(logits, splits), splits=splits, shuffle=shuffle, seed=seed)
    return inception_score_summary(scores)


def inception_score_summary(scores: Tensor) -> Tuple[Tensor, Tensor]:
    """Mean and population standard deviation (``ddof=0``, as ``numpy.std``) of the parts' scores."""
    return scores.mean(), scores.std(correction=0)
