"""Time of the engine's exact recomputation steps against the memory budget of one chunk.

The refinement of every k-NN radius and nearest neighbour ends in two gather-and-reduce steps
over chosen pairs (:mod:`lightning_prd.functional.knn.exact`):

* ``exact_pairs`` - float64 ``sum((a - b)^2)`` of listed pairs (gather both rows, widen,
  subtract, square, sum);
* ``direct_sq`` - the float32 distance from the differences of each row's screened candidates
  (gather the candidates, subtract the row, square, sum).

Each step walks its chunk several times, so a chunk that stays in the cache between the steps
is faster than one streamed from memory each time. For each shape (rows, dimension,
candidates per row; seeded Gaussian float32 rows, random candidates) and each budget, this
script prints the fastest of ``--repeats`` calls of both steps, on one thread, and checks that
every budget returns the same bits (the budget only cuts the pairs into chunks).

Usage::

    python benchmarks/bench_chunks.py
    python benchmarks/bench_chunks.py --budgets 2 4 32 --threads 2

The header says which CPU the run used (see ``bench_knn.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Tuple

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_sync_free import fastest  # noqa: E402

from lightning_prd.functional.knn import exact  # noqa: E402

from bench_knn import cpu_features  # noqa: E402

SHAPES = ((10_000, 2_048, 6), (10_000, 2_048, 22), (5_000, 1_024, 22), (20_000, 128, 22), (5_000, 64, 8))


def shape_times(n: int, dim: int, t: int, budgets: List[int], repeats: int) -> Tuple[List[float], List[float]]:
    """Fastest seconds of ``exact_pairs`` and ``direct_sq`` at each budget (MiB), on ``n`` rows of
    ``dim`` features with ``t`` random candidates each; exits if a budget changes the bits."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, dim, generator=g)
    idx = torch.randint(0, n, (n, t), generator=g)
    ia, ib = torch.arange(n)[:, None].expand(n, t).reshape(-1), idx.reshape(-1)
    saved = exact._CHUNK_BYTES
    times: Tuple[List[float], List[float]] = ([], [])
    first: List[torch.Tensor] = []
    try:
        for mib in budgets:
            exact._CHUNK_BYTES = mib * 2**20  # both steps cut their chunks by the library's own rules
            steps = (lambda: exact.exact_pairs(a, a, ia, ib), lambda: exact.direct_sq(a, a, idx))
            for i, step in enumerate(steps):
                sec, out = fastest(step, repeats)
                if len(first) <= i:
                    first.append(out)
                elif not torch.equal(out, first[i]):
                    raise SystemExit(f"{('exact_pairs', 'direct_sq')[i]} changed its bits at {mib} MiB")
                times[i].append(sec)
    finally:
        exact._CHUNK_BYTES = saved
    return times


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", nargs="+", type=int, default=[2, 4, 8, 16, 32], help="MiB per chunk")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads (the pass's workers use 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(cpu_features())
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), fastest of {args.repeats} calls")
    print(f"library budget: {exact._CHUNK_BYTES >> 20} MiB per chunk")
    print()
    heads = " | ".join(f"{b} MiB s" for b in args.budgets)
    print(f"| rows | D | candidates / row | step | {heads} |")
    print("|---|---|---|---|" + "---|" * len(args.budgets))
    for n, dim, t in SHAPES:
        for name, row in zip(("exact_pairs", "direct_sq"), shape_times(n, dim, t, args.budgets, args.repeats)):
            cells = " | ".join(f"{s:.3f}" for s in row)
            print(f"| {n:,} | {dim:,} | {t} | {name} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
