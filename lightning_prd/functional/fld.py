r"""Feature Likelihood Divergence (FLD; Jiralerspong et al., NeurIPS 2023).

Reference: M. Jiralerspong, A. J. Bose, I. Gemp, C. Qin, Y. Bachrach, G. Gidel, "Feature Likelihood
Divergence: Evaluating the Generalization of Generative Models Using Samples", NeurIPS 2023; the
official code ``marcojira/fld`` (``fld/MoG.py``, ``fld/metrics/FLD.py``), whose procedure and constants
are followed:

1. At most ``gen_size = 10,000`` generated samples are kept (a random subset).
2. Every set is normalised by the mean and the (unbiased) standard deviation of the **test** set, per feature.
3. A mixture of isotropic Gaussians is centred at the :math:`K` generated samples :math:`y_j`,
   :math:`p(x) = \frac1K \sum_j \mathcal N(x; y_j, \sigma_j^2 I)`. Its log-variances
   :math:`s_j = \log \sigma_j^2` start at :math:`\log\big((\min_i \lVert x_i - y_j\rVert^2 + 10^{-3}) / D\big)`
   and are fitted to the **training** set by Adam (learning rate 0.5, up to 50 epochs over shuffled
   batches of 10,000, :math:`s_j` clamped to :math:`[-40, 40]` after each step) on the loss
   :math:`-\frac{1}{BD}\sum_i \log\big(\frac1K\sum_j \mathcal N(x_i; y_j, \sigma_j^2 I)
   + \mathcal N(0.9 (x_i - \bar x); 0, \sigma_0^2 I)\big)`, the last term an extra "origin"
   component at the training mean :math:`\bar x` with its own fitted :math:`s_0` (starting at 0) that
   keeps every training sample's likelihood finite. Training stops early once the epoch's mean loss is
   within :math:`5\cdot10^{-4}` of each of the 4 before it (after epoch 6).
4. The dimension-adjusted negative log-likelihood of a set is
   :math:`\mathrm{NLL}(X) = -\frac{1}{|X| D}\sum_{x \in X} \log p(x)` (the origin component left out).
5. The baseline :math:`\mathrm{NLL}_0` is that of the test set under the same construction with the
   generated samples replaced by training samples: a mixture centred at
   :math:`\min(K, \lfloor N/2 \rfloor)` random training samples, fitted to the other training samples.

.. math::
    \mathrm{FLD} = 100\,(\mathrm{NLL}(P_{test}) - \mathrm{NLL}_0), \qquad
    \mathrm{FLD}_{train} = 100\,(\mathrm{NLL}(P_{train}) - \mathrm{NLL}_0), \qquad
    \text{gap} = 100\,(\mathrm{NLL}(P_{train}) - \mathrm{NLL}(P_{test})).

FLD is lower for better models (about 0 for a perfect one) and rises for poor fidelity, poor
diversity and for copies of the training set (a copy leaves test samples unlikely); the gap is the
official "generalization gap" (``FLD(eval_feat="gap")``): the more negative, the more the generated
samples favour the training set over held-out data, i.e. memorization.

Differences from the official code: randomness from two CPU ``torch.Generator`` seeded with
``seed`` (one draws the generated subset, then the order of the training samples in the fit; the
other the baseline's split and its fit order) where the official code uses NumPy's global
generator; distances, the fit (its gradient in closed form, the same Adam update) and the
likelihoods in float64 where the official code uses float32 ``torch.cdist`` and autograd; the three
scores come from one fitted mixture (the official code fits one per score). The official baseline
also re-normalises the already normalised sets by the test statistics again, an identity up to
rounding, not repeated here.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.engine.inputs import as_features, check_positive_int, check_real, check_seed
from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.functional.knn.pairwise import sq_distance_blocks
from lightning_prd.functional.knn.tiling import DEFAULT_BLOCK_BYTES
from lightning_prd.functional.memorization import check_test_set

#: the official code's constants (``fld/MoG.py``, ``fld/metrics/FLD.py``)
GEN_SIZE = 10_000
LR = 0.5
NUM_EPOCHS = 50
BATCH_SIZE = 10_000
ORIGIN_SHRINK = (1 - 0.1) ** 2  # the origin component's squared distances are scaled by (1 - 0.1)^2
INIT_OFFSET = 1e-3
LOG_VAR_LIMIT = 40.0
STOP_TOL = 5e-4
STOP_WINDOW = 5
#: float64 values of one chunk of rows of the cached distances (the fit's temporaries)
CHUNK_VALUES = 2**21


def check_fld_options(
    gen_size: Any, num_epochs: Any, lr: Any, batch_size: Any, baseline_nll: Any, seed: Any
) -> Tuple[int, int, float, int, Optional[float], int]:
    """Validated ``(gen_size, num_epochs, lr, batch_size, baseline_nll, seed)``; bad values raise ``ValueError``."""
    gen_size = check_positive_int(gen_size, "gen_size")
    num_epochs = check_positive_int(num_epochs, "num_epochs")
    lr = check_real(lr, "lr", low=0, low_open=True)
    batch_size = check_positive_int(batch_size, "batch_size")
    baseline_nll = None if baseline_nll is None else check_real(baseline_nll, "baseline_nll")
    return gen_size, num_epochs, lr, batch_size, baseline_nll, check_seed(seed)


def normalise_by_test(test: Tensor, *others: Tensor) -> List[Tensor]:
    """``(x - mean) / std`` in float64 for ``test`` and each of ``others``, with the test set's per-feature mean and
    unbiased standard deviation (the official ``preprocess_feat``)."""
    if test.shape[0] < 2:
        raise ValueError(f"Expected argument `test` to hold at least 2 samples for FLD, but got {test.shape[0]}")
    t = test.to(torch.float64)
    mean, std = t.mean(0), t.std(0)
    flat = torch.nonzero(std == 0).flatten()
    if flat.numel():
        raise ValueError(
            f"Expected argument `test` to vary in every feature (FLD divides by its standard deviation), but "
            f"{flat.numel()} features are constant, the first is feature {int(flat[0])}"
        )
    return [(x.to(torch.float64) - mean) / std for x in (test, *others)]


def _terms(log_var: Tensor, dim: int) -> Tuple[Tensor, Tensor]:
    """Per component, ``-0.5 / sigma^2`` and the constant ``-(D/2)(s + log 2 pi) - log K`` of its log-density."""
    const = -(dim / 2) * (log_var + math.log(2 * math.pi)) - math.log(log_var.shape[0])
    return -0.5 * torch.exp(-log_var), const


def _chunk_rows(width: int) -> int:
    """Rows of ``width`` float64 values in one working chunk of :data:`CHUNK_VALUES`."""
    return max(1, CHUNK_VALUES // max(1, width))


def _batch_step(
    dists: Tensor, origin: Tensor, log_var: Tensor, origin_log_var: Tensor, dim: int
) -> Tuple[Tensor, Tensor, float]:
    """Loss and its gradients in ``log_var`` and ``origin_log_var`` on one batch of ``dim``-feature samples: cached
    squared distances to the components ``[B, K]`` and the origin component's shrunk squared distances ``[B]``."""
    b, k = dists.shape
    scale, const = _terms(log_var, dim)
    o_scale = -0.5 * torch.exp(-origin_log_var)
    o_const = -(dim / 2) * (origin_log_var + math.log(2 * math.pi))
    resp_sum = torch.zeros(k, dtype=torch.float64, device=dists.device)
    resp_dist = torch.zeros(k, dtype=torch.float64, device=dists.device)
    origin_grad = torch.zeros((), dtype=torch.float64, device=dists.device)
    total = torch.zeros((), dtype=torch.float64, device=dists.device)
    step = _chunk_rows(k)
    for s in range(0, b, step):
        d, od = dists[s : s + step], origin[s : s + step]
        t = torch.addcmul(const, d, scale)  # log N(x_i; y_j, s_j) - log K
        o = od * o_scale + o_const
        top = torch.maximum(t.amax(1), o)
        e = t.sub_(top[:, None]).exp_()
        e0 = torch.exp(o - top)
        norm = e.sum(1) + e0
        inv = 1.0 / norm
        total += (top + norm.log()).sum()
        resp_sum += inv @ e
        resp_dist += inv @ e.mul_(d)
        origin_grad += (e0 * inv * (-od * o_scale - dim / 2)).sum()
    grad = -(-scale * resp_dist - (dim / 2) * resp_sum) / (b * dim)
    return grad, -origin_grad / (b * dim), float(-total / (b * dim))


def fit_log_variances(
    centres: Tensor,
    data: Tensor,
    order: Tensor,
    *,
    num_epochs: int = NUM_EPOCHS,
    lr: float = LR,
    batch_size: int = BATCH_SIZE,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> Tuple[Tensor, Tensor]:
    """The official ``MoG.fit``: log-variances ``[K]`` of the mixture centred at ``centres`` ``[K, D]`` fitted to
    ``data`` ``[n, D]`` (float64, normalised) visited in ``order`` (a permutation of its rows), and the
    cached ``[n, K]`` squared distances (rows in that order). Formula and constants: module docstring."""
    rows = data[order.to(data.device)]
    dists = torch.empty(rows.shape[0], centres.shape[0], dtype=torch.float64, device=data.device)
    for s, tile in sq_distance_blocks(rows, centres, block_bytes=block_bytes):
        dists[s : s + tile.shape[0]] = tile
    dim = data.shape[1]
    diff = rows - rows.mean(0)
    origin = ORIGIN_SHRINK * (diff * diff).sum(1)
    log_var = ((dists.amin(0) + INIT_OFFSET) / dim).log().requires_grad_(True)
    origin_log_var = torch.zeros((), dtype=torch.float64, device=data.device, requires_grad=True)
    optim = torch.optim.Adam([log_var, origin_log_var], lr=lr)
    losses: List[float] = []
    for epoch in range(num_epochs):
        batch_losses = []
        for s in range(0, rows.shape[0], batch_size):
            with torch.no_grad():
                batch = slice(s, s + batch_size)
                g, g0, loss = _batch_step(dists[batch], origin[batch], log_var, origin_log_var, dim)
            log_var.grad, origin_log_var.grad = g, g0
            optim.step()
            with torch.no_grad():
                log_var.clamp_(-LOG_VAR_LIMIT, LOG_VAR_LIMIT)
            batch_losses.append(loss)
        losses.append(sum(batch_losses) / len(batch_losses))
        if epoch > STOP_WINDOW and max(abs(losses[-1] - losses[-j]) for j in range(1, STOP_WINDOW + 1)) < STOP_TOL:
            break
    return log_var.detach(), dists


def _nll_from_dists(dists: Tensor, log_var: Tensor, dim: int) -> Tensor:
    """Sum over rows of ``-log p(x)`` from squared distances ``[n, K]`` (chunked)."""
    scale, const = _terms(log_var, dim)
    total = torch.zeros((), dtype=torch.float64, device=dists.device)
    step = _chunk_rows(dists.shape[1])
    for s in range(0, dists.shape[0], step):
        total -= torch.logsumexp(torch.addcmul(const, dists[s : s + step], scale), 1).sum()
    return total


def mixture_nll(centres: Tensor, log_var: Tensor, x: Tensor, *, block_bytes: int = DEFAULT_BLOCK_BYTES) -> Tensor:
    """The dimension-adjusted mean negative log-likelihood :math:`-\\frac{1}{nD}\\sum_i \\log p(x_i)` of float64 ``x``
    ``[n, D]`` under the mixture centred at ``centres`` with log-variances ``log_var`` (no origin component)."""
    total = torch.zeros((), dtype=torch.float64, device=x.device)
    for _, tile in sq_distance_blocks(x, centres, block_bytes=block_bytes):
        total += _nll_from_dists(tile, log_var, x.shape[1])
    return total / (x.shape[0] * x.shape[1])


def _baseline(
    train: Tensor, test: Tensor, size: int, seed: int, fit: Tuple[int, float, int], block_bytes: int
) -> Tensor:
    """The baseline NLL of normalised sets (see :func:`fld_baseline_nll`); ``fit``: epochs, rate, batch size."""
    gen = torch.Generator().manual_seed(seed)
    perm = torch.randperm(train.shape[0], generator=gen).to(train.device)
    split = min(size, train.shape[0] // 2)
    centres, rest = train[perm[:split]], train[perm[split:]]
    order = torch.randperm(rest.shape[0], generator=gen)
    num_epochs, lr, batch_size = fit
    log_var, _ = fit_log_variances(
        centres, rest, order, num_epochs=num_epochs, lr=lr, batch_size=batch_size, block_bytes=block_bytes
    )
    return mixture_nll(centres, log_var, test, block_bytes=block_bytes)


@score_precision()
def feature_likelihood_divergence(
    real: Any,
    fake: Any,
    test: Any,
    *,
    gen_size: int = GEN_SIZE,
    num_epochs: int = NUM_EPOCHS,
    lr: float = LR,
    batch_size: int = BATCH_SIZE,
    baseline_nll: Optional[float] = None,
    seed: int = 0,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> Dict[str, Tensor]:
    r"""Feature Likelihood Divergence (Jiralerspong et al., NeurIPS 2023) and its generalization gap.

    A mixture of isotropic Gaussians centred at the generated samples, with per-sample bandwidths fitted
    to the training set (the official ``marcojira/fld`` procedure and constants: module docstring), gives
    the dimension-adjusted negative log-likelihoods :math:`\mathrm{NLL}` of the training and test sets;

    .. math::
        \mathrm{FLD} = 100\,(\mathrm{NLL}(P_{test}) - \mathrm{NLL}_0), \qquad
        \mathrm{gap} = 100\,(\mathrm{NLL}(P_{train}) - \mathrm{NLL}(P_{test})),

    with :math:`\mathrm{NLL}_0` the test NLL of the same construction centred at training samples. FLD
    is lower for better models (about 0 for one as good as the training data itself) and is sensitive
    to fidelity, diversity and novelty; a negative gap means the generated samples explain the training
    set better than held-out data: memorization.

    Cost: ``N x K`` float64 distances are kept for the fit (``K = min(M, gen_size)``; 0.8 GB at
    10,000 x 10,000), and each of up to ``num_epochs`` epochs reads them a few times.

    Args:
        real: ``[N, D]`` training features (the set the model was trained on), ``N >= 2``.
        fake: ``[M, D]`` generated features.
        test: ``[n, D]`` held-out real features, ``n >= 2``, no constant feature (every set is divided by
            its standard deviation).
        gen_size: at most this many generated samples are used (a seeded random subset; 10,000).
        num_epochs: most epochs of the bandwidth fit (50). lr: Adam's learning rate (0.5).
        batch_size: training samples per Adam step (10,000).
        baseline_nll: :math:`\mathrm{NLL}_0` if known (e.g. from an earlier call with the same training
            and test sets and ``min(M, gen_size)``: :func:`fld_baseline_nll`); None to fit it.
        seed: seed of the draws (module docstring).
        block_bytes: memory budget of one distance tile and of the fit's working chunks.

    Returns:
        dict of 0-dim float64 tensors: ``fld`` (test FLD), ``fld_train`` (:math:`100(\mathrm{NLL}(P_{train}) -
        \mathrm{NLL}_0)`), ``fld_gap`` (generalization gap), ``fld_nll_test``, ``fld_nll_train`` and
        ``fld_nll_baseline`` (the dimension-adjusted NLLs).

    Example:
        >>> import torch
        >>> g = torch.Generator().manual_seed(0)
        >>> train, test = torch.randn(400, 8, generator=g), torch.randn(200, 8, generator=g)
        >>> good, shifted = torch.randn(300, 8, generator=g), torch.randn(300, 8, generator=g) + 1
        >>> copies = train[:300] + 0.3 * torch.randn(300, 8, generator=g)  # near-copies of the training set
        >>> for fake in (good, shifted, copies):
        ...     out = feature_likelihood_divergence(train, fake, test)
        ...     print(round(float(out["fld"]), 1), round(float(out["fld_gap"]), 1))
        -1.5 -1.1
        26.5 -1.3
        33.3 -73.5
    """
    gen_size, num_epochs, lr, batch_size, baseline_nll, seed = check_fld_options(
        gen_size, num_epochs, lr, batch_size, baseline_nll, seed
    )
    sets = FeatureSets.check(real, fake)
    held_out = check_test_set(sets.real, test)
    if sets.num_real < 2:
        raise ValueError(f"Expected argument `real` to hold at least 2 samples for FLD, but got {sets.num_real}")
    gen = torch.Generator().manual_seed(seed)
    fake_t = sets.fake
    if fake_t.shape[0] > gen_size:
        fake_t = fake_t[torch.randperm(fake_t.shape[0], generator=gen)[:gen_size].to(fake_t.device)]
    test_n, train_n, gen_n = normalise_by_test(held_out, sets.real, fake_t)
    order = torch.randperm(train_n.shape[0], generator=gen)
    log_var, dists = fit_log_variances(
        gen_n, train_n, order, num_epochs=num_epochs, lr=lr, batch_size=batch_size, block_bytes=block_bytes
    )
    nll_train = _nll_from_dists(dists, log_var, train_n.shape[1]) / (train_n.shape[0] * train_n.shape[1])
    del dists
    nll_test = mixture_nll(gen_n, log_var, test_n, block_bytes=block_bytes)
    if baseline_nll is None:
        nll_base = _baseline(train_n, test_n, gen_n.shape[0], seed, (num_epochs, lr, batch_size), block_bytes)
    else:
        nll_base = torch.tensor(baseline_nll, dtype=torch.float64, device=nll_test.device)
    return {
        "fld": 100 * (nll_test - nll_base),
        "fld_train": 100 * (nll_train - nll_base),
        "fld_gap": 100 * (nll_train - nll_test),
        "fld_nll_test": nll_test,
        "fld_nll_train": nll_train,
        "fld_nll_baseline": nll_base,
    }


def fld_baseline_nll(
    real: Any,
    test: Any,
    *,
    size: int = GEN_SIZE,
    num_epochs: int = NUM_EPOCHS,
    lr: float = LR,
    batch_size: int = BATCH_SIZE,
    seed: int = 0,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> Tensor:
    """FLD's baseline :math:`\\mathrm{NLL}_0` (the official ``FLD.get_baseline_nll``) for ``size`` generated samples:
    the test NLL under a mixture centred at ``min(size, N // 2)`` random training samples and fitted to the
    others. The same value :func:`feature_likelihood_divergence` fits with the same ``seed`` and
    ``min(M, gen_size) = size``; pass it as ``baseline_nll`` to reuse it across evaluations.

    Example:
        >>> import torch
        >>> g = torch.Generator().manual_seed(0)
        >>> train, test = torch.randn(400, 8, generator=g), torch.randn(200, 8, generator=g)
        >>> round(float(fld_baseline_nll(train, test, size=300)), 4)
        1.5395
    """
    size = check_positive_int(size, "size")
    _, num_epochs, lr, batch_size, _, seed = check_fld_options(1, num_epochs, lr, batch_size, None, seed)
    train = as_features(real, "real")
    if train.shape[0] < 2:
        raise ValueError(f"Expected argument `real` to hold at least 2 samples for FLD, but got {train.shape[0]}")
    test_n, train_n = normalise_by_test(check_test_set(train, test), train)
    return _baseline(train_n, test_n, size, seed, (num_epochs, lr, batch_size), block_bytes)


__all__ = [
    "check_fld_options",
    "feature_likelihood_divergence",
    "fit_log_variances",
    "fld_baseline_nll",
    "mixture_nll",
    "normalise_by_test",
]
