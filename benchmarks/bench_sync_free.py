"""Cost of the sync-free (CUDA) tile loops, forced on the CPU, against the CPU's listing path.

The pass of ``benchmarks/bench_knn.py``'s "ours" column (every k-NN score), first as the CPU
runs it (ambiguous pairs listed per tile, data-dependent shortcuts), then with the tile loops
CUDA takes (``lists.sync_free`` forced: every tile merged by ``topk``, ambiguous pairs logged
and decided after the loop, :mod:`lightning_prd.functional.knn.deferred`). Both give the same
scores (checked here); the time is the fastest of ``--repeats`` calls. On a CPU this measures
the extra passes over each tile that the sync-free path makes, not a GPU's timing.

Usage (float32 tiles: CUDA never screens)::

    LIGHTNING_PRD_SCREEN=0 python benchmarks/bench_sync_free.py --n 10000 --dim 2048
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lightning_prd.functional.knn import cross, self_pass  # noqa: E402

from bench_knn import cpu_features, ours  # noqa: E402


def _equal(x, y) -> bool:
    """Tensors, dicts of tensors and other values compared exactly."""
    if isinstance(x, torch.Tensor):
        return isinstance(y, torch.Tensor) and torch.equal(x, y)
    if isinstance(x, dict):
        return isinstance(y, dict) and x.keys() == y.keys() and all(_equal(x[k], y[k]) for k in x)
    return x == y


def fastest(fn, repeats: int):
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    g = torch.Generator().manual_seed(0)
    real = torch.randn(args.n, args.dim, generator=g)
    fake = 1.1 * torch.randn(args.n, args.dim, generator=g) + 0.1
    print(cpu_features())
    listing, a = fastest(lambda: ours(real, fake), args.repeats)
    cross.sync_free = self_pass.sync_free = lambda device: True
    deferred, b = fastest(lambda: ours(real, fake), args.repeats)
    same = all(_equal(getattr(a.cross, f.name), getattr(b.cross, f.name)) for f in dataclasses.fields(a.cross))
    print(f"N = M = {args.n:,}, D = {args.dim}, fastest of {args.repeats}; same scores: {same}")
    print(f"listing path (CPU) {listing:.2f} s; sync-free path {deferred:.2f} s ({deferred / listing:.2f}x)")


if __name__ == "__main__":
    main()
