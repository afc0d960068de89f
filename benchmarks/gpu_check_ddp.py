"""The 2-process part of ``benchmarks/gpu_check.py`` (D1-D4, D6, D7): run by ``torchrun`` on two GPUs (NCCL,
each rank on its own GPU after ``torch.cuda.set_device``) or, to try the script, on the CPU (gloo).

Parts (``--part``; a failed NCCL call can poison the communicator, so each probe of a rule has a process
group of its own):

* ``main``: D1 uneven shards (real 60/40 %, generated 55/45 %) with ``split_work`` on and off, D2 an idle
  rank, D3 the deferred log overflowing on rank 0 only, D4 CMMD split across ranks, each equal (every key, bit
  for bit) to one process holding the concatenated sets; D6 the time and per-rank peak memory of a compute.
* ``compute_on_cpu``: D7, ``GenerativeMetrics(compute_on_cpu=True)`` updated with device features (NCCL takes
  no CPU tensors: the gathers must run on the group's device).
* ``objects_without_set_device``: D7, ``all_gather_object`` with ``torch.cuda.set_device`` skipped: the
  outcome (objects, error or time-out) is recorded, not judged.

Rank 0 writes ``DIR/report-<part>.json`` after every step. Usage::

    torchrun --standalone --nproc_per_node=2 benchmarks/gpu_check_ddp.py --out "$OUT"
    torchrun --standalone --nproc_per_node=2 benchmarks/gpu_check_ddp.py --out "$OUT" --part compute_on_cpu
    torchrun --standalone --nproc_per_node=2 benchmarks/gpu_check_ddp.py --out DIR --device cpu --quick   # gloo
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from datetime import timedelta
from typing import Any, Callable, Dict, List, Optional

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_check_common import (  # noqa: E402
    CheckFailed,
    Skip,
    check,
    differences,
    gaussian_pair,
    peak_gib,
    reset_peak,
    sync,
    tied_pair,
)

SIZES = {False: dict(n=10000, dim=2048, timing=(50000, 2048)), True: dict(n=400, dim=16, timing=(2000, 64))}
PARTS = ("main", "compute_on_cpu", "objects_without_set_device")


class Run:
    """The rank, the device, the sizes and rank 0's report of one part."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        local = int(os.environ.get("LOCAL_RANK", self.rank))
        self.device = torch.device("cuda", local) if args.device == "cuda" else torch.device("cpu")
        self.sizes = SIZES[args.quick]
        self.path = os.path.join(args.out, f"report-{args.part}.json")
        self.data: Dict[str, Any] = {"part": args.part, "world": self.world, "backend": dist.get_backend(), "steps": {}}
        self.started = time.perf_counter()

    def write(self) -> None:
        if self.rank == 0:
            self.data["elapsed_s"] = round(time.perf_counter() - self.started, 1)
            with open(self.path, "w") as f:
                json.dump(self.data, f, indent=1, default=str)

    def step(self, name: str, fn: Callable[[], Dict[str, Any]]) -> None:
        t0 = time.perf_counter()
        entry: Dict[str, Any]
        try:
            entry = {"status": "ok", "numbers": fn() or {}}
        except Skip as err:
            entry = {"status": "skipped", "reason": str(err)}
        except Exception as err:
            entry = {"status": "failed", "reason": f"{type(err).__name__}: {err}"[:2000]}
            if not isinstance(err, CheckFailed):
                entry["traceback"] = traceback.format_exc()[-3000:]
        entry["seconds"] = round(time.perf_counter() - t0, 2)
        statuses: List[Any] = [None] * self.world
        dist.all_gather_object(statuses, entry["status"])
        entry["status_per_rank"] = statuses
        if entry["status"] == "ok" and "failed" in statuses:
            entry["status"] = "failed"
            entry["reason"] = f"failed on another rank: {statuses}"
        self.data["steps"][name] = entry
        self.write()
        if self.rank == 0:
            elapsed = time.perf_counter() - self.started
            print(f"[{elapsed:6.1f} s] {name}: {entry['status']} {entry.get('reason', '')[:300]}", flush=True)

    # ------------------------------------------------------------------------------------------- the sets
    def shares(self, tied: bool = False):
        """Real rows split 60/40 % and generated rows 55/45 % between the two ranks; the whole sets too.
        ``tied``: integer features with near-copies and copies (many ambiguous pairs) instead of Gaussians."""
        n, dim = self.sizes["n"], self.sizes["dim"]
        if tied:
            real, fake = tied_pair(n, 16 if self.args.quick else 64, n // 25, n // 50, seed=22)
        else:
            real, fake = gaussian_pair(n, dim, seed=21, scale=(1.0, 1.1), shift=(0.0, 0.1))
        cut_r, cut_f = int(0.6 * n), int(0.55 * n)
        mine = (real[:cut_r], fake[:cut_f]) if self.rank == 0 else (real[cut_r:], fake[cut_f:])
        return real, fake, tuple(t.to(self.device) for t in mine), cut_f

    def single(self, real, fake, **options) -> Dict[str, Any]:
        """One process's result on the given sets (no sync), on rank 0 only."""
        from lightning_prd import GenerativeMetrics

        metric = GenerativeMetrics(sync_on_compute=False, **options).to(self.device)
        metric.update(real.to(self.device), real=True)
        metric.update(fake.to(self.device), real=False)
        return metric.compute()

    def distributed(self, real_share, fake_share, **options) -> Dict[str, Any]:
        from lightning_prd import GenerativeMetrics

        metric = GenerativeMetrics(**options).to(self.device)
        metric.update(real_share, real=True)
        if fake_share is not None:
            metric.update(fake_share, real=False)
        return metric.compute()

    def compare(self, got, want) -> Dict[str, Any]:
        diff = differences(got, want) if self.rank == 0 else []
        check(not diff, f"keys that differ from one process: {diff}")
        return {"keys": len(got), "differ": diff}

    # ------------------------------------------------------------------------------------------- D1-D6
    def d1_uneven(self) -> Dict[str, Any]:
        real, fake, (r, f), _ = self.shares()
        want = self.single(real, fake, preset="training") if self.rank == 0 else None
        out = {}
        for split in (True, False):
            out[f"split_work={split}"] = self.compare(self.distributed(r, f, preset="training", split_work=split), want)
        return out

    def d2_idle(self) -> Dict[str, Any]:
        real, fake, (r, f), cut_f = self.shares()
        want = self.single(real, fake[:cut_f], preset="training") if self.rank == 0 else None
        return self.compare(self.distributed(r, f if self.rank == 0 else None, preset="training"), want)

    def d3_overflow(self) -> Dict[str, Any]:
        from lightning_prd.functional.knn import cross, deferred, self_pass

        real, fake, (r, f), _ = self.shares(tied=True)
        want = self.single(real, fake, preset="training") if self.rank == 0 else None
        saved = cross.sync_free, self_pass.sync_free, deferred.capacity, cross._reduce
        paths: List[bool] = []

        def spy(*args, **kwargs):
            paths.append(bool(args[5]))  # no_sync: True on the deferred path, False on the listing path
            return saved[3](*args, **kwargs)

        cross.sync_free = self_pass.sync_free = lambda device: True  # the CUDA path (native on CUDA)
        cross._reduce = spy
        if self.rank == 0:
            deferred.capacity = lambda n, m: 16
        try:
            got = self.distributed(r, f, preset="training")
        finally:
            cross.sync_free, self_pass.sync_free, deferred.capacity, cross._reduce = saved
        check(paths[:2] == [True, False], f"rank {self.rank}: deferred pass then listing rerun expected, got {paths}")
        return {**self.compare(got, want), "paths": paths}

    def d4_cmmd(self) -> Dict[str, Any]:
        real, fake, (r, f), _ = self.shares()
        options = dict(cmmd=True, prd=False, frechet=False)
        want = self.single(real, fake, **options) if self.rank == 0 else None
        return self.compare(self.distributed(r, f, split_work=True, **options), want)

    def d6_timing(self) -> Dict[str, Any]:
        n, dim = self.sizes["timing"]
        g = torch.Generator(device=self.device).manual_seed(self.rank)
        real = torch.randn(n // self.world, dim, generator=g, device=self.device)
        fake = 1.1 * torch.randn(n // self.world, dim, generator=g, device=self.device) + 0.1
        self.distributed(real[:256], fake[:256], preset="training")  # warm-up
        base = reset_peak(self.device)
        dist.barrier()
        t0 = time.perf_counter()
        self.distributed(real, fake, preset="training")
        sync(self.device)
        seconds = time.perf_counter() - t0
        peaks: List[Any] = [None] * self.world
        dist.all_gather_object(peaks, peak_gib(self.device, base))
        out = {"n": n, "dim": dim, "seconds_rank0": round(seconds, 3), "peak_gib_per_rank": peaks}
        if self.args.one_gpu_seconds:
            out["one_gpu_seconds"] = self.args.one_gpu_seconds
            out["two_over_one"] = round(seconds / self.args.one_gpu_seconds, 3)
        return out

    # ------------------------------------------------------------------------------------------- D7
    def d7_compute_on_cpu(self) -> Dict[str, Any]:
        _, _, (r, f), _ = self.shares()
        got = self.distributed(r, f, preset="training", compute_on_cpu=True)
        return {"keys": len(got), "device_of_scores": str(next(iter(got.values())).device)}

    def d7_objects(self) -> Dict[str, Any]:
        objects: List[Any] = [None] * self.world
        try:
            dist.all_gather_object(objects, {"rank": self.rank})
            return {"outcome": "gathered", "objects": objects}
        except Exception as err:  # the outcome is the finding
            return {"outcome": f"{type(err).__name__}: {err}"[:1000]}


def parse(argv: Optional[List[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cuda (NCCL) or cpu (gloo)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--part", default="main", choices=PARTS)
    ap.add_argument("--one-gpu-seconds", type=float, default=None, help="S9b's one-GPU compute time, for D6's ratio")
    return ap.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse(argv)
    os.makedirs(args.out, exist_ok=True)
    cuda = args.device == "cuda"
    if cuda and args.part != "objects_without_set_device":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl" if cuda else "gloo", timeout=timedelta(seconds=120))
    run = Run(args)
    if args.part == "main":
        for name, fn in (
            ("D1 uneven shards", run.d1_uneven),
            ("D2 idle rank", run.d2_idle),
            ("D3 deferred log overflow on one rank", run.d3_overflow),
            ("D4 CMMD split", run.d4_cmmd),
            ("D6 timing", run.d6_timing),
        ):
            run.step(name, fn)
    elif args.part == "compute_on_cpu":
        run.step("D7 compute_on_cpu", run.d7_compute_on_cpu)
    else:
        run.step("D7 all_gather_object without set_device", run.d7_objects)
    failed = [name for name, e in run.data["steps"].items() if e["status"] == "failed"]
    dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
