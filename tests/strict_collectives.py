"""NCCL's rules enforced over gloo: a wrapper around ``torch.distributed``'s collectives for the DDP tests.

:func:`install` (called in each process after ``init_process_group``) makes every tensor collective raise
``StrictCollectiveError`` when NCCL would refuse it or hang on it, until :func:`uninstall`:

* a tensor not placed on the group's device: gloo stands for NCCL and the CPU for the GPU
  (``collectives.ACCELERATOR_BACKENDS["gloo"] = "cpu"``); as the CPU is also where the states live with
  ``compute_on_cpu=True``, a tensor counts as on the group's device only when it went through
  ``collectives.place`` (which, here, copies and marks it). A collective on a CPU state as it is (what
  NCCL refuses) therefore raises;
* output buffers on another device than the input;
* shapes or dtypes that differ between the ranks (an extra metadata all-gather before each collective,
  which also catches ranks issuing different collectives);
* reduce ops other than SUM, MIN and MAX;
* a collective issued from a thread other than the main thread.

:data:`RECEIVED` counts the bytes each ``all_gather`` received on this rank (a test resets it).
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List

import torch
import torch.distributed as dist

from lightning_prd.functional.knn import collectives

#: bytes received by ``all_gather`` on this rank, by call site kind: "all_gather" (every call)
RECEIVED: Dict[str, int] = {"all_gather": 0}

#: what :func:`install` replaced, restored by :func:`uninstall`: "dist" (its functions), "place", "backends"
_REPLACED: Dict[str, Any] = {}

_ALLOWED_OPS = (dist.ReduceOp.SUM, dist.ReduceOp.MIN, dist.ReduceOp.MAX)


class StrictCollectiveError(RuntimeError):
    """A collective that NCCL would refuse or hang on."""


def _marked(t: torch.Tensor) -> bool:
    return bool(getattr(t, "_on_group_device", False))


def _place(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    out = t.to(device).clone()
    out._on_group_device = True  # type: ignore[attr-defined]
    return out


def _check(name: str, inputs: List[torch.Tensor], outputs: List[torch.Tensor], group: Any, original: Dict) -> None:
    if threading.current_thread() is not threading.main_thread():
        raise StrictCollectiveError(f"{name} issued from thread {threading.current_thread().name}, not the main thread")
    for t in inputs:
        if not _marked(t):
            raise StrictCollectiveError(
                f"{name} of a tensor on {t.device} that was not placed on the group's device "
                f"(shape {tuple(t.shape)}, dtype {t.dtype})"
            )
    for t in outputs:
        if t.device != inputs[0].device:
            raise StrictCollectiveError(f"{name} output on {t.device}, input on {inputs[0].device}")
    meta = (name, [(tuple(t.shape), str(t.dtype)) for t in inputs])
    every: List[Any] = [None] * dist.get_world_size(group)
    original["all_gather_object"](every, meta, group=group)
    if any(m != every[0] for m in every):
        raise StrictCollectiveError(f"ranks issued different collectives or shapes: {every}")


def install() -> None:
    """Wrap ``dist.all_gather``, ``all_reduce``, ``broadcast``, ``gather``, the object collectives and
    ``collectives.place`` in this process until :func:`uninstall`; :data:`RECEIVED` starts at 0."""
    uninstall()
    RECEIVED["all_gather"] = 0
    original = {
        n: getattr(dist, n)
        for n in ("all_gather", "all_reduce", "broadcast", "gather", "all_gather_object", "broadcast_object_list")
    }
    _REPLACED["dist"] = dict(original)
    _REPLACED["place"] = collectives.place
    _REPLACED["backends"] = dict(collectives.ACCELERATOR_BACKENDS)
    collectives.ACCELERATOR_BACKENDS["gloo"] = "cpu"
    collectives.place = _place

    def all_gather(tensor_list, tensor, group=None, async_op=False):
        _check("all_gather", [tensor], list(tensor_list), group, original)
        RECEIVED["all_gather"] += sum(t.numel() * t.element_size() for t in tensor_list)
        return original["all_gather"](tensor_list, tensor, group=group, async_op=async_op)

    def all_reduce(tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
        if op not in _ALLOWED_OPS:
            raise StrictCollectiveError(f"all_reduce with op {op}: only SUM, MIN and MAX are allowed")
        _check("all_reduce", [tensor], [], group, original)
        return original["all_reduce"](tensor, op=op, group=group, async_op=async_op)

    def broadcast(tensor, src=None, group=None, async_op=False, **kw):
        _check("broadcast", [tensor], [], group, original)
        return original["broadcast"](tensor, src=src, group=group, async_op=async_op, **kw)

    def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, **kw):
        _check("gather", [tensor], list(gather_list or []), group, original)
        return original["gather"](tensor, gather_list, dst=dst, group=group, async_op=async_op, **kw)

    def all_gather_object(object_list, obj, group=None):
        if threading.current_thread() is not threading.main_thread():
            raise StrictCollectiveError("all_gather_object issued from a thread other than the main thread")
        return original["all_gather_object"](object_list, obj, group=group)

    def broadcast_object_list(object_list, src=None, group=None, device=None, **kw):
        if threading.current_thread() is not threading.main_thread():
            raise StrictCollectiveError("broadcast_object_list issued from a thread other than the main thread")
        return original["broadcast_object_list"](object_list, src=src, group=group, device=device, **kw)

    dist.all_gather = all_gather
    dist.all_reduce = all_reduce
    dist.broadcast = broadcast
    dist.gather = gather
    dist.all_gather_object = all_gather_object
    dist.broadcast_object_list = broadcast_object_list


def uninstall() -> None:
    """Put back what :func:`install` replaced (nothing when it is not installed)."""
    if not _REPLACED:
        return
    for name, fn in _REPLACED.pop("dist").items():
        setattr(dist, name, fn)
    collectives.place = _REPLACED.pop("place")
    backends = _REPLACED.pop("backends")
    collectives.ACCELERATOR_BACKENDS.clear()
    collectives.ACCELERATOR_BACKENDS.update(backends)
