"""Time and peak memory of TopP&R, ours beside the official ``top-pr`` package, on the same data.

For each size (N = M, D), on seeded Gaussian float32 features (generated set scaled by 0.9):

* ``ours``     - :func:`lightning_prd.functional.top_precision_recall` with its defaults (the
  official settings: projection to 32-D, k = 160, half-row bandwidth rule, 10 bootstrap
  resamples): blocked float64 tiles, all replicates from one pass over the kernel tiles;
* ``top-pr``   - ``top_pr.compute_top_pr`` 0.2.1 (its full ``N x N`` distance matrices, a
  sorted half row per sample in Python, each bootstrap replicate recomputed); run only up
  to ``--ref-max`` samples (it needs several ``N x N`` float64 matrices at once).

Both columns print their scores, so a size doubles as an agreement check (the official code's
bootstrap is its only randomness; ours is seeded differently, so the scores agree within the
run-to-run spread measured in ``tests/test_top_pr.py``, not digit for digit).

Peak memory is the growth of the process's peak RSS during the call (see ``bench_knn.py``).

Usage::

    python benchmarks/bench_top_pr.py                            # 2,000/256 and 10,000/2,048
    python benchmarks/bench_top_pr.py --sizes 500x64 --ref-max 500  # a few seconds
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, List, Optional, Tuple

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lightning_prd.functional import top_precision_recall  # noqa: E402

from bench_knn import cpu_features, measure  # noqa: E402


def _data(n: int, dim: int) -> Tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, dim, generator=g), 0.9 * torch.randn(n, dim, generator=g)


def run(n: int, dim: int, ref_max: int) -> Dict[str, Tuple[float, Optional[float], str]]:
    real, fake = _data(n, dim)
    out: Dict[str, Tuple[float, Optional[float], str]] = {}
    box: Dict[str, Dict[str, float]] = {}

    def ours() -> None:
        box["ours"] = {k: float(v) for k, v in top_precision_recall(real, fake).items()}

    dt, peak = measure(ours)
    out["ours"] = (dt, peak, "P {top_precision:.3f} R {top_recall:.3f}".format(**box["ours"]))
    if n <= ref_max:
        try:
            from top_pr import top_pr as official
        except ImportError:
            official = None
        if official is not None:
            r, f = real.numpy(), fake.numpy()

            def reference() -> None:
                box["ref"] = official.compute_top_pr(real_features=r, fake_features=f)

            state = torch.get_rng_state()
            dt, peak = measure(reference)
            torch.set_rng_state(state)
            out["top-pr"] = (dt, peak, "P {fidelity:.3f} R {diversity:.3f}".format(**box["ref"]))
    return out


def _row(n: int, dim: int, r: Dict[str, Tuple[float, Optional[float], str]]) -> str:
    def cell(key: str) -> List[str]:
        if key not in r:
            return ["-", "-", "-"]
        dt, peak, scores = r[key]
        return [f"{dt:.2f}", "-" if peak is None else f"{peak:.2f}", scores]

    ratio = f"{r['top-pr'][0] / r['ours'][0]:.1f}x" if "top-pr" in r else "-"
    return "| " + " | ".join([f"{n:,}", str(dim), *cell("ours"), *cell("top-pr"), ratio]) + " |"


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["2000x256", "10000x2048"], help="NxD, N = M")
    ap.add_argument("--ref-max", type=int, default=10000, help="largest N the official code is run on")
    args = ap.parse_args(argv)
    print(cpu_features())
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32 features\n")
    print("| N = M | D | ours s | peak GiB | ours scores | top-pr s | peak GiB | top-pr scores | top-pr/ours |")
    print("|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes:
        n, dim = (int(v) for v in size.lower().split("x"))
        print(_row(n, dim, run(n, dim, args.ref_max)), flush=True)


if __name__ == "__main__":
    main()
