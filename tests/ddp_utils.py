"""Run a function on 2 real processes (gloo, CPU) and collect what each rank returns."""

from __future__ import annotations

import os
import socket
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, out_dir, fn, args, strict=False):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    if strict:  # NCCL's rules over gloo (tests/strict_collectives.py)
        import strict_collectives

        strict_collectives.install()
    try:
        result = fn(rank, world, *args)
        torch.save(result, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def run_ddp(fn, *args, world: int = 2, strict: bool = False):
    """Call ``fn(rank, world, *args)`` in ``world`` gloo processes; return the list of results. With
    ``strict``, every collective must follow NCCL's rules (:mod:`strict_collectives`)."""
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_worker, args=(world, _free_port(), out_dir, fn, args, strict), nprocs=world, join=True)
        return [torch.load(os.path.join(out_dir, f"rank{r}.pt")) for r in range(world)]
