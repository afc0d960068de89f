r"""alpha-Precision, beta-Recall and Authenticity (Alaa et al., ICML 2022).

Reference: A. M. Alaa, B. van Breugel, E. Saveliev, M. van der Schaar, "How Faithful is your
Synthetic Data? Sample-level Metrics for Evaluating and Auditing Generative Models", ICML 2022;
authors' code ``ahmedmalaa/evaluating-generative-models`` (``metrics/evaluation.py``, branch
``main`` and the corrected branch ``boris-new``), also shipped in synthcity.

Definitions (``real`` = :math:`x_1..x_N`, ``fake`` = :math:`y_1..y_M`, after the optional
embedding; all balls closed, ``NND_k`` excludes the point itself):

* :math:`c_r` = mean of the real features (or the one-class centre), :math:`r_\alpha` = the
  :math:`\alpha`-quantile of :math:`\lVert x_i - c_r\rVert` (linear interpolation, as
  ``numpy.quantile``); :math:`P_\alpha = \frac1M \#\{j : \lVert y_j - c_r\rVert \le r_\alpha\}`.
* :math:`c_g` = mean of the generated features, :math:`r_\beta` = the :math:`\beta`-quantile of
  :math:`\lVert y_j - c_g\rVert`; :math:`x_i` is recalled at :math:`\beta` when some
  :math:`y_j` with :math:`\lVert y_j - c_g\rVert \le r_\beta` has
  :math:`d(x_i, y_j) \le \mathrm{NND}_k(x_i)` (its nearest generated sample inside
  :math:`B(c_g, r_\beta)` lies in its k-NN ball); :math:`R_\beta` is the recalled share.
* Integrated scores :math:`1 - 2\int_0^1 \lvert \mathrm{curve}(a) - a\rvert\,da` (trapezoid rule).
* :math:`y_j` is authentic when :math:`d(y_j, x_{i^*}) > \mathrm{NND}_1(x_{i^*})`,
  :math:`i^*` its nearest real sample; Authenticity is the authentic share.

Where this deliberately differs from the authors' code and synthcity (and why):

* **Integration rule.** The authors compute :math:`1 - 2\Delta\alpha\sum_k \lvert c_k - \alpha_k\rvert`
  (a Riemann sum that counts both end points fully); synthcity uses
  :math:`1 - \sum_k \lvert c_k - \alpha_k\rvert / \sum_k \alpha_k` (PR #31), 29/30 of the
  authors' weight. We use the trapezoid rule, which approximates the integral the paper
  defines, does not depend on the grid's end points, and gives exactly 1 for the diagonal.
  The three differ by a few percent on the same curve.
* **beta-recall.** The paper's rule above, with the real ``NND_k`` ball (k = 5 by default) and
  closed balls; at :math:`\beta = 1` it equals coverage (Naeem et al.). The authors' code
  instead takes each real sample's overall nearest generated sample and requires it both to
  be within ``NND_1`` and inside :math:`B(c_g, r_\beta)`; that 1-NN test passes for only about
  half of the real samples even when the model is perfect (synthcity issue #244), so their
  curve saturates near 0.5.
* **Authenticity.** The corrected per-generated-sample definition of branch ``boris-new``
  (and dgm-eval). Branch ``main`` and synthcity index a per-real array with generated-sample
  indices (authors' issue #4), which is only defined when ``N == M``.
* **No equal-size requirement** (synthcity raises unless ``N == M``), no min-max scaling in the
  naive mode (synthcity's ``*_naive`` scales both sets to the real range first: pass an
  ``embedding`` callable for that), and distances are exact float64 (:mod:`.knn`).
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import torch
from torch import Tensor

from lightning_prd.functional import knn
from lightning_prd.functional.engine.inputs import (
    check_int,
    check_min_samples,
    check_pair,
    check_positive_int,
    check_real,
)
from lightning_prd.functional.engine.one_pass import PassResult, RealSide, requested, run_pass
from lightning_prd.functional.engine.oneclass import check_embedding, embed_features, embedding_center, train_oneclass
from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.functional.engine.stats import chunk_rows, mean64
from lightning_prd.functional.knn.shard import Shard

#: Level reported by ``alpha_typicality`` / ``recalled_at_beta`` for samples that are not
#: contained at any level in ``[0, 1]`` (any value above 1 means "never").
NEVER = 2.0

PER_SAMPLE_KEYS = (
    "real_distance_to_real_center",
    "fake_distance_to_real_center",
    "fake_distance_to_fake_center",
    "real_ball_fake_center_distance",
    "authentic",
)


# --------------------------------------------------------------------------------------
# Argument checks
# --------------------------------------------------------------------------------------


def check_num_alphas(num_alphas: Any) -> int:
    """``num_alphas`` must be an integer of at least 2 (the grid holds 0 and 1)."""
    return check_int(num_alphas, "num_alphas", minimum=2, maximum=1_000_000)


# --------------------------------------------------------------------------------------
# Small building blocks
# --------------------------------------------------------------------------------------


def _centre_distance(points: Tensor, centre: Tensor) -> Tensor:
    """Exact float64 ``||p - centre||`` per row (via :func:`.knn.exact_sq_dist`, in row chunks
    sharing one float64 buffer)."""
    n, rows = points.shape[0], chunk_rows(points.shape[1])
    out = torch.empty(n, dtype=torch.float64, device=points.device)
    buf = torch.empty((min(rows, n), points.shape[1]), dtype=torch.float64, device=points.device)
    for s in range(0, n, rows):
        blk = points[s : s + rows]
        out[s : s + blk.shape[0]] = knn.exact_sq_dist(blk, centre, buf)
    return out.sqrt()


def _radii(distances: Tensor, levels: Any) -> Tensor:
    """Quantiles of ``distances`` at ``levels`` (numpy-style linear interpolation)."""
    q = torch.as_tensor(levels, dtype=torch.float64, device=distances.device)
    return torch.quantile(distances, q)


def _levels(values: Tensor, reference: Tensor) -> Tensor:
    """Smallest ``q`` in ``[0, 1]`` with ``value <= quantile(reference, q)``, else :data:`NEVER`.

    Inverts the piecewise-linear quantile function of ``reference``; ``inf`` values give
    :data:`NEVER`.
    """
    s = torch.sort(reference).values
    n = s.shape[0]
    j = torch.searchsorted(s, values, side="left")  # first s[j] >= value
    lo = s[(j - 1).clamp(0, n - 1)]
    hi = s[j.clamp(0, n - 1)]
    gap = torch.where(hi > lo, hi - lo, torch.ones_like(hi))
    frac = ((values - lo) / gap).clamp(0.0, 1.0)
    level = ((j - 1).to(torch.float64) + frac) / max(n - 1, 1)
    level = torch.where(j == 0, torch.zeros_like(level), level.clamp(0.0, 1.0))
    return torch.where(j >= n, torch.full_like(level, NEVER), level)


def _integrated(alphas: Tensor, curve: Tensor) -> Tensor:
    """``1 - 2 * integral |curve - alpha| d alpha`` by the trapezoid rule on the grid."""
    return 1.0 - 2.0 * torch.trapezoid((curve - alphas).abs(), alphas)


def _authentic_from_pass(res: PassResult) -> Tensor:
    """``[M]`` bool: ``d(y_j, x_i*)^2 > NND_1(x_i*)^2`` (exact squared values, so a copy is False)."""
    nn_index = requested(res.cross.fake_nn_index, "fake_nn_index")
    return requested(res.cross.fake_nn_sq_dist, "fake_nn_sq_dist") > res.real.sq_radii[1][nn_index]


def fake_centre_distance(fake: Tensor) -> Tensor:
    """``||y_j - c_g||`` with ``c_g`` the float64 mean of the generated set (beta-recall's values)."""
    return _centre_distance(fake, mean64(fake))


def alpha_beta_from_sets(
    sets: FeatureSets,
    *,
    num_alphas: int,
    k: int,
    real_center: Optional[Tensor] = None,
    per_sample: bool = False,
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = knn.DEFAULT_BLOCK_BYTES,
    real_cache: Optional[RealSide] = None,
    shard: Optional[Shard] = None,
) -> Tuple[Dict[str, Tensor], PassResult]:
    """All scores from checked (and, when asked, already embedded) features and one engine pass."""
    fake_dist_g = fake_centre_distance(sets.fake)
    res = run_pass(
        sets,
        PassRequest(nearest="fake", real_ks=(1,), fake_values=fake_dist_g, value_ks=(k,)),
        dtype=dtype,
        block_bytes=block_bytes,
        real_cache=real_cache,
        shard=shard,
    )
    out = alpha_beta_from_pass(res, num_alphas=num_alphas, k=k, real_center=real_center, per_sample=per_sample)
    return out, res


def alpha_beta_from_pass(
    res: PassResult,
    *,
    num_alphas: int,
    k: int,
    real_center: Optional[Tensor] = None,
    per_sample: bool = False,
) -> Dict[str, Tensor]:
    """The alpha/beta/authenticity outputs from a pass run with ``nearest="fake"`` (or True),
    ``real_ks=(1,)``, ``fake_values`` = :func:`fake_centre_distance` of the generated set and
    ``value_ks=(k,)``."""
    real = res.real.points
    fake = requested(res.sets.fake if res.sets is not None else None, "sets")
    fake_dist_g = requested(res.fake_values, "fake_values")
    # c_r: the engine's real side already holds the float64 real mean
    real_centre = res.real.centre if real_center is None else real_center
    real_dist = _centre_distance(res.real.points, real_centre)
    fake_dist = _centre_distance(fake, real_centre)
    out_dtype = res.dtype
    alphas = torch.linspace(0.0, 1.0, num_alphas, dtype=torch.float64, device=real.device)
    r_alpha = _radii(real_dist, alphas)
    r_beta = _radii(fake_dist_g, alphas)
    ball_value = res.cross.real_ball_min_value[k]  # min ||y - c_g|| over fakes in the k-NN ball
    alpha_curve = (fake_dist[:, None] <= r_alpha[None, :]).to(torch.float64).mean(0)
    beta_curve = (ball_value[:, None] <= r_beta[None, :]).to(torch.float64).mean(0)
    authentic = _authentic_from_pass(res)

    out = {
        "alphas": alphas.to(out_dtype),
        "alpha_precision_curve": alpha_curve.to(out_dtype),
        "beta_recall_curve": beta_curve.to(out_dtype),
        "alpha_precision": _integrated(alphas, alpha_curve).to(out_dtype),
        "beta_recall": _integrated(alphas, beta_curve).to(out_dtype),
        "authenticity": authentic.to(torch.float64).mean().to(out_dtype),
    }
    if per_sample:
        out.update(
            authentic=authentic,
            fake_nearest_real=requested(res.cross.fake_nn_index, "fake_nn_index"),
            alpha_typicality=_levels(fake_dist, real_dist),
            recalled_at_beta=_levels(ball_value, fake_dist_g),
            real_distance_to_real_center=real_dist,
            fake_distance_to_real_center=fake_dist,
            fake_distance_to_fake_center=fake_dist_g,
            real_ball_fake_center_distance=ball_value,
        )
    return out


# --------------------------------------------------------------------------------------
# Public functions
# --------------------------------------------------------------------------------------


@score_precision()
def alpha_precision_beta_recall(
    real: Any,
    fake: Any,
    *,
    num_alphas: int = 30,
    k: int = 5,
    embedding: Optional[Any] = None,
    return_per_sample: bool = False,
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = knn.DEFAULT_BLOCK_BYTES,
) -> Dict[str, Tensor]:
    r"""alpha-Precision and beta-Recall curves, their integrated scores, and Authenticity.

    Alaa et al. (ICML 2022); definitions and the differences from the authors' code and
    synthcity are in the module docstring. With ``alphas = linspace(0, 1, num_alphas)``:

    .. math::
        P_\alpha = \frac1M \sum_j \mathbb 1\big[\lVert y_j - c_r\rVert \le r_\alpha\big], \quad
        R_\beta = \frac1N \sum_i \mathbb 1\big[\exists j:\ d(x_i, y_j) \le \mathrm{NND}_k(x_i),\
            \lVert y_j - c_g\rVert \le r_\beta\big],

    integrated as :math:`1 - 2\int_0^1 \lvert \mathrm{curve}(a) - a\rvert da` by the trapezoid
    rule (1 is best; the authors' Riemann sum and synthcity's ``1/sum(alpha)`` normalisation
    differ by a few percent). At :math:`\beta = 1`, :math:`R_\beta` equals coverage with the
    same ``k``. Authenticity is the share of generated samples farther from their nearest
    real sample :math:`x_{i^*}` than :math:`\mathrm{NND}_1(x_{i^*})`; a copy of the real set
    scores exactly 0. ``N`` and ``M`` may differ.

    Args:
        real: ``[N, D]`` real features (the reference distribution P); ``N >= k + 1``.
        fake: ``[M, D]`` generated features (the model Q); ``M >= 1``.
        num_alphas: number of points of the alpha (= beta) grid, at least 2 (30 as the authors).
        k: neighbourhood size of the real balls of beta-recall (5, so that beta = 1 is coverage).
        embedding: None (naive mode: features as given, :math:`c_r` = real mean);
            ``"oneclass"`` (train :func:`train_oneclass` on ``real`` with its defaults, seed 0,
            embed both sets and use its fixed centre as :math:`c_r`, as the paper does; this
            overfits the real set when ``N`` is small for ``D`` and biases alpha-precision
            down, see :func:`train_oneclass`: prefer a model trained on a held-out real
            split, passed as the module); or a module/callable
            mapping ``[n, D]`` to ``[n, D']``, used as is; if it has a ``center`` attribute
            (as a :func:`train_oneclass` model does) that is :math:`c_r`, else the mean of
            the embedded real set. It is called as is, in chunks, without gradients (put a
            module in eval mode first). All distances are then taken in the embedding.
        return_per_sample: also return the sample-level outputs for auditing (below).
        dtype: GEMM dtype of the k-NN pass, float32 by default (float64 if an input is float64).
        block_bytes: memory budget of one distance tile (and of each set's centred working
            copy, made when the set fits it: peak extra memory is at most about 3x this).

    Returns:
        dict with ``alphas``, ``alpha_precision_curve``, ``beta_recall_curve`` (each
        ``[num_alphas]``), ``alpha_precision``, ``beta_recall`` (integrated) and
        ``authenticity`` (0-dim), in the compute dtype. With ``return_per_sample=True`` also
        (float64 unless stated):

        * ``authentic``: ``[M]`` bool, the authenticity test of each generated sample;
        * ``fake_nearest_real``: ``[M]`` int64, index of its nearest real sample :math:`i^*`
          (the lowest index among exactly equidistant ones);
        * ``alpha_typicality``: ``[M]``, the smallest :math:`\alpha` whose real
          :math:`\alpha`-support :math:`B(c_r, r_\alpha)` holds the sample (0 = most typical;
          :data:`NEVER` = 2.0 when outside the whole real support);
        * ``recalled_at_beta``: ``[N]``, the smallest :math:`\beta` at which the real sample
          is recalled (:data:`NEVER` = 2.0 when its k-NN ball holds no generated sample);
        * the ingredients of the decisions, used by :func:`alpha_beta_masks`:
          ``real_distance_to_real_center`` ``[N]``, ``fake_distance_to_real_center`` ``[M]``,
          ``fake_distance_to_fake_center`` ``[M]``, and ``real_ball_fake_center_distance``
          ``[N]`` (smallest :math:`\lVert y_j - c_g\rVert` over the generated samples in
          the real sample's k-NN ball, ``inf`` when none).

        ``alpha_typicality <= a`` and ``recalled_at_beta <= b`` reproduce the decisions at
        any level up to floating-point rounding exactly at a quantile;
        :func:`alpha_beta_masks` gives the exact ones.

    Example:
        >>> import torch
        >>> real = torch.arange(8.0)[:, None]  # c_r = 3.5
        >>> fake = torch.tensor([[3.25], [4.0], [5.5], [9.0]])
        >>> out = alpha_precision_beta_recall(real, fake, num_alphas=5, k=2)
        >>> out["alphas"].tolist()
        [0.0, 0.25, 0.5, 0.75, 1.0]
        >>> out["alpha_precision_curve"].tolist(), out["beta_recall_curve"].tolist()
        ([0.5, 0.5, 0.75, 0.75, 0.75], [0.375, 0.375, 0.625, 0.625, 0.625])
        >>> [float(out[n]) for n in ("alpha_precision", "beta_recall", "authenticity")]
        [0.5625, 0.625, 0.25]
        >>> float(alpha_precision_beta_recall(real, real.clone(), k=2)["authenticity"])
        0.0
    """
    num_alphas = check_num_alphas(num_alphas)
    k = check_positive_int(k, "k")
    embedding = check_embedding(embedding)
    if not isinstance(return_per_sample, bool):
        raise ValueError(f"Expected argument `return_per_sample` to be a bool, but got {return_per_sample!r}")
    sets = FeatureSets.check(real, fake)
    check_min_samples(sets.real, k, "real")
    centre = None
    if embedding is not None:
        fn = train_oneclass(sets.real) if isinstance(embedding, str) else embedding
        real_e, fake_e = embed_features(fn, sets.real, "real"), embed_features(fn, sets.fake, "fake")
        check_pair(real_e, fake_e)
        centre = embedding_center(fn, real_e)
        sets = FeatureSets(real_e, fake_e)  # the embedding's outputs, each checked by embed_features
    out, _ = alpha_beta_from_sets(
        sets,
        num_alphas=num_alphas,
        k=k,
        real_center=centre,
        per_sample=return_per_sample,
        dtype=dtype,
        block_bytes=block_bytes,
    )
    return out


@score_precision()
def authenticity(
    real: Any,
    fake: Any,
    *,
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = knn.DEFAULT_BLOCK_BYTES,
) -> Tensor:
    r"""Authenticity (Alaa et al., ICML 2022): the share of generated samples that are not copies.

    .. math::
        A = \frac1M \sum_j \mathbb 1\big[d(y_j, x_{i^*}) > \mathrm{NND}_1(x_{i^*})\big],
        \qquad i^* = \arg\min_i d(y_j, x_i),

    the corrected per-generated-sample definition (authors' branch ``boris-new``, dgm-eval),
    not the index-mixing formula of branch ``main`` and synthcity, which needs ``N == M``.
    Distances are compared as exact float64 squares, so an exact copy of a real sample is
    never authentic and a copy of the real set scores exactly 0. ``NND_1`` excludes the real
    sample itself, but a duplicate inside the real set counts (at distance 0). When several
    real samples are exactly equally near, :math:`i^*` is the one of lowest index (as
    ``numpy.argmin``), whatever ``block_bytes``.

    Args:
        real: ``[N, D]`` real (training) features, ``N >= 2``.
        fake: ``[M, D]`` generated features.
        dtype: GEMM dtype, float32 by default (float64 if an input is float64).
        block_bytes: memory budget of one distance tile (and of each set's centred working
            copy, made when the set fits it: peak extra memory is at most about 3x this).

    Returns:
        0-dim tensor in ``[0, 1]`` (1: no generated sample is closer to a real sample than
        that sample's own nearest real neighbour).

    Example:
        >>> import torch
        >>> real = torch.tensor([[0.0], [1.0], [3.0]])
        >>> float(authenticity(real, torch.tensor([[0.0], [3.4], [5.5], [7.0]])))
        0.5
    """
    sets = FeatureSets.check(real, fake)
    check_min_samples(sets.real, 1, "real")
    res = run_pass(sets, PassRequest(nearest="fake", real_ks=(1,)), dtype=dtype, block_bytes=block_bytes)
    return _authentic_from_pass(res).to(torch.float64).mean().to(res.dtype)


@score_precision()
def alpha_beta_masks(result: Dict[str, Tensor], *, alpha: float = 1.0, beta: float = 1.0) -> Dict[str, Tensor]:
    r"""Sample-level decisions at one level ``alpha`` / ``beta``, for auditing and filtering.

    Takes the output of ``alpha_precision_beta_recall(..., return_per_sample=True)`` and
    returns, with the same quantile computation as the curves (so the mean of ``precise`` at a
    grid point equals the curve there exactly):

    * ``precise``: ``[M]`` bool, the generated sample lies in the real alpha-support
      :math:`\lVert y_j - c_r\rVert \le r_\alpha`;
    * ``authentic``: ``[M]`` bool, the authenticity test (independent of alpha and beta);
    * ``recalled``: ``[N]`` bool, the real sample is recalled at ``beta``.

    A typical audit keeps ``fake[masks["precise"] & masks["authentic"]]``.

    Args:
        result: dict returned with ``return_per_sample=True``.
        alpha: level of the real support, in ``[0, 1]``.
        beta: level of the generated support, in ``[0, 1]``.

    Example:
        >>> import torch
        >>> real = torch.arange(8.0)[:, None]
        >>> fake = torch.tensor([[3.25], [4.0], [5.5], [9.0]])
        >>> out = alpha_precision_beta_recall(real, fake, num_alphas=5, k=2, return_per_sample=True)
        >>> out["alpha_typicality"].tolist(), out["authentic"].tolist()
        ([0.0, 0.0, 0.5, 2.0], [False, False, False, True])
        >>> masks = alpha_beta_masks(out, alpha=0.5, beta=1.0)
        >>> masks["precise"].tolist()
        [True, True, True, False]
        >>> masks["recalled"].tolist()
        [False, False, False, True, True, True, True, True]
    """
    for name, value in (("alpha", alpha), ("beta", beta)):
        check_real(value, name, low=0.0, high=1.0)
    if not isinstance(result, dict) or any(key not in result for key in PER_SAMPLE_KEYS):
        raise ValueError(
            "Expected argument `result` to be the dict returned by "
            "`alpha_precision_beta_recall(..., return_per_sample=True)`"
        )
    r_alpha = _radii(result["real_distance_to_real_center"], float(alpha))
    r_beta = _radii(result["fake_distance_to_fake_center"], float(beta))
    return {
        "precise": result["fake_distance_to_real_center"] <= r_alpha,
        "authentic": result["authentic"],
        "recalled": result["real_ball_fake_center_distance"] <= r_beta,
    }


__all__ = ["NEVER", "alpha_beta_masks", "alpha_precision_beta_recall", "authenticity", "train_oneclass"]
