"""The k-NN pass and the bare GEMMs side by side on a quiet and on a busy machine.

Users score inside training, beside data-loader workers, other jobs and other ranks. For each
size (N = M, D; seeded Gaussian float32 features) and each load, this script starts the load,
then times in the same state:

* ``gemm`` - the three bare GEMMs an exact evaluation needs (X Xᵀ, Y Yᵀ, X Yᵀ);
* ``ours`` - every k-NN score of one ``generative_metrics`` pass (precision, recall, density,
  coverage, realism, authenticity, probabilistic precision/recall, PR-cover; the Fréchet
  distance, which is no k-NN score, is left out): tile passes in worker threads, one intra-op
  thread each (:mod:`lightning_prd.functional.knn.threads`);
* ``intra-op`` - the same pass with ``LIGHTNING_PRD_TILE_THREADS=1``: every operation on
  PyTorch's own intra-op threads (one parallel region, and its barrier, per operation);

and prints the fastest of ``--repeats`` calls of each, their call-to-call spread (slowest /
fastest), the ratio ``ours / gemm`` and the minor page faults of one pass (``ru_minflt``: memory
the pass touches for the first time, e.g. buffers allocated and freed per tile; the fewest of the
calls, the steady state).

Loads (each a separate process, bounded: it exits by itself after ``--load-seconds`` and is
killed when its row is done):

* ``quiet`` - nothing else runs;
* ``spin`` - one Python process spinning on one core;
* ``torch2`` - another torch process multiplying 1,500 x 1,500 matrices on 2 threads (like a
  second rank on the same node).

Usage::

    python benchmarks/bench_load.py                                   # 5,000/1,024 and 10,000/2,048
    python benchmarks/bench_load.py --sizes 5000x1024 --loads quiet spin --repeats 5
    ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 LIGHTNING_PRD_SCREEN=0 python benchmarks/bench_load.py

The header says which CPU features and kernels the run used (see ``bench_knn.py``).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from typing import Callable, Dict, List, Tuple

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lightning_prd.functional import generative_metrics  # noqa: E402

from bench_knn import bare_gemms, cpu_features  # noqa: E402

LOADS: Dict[str, str] = {
    "quiet": "",
    "spin": "import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass\n",
    "torch2": (
        "import time, torch\ntorch.set_num_threads(2)\na = torch.randn(1500, 1500)\n"
        "end = time.time() + {seconds}\nwhile time.time() < end: a @ a\n"
    ),
}


def start_load(name: str, seconds: float) -> List[subprocess.Popen]:
    """The processes of load ``name``, already running (none for ``quiet``)."""
    code = LOADS[name]
    if not code:
        return []
    proc = subprocess.Popen([sys.executable, "-c", code.format(seconds=seconds)])
    time.sleep(1.5)  # torch's import and the first products
    return [proc]


def timed(fn: Callable[[], object], repeats: int) -> Tuple[float, float, float]:
    """Fastest seconds of ``repeats`` calls, slowest / fastest, and the fewest minor page faults
    of a call (the steady state: the first call of a process also grows the allocator's heap)."""
    times, faults = [], []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return min(times), max(times) / min(times), float(min(faults))


def knn_scores(real: torch.Tensor, fake: torch.Tensor) -> Dict[str, torch.Tensor]:
    return generative_metrics(real, fake, frechet=False)


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["5000x1024", "10000x2048"], help="NxD, N = M")
    parser.add_argument("--loads", nargs="+", default=list(LOADS), choices=list(LOADS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--load-seconds", type=float, default=600.0, help="a load process exits after this long")
    args = parser.parse_args(argv)
    print(cpu_features())
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, fastest of {args.repeats} calls")
    print()
    print(
        "| N = M | D | load | 3 bare GEMMs s (spread) | k-NN pass s (spread) | pass / GEMMs "
        "| minor faults / pass | intra-op pass s (spread) | intra-op / GEMMs |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes:
        n, dim = (int(v) for v in size.lower().split("x"))
        g = torch.Generator().manual_seed(0)
        real = torch.randn(n, dim, generator=g)
        fake = 1.1 * torch.randn(n, dim, generator=g) + 0.1
        knn_scores(real[:500], fake[:500])  # first-call costs (the GEMM probe, thread pools) out of the rows
        for load in args.loads:
            procs = start_load(load, args.load_seconds)
            try:
                gemm = timed(lambda r=real, f=fake: bare_gemms(r, f), args.repeats)
                ours = timed(lambda r=real, f=fake: knn_scores(r, f), args.repeats)
                previous = os.environ.get("LIGHTNING_PRD_TILE_THREADS")
                os.environ["LIGHTNING_PRD_TILE_THREADS"] = "1"
                try:
                    intra = timed(lambda r=real, f=fake: knn_scores(r, f), args.repeats)
                finally:
                    os.environ.pop("LIGHTNING_PRD_TILE_THREADS")
                    if previous is not None:
                        os.environ["LIGHTNING_PRD_TILE_THREADS"] = previous
            finally:
                for p in procs:
                    p.kill()
                    p.wait()
            print(
                f"| {n:,} | {dim:,} | {load} | {gemm[0]:.2f} ({gemm[1]:.2f}x) | {ours[0]:.2f} ({ours[1]:.2f}x) "
                f"| {ours[0] / gemm[0]:.2f}x | {ours[2]:,.0f} | {intra[0]:.2f} ({intra[1]:.2f}x) "
                f"| {intra[0] / gemm[0]:.2f}x |",
                flush=True,
            )


if __name__ == "__main__":
    main()
