"""Cost of realism in an all-scores k-NN pass: the pass with and without ``realism_k``.

Every score of ``benchmarks/bench_knn.py``'s pass (precision, recall, density, coverage,
nearest neighbours, beta-recall minima), once with realism and once without, alternating in
one process, ``--repeats`` times; prints the medians, the realism share of the pass
(``(with - without) / with``) and the time spent inside the realism stage itself
(:class:`~lightning_prd.functional.knn.realism.RealismLists` and the float64 fallback).

Usage (float32 tiles, as on CPUs without native bfloat16)::

    LIGHTNING_PRD_SCREEN=0 python benchmarks/bench_realism.py --n 10000 --dim 2048
    LIGHTNING_PRD_SCREEN=0 python benchmarks/bench_realism.py --n 5000 --dim 1024
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from typing import Callable, Dict, List

import torch

from lightning_prd.functional.alpha_beta import fake_centre_distance
from lightning_prd.functional.engine.one_pass import knn_pass
from lightning_prd.functional.knn import realism


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _timed(fn: Callable, clock: Dict[str, float]) -> Callable:
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            clock["realism"] += time.perf_counter() - t0

    return wrapper


def run(n: int, dim: int, repeats: int) -> None:
    g = torch.Generator().manual_seed(0)
    real = torch.randn(n, dim, generator=g)
    fake = 1.1 * torch.randn(n, dim, generator=g) + 0.1
    values = fake_centre_distance(fake)
    clock = {"realism": 0.0}
    # the realism stage's own time: its set-up, per-tile update, finish and the float64 fallback
    realism.RealismLists.__init__ = _timed(realism.RealismLists.__init__, clock)
    realism.RealismLists.update = _timed(realism.RealismLists.update, clock)
    realism.RealismLists.finish = _timed(realism.RealismLists.finish, clock)
    realism.exact_realism = _timed(realism.exact_realism, clock)

    def one(realism_k):
        t0 = time.perf_counter()
        knn_pass(
            real,
            fake,
            member_ks=[3, 5],
            recall_ks=[3],
            realism_k=realism_k,
            nearest="fake",
            real_ks=[1, 3],
            fake_values=values,
            value_ks=[5],
        )
        return time.perf_counter() - t0

    with_r: List[float] = []
    without: List[float] = []
    stage: List[float] = []
    for _ in range(repeats):
        clock["realism"] = 0.0
        with_r.append(one(3))
        stage.append(clock["realism"])
        without.append(one(None))
    w, wo, s = statistics.median(with_r), statistics.median(without), statistics.median(stage)
    print(f"N = M = {n:,}, D = {dim:,}, repeats {repeats}")
    print(f"  with realism    {w:7.2f} s  (all: {', '.join(f'{x:.2f}' for x in with_r)})")
    print(f"  without realism {wo:7.2f} s  (all: {', '.join(f'{x:.2f}' for x in without)})")
    print(f"  realism stage   {s:7.2f} s  (all: {', '.join(f'{x:.2f}' for x in stage)})")
    print(f"  share of the pass: {(w - wo) / w:6.1%} (with - without) / with;  {s / w:6.1%} stage / with")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=2_048)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(
        f"CPU: {_cpu()}, {torch.get_num_threads()} threads, torch {torch.__version__}, "
        f"cpu capability {torch.backends.cpu.get_cpu_capability()}, "
        f"LIGHTNING_PRD_SCREEN={os.environ.get('LIGHTNING_PRD_SCREEN', '(unset)')}"
    )
    if os.path.exists("/proc/loadavg"):
        with open("/proc/loadavg") as f:
            print(f"load average: {' '.join(f.read().split()[:3])}")
    run(args.n, args.dim, args.repeats)


if __name__ == "__main__":
    main()
