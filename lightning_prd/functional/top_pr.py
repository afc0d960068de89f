r"""TopP&R: precision and recall on kernel density supports kept by significance (Kim et al., NeurIPS 2023).

Kim, Jang, Kim & Yoo, "TopP&R: Robust Support Estimation Approach for Evaluating Fidelity and
Diversity in Generative Models", NeurIPS 2023; official code: the ``top-pr`` package
(``top_pr.compute_top_pr``, LAIT-CVLab/TopPR).
"""

from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional.engine.inputs import (
    check_block_bytes,
    check_float64_range,
    check_positive_int,
    check_real,
    check_seed,
)
from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.functional.knn.kde import cosine_kernel_sums, kth_distance
from lightning_prd.functional.knn.shard import Shard
from lightning_prd.functional.knn.tiling import DEFAULT_BLOCK_BYTES

#: the bandwidth rules: a true k-NN distance, or the official code's half-row k-th distance
BANDWIDTH_RULES = ("knn", "half_row")


#: the options of :func:`top_precision_recall` and their defaults (the official code's)
TOP_PR_DEFAULTS: Dict[str, Any] = dict(
    alpha=0.1, num_bootstrap=10, projection_dim=32, k=None, bandwidth="half_row", seed=99
)


def check_top_pr_options(
    *, alpha: Any, num_bootstrap: Any, projection_dim: Any, k: Any, bandwidth: Any, seed: Any, owner: str = ""
) -> Dict[str, Any]:
    """The options of :func:`top_precision_recall`, validated (errors name ``owner['name']`` if given).

    Example:
        >>> check_top_pr_options(**{**TOP_PR_DEFAULTS, "k": 0}, owner="top_pr")
        Traceback (most recent call last):
        ...
        ValueError: Expected argument `top_pr['k']` to be a positive integer, but got 0
    """

    def name(key: str) -> str:
        return f"{owner}['{key}']" if owner else key

    return dict(
        alpha=check_real(alpha, name("alpha"), low=0.0, high=1.0, low_open=True, high_open=True),
        num_bootstrap=check_positive_int(num_bootstrap, name("num_bootstrap")),
        projection_dim=None if projection_dim is None else check_positive_int(projection_dim, name("projection_dim")),
        k=None if k is None else check_positive_int(k, name("k")),
        bandwidth=_check_rule(bandwidth, name("bandwidth")),
        seed=check_seed(seed, name("seed")),
    )


def _check_rule(value: Any, name: str) -> str:
    if not isinstance(value, str) or value not in BANDWIDTH_RULES:
        raise ValueError(f"Expected argument `{name}` to be one of {BANDWIDTH_RULES}, but got {value!r}")
    return value


def top_pr_draws(
    num_real: int, num_fake: int, dim: int, *, projection_dim: Optional[int], num_bootstrap: int, seed: int
) -> Tuple[Optional[Tensor], Tensor, Tensor]:
    """The random draws of :func:`top_precision_recall`: ``(projection, real_resamples, fake_resamples)``.

    One CPU ``torch.Generator`` seeded with ``seed`` draws, in this order, the projection
    ``[projection_dim, dim]`` (float32 Xavier-normal, std ``sqrt(2 / (dim + projection_dim))``,
    as ``torch.nn.init.xavier_normal_``; None when ``dim <= projection_dim`` or
    ``projection_dim`` is None), then ``num_bootstrap`` resamples with replacement of the real
    indices ``[num_bootstrap, num_real]`` and of the generated ones ``[num_bootstrap, num_fake]``.
    Drawn on the CPU so that a result does not depend on the device.

    Example:
        >>> w, r, f = top_pr_draws(5, 4, 64, projection_dim=32, num_bootstrap=3, seed=99)
        >>> tuple(w.shape), tuple(r.shape), tuple(f.shape)
        ((32, 64), (3, 5), (3, 4))
    """
    gen = torch.Generator().manual_seed(seed)
    weight = None
    if projection_dim is not None and dim > projection_dim:
        std = math.sqrt(2.0 / (dim + projection_dim))
        weight = torch.empty(projection_dim, dim).normal_(0.0, std, generator=gen)
    real_idx = torch.randint(0, num_real, (num_bootstrap, num_real), generator=gen)
    fake_idx = torch.randint(0, num_fake, (num_bootstrap, num_fake), generator=gen)
    return weight, real_idx, fake_idx


def _counts(idx: Tensor, n: int, device: torch.device) -> Tensor:
    """Multinomial counts ``[B, n]`` (float64) of resampled indices ``[B, n]``."""
    idx = idx.to(device)
    ones = torch.ones(idx.shape, dtype=torch.float64, device=device)
    return torch.zeros(idx.shape[0], n, dtype=torch.float64, device=device).scatter_add_(1, idx, ones)


def _project(x: Tensor, weight: Optional[Tensor], chunk: int = 8192) -> Tensor:
    """``x`` in float64, through ``weight`` ``[d, D]`` if given, in row chunks (no float64 copy of ``[N, D]``)."""
    if weight is None:
        return x.to(torch.float64)
    return torch.cat([x[i : i + chunk].to(torch.float64) @ weight.T for i in range(0, x.shape[0], chunk)])


def _support(
    x: Tensor, resamples: Tensor, k: int, rule: str, alpha: float, block_bytes: int, name: str, shard: Optional[Shard]
) -> Tuple[float, Tensor, Tensor]:
    """Bandwidth ``h``, density at the set's own points ``p_hat`` ``[n]``, and the band ``c`` (0-dim)."""
    radii = kth_distance(x, k, rule=rule, block_bytes=block_bytes, shard=shard).sort().values
    h = float(radii[max(radii.numel() // 2 - 1, 0)])  # the official code's median index (one host read)
    if h <= 0:
        raise ValueError(
            f"Expected argument `{name}` to have distinct samples, but TopP&R's bandwidth of it is 0 (half of "
            f"its samples have {k} duplicates once projected and centred on the real mean in float64: exact "
            "copies, or a spread below float64's resolution of that offset): its kernel density estimate is "
            "undefined"
        )
    n = x.shape[0]
    weights = torch.cat([torch.ones(1, n, dtype=torch.float64, device=x.device), _counts(resamples, n, x.device)])
    sums = cosine_kernel_sums(x, x, h, weights, block_bytes=block_bytes, shard=shard) / n
    p_hat = sums[:, 0]
    theta = (sums[:, 1:] - p_hat[:, None]).abs().amax(0)  # sup over the points, per replicate
    return h, p_hat, torch.quantile(theta, 1.0 - alpha)


@score_precision()
def top_precision_recall(
    real: Any,
    fake: Any,
    *,
    alpha: float = 0.1,
    num_bootstrap: int = 10,
    projection_dim: Optional[int] = 32,
    k: Optional[int] = None,
    bandwidth: str = "half_row",
    seed: int = 99,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> Dict[str, Tensor]:
    r"""TopP&R: the share of significant generated samples inside the real support, and vice versa.

    Each set's support is the super-level set of its kernel density estimate (Kim et al. 2023,
    Sec. 3-4), with the compact cosine kernel :math:`K(u) = \cos(\pi u/2)\,[u \le 1]`:

    .. math::

        \hat p(y) = \frac{1}{n}\sum_{i=1}^{n} K\big(\lVert y - x_i\rVert / h\big), \qquad
        \hat{\mathrm{supp}} = \{y : \hat p(y) > c_\alpha\},

    where :math:`c_\alpha` is the bootstrap confidence band: the :math:`(1-\alpha)`-quantile
    (linear interpolation) over ``num_bootstrap`` resamples :math:`x^*` of
    :math:`\sup_j |\hat p(x_j) - \hat p^*(x_j)|`. Only samples inside their own set's support
    count ("topologically significant"), so outliers and noise drop out:

    .. math::

        \mathrm{TopP} = \frac{\#\{j : \hat p_g(y_j) > c_g,\ \hat p_r(y_j) > c_r\}}
                             {\#\{j : \hat p_g(y_j) > c_g\}}, \qquad
        \mathrm{TopR} = \frac{\#\{i : \hat p_r(x_i) > c_r,\ \hat p_g(x_i) > c_g\}}
                             {\#\{i : \hat p_r(x_i) > c_r\}},

    and ``top_f1`` their harmonic mean. Bandwidth :math:`h` (per set): the median of the
    samples' k-th neighbour distances (the :math:`\lfloor n'/2 \rfloor`-th smallest of the n'
    values, as the official code takes it), ``k = 5 d`` (d the working dimension). Features
    wider than ``projection_dim`` are first mapped by one random linear projection (no bias,
    Xavier-normal; both sets by the same matrix).

    Convention: the official ``top_pr.compute_top_pr`` 0.2.1, followed except where listed.

    * Same defaults: ``alpha=0.1``, 10 bootstrap resamples, cosine kernel, projection to 32-D,
      ``k = 5 d``, the official bandwidth rule (``bandwidth="half_row"``): for the rows
      ``i < n - k`` only, the k-th smallest distance to the rows ``j > i``. With the default
      ``seed=99`` the projection matrix equals the official one (``torch.manual_seed(99)``
      then ``xavier_normal_``); it is applied in float64 (the official code: float32).
    * The half-row rule depends on the order of the samples (shuffle class-sorted sets) and
      gives larger bandwidths than a true k-NN distance; scores depend strongly on the
      bandwidth in 32-D (TopR of a 0.8-scaled copy of the real distribution: about 0.42 with
      the official rule, 0.25 with k-NN). ``bandwidth="knn"`` takes each sample's true k-NN
      distance (order-free) for users who do not compare with published numbers.
    * The kernel's normalising constant :math:`(\pi/4h)^d` is left out: every comparison is
      between quantities of one set's bandwidth, so it cancels (and cannot overflow).
    * The bootstrap draws come from a seeded ``torch.Generator`` (the official code uses
      NumPy's global state, reseeded with 42 when it projects), on the CPU, so a result does
      not depend on the device. All replicates come from one pass over the distance tiles
      (kernel tile times multinomial counts); the official code recomputes each one.
    * Every dimension takes this bandwidth rule (the official code's grid and persistence
      homology path for ``d <= 3`` is not implemented).
    * ``top_f1`` is 0 when precision + recall is 0 (the official code: when either is at most
      1e-4); a set with no significant sample gives NaN for its score.

    Args:
        real: ``[N, D]`` real features (P).
        fake: ``[M, D]`` generated features (Q).
        alpha: significance level of the confidence band, in (0, 1).
        num_bootstrap: bootstrap resamples for the band (10 in the official code).
        projection_dim: working dimension of the random projection (applied when D exceeds
            it); None keeps the features as they are.
        k: neighbour of the bandwidth rule; None for ``5 x`` the working dimension. Each set
            needs more than k samples.
        bandwidth: ``"half_row"`` (official) or ``"knn"`` (see above).
        seed: seed of the projection and of the bootstrap draws.
        block_bytes: memory budget of one float64 distance tile.

    Returns:
        dict of float64 0-dim tensors ``top_precision``, ``top_recall``, ``top_f1``.

    Example:
        >>> import torch
        >>> g = torch.Generator().manual_seed(0)
        >>> real = torch.randn(600, 16, generator=g)
        >>> out = top_precision_recall(real, torch.randn(500, 16, generator=g))
        >>> [round(float(out[n]), 2) for n in ("top_precision", "top_recall", "top_f1")]
        [0.86, 1.0, 0.92]
        >>> collapsed = top_precision_recall(real, 0.1 * torch.randn(500, 16, generator=g))
        >>> [round(float(collapsed[n]), 2) for n in ("top_precision", "top_recall")]
        [1.0, 0.0]
    """
    sets = FeatureSets.check(real, fake)
    opts = check_top_pr_options(
        alpha=alpha, num_bootstrap=num_bootstrap, projection_dim=projection_dim, k=k, bandwidth=bandwidth, seed=seed
    )
    return top_pr_scores(sets, opts, block_bytes=check_block_bytes(block_bytes))


def top_pr_scores(
    sets: FeatureSets, options: Dict[str, Any], *, block_bytes: int, shard: Optional[Shard] = None
) -> Dict[str, Tensor]:
    """:func:`top_precision_recall` on checked sets and validated ``options`` (the dict of
    :func:`check_top_pr_options`); with ``shard`` the tile rows are split across the ranks (every
    rank holding all features, after a metric's sync) and every rank gets the single-process
    result (:mod:`.knn.kde`)."""
    real, fake = sets.real, sets.fake
    alpha, num_bootstrap, projection_dim = options["alpha"], options["num_bootstrap"], options["projection_dim"]
    k, bandwidth, seed = options["k"], options["bandwidth"], options["seed"]
    dim = real.shape[1]
    work_dim = dim if projection_dim is None else min(dim, projection_dim)
    k = 5 * work_dim if k is None else k
    for name, x in (("real", real), ("fake", fake)):
        if x.shape[0] <= k:
            raise ValueError(
                f"Expected argument `{name}` to hold more than k = {k} samples for TopP&R's bandwidth "
                f"(k = 5 x the working dimension {work_dim} unless `k` is given), but got {x.shape[0]}"
            )
    weight, resamples_r, resamples_f = top_pr_draws(
        real.shape[0], fake.shape[0], dim, projection_dim=projection_dim, num_bootstrap=num_bootstrap, seed=seed
    )
    w = None if weight is None else weight.to(device=real.device, dtype=torch.float64)
    r64, f64 = _project(real, w), _project(fake, w)
    centre = r64.mean(0)
    r64, f64 = r64 - centre, f64 - centre
    check_float64_range(r64, f64, scores="TopP&R's scores, computed after its random projection,")
    h_r, p_rr, c_r = _support(r64, resamples_r, k, bandwidth, alpha, block_bytes, "real", shard)
    h_f, p_ff, c_f = _support(f64, resamples_f, k, bandwidth, alpha, block_bytes, "fake", shard)
    ones_r = torch.ones(1, real.shape[0], dtype=torch.float64, device=real.device)
    ones_f = torch.ones(1, fake.shape[0], dtype=torch.float64, device=real.device)
    p_fr = cosine_kernel_sums(r64, f64, h_f, ones_f, block_bytes=block_bytes, shard=shard)[:, 0] / fake.shape[0]
    p_rf = cosine_kernel_sums(f64, r64, h_r, ones_r, block_bytes=block_bytes, shard=shard)[:, 0] / real.shape[0]
    sig_r, sig_f = p_rr > c_r, p_ff > c_f
    precision = (sig_f & (p_rf > c_r)).sum().double() / sig_f.sum().double()
    recall = (sig_r & (p_fr > c_f)).sum().double() / sig_r.sum().double()
    total = precision + recall
    f1 = torch.where(total == 0, torch.zeros_like(total), 2 * precision * recall / total)
    return {"top_precision": precision, "top_recall": recall, "top_f1": f1}


__all__ = [
    "BANDWIDTH_RULES",
    "TOP_PR_DEFAULTS",
    "check_top_pr_options",
    "top_pr_draws",
    "top_pr_scores",
    "top_precision_recall",
]
