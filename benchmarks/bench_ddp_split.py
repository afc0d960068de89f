"""Per-rank work under DDP: W gloo processes (1 thread each) vs 1 process (1 thread).

Each rank holds 1/W of the samples; ``compute()`` gathers them, then (``split_work=True``)
each rank computes 1/W of the work and the results are combined: the distance tiles of the
k-NN pass (``--scores knn``, the default), KID's subsets (``kid``), TopP&R's kernel density
tiles (``top_pr``). The table shows compute() wall time per rank with and without the split,
next to one single-threaded process doing everything; every process computes once untimed
first (thread pools, allocator).

Usage::

    python benchmarks/bench_ddp_split.py --n 4000 --dim 512 --world 2
    python benchmarks/bench_ddp_split.py --n 4000 --dim 512 --scores kid top_pr
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from lightning_prd import GenerativeMetrics


def _data(n, dim):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, dim, generator=g), 1.1 * torch.randn(n, dim, generator=g)


#: GenerativeMetrics options per ``--scores`` name (Fréchet and PRD's k-means are not split)
SCORES = {
    "knn": dict(),
    "kid": dict(kid=True),
    "top_pr": dict(top_pr=True),
}
NO_KNN = dict(k_precision_recall=None, k_density_coverage=None, alpha_beta=False, probabilistic=False, pr_cover=False)


def _options(scores):
    opts = dict(frechet=False, prd=False)
    if "knn" not in scores:
        opts.update(NO_KNN)
    for name in scores:
        opts.update(SCORES[name])
    return opts


def _timed_compute(real, fake, scores=("knn",), **kw):
    m = GenerativeMetrics(**_options(scores), **kw)
    m.update(real, real=True)
    m.update(fake, real=False)
    t0 = time.perf_counter()
    out = m.compute()
    return time.perf_counter() - t0, {k: float(v) for k, v in out.items() if v.ndim == 0}


def _worker(rank, world, port, n, dim, scores, out_dir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    real, fake = _data(n, dim)
    res = {}
    _timed_compute(real.chunk(world)[rank], fake.chunk(world)[rank], scores)  # warm-up, not timed
    for split in (True, False):
        dist.barrier()
        # contiguous blocks: the gathered sets are the single-process sets in the same order
        # (KID's subsets and TopP&R's half-row bandwidths depend on it)
        res[split] = _timed_compute(real.chunk(world)[rank], fake.chunk(world)[rank], scores, split_work=split)
    torch.save(res, os.path.join(out_dir, f"{rank}.pt"))
    dist.destroy_process_group()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--scores", nargs="+", choices=sorted(SCORES), default=["knn"])
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    _timed_compute(*_data(args.n, args.dim), args.scores)  # warm-up, not timed
    single_t, single_out = _timed_compute(*_data(args.n, args.dim), args.scores)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(_worker, args=(args.world, port, args.n, args.dim, args.scores, d), nprocs=args.world, join=True)
        ranks = [torch.load(os.path.join(d, f"{r}.pt")) for r in range(args.world)]
    same = all(r[True][1] == single_out and r[False][1] == single_out for r in ranks)
    print(
        f"N = M = {args.n:,}, D = {args.dim}, scores {' '.join(args.scores)}, 1 thread per process; "
        f"scores identical to one process: {same}\n"
    )
    print("| setting | compute() s | vs one process |")
    print("|---|---|---|")
    print(f"| 1 process | {single_t:.2f} | 1.00x |")
    for split, label in ((False, "every rank computes all tiles"), (True, "tiles split across ranks")):
        t = max(r[split][0] for r in ranks)
        print(f"| {args.world} ranks, {label} (slowest rank) | {t:.2f} | {t / single_t:.2f}x |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
