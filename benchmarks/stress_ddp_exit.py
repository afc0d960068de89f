"""Clean exits of 2-process gloo DDP runs, many times over, on a busy machine.

Each repetition starts ``--world`` fresh processes, joined in one gloo process group over TCP;
each computes :class:`lightning_prd.GenerativeMetrics` on its shard with the k-NN pass in
worker threads (small tiles, ``LIGHTNING_PRD_TILE_THREADS``), writes its scores and ends the
way a user's script ends: its main function returns and the interpreter exits normally.
Beside them run ``--spin`` processes that spin on a core each. A repetition passes when every
process exits with status 0, wrote its scores, and wrote no ``terminate called`` to stderr.

The processes are forked from one parent that imported ``torch`` and ``lightning_prd`` once
(``--start fork``, the default: a repetition then costs its DDP work, not two imports of the
package), or started as new interpreters (``--start exec``). Either way each is a new process
that exits through the interpreter's whole shutdown.

``--leave-group`` skips ``torch.distributed.destroy_process_group()`` at the end of the
workers (the group is then left to the interpreter's exit).

Usage::

    python benchmarks/stress_ddp_exit.py --repeat 200 --spin 1
    python benchmarks/stress_ddp_exit.py --repeat 200 --spin 1 --leave-group
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.abspath(__file__)


@dataclass
class Outcome:
    """One repetition: each rank's exit status (``-6``: killed by SIGABRT), whether it wrote its
    scores, and its stderr."""

    codes: List[int]
    wrote: List[bool]
    stderr: List[str]

    @property
    def aborted(self) -> bool:
        return any("terminate called" in e for e in self.stderr)

    @property
    def ok(self) -> bool:
        return all(c == 0 for c in self.codes) and all(self.wrote) and not self.aborted

    @property
    def port_clash(self) -> bool:
        return any("address already in use" in e.lower() for e in self.stderr)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(threads: int) -> Dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    env["LIGHTNING_PRD_TILE_THREADS"] = str(threads)
    return env


class Launcher:
    """Starts the repetitions' processes: new interpreters (``exec``) or forks of one parent that
    has imported the package (``fork``)."""

    def __init__(self, start: str = "fork", threads: int = 2, leave_group: bool = False) -> None:
        self.start, self.threads, self.leave_group = start, threads, leave_group
        self.parent: Optional[subprocess.Popen] = None
        if start == "fork":
            self.parent = subprocess.Popen(
                [sys.executable, HERE, "--fork-parent"] + (["--leave-group"] if leave_group else []),
                env=_env(threads),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            if self.parent.stdout is None or self.parent.stdout.readline().strip() != "ready":
                raise RuntimeError("the fork parent did not start")

    def close(self) -> None:
        if self.parent is not None:
            self.parent.kill()
            self.parent.wait()

    def run_once(self, world: int = 2, timeout: float = 120.0) -> Outcome:
        """One repetition: ``world`` new processes, their exit statuses and stderr."""
        with tempfile.TemporaryDirectory() as out:
            port = _free_port()
            if self.parent is not None:
                assert self.parent.stdin is not None and self.parent.stdout is not None
                self.parent.stdin.write(json.dumps(dict(world=world, port=port, out=out)) + "\n")
                self.parent.stdin.flush()
                codes = json.loads(self.parent.stdout.readline())
            else:
                codes = self._exec(world, port, out, timeout)
            errs = []
            for r in range(world):
                with open(os.path.join(out, f"rank{r}.err"), errors="replace") as fh:
                    errs.append(fh.read())
            wrote = [os.path.exists(os.path.join(out, f"rank{r}.json")) for r in range(world)]
        return Outcome(codes, wrote, errs)

    def _exec(self, world: int, port: int, out: str, timeout: float) -> List[int]:
        env = dict(_env(self.threads), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world))
        args = [sys.executable, HERE, "--worker", out] + (["--leave-group"] if self.leave_group else [])
        procs = []
        for r in range(world):
            with open(os.path.join(out, f"rank{r}.err"), "w") as err:
                procs.append(subprocess.Popen(args, env=dict(env, RANK=str(r)), stdout=subprocess.DEVNULL, stderr=err))
        try:
            return [p.wait(timeout=timeout) for p in procs]
        finally:
            for p in procs:
                p.kill()
                p.wait()


def stress(
    repeat: int,
    spin: int = 1,
    world: int = 2,
    threads: int = 2,
    leave_group: bool = False,
    start: str = "fork",
    progress: bool = False,
    seconds: Optional[float] = None,
) -> List[Outcome]:
    """``repeat`` repetitions with ``spin`` spinning processes beside them (a repetition whose TCP
    port was taken meanwhile is run again). ``progress``: one character per repetition on stdout
    (``.`` passed, ``A`` a rank aborted with ``terminate called``, ``F`` another failure).
    ``seconds``: stop after the repetition that ends past this time."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(spin)]
    launcher = Launcher(start, threads, leave_group)
    try:
        outcomes: List[Outcome] = []
        end = time.perf_counter() + seconds if seconds is not None else float("inf")
        while len(outcomes) < repeat and time.perf_counter() < end:
            o = launcher.run_once(world)
            if o.ok or not o.port_clash:
                outcomes.append(o)
                if progress:
                    print("." if o.ok else "A" if o.aborted else "F", end="", flush=True)
        return outcomes
    finally:
        launcher.close()
        for s in spinners:
            s.kill()
            s.wait()


def _worker(out: str, leave_group: bool) -> None:
    """One rank: the metric on its shard, its scores written, the group destroyed (or left)."""
    import torch
    import torch.distributed as dist

    from lightning_prd import GenerativeMetrics

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(0)
    real, fake = torch.randn(700, 32, generator=g), 1.2 * torch.randn(600, 32, generator=g)
    m = GenerativeMetrics(realism=True, prd=False, frechet=False, block_bytes=10**6)  # several tiles per thread
    m.update(real.chunk(world)[rank], real=True)
    m.update(fake.chunk(world)[rank], real=False)
    scores = {k: float(v) for k, v in m.compute().items() if v.ndim == 0}
    with open(os.path.join(out, f"rank{rank}.json"), "w") as fh:
        json.dump(scores, fh)
    if not leave_group:
        dist.destroy_process_group()


def _fork_parent(leave_group: bool) -> None:
    """Reads one repetition per line of stdin, forks its ranks, answers their exit statuses. A
    forked rank leaves this function by ``SystemExit``, so its interpreter shuts down normally."""
    import torch  # noqa: F401  (imported once, before any fork)

    import lightning_prd  # noqa: F401

    print("ready", flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        pids = []
        for r in range(job["world"]):
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                err = os.open(os.path.join(job["out"], f"rank{r}.err"), os.O_WRONLY | os.O_CREAT, 0o644)
                os.dup2(err, 2)
                os.environ.update(
                    MASTER_ADDR="127.0.0.1", MASTER_PORT=str(job["port"]), WORLD_SIZE=str(job["world"]), RANK=str(r)
                )
                code = 0
                try:
                    _worker(job["out"], leave_group)
                except BaseException:
                    import traceback

                    traceback.print_exc()
                    code = 1
                raise SystemExit(code)
            pids.append(pid)
        codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
        print(json.dumps(codes), flush=True)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=100, help="repetitions (new processes each)")
    ap.add_argument("--spin", type=int, default=1, help="spinning processes beside the workers")
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2, help="k-NN worker threads per process")
    ap.add_argument("--start", choices=["fork", "exec"], default="fork")
    ap.add_argument("--minutes", type=float, help="stop after this time even if fewer repetitions ran")
    ap.add_argument("--leave-group", action="store_true", help="workers do not destroy the process group")
    ap.add_argument("--worker", metavar="OUT_DIR", help=argparse.SUPPRESS)
    ap.add_argument("--fork-parent", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        _worker(args.worker, args.leave_group)
        return 0
    if args.fork_parent:
        _fork_parent(args.leave_group)
        return 0
    load = os.getloadavg()
    t0 = time.perf_counter()
    outcomes = stress(
        args.repeat,
        args.spin,
        args.world,
        args.threads,
        args.leave_group,
        args.start,
        True,
        args.minutes and 60 * args.minutes,
    )
    print()
    failed = [o for o in outcomes if not o.ok]
    by_code = collections.Counter(",".join(map(str, o.codes)) for o in failed)
    print(
        f"{len(outcomes)} repetitions ({args.start}) of {args.world} gloo processes x {args.threads} k-NN threads, "
        f"{args.spin} spinning process(es), group {'left to exit' if args.leave_group else 'destroyed'}; "
        f"{os.cpu_count()} CPUs, load average {load[0]:.2f} at start, {os.getloadavg()[0]:.2f} at end; "
        f"{time.perf_counter() - t0:.0f} s"
    )
    print(
        f"failed: {len(failed)} (exit statuses of the failed repetitions: {dict(by_code) or '-'}; "
        f"'terminate called' in stderr: {sum(o.aborted for o in failed)})"
    )
    for o in failed[:3]:
        print("--- exit statuses", o.codes, "\n" + "\n".join(e[-600:] for e in o.stderr if e.strip()))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
