"""The 50,000 x 50,000 evaluation at D = 4,096 (VGG-16 fc2 size): time and peak memory.

On the CPU, peak memory is the process's peak RSS (VmHWM) above the RSS once the features
exist; on CUDA (``--device cuda``) it is ``torch.cuda.max_memory_allocated`` above the
features, and the time waits for the device (one synchronisation before and after). The full
distance matrices would need ~30 GB in float32 (prdc: ~60 GB). The header gives the CPU
features (or the GPU) the run used.

Usage::

    python benchmarks/bench_50k.py [--n 50000] [--dim 4096] [--device cuda]
"""

from __future__ import annotations

import argparse
import time

import torch

from lightning_prd.functional.knn import shapes

from bench_knn import _reset_peak, _rss_kib, cpu_features, ours


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50000)
    ap.add_argument("--dim", type=int, default=4096)
    ap.add_argument("--device", default="cpu", help="cpu or cuda[:index]")
    args = ap.parse_args(argv)
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"--device {args.device}: CUDA is not available")
    cuda = dev.type == "cuda"
    print(torch.cuda.get_device_name(dev) if cuda else cpu_features())
    g = torch.Generator(device=dev).manual_seed(0)
    real = torch.randn(args.n, args.dim, generator=g, device=dev)
    fake = 1.1 * torch.randn(args.n, args.dim, generator=g, device=dev) + 0.1
    feat_gib = 2 * real.numel() * 4 / 2**30
    if cuda:
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        base = torch.cuda.memory_allocated(dev)
    else:
        _reset_peak()
        base = _rss_kib("VmRSS")
    t0 = time.perf_counter()
    res = ours(real, fake)
    if cuda:
        torch.cuda.synchronize(dev)
    dt = time.perf_counter() - t0
    if cuda:
        peak = (torch.cuda.max_memory_allocated(dev) - base) / 2**30
    else:
        peak = (_rss_kib("VmHWM") - base) / 2**20
    p = res.cross.fake_in_real[3].double().mean().item()
    c = res.cross.real_ball_hit[5].double().mean().item()
    print("| N = M | D | device | features GiB | time s | peak above features GiB | precision | coverage |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {args.n:,} | {args.dim:,} | {dev.type} | {feat_gib:.2f} | {dt:.1f} | {peak:.2f} | {p:.4f} | {c:.4f} |")
    probed = ", ".join(f"{d} {dt_} depth {k}: {s}" for (d, dt_, k), s in shapes._CACHE.items())
    print(f"smallest efficient tile side (GEMM probe): {probed or 'not probed'}")


if __name__ == "__main__":
    main()
