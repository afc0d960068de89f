"""Run a function on 2 real processes (gloo, CPU) and collect what each rank returns.

:func:`run_ddp` with ``world=2`` runs in one pool of 2 worker processes per test session: started on the first
call, each worker joins one gloo process group for the whole session and then runs one call after another (about
a second per call instead of two new processes importing torch and the package). Each call sees what a fresh
spawn saw: the caller's environment variables and ``sys.path``, and the state a worker had when it started
(random generators, default dtype, matmul precision, thread count, grad mode, warning filters, working
directory, the package's registries of families, protocols and extractors, and every module-level name of the
package, of ``torch`` / ``torch.distributed`` and of the test modules that a call rebinds), put back after it.
A call that fails on a rank (an exception, a worker that dies, or no answer within :data:`TIMEOUT` seconds)
raises :class:`RankError` naming the rank, with its traceback, and ends the pool: the next call starts a new one.
Other world sizes spawn their own processes per call.
"""

from __future__ import annotations

import atexit
import copy
import datetime
import io
import os
import pickle
import random
import socket
import sys
import tempfile
import time
import traceback
import warnings
from multiprocessing.connection import wait
from typing import Any, Dict, List, Optional

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

#: seconds a pooled call may take before the pool is ended (``LIGHTNING_PRD_DDP_TIMEOUT``)
TIMEOUT = float(os.environ.get("LIGHTNING_PRD_DDP_TIMEOUT", "600"))
#: seconds the other ranks get to answer once one rank failed (they may wait in a collective)
GRACE = 3.0
#: environment variables of the pool's process group: a call's environment keeps the pool's values
GROUP_ENV = ("MASTER_ADDR", "MASTER_PORT")
#: module-level containers emptied and refilled with a worker's first contents after each call:
#: (module, attribute); a module not imported yet is skipped
CONTAINERS = (
    ("lightning_prd.functional.engine.families", "_REGISTRY"),
    ("lightning_prd.functional.engine.families", "_loaded"),
    ("lightning_prd.protocols.table", "_TABLE"),
    ("lightning_prd.features.registry", "_REGISTRY"),
    ("lightning_prd.callback.refusals", "_REFUSED"),
    ("lightning_prd.functional.knn.shapes", "_CACHE"),
)

_TESTS = os.path.dirname(os.path.abspath(__file__))


class RankError(RuntimeError):
    """A call of :func:`run_ddp` failed on a rank: the rank, the error and its traceback there."""


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


def _spawn(fn, args, world, strict):
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_worker, args=(world, _free_port(), out_dir, fn, args, strict), nprocs=world, join=True)
        return [torch.load(os.path.join(out_dir, f"rank{r}.pt")) for r in range(world)]


# ---------------------------------------------------------------------------------------------------------------
# the pooled worker


def _watched_modules() -> Dict[str, Dict[str, Any]]:
    """The module-level names of the package, ``torch``, ``torch.distributed`` and the test modules, by module."""
    out = {}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) or ""
        if (
            name in ("torch", "torch.distributed")
            or name == "lightning_prd"
            or name.startswith("lightning_prd.")
            or os.path.dirname(os.path.abspath(path)) == _TESTS
        ):
            out[name] = dict(vars(module))
    return out


class _State:
    """What a call may change in a worker, as it was when the worker started; :meth:`restore` puts it back."""

    def __init__(self) -> None:
        from lightning_prd.functional.engine.families import families

        families()  # the built-in records registered: the registry's first contents
        self.torch_rng = torch.get_rng_state()
        self.python_rng = random.getstate()
        self.numpy_rng = np.random.get_state()
        self.dtype = torch.get_default_dtype()
        self.matmul = torch.get_float32_matmul_precision()
        self.threads = torch.get_num_threads()
        self.deterministic = torch.are_deterministic_algorithms_enabled()
        self.grad = torch.is_grad_enabled()
        self.cwd = os.getcwd()
        self.excepthook = sys.excepthook
        self.containers = {key: copy.copy(value) for key, value in self._containers().items()}
        self.group_env = {key: os.environ[key] for key in GROUP_ENV}

    @staticmethod
    def _containers() -> Dict[Any, Any]:
        out = {}
        for module, attribute in CONTAINERS:
            if module in sys.modules:
                out[(module, attribute)] = getattr(sys.modules[module], attribute)
        return out

    def enter(self, env: Dict[str, str], path: List[str]) -> None:
        """The caller's environment (with the pool's group variables) and ``sys.path``."""
        os.environ.clear()
        os.environ.update(env)
        os.environ.update(self.group_env)
        sys.path[:] = path

    def restore(self, modules: Dict[str, Dict[str, Any]]) -> None:
        for name, names in modules.items():
            module = sys.modules.get(name)
            if module is None:
                continue
            for key, value in names.items():
                if getattr(module, key, _MISSING) is not value:
                    setattr(module, key, value)
        for key, container in self._containers().items():
            first = self.containers.get(key)
            if first is None:
                continue
            container.clear()
            container.update(first) if isinstance(container, dict) else container.extend(first)
        torch.set_rng_state(self.torch_rng)
        random.setstate(self.python_rng)
        np.random.set_state(self.numpy_rng)
        torch.set_default_dtype(self.dtype)
        torch.set_float32_matmul_precision(self.matmul)
        torch.set_num_threads(self.threads)
        torch.use_deterministic_algorithms(self.deterministic)
        torch.set_grad_enabled(self.grad)
        os.chdir(self.cwd)
        sys.excepthook = self.excepthook


_MISSING = object()


def _call(state: _State, rank: int, world: int, message: bytes) -> tuple:
    """One call: ``("ok", saved result)`` or ``("error", pickled exception or None, traceback)``."""
    modules = _watched_modules()
    strict = False
    try:
        env, path, strict, call = pickle.loads(message)
        state.enter(env, path)
        fn, args = pickle.loads(call)
        modules = _watched_modules()  # the test module of ``fn`` included
        if strict:  # NCCL's rules over gloo (tests/strict_collectives.py)
            import strict_collectives

            strict_collectives.install()
        with warnings.catch_warnings():
            result = fn(rank, world, *args)
        buffer = io.BytesIO()
        torch.save(result, buffer)
        return ("ok", buffer.getvalue())
    except BaseException as err:  # noqa: BLE001 - every failure goes back to the caller
        try:
            pickled: Optional[bytes] = pickle.dumps(err)
        except Exception:  # noqa: BLE001 - an exception that does not pickle: its text only
            pickled = None
        return ("error", pickled, traceback.format_exc())
    finally:
        if strict:
            import strict_collectives

            strict_collectives.uninstall()
        state.restore(modules)


def _serve(rank: int, world: int, port: int, conn) -> None:
    """A pooled worker: join the session's group, then run each call sent on ``conn`` until it closes."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=TIMEOUT))
    state = _State()
    try:
        while True:
            try:
                message = conn.recv_bytes()
            except (EOFError, OSError):
                break
            if not message:
                break
            conn.send(_call(state, rank, world, message))
    finally:
        dist.destroy_process_group()


# ---------------------------------------------------------------------------------------------------------------
# the caller's side


class _Pool:
    """``world`` pooled workers joined in one gloo group."""

    def __init__(self, world: int) -> None:
        context = mp.get_context("spawn")
        port = _free_port()
        self.world, self.conns, self.procs = world, [], []
        self._failed_at = 0.0
        for rank in range(world):
            mine, theirs = context.Pipe()
            proc = context.Process(target=_serve, args=(rank, world, port, theirs), daemon=True)
            proc.start()
            theirs.close()
            self.conns.append(mine)
            self.procs.append(proc)

    def call(self, fn, args, strict: bool) -> list:
        inner = pickle.dumps((fn, args))
        message = pickle.dumps((dict(os.environ), list(sys.path), strict, inner))
        for conn in self.conns:
            conn.send_bytes(message)
        answers: Dict[int, tuple] = {}
        deadline = time.monotonic() + TIMEOUT
        while len(answers) < self.world:
            pending = [c for r, c in enumerate(self.conns) if r not in answers]
            failed = any(a[0] != "ok" for a in answers.values())
            left = min(deadline, self._failed_at + GRACE) if failed else deadline
            ready = wait(pending, timeout=max(0.0, left - time.monotonic()))
            if not ready:
                break
            for conn in ready:
                rank = self.conns.index(conn)
                try:
                    answers[rank] = conn.recv()
                except (EOFError, OSError):
                    self.procs[rank].join(1)
                    answers[rank] = ("died", None, f"worker exited with status {self.procs[rank].exitcode}")
                if answers[rank][0] != "ok" and not failed:
                    self._failed_at = time.monotonic()
                    failed = True
        errors = {rank: a for rank, a in sorted(answers.items()) if a[0] != "ok"}
        if errors or len(answers) < self.world:
            self.close(force=True)
            if errors:
                rank, (_, pickled, text) = next(iter(errors.items()))
                cause = _unpickled(pickled)
                others = sorted(set(range(self.world)) - set(answers))
                waiting = f" (rank {', '.join(map(str, others))} gave no answer)" if others else ""
                raise RankError(f"rank {rank} of {self.world} failed{waiting}:\n{text}") from cause
            missing = sorted(set(range(self.world)) - set(answers))
            raise RankError(f"rank {', '.join(map(str, missing))} of {self.world} gave no answer in {TIMEOUT:.0f} s")
        return [torch.load(io.BytesIO(answers[rank][1])) for rank in range(self.world)]

    def alive(self) -> bool:
        return all(p.is_alive() for p in self.procs)

    def close(self, force: bool = False) -> None:
        for conn in self.conns:
            try:
                if not force:
                    conn.send_bytes(b"")  # the worker leaves the group and returns
                conn.close()
            except OSError:
                pass
        for proc in self.procs:
            proc.join(0 if force else 10)
            if proc.is_alive():
                proc.kill()
                proc.join(5)


def _unpickled(pickled: Optional[bytes]) -> Optional[BaseException]:
    try:
        return pickle.loads(pickled) if pickled is not None else None
    except Exception:  # noqa: BLE001 - an exception class the caller cannot rebuild: the text stands
        return None


_POOL: Optional[_Pool] = None


def close_pool() -> None:
    """End the session's pool (its workers leave the group and exit)."""
    global _POOL
    if _POOL is not None:
        _POOL.close()
        _POOL = None


atexit.register(close_pool)


def run_ddp(fn, *args, world: int = 2, strict: bool = False):
    """Call ``fn(rank, world, *args)`` in ``world`` gloo processes; return the list of results. With
    ``strict``, every collective must follow NCCL's rules (:mod:`strict_collectives`). ``world=2`` runs in the
    session's pool (module docstring)."""
    global _POOL
    if world != 2:
        return _spawn(fn, args, world, strict)
    if _POOL is None or not _POOL.alive():
        if _POOL is not None:
            _POOL.close(force=True)
        _POOL = _Pool(world)
    pool, _POOL = _POOL, None  # a call that raises leaves no pool behind
    try:
        results = pool.call(fn, args, strict)
    except BaseException:
        pool.close(force=True)
        raise
    _POOL = pool
    return results
