"""Tie-heavy features (one-hot tabular columns) against Gaussian features of the same size.

Tabular synthesizers produce one-hot and small-integer columns: distances take a handful of
values, nearly every k-th neighbour is tied, and many rows need the exact float64 fallback of
the k-NN engine. This script times precision/recall + density/coverage and authenticity on such
data and on Gaussian data of the same shape, in one process, and prints a markdown table.

Usage::

    python benchmarks/bench_ties.py            # N = M = 20,000, 6 one-hot columns of 3 + 2 integer columns
    python benchmarks/bench_ties.py --n 5000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from lightning_prd.functional import authenticity, density_coverage, precision_recall


def tabular(n: int, rng: np.random.Generator) -> torch.Tensor:
    cols = [np.eye(3, dtype=np.float32)[rng.integers(0, 3, n)] for _ in range(6)]
    return torch.from_numpy(np.concatenate(cols + [rng.integers(0, 5, (n, 2)).astype(np.float32)], 1))


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    tab_real, tab_fake = tabular(args.n, rng), tabular(args.n, rng)
    g = torch.Generator().manual_seed(0)
    gauss_real = torch.randn(tab_real.shape, generator=g)
    gauss_fake = torch.randn(tab_real.shape, generator=g)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, N = M = {args.n:,}, D = {tab_real.shape[1]}\n"
    )
    print("| data | P/R + D/C s | authenticity s |")
    print("|---|---|---|")
    for name, real, fake in (("one-hot tabular", tab_real, tab_fake), ("Gaussian", gauss_real, gauss_fake)):
        scores = timed(lambda real=real, fake=fake: (precision_recall(real, fake), density_coverage(real, fake)))
        auth = timed(lambda real=real, fake=fake: authenticity(real, fake))
        print(f"| {name} | {scores:.2f} | {auth:.2f} |")


if __name__ == "__main__":
    main()
