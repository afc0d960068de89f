"""Seeded k-means in torch (CPU or CUDA) for the PRD histograms, several runs at once.

Lloyd's algorithm with greedy k-means++ seeding (Arthur & Vassilvitskii 2007; ``2 + log k``
candidates per step, as scikit-learn does). Like scikit-learn's ``MiniBatchKMeans``, the
``n_init`` seedings of a run are drawn and compared on a random subsample of ``init_size``
points; here each is first refined by :data:`REFINE_ITER` Lloyd iterations there, and the best
(lowest inertia) is run to convergence on the subsample and then on all points.

* ``num_runs`` independent clusterings of the same points advance together: one GEMM per
  block of rows serves the centres of every run (and of every seeding while seeding), which
  keeps the GEMMs wide and the number of small operations low, on CPU and GPU alike.
* Randomness comes only from a CPU ``torch.Generator`` seeded by ``seed`` (never the global
  RNG); its uniforms are moved to the data's device, so the random stream does not depend on
  the device (the clusterings may still differ by float rounding).
* Squared distances ``||x||^2 - 2 x.c + ||c||^2`` by GEMM on mean-centred data, in blocks of
  rows sized by :data:`BLOCK_BYTES`; the centre sums are a one-hot GEMM on the same block
  (deterministic, unlike ``index_add_`` on CUDA), so an iteration reads the data once.
* Convergence per run as in scikit-learn's ``KMeans``: labels unchanged, or total squared
  centre shift ``<= tol * mean(per-feature variance)``, or ``max_iter`` iterations.
* An empty cluster is re-seeded at the point farthest from its centre.
* float32 products in IEEE float32 and no autocast, whatever the caller set
  (:func:`~lightning_prd.functional.engine.precision.score_precision`): the labels follow the GEMMs.
* The k-means++ draws take the running sums of the distances on the CPU (:func:`running_sums`), so
  seeding is deterministic on every device, under ``torch.use_deterministic_algorithms(True)`` too.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional, Tuple

import numpy as np
import torch
from torch import Tensor

from lightning_prd.functional.engine.inputs import check_int, check_positive_int, check_real
from lightning_prd.functional.engine.precision import score_precision

#: Memory budget of one block of rows (the rows, their scores and one-hot labels).
BLOCK_BYTES = 64 * 2**20
#: Lloyd iterations after which the ``n_init`` seedings of a run are compared.
REFINE_ITER = 3


class KMeansResult(NamedTuple):
    centers: Tensor  # [R, k, D]
    labels: Tensor  # [R, n] int64
    inertia: Tensor  # [R] float64: sum of squared distances to the assigned centres
    n_iter: Tensor  # [R] Lloyd iterations of the last phase


class _Data(NamedTuple):
    x: Tensor  # mean-centred points [n, D]
    sq: Tensor  # their squared norms [n]
    mean: Tensor  # the subtracted mean (float64)
    tol_scale: float  # mean per-feature variance (scikit-learn's tolerance unit)


def prepare(x: Tensor, *, inplace: bool = False) -> _Data:
    """Centre ``x`` once (a shared offset costs float32 digits in the GEMM) and cache norms."""
    mean = x.mean(0, dtype=torch.float64)
    x = x.sub_(mean.to(x.dtype)) if inplace else x - mean.to(x.dtype)
    sq = x.square().sum(1)
    return _Data(x, sq, mean, float(sq.sum(dtype=torch.float64)) / (x.shape[0] * x.shape[1]))


def _assign(x: Tensor, sq: Tensor, centers: Tensor, with_sums: bool = True) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """For ``R`` sets of ``k`` centres: labels and squared distances ``[R, n]``, sums, counts."""
    runs, k, dim = centers.shape
    flat = centers.reshape(runs * k, dim)
    c_sq = flat.square().sum(1)
    offsets = torch.arange(runs, device=x.device) * k
    rows = max(1, BLOCK_BYTES // (x.element_size() * (dim + 2 * runs * k)))
    labels = torch.empty(runs, x.shape[0], dtype=torch.long, device=x.device)
    dist = torch.empty(runs, x.shape[0], dtype=x.dtype, device=x.device)
    sums = torch.zeros_like(flat)
    for start in range(0, x.shape[0], rows):
        xb, stop = x[start : start + rows], start + rows
        scores = torch.addmm(c_sq, xb, flat.T, alpha=-2.0).view(-1, runs, k)  # ||c||^2 - 2 x.c
        best, lab = scores.min(2)
        labels[:, start:stop] = lab.T
        dist[:, start:stop] = (best.T + sq[start:stop]).clamp_min_(0)
        if with_sums:
            one_hot = torch.zeros(xb.shape[0], runs * k, dtype=x.dtype, device=x.device)
            sums.addmm_(one_hot.scatter_(1, lab + offsets, 1.0).T, xb)
    counts = torch.bincount((labels + offsets.unsqueeze(1)).flatten(), minlength=runs * k)
    return labels, dist, sums.view(runs, k, dim), counts.view(runs, k)


def _lloyd(data: _Data, centers: Tensor, max_iter: int, tol: float) -> KMeansResult:
    """Lloyd iterations for ``R`` independent sets of centres ``[R, k, D]``."""
    x, centers = data.x, centers.clone()
    labels, dist, sums, counts = _assign(x, data.sq, centers)
    n_iter = torch.zeros(centers.shape[0], dtype=torch.long)
    active = torch.arange(centers.shape[0], device=x.device)  # runs not yet converged
    for it in range(1, max_iter + 1):
        new = sums / counts.clamp_min(1).unsqueeze(2).to(x.dtype)
        empty = counts == 0
        for a in torch.nonzero(empty.any(1)).flatten().tolist():  # re-seed at the farthest points
            slots = torch.nonzero(empty[a]).flatten()
            new[a, slots] = x[dist[active[a]].topk(slots.numel()).indices]
        shift = (new - centers[active]).square().sum((1, 2))
        centers[active] = new
        new_labels, new_dist, sums, counts = _assign(x, data.sq, new, with_sums=it < max_iter)
        done = (new_labels == labels[active]).all(1) | (shift <= tol * data.tol_scale)
        labels[active], dist[active] = new_labels, new_dist
        n_iter[active.cpu()] = it
        keep = ~done
        active, sums, counts = active[keep], sums[keep], counts[keep]
        if active.numel() == 0:
            break
    return KMeansResult(centers, labels, dist.sum(1, dtype=torch.float64), n_iter)


def running_sums(dist: Tensor) -> Tensor:
    """The float64 running sums of the rows of ``dist`` ``[S, n]``, as a CPU tensor: left to right, one
    addition per entry (NumPy's ``cumsum``, the values of torch's CPU ``cumsum``). Computed on the CPU
    whatever the device of ``dist``: the same sums on every device, and no CUDA ``cumsum``, which some torch
    versions refuse under ``torch.use_deterministic_algorithms(True)``.

    Example:
        >>> running_sums(torch.tensor([[1.0, 2.0, 3.0], [0.5, 0.0, 0.25]])).tolist()
        [[1.0, 3.0, 6.0], [0.5, 0.5, 0.75]]
    """
    rows = dist.detach().to(device="cpu", dtype=torch.float64).numpy()
    return torch.from_numpy(np.cumsum(rows, axis=1))


def _kmeans_pp(x: Tensor, sq: Tensor, u: Tensor) -> Tensor:
    """Greedy k-means++ seedings among the rows of ``x``, all advancing together.

    ``u`` holds uniforms ``[k, S, trials]`` (float64, on the CPU) for ``S`` seedings; the candidates of
    each step are drawn on the CPU (:func:`running_sums`). Returns ``[S, k]`` row indices.
    """
    n, (k, seedings, trials) = x.shape[0], u.shape
    runs = torch.arange(seedings, device=x.device)
    chosen = torch.empty(seedings, k, dtype=torch.long, device=x.device)
    chosen[:, 0] = (u[0, :, 0] * n).long().clamp_max(n - 1).to(x.device)
    dist = (sq + sq[chosen[:, :1]] - 2.0 * (x[chosen[:, 0]] @ x.T)).clamp_min_(0)  # [S, n]
    dist[runs, chosen[:, 0]] = 0
    for i in range(1, k):
        cum = running_sums(dist)
        total = cum[:, -1:]
        by_dist = torch.searchsorted(cum, u[i] * total, right=True).clamp_max(n - 1)
        # all remaining distances 0 (fewer distinct points than k): pick uniformly
        cand = torch.where(total > 0, by_dist, (u[i] * n).long().clamp_max(n - 1)).to(x.device)  # [S, trials]
        flat = cand.flatten()
        d_cand = torch.addmm(sq[flat].unsqueeze(1) + sq, x[flat], x.T, alpha=-2.0).clamp_min_(0)
        d_cand = torch.minimum(dist.unsqueeze(1), d_cand.view(seedings, trials, n))
        best = d_cand.sum(2, dtype=torch.float64).argmin(1)  # lowest potential per seeding
        chosen[:, i] = cand[runs, best]
        dist = d_cand[runs, best]
        dist.scatter_(1, chosen[:, : i + 1], 0.0)
    return chosen


@score_precision()
def fit(
    data: _Data,
    num_clusters: int,
    *,
    seed: int,
    num_runs: int = 1,
    n_init: int = 10,
    max_iter: int = 100,
    tol: float = 1e-4,
    init_size: int = 4096,
) -> KMeansResult:
    """``num_runs`` independent k-means clusterings of prepared data (centred coordinates).

    All runs draw from one generator seeded by ``seed`` and share the seeding subsample.
    Seeding memory grows as ``num_runs * n_init * init_size``.
    """
    n, dim = data.x.shape
    gen = torch.Generator().manual_seed(seed)
    sub = data
    if init_size < n:
        idx = torch.randperm(n, generator=gen)[: max(init_size, num_clusters)].to(data.x.device)
        sub = _Data(data.x[idx], data.sq[idx], data.mean, data.tol_scale)
    u = torch.rand(num_clusters, num_runs * n_init, 2 + int(math.log(num_clusters)), generator=gen, dtype=torch.float64)
    seeds = _kmeans_pp(sub.x, sub.sq, u)
    refined = _lloyd(sub, sub.x[seeds], REFINE_ITER, tol)
    best = refined.inertia.view(num_runs, n_init).argmin(1)  # the first of equals: deterministic
    centers = refined.centers.view(num_runs, n_init, num_clusters, dim)[
        torch.arange(num_runs, device=best.device), best
    ]
    res = _lloyd(sub, centers, max_iter, tol)
    return res if sub is data else _lloyd(data, res.centers, max_iter, tol)


@score_precision()
def kmeans(
    x: Tensor,
    num_clusters: int,
    *,
    seed: int = 0,
    n_init: int = 10,
    max_iter: int = 100,
    tol: float = 1e-4,
    init_size: int = 4096,
    init: Optional[Tensor] = None,
) -> KMeansResult:
    """Cluster the rows of a floating ``[n, D]`` tensor into ``num_clusters`` groups (one run).

    Args:
        x: points, float32 or float64, on any device (the work stays there).
        num_clusters: ``k``, at most ``n``.
        seed: seed of the private ``torch.Generator``; equal seeds give equal results.
        n_init: number of k-means++ seedings; the one with the lowest inertia after
            :data:`REFINE_ITER` Lloyd iterations on the subsample is kept.
        max_iter: Lloyd iterations at most, on the subsample and then on all points.
        tol: relative tolerance on the total squared centre shift (scikit-learn's meaning).
        init_size: size of the subsample on which the seedings are drawn and compared.
        init: ``[k, D]`` initial centres; skips seeding and runs Lloyd from them.

    Returns:
        :class:`KMeansResult` without the run dimension: centres ``[k, D]`` in the
        coordinates and dtype of ``x``, labels ``[n]``, inertia and iterations as 0-dim tensors.
    """
    if x.ndim != 2 or not x.is_floating_point():
        raise ValueError(
            f"Expected argument `x` to be a floating 2-D tensor, but got {x.dtype} of shape {tuple(x.shape)}"
        )
    num_clusters = check_int(num_clusters, "num_clusters", minimum=1, maximum=x.shape[0])
    n_init, max_iter, init_size = (
        check_positive_int(v, n) for v, n in ((n_init, "n_init"), (max_iter, "max_iter"), (init_size, "init_size"))
    )
    tol = check_real(tol, "tol", low=0.0)
    data = prepare(x)
    mean = data.mean.to(x.dtype)
    if init is None:
        res = fit(data, num_clusters, seed=seed, n_init=n_init, max_iter=max_iter, tol=tol, init_size=init_size)
    elif init.shape != (num_clusters, x.shape[1]):
        raise ValueError(f"Expected argument `init` of shape {(num_clusters, x.shape[1])}, but got {tuple(init.shape)}")
    else:
        res = _lloyd(data, (init.to(x) - mean).unsqueeze(0), max_iter, tol)
    return KMeansResult(res.centers[0] + mean, res.labels[0], res.inertia[0], res.n_iter[0])
