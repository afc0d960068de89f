"""The device a collective on a process group must use, for tensor and object collectives alike.

Stage: bottom (imports only torch and ``torch.distributed``); used by :mod:`.shard`, :mod:`.kernel`,
the Metric classes' gather and the callback's and the feature cache's collectives.

Rules (those of NCCL, the backend of multi-GPU training):

* A backend that takes only accelerator tensors (``nccl``: CUDA, ``xccl``: XPU) needs every tensor of a
  collective on this process's accelerator device. Features kept on the CPU
  (``compute_on_cpu=True``) are moved there for the collective and the result moved back
  (:func:`to_group`, then ``.to(states' device)``).
* This process's CUDA device is the current one when the script chose it
  (``torch.cuda.set_device(local_rank)``, which Lightning does); when the current device is still
  ``cuda:0`` and ``torchrun``'s ``LOCAL_RANK`` is set, it is ``cuda:LOCAL_RANK`` (modulo the visible
  devices), so a script that forgot ``set_device`` does not put every rank's buffers on GPU 0.
* Any other backend (``gloo``, ``mpi``, or a mixed ``cpu:gloo,cuda:nccl``) takes tensors where they are.
* Object collectives (``all_gather_object``, ``broadcast_object_list``) pickle through a tensor on the
  current device: :func:`object_device_context` makes that this process's device.

Example:
    >>> import torch
    >>> group_device(None, torch.device("cpu"))  # no process group: where the tensor is
    device(type='cpu')
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, ContextManager, Dict, Optional

import torch
import torch.distributed as dist
from torch import Tensor

#: backends that take tensors of one accelerator type only, and that type
ACCELERATOR_BACKENDS: Dict[str, str] = {"nccl": "cuda", "xccl": "xpu"}


def _backend(group: Optional[Any]) -> Optional[str]:
    if not (dist.is_available() and dist.is_initialized()):
        return None
    return str(dist.get_backend(group))


def accelerator_index(kind: str) -> int:
    """This process's device index of accelerator type ``kind``: the current device, or ``LOCAL_RANK``
    (modulo the visible devices) when the current device was left at 0."""
    module = getattr(torch, kind)
    current = int(module.current_device())
    local = os.environ.get("LOCAL_RANK")
    if current == 0 and local is not None and local.isdigit():
        count = int(module.device_count())
        return int(local) % count if count else 0
    return current


def group_device(group: Optional[Any] = None, like: Optional[torch.device] = None) -> torch.device:
    """The device the tensors of a collective on ``group`` must be on, for tensors now on ``like``.

    Under an accelerator-only backend (:data:`ACCELERATOR_BACKENDS`): ``like`` when it is of that type,
    else this process's accelerator device (:func:`accelerator_index`). Otherwise ``like`` (CPU if None).
    """
    kind = ACCELERATOR_BACKENDS.get(_backend(group) or "")
    if kind is None:
        return like if like is not None else torch.device("cpu")
    if like is not None and like.type == kind:
        return like
    if kind == "cpu":
        return torch.device("cpu")
    return torch.device(kind, accelerator_index(kind))


def place(t: Tensor, device: torch.device) -> Tensor:
    """``t`` on ``device`` (the tensor itself when it is there already)."""
    return t.to(device)


def to_group(t: Tensor, group: Optional[Any] = None) -> Tensor:
    """``t`` on the device a collective on ``group`` needs (:func:`group_device`)."""
    return place(t, group_device(group, t.device))


def object_device_context(group: Optional[Any] = None, like: Optional[torch.device] = None) -> ContextManager[Any]:
    """A context in which object collectives on ``group`` pickle through this process's device: under a
    CUDA backend, ``torch.cuda.device(group_device(group, like))``; otherwise nothing."""
    device = group_device(group, like)
    if device.type == "cuda":
        return torch.cuda.device(device)
    return contextlib.nullcontext()
