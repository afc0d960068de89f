"""Scratch buffers kept for a whole pass: the chunks and calls of a stage reuse one allocation.

Stage: the bottom, below :mod:`.lists` (imports only torch). A large temporary allocated and freed
for every chunk of pairs (the float64 recomputations of :mod:`.exact`) is handed back to the
operating system by the allocator and faulted in again, page by page, by the next chunk: tens
of thousands of minor page faults per pass. Inside :func:`pass_workspace` (entered by every
pass of :mod:`lightning_prd.functional.engine.one_pass`), :func:`scratch` returns a view of a
buffer kept for the rest of the pass instead, one per name, dtype, device and worker thread
(:mod:`.threads` gives each worker its slot of the caller's workspace); the buffers are freed
when the outermost block ends. Outside a block, :func:`scratch` is ``torch.empty``.

A scratch buffer is a temporary of one call: valid until the next :func:`scratch` of the same
name in the same thread, never returned to a caller.

Example:
    >>> import torch
    >>> with pass_workspace():
    ...     a = scratch("diff", 1000, torch.float64, torch.device("cpu"))
    ...     b = scratch("diff", 10, torch.float64, torch.device("cpu"))
    ...     a.data_ptr() == b.data_ptr()
    True
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Dict, Iterator, Optional, Tuple

import torch
from torch import Tensor

Key = Tuple[int, str, torch.dtype, torch.device]

_local = threading.local()


def current() -> Optional[Dict[Key, Tensor]]:
    """The workspace of this thread's running pass, or None outside one."""
    return getattr(_local, "space", None)


@contextmanager
def pass_workspace() -> Iterator[None]:
    """Keep :func:`scratch` buffers until the block ends (nested blocks share the outer one's)."""
    if current() is not None:
        yield
        return
    _local.space, _local.slot = {}, 0
    try:
        yield
    finally:
        _local.space = None


@contextmanager
def worker_slot(space: Optional[Dict[Key, Tensor]], slot: int) -> Iterator[None]:
    """In a worker thread: use the caller's workspace ``space`` with this thread's own ``slot``."""
    saved = (current(), getattr(_local, "slot", 0))
    _local.space, _local.slot = space, slot
    try:
        yield
    finally:
        _local.space, _local.slot = saved


def scratch(name: str, numel: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """A 1-D tensor of ``numel`` uninitialised elements: a view of this thread's buffer ``name``
    of the running pass (grown when too small), or a fresh one outside a pass."""
    space = current()
    if space is None:
        return torch.empty(numel, dtype=dtype, device=device)
    key = (int(getattr(_local, "slot", 0)), name, dtype, torch.device(device))
    buf = space.get(key)
    if buf is None or buf.numel() < numel:
        buf = space[key] = torch.empty(numel, dtype=dtype, device=device)
    return buf[:numel]


def tile_mask(tile: Tensor, name: str) -> Tensor:
    """A boolean scratch tensor of ``tile``'s shape (``out=`` of a tile comparison)."""
    return scratch(name, tile.numel(), torch.bool, tile.device).view(tile.shape)
