"""The 50,000 x 50,000 evaluation at D = 4,096 (VGG-16 fc2 size): time and peak memory.

Peak memory is the process's peak RSS (VmHWM) above the RSS once the features exist; the
full distance matrices would need ~30 GB in float32 (prdc: ~60 GB).

Usage::

    python benchmarks/bench_50k.py [--n 50000] [--dim 4096]
"""

from __future__ import annotations

import argparse
import time

import torch

from bench_knn import _reset_peak, _rss_kib, ours


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50000)
    ap.add_argument("--dim", type=int, default=4096)
    args = ap.parse_args(argv)
    g = torch.Generator().manual_seed(0)
    real = torch.randn(args.n, args.dim, generator=g)
    fake = 1.1 * torch.randn(args.n, args.dim, generator=g) + 0.1
    feat_gib = 2 * real.numel() * 4 / 2**30
    _reset_peak()
    base = _rss_kib("VmRSS")
    t0 = time.perf_counter()
    res = ours(real, fake)
    dt = time.perf_counter() - t0
    peak = (_rss_kib("VmHWM") - base) / 2**20
    p = res.cross.fake_in_real[3].double().mean().item()
    c = res.cross.real_ball_hit[5].double().mean().item()
    print("| N = M | D | features GiB | time s | peak above features GiB | precision | coverage |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {args.n:,} | {args.dim:,} | {feat_gib:.2f} | {dt:.0f} | {peak:.2f} | {p:.4f} | {c:.4f} |")


if __name__ == "__main__":
    main()
