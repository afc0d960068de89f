"""Check the package on a GPU in one command: correctness against the float64 oracle and the CPU path under
adversarial precision settings, sync freedom, autocast, extractor precision, deterministic mode, timings and
peak memory at 10k-50k x 2,048-4,096, a 24 GB budget, ``eigh``, the callback end to end, and a 2-GPU NCCL part
when two GPUs are present.

Each step runs in its own ``try``; ``DIR/report.json`` is rewritten after every step with each step's status
(``ok``, ``failed`` or ``skipped``, with the reason), its seconds and its numbers, so a run cut short still
leaves its report. Past ``--deadline`` seconds the optional steps (S9c, S12, S12b, the 2-GPU part) are skipped;
past ``--hard-deadline`` every remaining step is. The exit status is 1 when a step that ran failed.

Usage::

    python benchmarks/gpu_check.py --out "$OUT"                        # one GPU: under 8 minutes on an H100/H200
    python benchmarks/gpu_check.py --device cpu --quick --out DIR      # the same steps on the CPU, small sizes (CI)

The 2-GPU part runs by itself from ``torchrun`` (two GPUs, NCCL; ``gpu_check.py`` starts it when it sees two)::

    torchrun --standalone --nproc_per_node=2 benchmarks/gpu_check_ddp.py --out "$OUT"

The steps follow the GPU check plan S0-S12 and D1-D7; ``--quick`` shrinks every size
(``gpu_check_common.QUICK``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_check_common import HERE, CheckFailed, Context, Skip, check  # noqa: E402

Step = Tuple[str, Callable[[Context], Dict[str, Any]], bool]


def steps() -> List[Step]:
    """(name, function, optional) in running order."""
    import gpu_check_extractors as ex
    import gpu_check_numerics as nu
    import gpu_check_workloads as wl

    return [
        ("S0 environment", nu.s0_environment, False),
        ("S1 CUDA-only tests", nu.s1_cuda_tests, False),
        ("S2 oracle", nu.s2_oracle, False),
        ("S2b compute_device", nu.s2b_compute_device, False),
        ("S3 device vs CPU", nu.s3_device_vs_cpu, False),
        ("S4 sync-free tile loop", nu.s4_sync_free, False),
        ("S5 TF32 kept out", nu.s5_tf32_kept_out, False),
        ("S6 autocast", nu.s6_autocast, False),
        ("S7 extractor precision", ex.s7_extractor_precision, False),
        ("S7b extractor_precision option", ex.s7b_extractor_precision_option, False),
        ("S8 deterministic", ex.s8_deterministic, False),
        ("S9a pass timing", wl.s9a_pass_timing, False),
        ("S9b compute timing", wl.s9b_compute_timing, False),
        ("S9c CPU pass", wl.s9c_cpu_pass, True),
        ("S10 24 GB budget", wl.s10_memory_fraction, False),
        ("S11 eigh", nu.s11_eigh, False),
        ("S12 callback", wl.s12_callback, True),
        ("S12b extraction out of memory", wl.s12b_extract_batch_halving, True),
        ("D 2-GPU NCCL", ddp_part, True),
    ]


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (user + system)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class Report:
    """``report.json``: the run's settings and one entry per step, written after every step."""

    def __init__(self, ctx: Context, args: argparse.Namespace) -> None:
        self.ctx = ctx
        self.path = os.path.join(ctx.out, "report.json")
        self.data: Dict[str, Any] = {
            "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
            "device": str(ctx.device),
            "quick": ctx.quick,
            "deadline_s": args.deadline,
            "hard_deadline_s": args.hard_deadline,
            "steps": {},
        }
        self.write()

    def write(self) -> None:
        self.data["elapsed_s"] = round(self.ctx.elapsed(), 1)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1, default=str)
        os.replace(tmp, self.path)

    def run(self, name: str, fn: Callable[[Context], Dict[str, Any]], optional: bool, args: argparse.Namespace) -> str:
        entry: Dict[str, Any] = {}
        elapsed = self.ctx.elapsed()
        t0, c0 = time.perf_counter(), cpu_seconds()
        if elapsed > args.hard_deadline or (optional and elapsed > args.deadline):
            entry.update(status="skipped", reason=f"past the deadline ({elapsed:.0f} s elapsed)")
        else:
            try:
                entry.update(status="ok", numbers=fn(self.ctx) or {})
            except Skip as err:
                entry.update(status="skipped", reason=str(err))
            except Exception as err:
                entry.update(status="failed", reason=f"{type(err).__name__}: {err}"[:2000])
                if not isinstance(err, CheckFailed):
                    entry["traceback"] = traceback.format_exc()[-4000:]
        entry["seconds"] = round(time.perf_counter() - t0, 2)
        entry["cpu_seconds"] = round(cpu_seconds() - c0, 2)
        self.data["steps"][name] = entry
        self.write()
        reason = f" - {entry['reason'].splitlines()[0][:300]}" if "reason" in entry else ""
        print(f"[{self.ctx.elapsed():6.1f} s] {name}: {entry['status']}{reason}", flush=True)
        return entry["status"]


def ddp_part(ctx: Context) -> Dict[str, Any]:
    """The 2-GPU NCCL part (``gpu_check_ddp.py`` under ``torchrun``, one process group per part) when two CUDA
    devices are visible. The probe of ``all_gather_object`` without ``set_device`` is recorded, not judged."""
    if not ctx.cuda:
        raise Skip("needs two CUDA devices (NCCL); this run is on the CPU")
    if torch.cuda.device_count() < 2:
        raise Skip(f"needs two CUDA devices (NCCL); {torch.cuda.device_count()} visible")
    out_dir = os.path.join(ctx.out, "ddp")
    base = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        os.path.join(HERE, "gpu_check_ddp.py"),
    ]
    base += ["--out", out_dir] + (["--quick"] if ctx.quick else [])
    if "compute_s" in ctx.shared:
        base += ["--one-gpu-seconds", f"{ctx.shared['compute_s']:.3f}"]
    out: Dict[str, Any] = {}
    failed = []
    for part, judged in (("main", True), ("compute_on_cpu", True), ("objects_without_set_device", False)):
        cmd = base + ["--part", part]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=200)
            code, tail = proc.returncode, (proc.stdout + proc.stderr)[-3000:]
        except subprocess.TimeoutExpired as err:
            code, tail = "timeout", str(err)[-3000:]
        path = os.path.join(out_dir, f"report-{part}.json")
        report = json.load(open(path)) if os.path.exists(path) else {}
        out[part] = {"command": " ".join(["torchrun", *cmd[3:]]), "returncode": code, "report": report}
        if code != 0:
            out[part]["output_tail"] = tail
            if judged:
                failed.append(part)
    check(not failed, f"failed parts: {failed}")
    return out


def parse(argv: Optional[List[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder of report.json (created)")
    ap.add_argument("--device", default="cuda", help="cuda, cuda:<index> or cpu (default: cuda)")
    ap.add_argument("--quick", action="store_true", help="small sizes: the steps in about a minute on a CPU")
    ap.add_argument("--deadline", type=float, default=420.0, help="seconds after which optional steps are skipped")
    ap.add_argument("--hard-deadline", type=float, default=510.0, help="seconds after which every step is skipped")
    ap.add_argument(
        "--only", nargs="*", default=None, help="run only the steps whose names start with these (e.g. S2 S9a)"
    )
    ap.add_argument("--worker", choices=["deterministic"], default=None, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse(argv)
    device = torch.device(args.device)
    if device.type not in ("cuda", "cpu"):
        raise SystemExit(f"Expected argument `--device` to be cuda, cuda:<index> or cpu, but got {args.device!r}")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"--device {args.device}: CUDA is not available (use --device cpu)")
    os.makedirs(args.out, exist_ok=True)
    ctx = Context(device=device, quick=args.quick, out=os.path.abspath(args.out))
    if args.worker == "deterministic":
        from gpu_check_extractors import deterministic_worker

        print(json.dumps(deterministic_worker(ctx), default=str))
        return 0
    report = Report(ctx, args)
    statuses = []
    for name, fn, optional in steps():
        if args.only is not None and not any(name.startswith(prefix) for prefix in args.only + ["S0"]):
            continue
        statuses.append(report.run(name, fn, optional, args))
    report.data["failed"] = [name for name, e in report.data["steps"].items() if e["status"] == "failed"]
    report.data["cpu_seconds"] = round(cpu_seconds(), 1)
    report.write()
    counts = ", ".join(f"{statuses.count(s)} {s}" for s in ("ok", "skipped", "failed"))
    print(
        f"{len(statuses)} steps in {ctx.elapsed():.1f} s ({report.data['cpu_seconds']} CPU s): {counts}; {report.path}"
    )
    return 1 if report.data["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
