"""Float64 NumPy oracles written directly from the formulas (seed note, DESIGN.md).

Brute force on full distance matrices: only for the small sizes used in tests. Independent of
the package: no import from ``lightning_prd``.
"""

from __future__ import annotations

import numpy as np


def dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Plain Euclidean distances ``[len(a), len(b)]`` by direct differences."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))


def kth_radius(a: np.ndarray, k: int) -> np.ndarray:
    """NND_k: distance to the k-th nearest *other* point (diagonal masked, duplicates count)."""
    d = dist(a, a)
    np.fill_diagonal(d, np.inf)
    return np.sort(d, axis=1)[:, k - 1]


def precision_recall(real, fake, k=3):
    d = dist(fake, real)  # [M, N]
    precision = (d <= kth_radius(real, k)[None, :]).any(1).mean()
    recall = (d.T <= kth_radius(fake, k)[None, :]).any(1).mean()
    return precision, recall


def density_coverage(real, fake, k=5):
    hits = dist(fake, real) <= kth_radius(real, k)[None, :]  # [M, N]
    return hits.sum() / (k * len(fake)), hits.any(0).mean()


def realism(real, fake, k=3):
    r = kth_radius(real, k)
    keep = r <= np.median(r)
    d = dist(fake, real)[:, keep]
    with np.errstate(divide="ignore"):
        return (r[keep][None, :] / d).max(1)


def frechet(real, fake):
    from scipy import linalg

    real, fake = np.asarray(real, np.float64), np.asarray(fake, np.float64)
    mu1, mu2 = real.mean(0), fake.mean(0)
    s1, s2 = np.cov(real, rowvar=False), np.cov(fake, rowvar=False)
    covmean = linalg.sqrtm(s1 @ s2).real
    return float(((mu1 - mu2) ** 2).sum() + np.trace(s1) + np.trace(s2) - 2 * np.trace(covmean))


def frechet_few_samples(real, fake):
    r"""The Fréchet distance exactly when there are fewer samples than dimensions: with centred rows ``A``, ``B``
    and ``S = X^T X / (n - 1)``, the nonzero eigenvalues of ``S_a S_b`` are the squared singular values of
    ``A B^T / sqrt((n_a - 1)(n_b - 1))``, so ``tr (S_a S_b)^{1/2}`` is their sum (the nuclear norm of the small
    cross-Gram matrix): no ``D x D`` eigenproblem and no rounding-level null eigenvalues."""
    a, b = np.asarray(real, np.float64), np.asarray(fake, np.float64)
    ac, bc = a - a.mean(0), b - b.mean(0)
    n1, n2 = len(a) - 1, len(b) - 1
    cross = np.linalg.svd(ac @ bc.T / np.sqrt(n1 * n2), compute_uv=False).sum()
    return float(((a.mean(0) - b.mean(0)) ** 2).sum() + (ac**2).sum() / n1 + (bc**2).sum() / n2 - 2 * cross)
