"""Precision, recall, density and coverage with faiss-cpu's exact search beside ours, quiet and busy.

The baseline is the fastest exact route we know with a standard library: the radii ``NND_k`` of
each set from ``faiss.IndexFlatL2`` (exact float32 search of each set in itself, ``k + 1``
neighbours, the first being the sample itself), then blocked membership over the real x fake
float32 GEMM tiles (torch, tiles of 2,048 rows): a fake is inside real ball ``i`` when
``d^2 <= NND_k(x_i)^2``, and the same with the fake balls for recall. ``ours`` is
``generative_metrics`` asked for the same four scores (one pass, decisions in float64). The
script asserts that both give the same four scores, then prints the fastest of ``--repeats``
calls of each, their spread, and the ratio, for each load of ``bench_load.py`` (``quiet``,
``spin``: one process spinning on one core, ``torch2``: another torch process multiplying on 2
threads).

Usage::

    pip install faiss-cpu   # benchmark-only dependency (no torch dependency)
    python benchmarks/bench_faiss.py --sizes 5000x1024 10000x2048 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, List

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_load import LOADS, cpu_features, start_load, timed  # noqa: E402

from lightning_prd.functional import generative_metrics  # noqa: E402

K = 5
ROWS = 2048


def faiss_radii(x: np.ndarray, k: int) -> np.ndarray:
    """Squared ``NND_k`` of every row of ``x`` by exact float32 search (the row itself excluded)."""
    import faiss

    index = faiss.IndexFlatL2(x.shape[1])
    index.add(x)
    dist, _ = index.search(x, k + 1)
    return dist[:, k]


def faiss_scores(real: torch.Tensor, fake: torch.Tensor, k: int = K) -> Dict[str, float]:
    """The four scores from faiss radii and blocked float32 membership."""
    r_np, f_np = real.numpy(), fake.numpy()
    r_sq = torch.from_numpy(faiss_radii(r_np, k))
    f_sq = torch.from_numpy(faiss_radii(f_np, k))
    n, m = len(real), len(fake)
    real_norms, fake_norms = (real * real).sum(1), (fake * fake).sum(1)
    counts = torch.zeros(m, dtype=torch.long)
    covered = torch.zeros(n, dtype=torch.bool)
    recalled = torch.zeros(n, dtype=torch.bool)
    for i0 in range(0, n, ROWS):
        rows = slice(i0, i0 + ROWS)
        d2 = torch.addmm(real_norms[rows, None] + fake_norms[None, :], real[rows], fake.T, alpha=-2.0)
        inside = d2 <= r_sq[rows, None]  # [rows, M]: fake j inside real ball i
        counts += inside.sum(0)
        covered[rows] = inside.any(1)
        recalled[rows] = (d2 <= f_sq[None, :]).any(1)
    return {
        "precision": float((counts > 0).double().mean()),
        "recall": float(recalled.double().mean()),
        "density": float(counts.double().sum() / (k * m)),
        "coverage": float(covered.double().mean()),
    }


def ours(real: torch.Tensor, fake: torch.Tensor) -> Dict[str, float]:
    out = generative_metrics(
        real,
        fake,
        k_precision_recall=K,
        k_density_coverage=K,
        realism=False,
        authenticity=False,
        frechet=False,
        probabilistic=False,
        pr_cover=False,
    )
    return {key: float(out[key]) for key in ("precision", "recall", "density", "coverage")}


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["5000x1024", "10000x2048"], help="NxD, N = M")
    parser.add_argument("--loads", nargs="+", default=list(LOADS), choices=list(LOADS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--load-seconds", type=float, default=600.0)
    args = parser.parse_args(argv)
    import faiss

    print(cpu_features())
    print(f"torch {torch.__version__}, faiss {faiss.__version__}, {torch.get_num_threads()} threads")
    print()
    print("| N = M | D | load | faiss radii + blocked membership s (spread) | ours s (spread) | faiss / ours |")
    print("|---|---|---|---|---|---|")
    for size in args.sizes:
        n, dim = (int(v) for v in size.lower().split("x"))
        g = torch.Generator().manual_seed(0)
        real = torch.randn(n, dim, generator=g)
        fake = 1.1 * torch.randn(n, dim, generator=g) + 0.1
        want, got = faiss_scores(real, fake), ours(real, fake)
        if any(np.float32(want[key]) != np.float32(got[key]) for key in want):  # ours are float32 scores
            raise SystemExit(f"faiss and ours disagree at {size}: {want} vs {got}")
        for load in args.loads:
            procs = start_load(load, args.load_seconds)
            try:
                base = timed(lambda r=real, f=fake: faiss_scores(r, f), args.repeats)
                mine = timed(lambda r=real, f=fake: ours(r, f), args.repeats)
            finally:
                for p in procs:
                    p.kill()
                    p.wait()
            print(
                f"| {n:,} | {dim:,} | {load} | {base[0]:.2f} ({base[1]:.2f}x) | {mine[0]:.2f} ({mine[1]:.2f}x) "
                f"| {base[0] / mine[0]:.2f}x |",
                flush=True,
            )


if __name__ == "__main__":
    main()
