"""Time and peak memory of FD∞, C_T and FLD, ours beside NumPy/SciPy re-implementations of the reference code.

The reference code cannot be imported here: dgm-eval (``layer6ai-labs/dgm-eval``: ``compute_FD_infinity`` in
``dgm_eval/metrics/fd.py``, ``compute_CTscore`` in ``dgm_eval/metrics/ct.py``) is not on PyPI, and the FLD
package (``marcojira/fld``: ``fld/MoG.py``, ``fld/metrics/FLD.py``) pins a CLIP build from GitHub. Each
``reference`` column therefore runs a float64 re-implementation that follows the reference's algorithm step by
step, on the same seeded data and, where the reference draws at random, on the same draws as ours:

* FD∞: ``np.cov`` statistics and ``scipy.linalg.sqrtm`` of the product for each of the 15 sizes, least squares
  in 1/N (``tests/oracle_memorization.py: fd_infinity``); ours forms the real covariance's square root once and
  an eigenvalue problem per size;
* C_T: scikit-learn's ``PCA(n_components=64)`` (its default solver, randomized at these sizes, seeded 0),
  ``KMeans(n_clusters=3, n_init=10)``, ``NearestNeighbors`` per cell and ``scipy.stats.mannwhitneyu``, as
  dgm-eval; ours an exact float64 PCA, our seeded k-means and exact k-NN passes;
* FLD: the official ``MoG.fit`` / ``get_dim_adjusted_nlls`` written in NumPy float64 (GEMM squared distances as
  its ``torch.cdist``, gradient in closed form, Adam written out; ``tests/oracle_memorization.py: fld``), with
  the official baseline; ours the same procedure in torch float64 with exact small distances.

The score columns double as an agreement check (FD∞ and FLD share the draws, so they agree to rounding; C_T
agrees when both k-means find the same partition and the two PCAs the same subspace up to the randomized
solver's error).

Peak memory is the growth of the process's peak RSS during the call (see ``bench_knn.py``).

Usage::

    python benchmarks/bench_memorization.py                                   # 10,000 x 2,048, 5,000 test
    python benchmarks/bench_memorization.py --n 2000 --dim 256 --test 1000    # a few seconds
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from lightning_prd.functional.data_copying import data_copying  # noqa: E402
from lightning_prd.functional.fld import feature_likelihood_divergence  # noqa: E402
from lightning_prd.functional.frechet_infinity import fd_infinity_sizes, frechet_distance_infinity  # noqa: E402

import oracle_memorization as om  # noqa: E402
from bench_knn import cpu_features, measure  # noqa: E402


def data(n: int, m: int, n_test: int, dim: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Seeded float32 features: train and test from one correlated Gaussian, the generated set a slightly
    narrower, shifted one with 10% near-copies of training samples."""
    g = torch.Generator().manual_seed(0)
    mix = torch.randn(dim, dim, generator=g) / dim**0.5
    train = torch.randn(n, dim, generator=g) @ mix
    test = torch.randn(n_test, dim, generator=g) @ mix
    fake = 0.9 * torch.randn(m, dim, generator=g) @ mix + 0.02
    copies = m // 10
    fake[:copies] = train[:copies] + 0.05 * torch.randn(copies, dim, generator=g) @ mix
    return train, fake, test


def ref_fd_infinity(real: np.ndarray, fake: np.ndarray, seed: int) -> float:
    g = torch.Generator().manual_seed(seed)
    subsets = [torch.randperm(len(fake), generator=g)[:s].numpy() for s in fd_infinity_sizes(len(fake)).tolist()]
    return om.fd_infinity(real, fake, subsets)[0]


def ref_ct(train: np.ndarray, test: np.ndarray, fake: np.ndarray) -> float:
    from scipy.stats import mannwhitneyu
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA
    from sklearn.neighbors import NearestNeighbors

    if train.shape[1] > 64:
        pca = PCA(n_components=64, random_state=0).fit(train)
        train, test, fake = pca.transform(train), pca.transform(test), pca.transform(fake)
    km = KMeans(n_clusters=3, n_init=10, random_state=0).fit(train)
    t_lab, p_lab, q_lab = km.predict(train), km.predict(test), km.predict(fake)
    m, n = len(fake), len(test)
    z, p_share, keep = np.zeros(3), np.zeros(3), np.zeros(3, bool)
    for c in range(3):
        nn = NearestNeighbors(n_neighbors=1).fit(train[t_lab == c])
        lq = nn.kneighbors(fake[q_lab == c])[0][:, 0]
        lp = nn.kneighbors(test[p_lab == c])[0][:, 0]
        u = mannwhitneyu(lq, lp, alternative="less").statistic
        mc, nc = len(lq), len(lp)
        z[c] = (u - (nc * mc / 2 - 0.5)) / np.sqrt(nc * mc * (nc + mc + 1) / 12)
        p_share[c], keep[c] = nc / n, mc / m > 20 / m
    return float(p_share[keep] @ z[keep] / p_share[keep].sum())


def ref_fld(train: np.ndarray, test: np.ndarray, fake: np.ndarray, seed: int) -> float:
    n = len(train)
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(n, generator=g).numpy()
    g2 = torch.Generator().manual_seed(seed)
    perm = torch.randperm(n, generator=g2).numpy()
    split = min(len(fake), n // 2)
    border = torch.randperm(n - split, generator=g2).numpy()
    out = om.fld(
        train, test, fake, fit_order=order, baseline_perm=perm, baseline_order=border, sq_dists=om.gemm_sq_dists
    )
    return out["fld"]


def run(n: int, m: int, n_test: int, dim: int, skip: List[str]) -> List[Tuple[str, Dict[str, Tuple[float, ...]]]]:
    train, fake, test = data(n, m, n_test, dim)
    tr, fk, te = (x.double().numpy() for x in (train, fake, test))
    rows: List[Tuple[str, Dict[str, Tuple[float, ...]]]] = []
    cases: List[Tuple[str, Callable[[], float], Callable[[], float]]] = [
        (
            "FD∞",
            lambda: float(frechet_distance_infinity(train, fake, seed=0)["frechet_distance_infinity"]),
            lambda: ref_fd_infinity(tr, fk, 0),
        ),
        ("C_T", lambda: float(data_copying(train, fake, test, seed=0)["ct"]), lambda: ref_ct(tr, te, fk)),
        (
            "FLD",
            lambda: float(feature_likelihood_divergence(train, fake, test, seed=0)["fld"]),
            lambda: ref_fld(tr, te, fk, 0),
        ),
    ]
    for name, ours, reference in cases:
        if name in skip:
            continue
        result: Dict[str, Tuple[float, ...]] = {}
        for column, fn in (("ours", ours), ("reference", reference)):
            if f"{name}:{column}" in skip:
                continue
            box: Dict[str, float] = {}
            dt, peak = measure(lambda fn=fn, box=box: box.setdefault("score", fn()))
            result[column] = (dt, float("nan") if peak is None else peak, box["score"])
        rows.append((name, result))
        print(_row(name, result), flush=True)
    return rows


def _row(name: str, r: Dict[str, Tuple[float, ...]]) -> str:
    def cell(key: str) -> List[str]:
        if key not in r:
            return ["-", "-", "-"]
        dt, peak, score = r[key]
        return [f"{dt:.1f}", f"{peak:.2f}", f"{score:.4g}"]

    ratio = f"{r['reference'][0] / r['ours'][0]:.1f}x" if "ours" in r and "reference" in r else "-"
    return "| " + " | ".join([name, *cell("ours"), *cell("reference"), ratio]) + " |"


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000, help="training (real) samples")
    ap.add_argument("--m", type=int, default=None, help="generated samples (default: --n)")
    ap.add_argument("--test", type=int, default=5_000, help="held-out real samples")
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--skip", nargs="*", default=[], help="FD∞, C_T, FLD, or NAME:ours / NAME:reference")
    args = ap.parse_args(argv)
    m = args.n if args.m is None else args.m
    print(cpu_features())
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32 features")
    print(f"train {args.n:,} x {args.dim:,}, generated {m:,}, test {args.test:,}\n")
    print("| score | ours s | peak GiB | ours | reference s | peak GiB | reference | reference/ours |")
    print("|---|---|---|---|---|---|---|---|")
    run(args.n, m, args.test, args.dim, args.skip)


if __name__ == "__main__":
    main()
