"""Time of KID and the Vendi score, side by side with torchmetrics and ``vendi-score``, on the same data.

For each size (N = M, D), on seeded Gaussian float32 features (the generated set shifted by 0.1):

* ``kid``        - :func:`lightning_prd.functional.kernel_inception_distance` (float64 MMD²);
* ``tm kid``     - torchmetrics' ``KernelInceptionDistance`` (identity feature module) on the same
  subsets (its global generator seeded alike), in the features' float32;
* ``tm kid f64`` - the same on float64 features (our arithmetic);
* ``vendi``      - :func:`lightning_prd.functional.vendi_score` of the generated set (the smaller
  Gram matrix in float64, here ``D x D``);
* ``vs dual``    - ``vendi_score.vendi.score_dual`` (NumPy/SciPy, the ``D x D`` Gram);
* ``vs X``       - ``vendi_score.vendi.score_X`` (the ``n x n`` kernel matrix; skipped above
  ``--max-n-kernel`` samples).

Each row also gives the largest relative difference of the values to their reference, so the
table doubles as an agreement check. KID uses ``--subsets`` subsets of ``min(1000, N)``
samples (torchmetrics' defaults). Peak memory is not reported (the subsets are small).

Usage::

    python benchmarks/bench_kernels.py                         # 2,000/256 and 10,000/2,048 on the CPU
    python benchmarks/bench_kernels.py --sizes 500x32 --subsets 5
    python benchmarks/bench_kernels.py --device cuda
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Callable, Dict, List, Optional, Tuple

import torch

from lightning_prd.functional import kernel_inception_distance, vendi_score

from bench_knn import cpu_features


def timed(fn: Callable[[], object], device: torch.device) -> Tuple[float, object]:
    """Seconds of one call (the device synchronised) and its value."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    value = fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0, value


def torchmetrics_kid(real: torch.Tensor, fake: torch.Tensor, subsets: int, subset_size: int, seed: int) -> float:
    from torchmetrics.image.kid import KernelInceptionDistance

    warnings.filterwarnings("ignore", message="Metric `Kernel Inception Distance` will save all extracted features")
    metric = KernelInceptionDistance(feature=torch.nn.Identity(), subsets=subsets, subset_size=subset_size).to(
        real.device
    )
    metric.update(real, real=True)
    metric.update(fake, real=False)
    torch.manual_seed(seed)  # torchmetrics draws with the global generator: the same subsets as ours
    return float(metric.compute()[0])


def run(n: int, dim: int, args: argparse.Namespace, device: torch.device) -> Dict[str, Tuple[float, float]]:
    """name -> (seconds, relative difference to the reference value)."""
    g = torch.Generator().manual_seed(0)
    real = torch.randn(n, dim, generator=g).to(device)
    fake = (torch.randn(n, dim, generator=g) + 0.1).to(device)
    size = min(1000, n)
    kernel_inception_distance(real[:20], fake[:20], subsets=1, subset_size=20)  # warm-up: first-call costs
    vendi_score(fake[:20])
    out: Dict[str, Tuple[float, float]] = {}
    t, (mean, _) = timed(lambda: kernel_inception_distance(real, fake, subsets=args.subsets, subset_size=size), device)
    ours = float(mean)
    t_tm, tm = timed(lambda: torchmetrics_kid(real, fake, args.subsets, size, 0), device)
    t_tm64, tm64 = timed(lambda: torchmetrics_kid(real.double(), fake.double(), args.subsets, size, 0), device)
    out["kid"] = (t, abs(ours - float(tm64)) / abs(float(tm64)))
    out["tm kid"] = (t_tm, abs(float(tm) - ours) / abs(ours))
    out["tm kid f64"] = (t_tm64, 0.0)
    t, v = timed(lambda: float(vendi_score(fake)), device)
    try:
        from vendi_score import vendi
    except ImportError:
        return out
    x = fake.double().cpu().numpy()
    t_dual, ref = timed(lambda: vendi.score_dual(x), device)
    out["vendi"] = (t, abs(float(v) - ref) / ref)  # type: ignore[arg-type]
    out["vs dual"] = (t_dual, 0.0)
    if n <= args.max_n_kernel:
        t_x, ref_x = timed(lambda: vendi.score_X(x), device)
        out["vs X"] = (t_x, abs(ref_x - ref) / ref)
    return out


COLUMNS = ["kid", "tm kid", "tm kid f64", "vendi", "vs dual", "vs X"]


def _row(n: int, dim: int, r: Dict[str, Tuple[float, float]]) -> str:
    cells = [f"{r[c][0]:.2f} s ({r[c][1]:.0e})" if c in r else "-" for c in COLUMNS]
    return f"| {n:,} x {dim:,} | " + " | ".join(cells) + " |"


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["2000x256", "10000x2048"], help="NxD, N = M")
    ap.add_argument("--subsets", type=int, default=100, help="KID subsets (default 100)")
    ap.add_argument("--max-n-kernel", type=int, default=10000, help="largest n for vendi-score's n x n score_X")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    print(cpu_features())
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {device}")
    if device.type == "cuda":
        print(torch.cuda.get_device_name(device))
    print()
    print("| N = M x D | " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * (len(COLUMNS) + 1))
    for text in args.sizes:
        n, dim = (int(v) for v in text.lower().split("x"))
        print(_row(n, dim, run(n, dim, args, device)), flush=True)
    print()
    print(
        "seconds per call (relative difference of the value: kid vs tm kid f64, tm kid vs kid, "
        "vendi and vs X vs vs dual)"
    )


if __name__ == "__main__":
    main()
