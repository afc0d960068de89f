r"""The :math:`C_T` data-copying statistic (Meehan, Chaudhuri, Dasgupta, AISTATS 2020).

Reference: C. Meehan, K. Chaudhuri, S. Dasgupta, "A Non-Parametric Test to Detect Data-Copying in
Generative Models", AISTATS 2020 (code ``casey-meehan/data-copying``), with the choices of dgm-eval's
``compute_CTscore`` (``layer6ai-labs/dgm-eval``, ``dgm_eval/metrics/ct.py``).

Roles: ``real`` is the training set :math:`T`, ``test`` a held-out real set :math:`P_n` (never seen in
training) and ``fake`` the generated set :math:`Q_m`. Let :math:`L(z) = \min_{t \in T_\pi} d(z, t)`, the
distance to the nearest training sample *of the same cell* :math:`\pi`.

1. If ``D > pca_dim`` (64), all three sets are projected onto the top ``pca_dim`` principal axes of the
   training set (dgm-eval's ``PCA(n_components=64).fit(train)``).
2. The training set is split into ``num_cells = 3`` cells by k-means (``KMeans(n_clusters=3,
   n_init=10)``); every sample belongs to the cell of its nearest centre.
3. In each cell, the Mann-Whitney U statistic of the generated distances :math:`L(Q_\pi)` against the
   test distances :math:`L(P_\pi)` (``mannwhitneyu(LQm, LPn).statistic``: pairs with
   :math:`L(q) > L(p)`, ties counted 1/2), z-scored under the null with the reference code's continuity
   correction and no tie correction:

   .. math::
       Z_U(\pi) = \frac{U - (n_\pi m_\pi / 2 - 1/2)}{\sqrt{n_\pi m_\pi (n_\pi + m_\pi + 1) / 12}} .

4. Cells holding at most ``cell_threshold = 20`` generated samples are dropped (the reference's
   :math:`Q_m(\pi) > \tau` with :math:`\tau = 20 / m`), and

   .. math::
       C_T = \frac{\sum_{\pi \in \Pi_\tau} P_n(\pi)\, Z_U(\pi)}{\sum_{\pi \in \Pi_\tau} P_n(\pi)},
       \qquad P_n(\pi) = n_\pi / n .

:math:`C_T \ll 0` (generated samples closer to the training set than fresh data is): data copying;
:math:`C_T \approx 0`: none; :math:`C_T \gg 0`: underfitting. Each :math:`Z_U` is a z-score (about
standard normal without copying), so values below about -3 are far outside chance.

Differences from the reference code: the principal axes are exact (float64 eigenvectors of the
training covariance; scikit-learn's ``PCA`` picks its randomized solver at these sizes, unseeded), the
k-means (:mod:`~lightning_prd.functional.engine.kmeans`: greedy k-means++, 10 seedings, Lloyd to
scikit-learn's tolerance) is seeded with ``seed`` (dgm-eval's is not), and nearest neighbours are
exact float64 (ties by index, which does not change a distance). :math:`C_T` does not depend on the
labels of the cells, so it matches the reference whenever both find the same partition. When no cell
keeps enough generated samples, :math:`C_T` is NaN (the reference divides 0 by 0).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, NamedTuple, Optional

import torch
from torch import Tensor

from lightning_prd.functional.engine.inputs import check_int, check_seed
from lightning_prd.functional.engine.kmeans import kmeans
from lightning_prd.functional.engine.one_pass import requested, run_pass
from lightning_prd.functional.engine.precision import score_precision
from lightning_prd.functional.engine.request import PassRequest
from lightning_prd.functional.engine.sets import FeatureSets
from lightning_prd.functional.engine.stats import gram64, mean64, row_chunks
from lightning_prd.functional.memorization import check_test_set

#: dgm-eval's choices: PCA to 64 components, 3 cells, cells need more than 20 generated samples
PCA_DIM = 64
NUM_CELLS = 3
CELL_THRESHOLD = 20
#: scikit-learn's KMeans defaults that dgm-eval keeps (n_init is set explicitly there)
KMEANS_N_INIT = 10
KMEANS_MAX_ITER = 300


class DataCopyingReference(NamedTuple):
    """The training and test side of :math:`C_T`, independent of the generated set (reuse it across
    evaluations): the projection (``mean`` ``[D]`` and ``basis`` ``[D, pca_dim]`` float64, both None
    without PCA), the cell ``centres`` ``[num_cells, d]``, the reduced training samples of each cell
    (``real_cells``), the test counts per cell (``test_counts`` ``[num_cells]`` int64) and each cell's
    sorted test distances :math:`L(P_\\pi)` (``test_distances``, float64)."""

    mean: Optional[Tensor]
    basis: Optional[Tensor]
    centres: Tensor
    real_cells: List[Tensor]
    test_counts: Tensor
    test_distances: List[Tensor]


def check_data_copying_options(num_cells: Any, cell_threshold: Any, pca_dim: Any, seed: Any) -> tuple:
    """Validated ``(num_cells, cell_threshold, pca_dim, seed)``; ``pca_dim`` may be None (no projection)."""
    num_cells = check_int(num_cells, "num_cells", minimum=1)
    cell_threshold = check_int(cell_threshold, "cell_threshold", minimum=0)
    pca_dim = None if pca_dim is None else check_int(pca_dim, "pca_dim", minimum=1)
    return num_cells, cell_threshold, pca_dim, check_seed(seed)


def _project(x: Tensor, mean: Optional[Tensor], basis: Optional[Tensor]) -> Tensor:
    """``(x - mean) @ basis`` in float64 row chunks, or ``x`` itself without a projection."""
    if mean is None or basis is None:
        return x
    out = torch.empty(x.shape[0], basis.shape[1], dtype=torch.float64, device=x.device)
    for s, rows in row_chunks(x):
        out[s : s + rows.shape[0]] = rows.sub_(mean) @ basis
    return out


def _nearest(reference: Tensor, queries: Tensor) -> tuple:
    """Exact nearest reference row of each query: ``(index, distance)`` (:mod:`.knn`'s cross pass)."""
    res = run_pass(FeatureSets(reference, queries), PassRequest(nearest="fake"))
    index = requested(res.cross.fake_nn_index, "fake_nn_index")
    return index, requested(res.cross.fake_nn_sq_dist, "fake_nn_sq_dist").sqrt()


def _cell_distances(cells: List[Tensor], points: Tensor, labels: Tensor) -> List[Tensor]:
    """Per cell, the sorted distances of its ``points`` to the nearest training sample of the cell."""
    out = []
    for c, train in enumerate(cells):
        mine = points[labels == c]
        dist = _nearest(train, mine)[1] if mine.shape[0] else torch.empty(0, dtype=torch.float64)
        out.append(torch.sort(dist.to(torch.float64)).values)
    return out


def data_copying_reference(
    real: Tensor,
    test: Tensor,
    *,
    num_cells: int = NUM_CELLS,
    pca_dim: Optional[int] = PCA_DIM,
    seed: int = 0,
) -> DataCopyingReference:
    """The :class:`DataCopyingReference` of checked training features ``real`` and test features ``test`` (one
    width, one device; options checked by :func:`check_data_copying_options`)."""
    if real.shape[0] < num_cells:
        raise ValueError(
            f"Expected argument `real` to hold at least `num_cells` = {num_cells} samples for the cells, "
            f"but got {real.shape[0]}"
        )
    mean = basis = None
    if pca_dim is not None and real.shape[1] > pca_dim:
        mean = mean64(real)
        cov = gram64(real, centre=mean)
        basis = torch.linalg.eigh(cov).eigenvectors[:, -pca_dim:].flip(1)  # largest variance first
    train, held_out = _project(real, mean, basis), _project(test, mean, basis)
    fit = kmeans(
        train, num_clusters=num_cells, seed=seed, n_init=KMEANS_N_INIT, max_iter=KMEANS_MAX_ITER, init_size=len(train)
    )
    centres = fit.centers
    train_labels, test_labels = _nearest(centres, train)[0], _nearest(centres, held_out)[0]
    cells = [train[train_labels == c] for c in range(num_cells)]
    test_counts = torch.bincount(test_labels, minlength=num_cells).cpu()
    for c in range(num_cells):
        if cells[c].shape[0] == 0 or int(test_counts[c]) == 0:
            raise ValueError(
                f"Expected every cell to hold training and `test` samples, but cell {c} holds "
                f"{cells[c].shape[0]} training and {int(test_counts[c])} test samples; pass a smaller "
                f"`num_cells` (got {num_cells}) or more test samples"
            )
    return DataCopyingReference(mean, basis, centres, cells, test_counts, _cell_distances(cells, held_out, test_labels))


def _z_u(fake_dist: Tensor, test_dist: Tensor) -> float:
    """The reference code's z-scored Mann-Whitney U of ``fake_dist`` against sorted ``test_dist``."""
    m, n = fake_dist.shape[0], test_dist.shape[0]
    fake_dist = fake_dist.to(test_dist.device)
    below = torch.searchsorted(test_dist, fake_dist, side="left")
    at_most = torch.searchsorted(test_dist, fake_dist, side="right")
    u = float((below + at_most).sum()) / 2.0  # pairs with L(q) > L(p), ties 1/2
    return (u - (n * m / 2.0 - 0.5)) / math.sqrt(n * m * (n + m + 1) / 12.0)


def data_copying_from_reference(
    ref: DataCopyingReference, fake: Tensor, *, cell_threshold: int = CELL_THRESHOLD, per_cell: bool = False
) -> Dict[str, Tensor]:
    """:math:`C_T` of checked generated features against a :class:`DataCopyingReference` (outputs of
    :func:`data_copying`)."""
    num_cells = len(ref.real_cells)
    gen = _project(fake, ref.mean, ref.basis)
    labels = _nearest(ref.centres, gen)[0]
    fake_counts = torch.bincount(labels, minlength=num_cells).cpu()
    fake_dists = _cell_distances(ref.real_cells, gen, labels)
    z = torch.zeros(num_cells, dtype=torch.float64)
    for c in range(num_cells):
        if int(fake_counts[c]):
            z[c] = _z_u(fake_dists[c], ref.test_distances[c])
    kept = fake_counts > cell_threshold
    share = ref.test_counts.to(torch.float64) / float(ref.test_counts.sum())
    ct = (share[kept] * z[kept]).sum() / share[kept].sum()  # NaN when no cell is kept (0 / 0)
    device = fake.device
    out = {"ct": ct.to(device), "ct_cells": kept.sum().to(device)}
    if per_cell:
        out.update(
            ct_cell_z=z.to(device),
            ct_cell_test_share=share.to(device),
            ct_cell_fake_count=fake_counts.to(device),
            ct_cell_kept=kept.to(device),
        )
    return out


@score_precision()
def data_copying(
    real: Any,
    fake: Any,
    test: Any,
    *,
    num_cells: int = NUM_CELLS,
    cell_threshold: int = CELL_THRESHOLD,
    pca_dim: Optional[int] = PCA_DIM,
    seed: int = 0,
    return_per_cell: bool = False,
) -> Dict[str, Tensor]:
    r"""The :math:`C_T` data-copying statistic (Meehan et al., AISTATS 2020) as dgm-eval computes it.

    .. math::
        C_T = \frac{\sum_{\pi \in \Pi_\tau} P_n(\pi)\, Z_U(\pi)}{\sum_{\pi \in \Pi_\tau} P_n(\pi)},

    the test-share-weighted mean over the k-means cells :math:`\pi` of the training set of the
    z-scored Mann-Whitney U statistic comparing generated-to-training with test-to-training
    nearest-neighbour distances inside the cell (module docstring: PCA to 64 dimensions, 3 cells, cells
    with at most 20 generated samples dropped, dgm-eval's choices). Strongly negative (below about
    -3, far outside chance): the generated samples sit closer to the training samples than fresh data does, i.e.
    data copying; about 0 when the generated set looks like held-out data; positive: underfitting.

    Args:
        real: ``[N, D]`` training features :math:`T` (the set the model was trained on), ``N >= num_cells``.
        fake: ``[M, D]`` generated features :math:`Q_m`.
        test: ``[n, D]`` held-out real features :math:`P_n`, never used in training; every cell must hold some.
        num_cells: number of k-means cells of the training set (3, as dgm-eval).
        cell_threshold: a cell enters :math:`C_T` when it holds more than this many generated samples (20).
        pca_dim: project onto this many principal axes of ``real`` when ``D`` exceeds it (64); None: never.
        seed: seed of the k-means.
        return_per_cell: also return the per-cell values (below).

    Returns:
        dict with ``ct`` (0-dim float64; NaN when no cell keeps enough generated samples) and
        ``ct_cells`` (0-dim int64, the number of cells kept). With ``return_per_cell=True`` also
        ``ct_cell_z`` (float64, :math:`Z_U`, 0 for a cell without generated samples),
        ``ct_cell_test_share`` (float64, :math:`P_n(\pi)`), ``ct_cell_fake_count`` (int64) and
        ``ct_cell_kept`` (bool), each ``[num_cells]``.

    Raises:
        ValueError: when a cell holds no test (or no training) sample, or on bad options.

    Example:
        >>> import torch
        >>> g = torch.Generator().manual_seed(0)
        >>> train, test = torch.randn(600, 4, generator=g), torch.randn(300, 4, generator=g)
        >>> copies = train[:300] + 0.01 * torch.randn(300, 4, generator=g)
        >>> fresh = torch.randn(300, 4, generator=g)
        >>> [round(float(data_copying(train, fake, test)["ct"]), 1) for fake in (copies, fresh)]
        [-12.0, 1.0]
    """
    num_cells, cell_threshold, pca_dim, seed = check_data_copying_options(num_cells, cell_threshold, pca_dim, seed)
    if not isinstance(return_per_cell, bool):
        raise ValueError(f"Expected argument `return_per_cell` to be a bool, but got {return_per_cell!r}")
    sets = FeatureSets.check(real, fake)
    held_out = check_test_set(sets.real, test)
    ref = data_copying_reference(sets.real, held_out, num_cells=num_cells, pca_dim=pca_dim, seed=seed)
    return data_copying_from_reference(ref, sets.fake, cell_threshold=cell_threshold, per_cell=return_per_cell)


__all__ = [
    "DataCopyingReference",
    "check_data_copying_options",
    "data_copying",
    "data_copying_from_reference",
    "data_copying_reference",
]
