"""Storage and collectives of :mod:`lightning_prd.features.cache`: atomic writes, checksums, rank exchange."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional

import torch
import torch.distributed as dist
from torch import Tensor


def tensor_bytes(t: Tensor) -> memoryview:
    """The raw bytes of ``t`` (any dtype, any device; copied to the CPU when needed)."""
    return t.detach().reshape(-1).contiguous().view(torch.uint8).cpu().numpy().data


class RowHasher:
    """SHA-256 of rows streamed in chunks; the chunk boundaries do not enter the digest."""

    def __init__(self) -> None:
        self.sha, self.rows = hashlib.sha256(), 0
        self._layout: Optional[str] = None

    def update(self, x: Tensor) -> None:
        layout = f"{x.dtype}{tuple(x.shape[1:])}"
        if layout != self._layout:
            self.sha.update(f"|{layout}|".encode())
            self._layout = layout
        self.sha.update(tensor_bytes(x))
        self.rows += int(x.shape[0])

    def hexdigest(self) -> str:
        return f"{self.rows}:{self.sha.hexdigest()}"


def atomic_save(obj: Any, path: Path) -> None:
    """``torch.save`` to a temporary file in ``path``'s folder, flushed to disk, then ``os.replace``:
    readers see the old file or the complete new one, never a partial one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # the permissions of a plain new file, not mkstemp's 0600
        with os.fdopen(fd, "wb") as fh:
            torch.save(obj, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


class Comm:
    """The few collectives the cache needs; trivial for one process."""

    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world
        if world > 1 and not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError(
                f"RealFeatureCache: world size {world} needs an initialised torch.distributed process group"
            )

    def from_zero(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` evaluated on rank 0, returned on every rank."""
        if self.world == 1:
            return fn()
        box = [fn() if self.rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def all_gather(self, obj: Any) -> List[Any]:
        if self.world == 1:
            return [obj]
        out: List[Any] = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def gather_to_zero(self, chunks: List[Tensor]) -> Optional[List[List[Tensor]]]:
        """Every rank's chunks on rank 0 (one list per rank, in rank order); None elsewhere."""
        if self.world == 1:
            return [chunks]
        mine = torch.cat(chunks) if chunks else None
        metas = self.all_gather(None if mine is None else (int(mine.shape[0]), tuple(mine.shape[1:]), str(mine.dtype)))
        shapes = {m[1:] for m in metas if m is not None}
        if len(shapes) != 1:
            raise ValueError(
                f"Expected every rank's real features to share one width and dtype, but got {sorted(shapes)}"
            )
        tail, dtype_name = shapes.pop()
        dtype = getattr(torch, dtype_name.replace("torch.", ""))
        device = (
            torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
        )
        most = max(m[0] for m in metas if m is not None)
        padded = torch.zeros((most, *tail), dtype=dtype, device=device)
        if mine is not None:
            padded[: mine.shape[0]] = mine
        del mine
        bufs = [torch.empty_like(padded) for _ in range(self.world)] if self.rank == 0 else None
        dist.gather(padded, bufs, dst=0)
        if self.rank != 0:
            return None
        return [chunks] + [[b[: m[0]].cpu()] if m is not None else [] for b, m in zip(bufs[1:], metas[1:])]  # type: ignore[index]


def checksum(shards: List[List[Tensor]]) -> str:
    """SHA-256 of every rank's feature chunks: rank, dtype, shape and bytes, in order."""
    sha = hashlib.sha256()
    for r, shard in enumerate(shards):
        sha.update(f"|rank{r}:{len(shard)}|".encode())
        for t in shard:
            sha.update(f"|{t.dtype}|{tuple(t.shape)}|".encode())
            sha.update(tensor_bytes(t))
    return sha.hexdigest()


def rows(shard: List[Tensor], chunk_rows: int) -> Iterator[Tensor]:
    """The rows of ``shard``'s tensors in slices of at most ``chunk_rows`` (views, no copies)."""
    for t in shard:
        for start in range(0, t.shape[0], chunk_rows):
            yield t[start : start + chunk_rows]
