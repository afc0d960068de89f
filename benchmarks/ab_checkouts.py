"""Time the same scoring call on two checkouts of the package, in turns, and print their ratio.

An engine or interface change must not slow the pass: this runs ``generative_metrics`` (the default call,
and the call with the families that join the k-NN pass) in worker processes that import the package from
``--baseline`` (another checkout, e.g. a ``git worktree`` of main) and from this checkout, alternating
baseline and candidate ``--rounds`` times, so both see the same machine load; each side's time is the
fastest of its rounds, and the table gives candidate / baseline.

    git worktree add /tmp/main-checkout main
    python benchmarks/ab_checkouts.py --baseline /tmp/main-checkout --sizes 5000x1024 10000x2048
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

HERE = Path(__file__).resolve().parents[1]

WORKER = r"""
import json, sys, time
import torch
from lightning_prd.functional import generative_metrics
n, d, call = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
g = torch.Generator().manual_seed(0)
real, fake = torch.randn(n, d, generator=g), torch.randn(n, d, generator=g) + 0.1
options = {"default": {}, "joined": dict(clipped=True, symmetric=True, per_sample=True)}[call]
generative_metrics(real[:256], fake[:256], **options)  # warm-up: imports, GEMM probe
start = time.perf_counter()
generative_metrics(real, fake, **options)
print(json.dumps({"seconds": time.perf_counter() - start}))
"""


def one(root: Path, n: int, d: int, call: str) -> float:
    env = dict(os.environ, PYTHONPATH=str(root))
    out = subprocess.run(
        [sys.executable, "-c", WORKER, str(n), str(d), call], env=env, capture_output=True, text=True, check=True
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="root of the other checkout (holds lightning_prd/)")
    ap.add_argument("--sizes", nargs="+", default=["5000x1024"], help="NxD, N = M")
    ap.add_argument("--calls", nargs="+", default=["default", "joined"], choices=["default", "joined"])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    base = Path(args.baseline).resolve()
    if not (base / "lightning_prd").is_dir():
        ap.error(f"--baseline {base}: no lightning_prd/ there")
    import torch

    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, baseline {base}, candidate {HERE}")
    print(f"{'size':>12}  {'call':>8}  {'baseline s':>10}  {'candidate s':>11}  {'candidate/baseline':>18}")
    for size in args.sizes:
        n, d = (int(v) for v in size.lower().split("x"))
        for call in args.calls:
            times: Dict[str, List[float]] = {"base": [], "new": []}
            for _ in range(args.rounds):
                times["base"].append(one(base, n, d, call))
                times["new"].append(one(HERE, n, d, call))
            b, c = min(times["base"]), min(times["new"])
            print(f"{size:>12}  {call:>8}  {b:>10.3f}  {c:>11.3f}  {c / b:>18.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
