r"""The nearest-training-neighbour view of memorization, and dgm-eval's authenticity percentage.

For each generated sample :math:`y_j`, its nearest real (training) sample
:math:`x_{i^*}`, :math:`i^* = \arg\min_i d(y_j, x_i)` (the lowest index among exactly equidistant
ones, as ``numpy.argmin``), the distance :math:`d_j = d(y_j, x_{i^*})`, that real sample's own
nearest-neighbour radius :math:`r_j = \mathrm{NND}_1(x_{i^*})` (its nearest *other* real sample; a
duplicate inside the real set counts, at distance 0) and the ratio

.. math::
    \rho_j = d_j / r_j .

:math:`\rho_j \le 1` means :math:`y_j` is at least as close to its training neighbour as that
neighbour's own nearest training sample: the sample is *not authentic* in the sense of Alaa et al.
(ICML 2022), whose Authenticity (:func:`~lightning_prd.functional.alpha_beta.authenticity`) is the
share of :math:`\rho_j > 1`. A copy of a training sample has :math:`\rho_j = 0`. The pairs of smallest
:math:`\rho` (:func:`closest_pairs`) are the likeliest copies: look at them side by side.

Authenticity percentage: dgm-eval's ``compute_authpct`` (``layer6ai-labs/dgm-eval``,
``dgm_eval/metrics/authpct.py``, from ``marcojira/fls``) reports
:math:`100 \cdot \frac1M \#\{j : r_j < d_j\}`, the same strict test as our per-sample authenticity, so
``authenticity_percentage == 100 * authenticity`` on the same sets. dgm-eval forms full ``torch.cdist``
matrices in float32 (copies land at a small non-zero distance, ties go to whichever index
``torch.min`` returns); here every distance is exact float64 (:mod:`~lightning_prd.functional.knn`),
ties go to the lowest index, and memory is bounded by the tile budget. The FLD package's own
``AuthPct`` (``fld/metrics/AuthPct.py``) sub-samples 10,000 of each set and reports the percentage
minus 50; we follow dgm-eval (no sub-sampling, no offset).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import torch
from torch import Tensor

from lightning_prd.functional import knn
from lightning_prd.functional.engine.devices import to_compute_device
from lightning_prd.functional.engine.inputs import as_features, check_min_samples, check_positive_int
from lightning_prd.functional.engine.one_pass import PassResult, requested, run_pass
from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.engine.sets import FeatureSets


class NearestReal(NamedTuple):
    """Per generated sample ``j`` (``[M]`` tensors): ``real_index`` (int64, :math:`i^*`), ``distance``
    (float64, :math:`d_j`), ``real_radius`` (float64, :math:`r_j = \\mathrm{NND}_1(x_{i^*})`), ``ratio``
    (float64, :math:`\\rho_j = d_j / r_j`; 0 when :math:`d_j = 0`, ``inf`` when only :math:`r_j = 0`) and
    ``authentic`` (bool, :math:`d_j > r_j`, decided on exact float64 squares)."""

    real_index: Tensor
    distance: Tensor
    real_radius: Tensor
    ratio: Tensor
    authentic: Tensor


class ClosestPairs(NamedTuple):
    """The ``n`` pairs of smallest ratio, in increasing order: ``fake_index`` and ``real_index`` (int64) and
    their ``ratio`` and ``distance`` (float64), each ``[n]``."""

    fake_index: Tensor
    real_index: Tensor
    ratio: Tensor
    distance: Tensor


def check_test_set(real: Tensor, test: Any, name: str = "test") -> Tensor:
    """The held-out real set ``test`` as checked features ``[n, D]`` of the width and device of the checked
    ``real`` features (a set on a device without float64 is copied to the CPU first, like ``real``,
    :func:`~lightning_prd.functional.engine.devices.compute_device`); errors name the argument ``name``."""
    out = to_compute_device(as_features(test, name))
    if out.shape[1] != real.shape[1]:
        raise ValueError(f"Expected `{name}` to have the {real.shape[1]} features of `real`, but got {out.shape[1]}")
    if out.device != real.device:
        raise ValueError(f"Expected `{name}` on the device of `real` ({real.device}), but got {out.device}")
    return out


def nearest_real_from_pass(res: PassResult) -> NearestReal:
    """The :class:`NearestReal` view from a pass run with ``nearest="fake"`` (or True) and ``real_ks=(1,)``
    (the pass of :func:`~lightning_prd.functional.alpha_beta.authenticity`, which ``generative_metrics`` shares)."""
    index = requested(res.cross.fake_nn_index, "fake_nn_index")
    sq_dist = requested(res.cross.fake_nn_sq_dist, "fake_nn_sq_dist")
    sq_radius = res.real.sq_radii[1][index]
    distance, radius = sq_dist.sqrt(), sq_radius.sqrt()
    ratio = torch.where(sq_dist == 0, torch.zeros_like(distance), distance / radius)  # x/0 = inf
    return NearestReal(index, distance, radius, ratio, sq_dist > sq_radius)


@score_precision()
def nearest_real_neighbours(
    real: Any,
    fake: Any,
    *,
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = knn.DEFAULT_BLOCK_BYTES,
) -> NearestReal:
    r"""For each generated sample: its nearest real sample, that distance, and the ratio to the real sample's own
    ``NND_1`` (module docstring).

    .. math::
        i^*_j = \arg\min_i d(y_j, x_i), \qquad \rho_j = \frac{d(y_j, x_{i^*_j})}{\mathrm{NND}_1(x_{i^*_j})},

    exact float64 distances, ties by the lowest real index. ``authentic`` (:math:`\rho_j > 1`, decided on
    the exact squares) is the per-sample test whose mean is
    :func:`~lightning_prd.functional.alpha_beta.authenticity`; :func:`closest_pairs` picks the smallest
    :math:`\rho`.

    Args:
        real: ``[N, D]`` real (training) features, ``N >= 2``.
        fake: ``[M, D]`` generated features.
        dtype: GEMM dtype of the k-NN pass, float32 by default (float64 if an input is float64).
        block_bytes: memory budget of one distance tile.

    Returns:
        :class:`NearestReal` of ``[M]`` tensors ``real_index``, ``distance``, ``real_radius``, ``ratio``, ``authentic``.

    Example:
        >>> import torch
        >>> real = torch.tensor([[0.0], [1.0], [3.0]])
        >>> view = nearest_real_neighbours(real, torch.tensor([[0.0], [3.4], [5.5], [0.5]]))
        >>> view.real_index.tolist(), [round(v, 2) for v in view.ratio.tolist()], view.authentic.tolist()
        ([0, 2, 2, 0], [0.0, 0.2, 1.25, 0.5], [False, False, True, False])
    """
    sets = FeatureSets.check(real, fake)
    check_min_samples(sets.real, 1, "real")
    res = run_pass(sets, PassRequest(nearest="fake", real_ks=(1,)), dtype=dtype, block_bytes=block_bytes)
    return nearest_real_from_pass(res)


@score_precision()
def closest_pairs(view: NearestReal, n: int = 16) -> ClosestPairs:
    """The ``min(n, M)`` (generated, nearest real) pairs of smallest ratio :math:`\\rho` (the likeliest copies),
    in increasing order of ratio, equal ratios by the lower generated index: the pairs to show side by side.

    Example:
        >>> import torch
        >>> real = torch.tensor([[0.0], [1.0], [3.0]])
        >>> view = nearest_real_neighbours(real, torch.tensor([[0.0], [3.4], [5.5], [0.5]]))
        >>> pairs = closest_pairs(view, n=2)
        >>> pairs.fake_index.tolist(), pairs.real_index.tolist(), [round(v, 2) for v in pairs.ratio.tolist()]
        ([0, 1], [0, 2], [0.0, 0.2])
    """
    if not isinstance(view, NearestReal):
        raise ValueError(
            "Expected argument `view` to be the NearestReal of `nearest_real_neighbours`, "
            f"but got {type(view).__name__}"
        )
    n = check_positive_int(n, "n")
    order = torch.sort(view.ratio, stable=True).indices[:n]
    return ClosestPairs(order, view.real_index[order], view.ratio[order], view.distance[order])


def authenticity_percentage_of(view: NearestReal) -> Tensor:
    """``100 * mean(authentic)`` of a :class:`NearestReal` view, as a 0-dim float64 tensor."""
    return 100.0 * view.authentic.to(torch.float64).mean()


@score_precision()
def authenticity_percentage(
    real: Any,
    fake: Any,
    *,
    dtype: Optional[torch.dtype] = None,
    block_bytes: int = knn.DEFAULT_BLOCK_BYTES,
) -> Tensor:
    r"""Authenticity percentage as dgm-eval reports it (``compute_authpct``): 100 times the share of generated
    samples farther from their nearest real sample than that sample is from its own nearest real neighbour.

    .. math::
        \mathrm{AuthPct} = \frac{100}{M} \#\{j : \mathrm{NND}_1(x_{i^*_j}) < d(y_j, x_{i^*_j})\}
        = 100 \cdot \mathrm{Authenticity},

    the per-generated-sample test of Alaa et al. (ICML 2022) that
    :func:`~lightning_prd.functional.alpha_beta.authenticity` averages, in percent. Exact float64
    distances and lowest-index ties, where dgm-eval uses float32 ``cdist`` matrices (module docstring);
    no sub-sampling and no ``- 50`` offset (those are the FLD package's ``AuthPct``). Higher means fewer
    likely copies; a copy of the training set scores 0.

    Args:
        real: ``[N, D]`` real (training) features, ``N >= 2``.
        fake: ``[M, D]`` generated features.
        dtype: GEMM dtype of the k-NN pass, float32 by default (float64 if an input is float64).
        block_bytes: memory budget of one distance tile.

    Returns:
        0-dim float64 tensor in ``[0, 100]``.

    Example:
        >>> import torch
        >>> real = torch.tensor([[0.0], [1.0], [3.0]])
        >>> float(authenticity_percentage(real, torch.tensor([[0.0], [3.4], [5.5], [7.0]])))
        50.0
    """
    return authenticity_percentage_of(nearest_real_neighbours(real, fake, dtype=dtype, block_bytes=block_bytes))


__all__ = [
    "ClosestPairs",
    "NearestReal",
    "authenticity_percentage",
    "authenticity_percentage_of",
    "check_test_set",
    "closest_pairs",
    "nearest_real_from_pass",
    "nearest_real_neighbours",
]
