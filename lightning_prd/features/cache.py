"""Real features cached on disk across runs: :class:`RealFeatureCache`.

Comparing runs means many fits against the same real set; embedding it (e.g. 50,000 images
through Inception) costs minutes per run. The cache stores the extracted real features in
``cache_dir`` under a key that changes whenever the features could change:

* the **real samples as read**: SHA-256 of every sample's dtype, shape and bytes, streamed
  chunk by chunk through the same path that feeds the extractor (independent of the batch
  size), one digest per rank in rank order;
* the **extractor**: module and class qualname; SHA-256 of every parameter and buffer (name,
  dtype, shape, bytes), so another weights file or another dtype never hits; every
  submodule's class and plain attributes (strides, resize mode, normalisation constants...);
  the input contract (``num_features``, ``input_dtype``, ``input_range``, ``input_size``);
  the user-given ``name``;
* ``num_real``, the world size (features are stored per rank, in the callback's sharding),
  the device type, torch's default dtype and autocast state, and the torch version.

A plain function or lambda cannot be fingerprinted (its code may read weights from anywhere):
give it a ``name`` that you change whenever it changes. Files are ``real-<key>.pt``, written
by rank 0 only, atomically (a temporary file in the same folder, then ``os.replace``), and
hold a SHA-256 checksum of the features: a truncated or corrupt file is ignored with one
warning and rewritten. Loading memory-maps the file and copies this rank's rows once.
Under DDP ``cache_dir`` must be on a filesystem every rank sees.

Example:
    >>> import tempfile, torch
    >>> from lightning_prd.features import RandomConvNet
    >>> cache = RealFeatureCache(tempfile.mkdtemp())
    >>> net, real = RandomConvNet(num_features=4, size=8), torch.rand(6, 3, 8, 8)
    >>> chunks = lambda: iter(real.split(4))
    >>> first = torch.cat(list(cache.real_features(net, chunks, net)))
    >>> second = torch.cat(list(cache.real_features(net, chunks, lambda x: 1 / 0)))  # a hit: net not called
    >>> torch.equal(first, second), tuple(second.shape)
    (True, (6, 4))
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Union

import torch
import torch.distributed as dist
from torch import Tensor, nn

from lightning_prd.functional._validation import check_positive_int

FORMAT = 1
Chunks = Callable[[], Iterable[Tensor]]
_PLAIN = (type(None), bool, int, float, str)
_SKIP = object()  # a value that is not part of the key


def _bytes(t: Tensor) -> memoryview:
    return memoryview(t.detach().reshape(-1).contiguous().view(torch.uint8).cpu().numpy())


class _RowHasher:
    """SHA-256 of rows streamed in chunks; the chunk boundaries do not enter the digest."""

    def __init__(self) -> None:
        self.sha, self.rows, self._layout = hashlib.sha256(), 0, None

    def update(self, x: Tensor) -> None:
        layout = f"{x.dtype}{tuple(x.shape[1:])}"
        if layout != self._layout:
            self.sha.update(f"|{layout}|".encode())
            self._layout = layout
        self.sha.update(_bytes(x))
        self.rows += int(x.shape[0])

    def hexdigest(self) -> str:
        return f"{self.rows}:{self.sha.hexdigest()}"


def _plain(value: Any) -> Any:
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (torch.dtype, torch.Size)):
        return str(value)
    if isinstance(value, Tensor):
        return f"tensor:{value.dtype}{tuple(value.shape)}:{hashlib.sha256(_bytes(value)).hexdigest()}"
    if isinstance(value, (tuple, list)):
        items = [_plain(v) for v in value]
        return _SKIP if any(v is _SKIP for v in items) else items
    if inspect.isfunction(value) or inspect.isclass(value) or inspect.isbuiltin(value):
        return f"{value.__module__}.{value.__qualname__}"
    return _SKIP


def _qualname(obj: Any) -> str:
    cls = obj if inspect.isclass(obj) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def check_cacheable(extractor: Any, name: Optional[str] = None) -> Optional[nn.Module]:
    """The module whose weights identify ``extractor`` (itself, or the owner of a bound method); None for
    ``None`` and for a named plain callable; ``ValueError`` for an unnamed plain callable."""
    if inspect.ismethod(extractor) and isinstance(extractor.__self__, nn.Module):
        return extractor.__self__
    if extractor is None or isinstance(extractor, nn.Module):
        return extractor
    if name is None:
        raise ValueError(
            f"Expected argument `feature_extractor` to be an nn.Module (whose weights the disk cache can hash), but "
            f"got {type(extractor).__name__} {getattr(extractor, '__qualname__', '')!r}: pass "
            f"cache_dir=RealFeatureCache(PATH, name='...') with a name that changes whenever the callable does"
        )
    return None


def extractor_identity(extractor: Any, name: Optional[str] = None) -> Dict[str, Any]:
    """The extractor's part of the cache key (module docstring); raises for an unnamed plain callable.

    Example:
        >>> from lightning_prd.features import Identity
        >>> ident = extractor_identity(Identity(3))
        >>> ident["class"], ident["contract"]["num_features"]
        ('lightning_prd.features.base.Identity', 3)
    """
    out: Dict[str, Any] = {"name": name}
    module = check_cacheable(extractor, name)
    method = extractor.__func__.__qualname__ if module is not None and module is not extractor else None
    if extractor is None:
        out["class"] = "flatten"
        return out
    if module is None:
        out["class"] = _qualname(extractor) + f":{getattr(extractor, '__qualname__', '')}"
        return out
    sha = hashlib.sha256()
    tensors = list(module.named_parameters(remove_duplicate=False)) + list(module.named_buffers(remove_duplicate=False))
    for key, t in tensors:
        sha.update(f"|{key}|{t.dtype}|{tuple(t.shape)}|".encode())
        sha.update(_bytes(t))
    config = []
    for path, sub in module.named_modules():
        attrs = {k: _plain(v) for k, v in sorted(vars(sub).items()) if not k.startswith("_") and k != "training"}
        config.append([path, _qualname(sub), {k: v for k, v in attrs.items() if v is not _SKIP}])
    contract = {k: _plain(getattr(module, k, None)) for k in ("num_features", "input_dtype", "input_range", "input_size")}
    out.update({
        "class": _qualname(module), "method": method, "weights_sha256": sha.hexdigest(), "config": config,
        "contract": {k: (None if v is _SKIP else v) for k, v in contract.items()},
    })
    return out


class RealFeatureCache:
    """Real features on disk across runs (the key: module docstring); used by ``PRDCallback(cache_dir=...)``.

    Args:
        cache_dir: folder of the cache files (created when first written).
        name: a name added to the key; required for an extractor that is a plain function or
            lambda rather than an ``nn.Module``.
    """

    def __init__(self, cache_dir: Union[str, "os.PathLike[str]"], *, name: Optional[str] = None) -> None:
        if not isinstance(cache_dir, (str, os.PathLike)) or not str(cache_dir):
            raise TypeError(f"Expected argument `cache_dir` to be a folder path, but got {cache_dir!r}")
        self.cache_dir = Path(cache_dir).expanduser()
        if self.cache_dir.exists() and not self.cache_dir.is_dir():
            raise ValueError(f"Expected argument `cache_dir` to be a folder, but {str(self.cache_dir)!r} is a file")
        if name is not None and (not isinstance(name, str) or not name):
            raise ValueError(f"Expected argument `name` to be a non-empty string or None, but got {name!r}")
        self.name = name
        #: what the last call did: ``"hit"``, ``"miss"`` (extracted and written) or ``"unwritten"``
        self.last_status: Optional[str] = None

    def real_features(
        self, extractor: Any, chunks: Chunks, extract: Callable[[Tensor], Tensor], *, num_real: Optional[int] = None,
        rank: int = 0, world: int = 1, device: Union[None, str, torch.device] = None, chunk_rows: int = 1024,
    ) -> Iterator[Tensor]:
        """This rank's real features, in chunks of at most ``chunk_rows`` rows: from the cache, or
        ``extract(chunk)`` for every chunk of ``chunks()`` (then written). Under DDP (``world > 1``)
        every rank must call it (collectives); ``chunks()`` yields this rank's samples."""
        chunk_rows = check_positive_int(chunk_rows, "chunk_rows")
        device = torch.device(device if device is not None else "cpu")
        meta = {
            "format": FORMAT, "extractor": extractor_identity(extractor, self.name), "num_real": num_real,
            "world_size": world, "device": device.type, "default_dtype": str(torch.get_default_dtype()),
            "autocast": bool(torch.is_autocast_enabled(device.type)), "torch": torch.__version__,
        }
        stem = "real-" + hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()[:24]
        comm = _Comm(rank, world)
        known = comm.from_zero(lambda: any(self.cache_dir.glob(f"{stem}-*.pt")))
        feats: Optional[List[Tensor]] = None
        hasher = _RowHasher()
        if known:  # hash first: a hit never calls the extractor
            for x in chunks():
                hasher.update(x)
        else:  # no file can match: hash while extracting, in one pass
            feats = []
            for x in chunks():
                hasher.update(x)
                feats.append(extract(x))
        data = hashlib.sha256("|".join(comm.all_gather(hasher.hexdigest())).encode()).hexdigest()[:24]
        key = json.dumps({**meta, "data": data}, sort_keys=True)
        path = self.cache_dir / f"{stem}-{data}.pt"
        if feats is None:
            shard = self._load(path, key, rank) if comm.from_zero(path.is_file) else None
            if all(comm.all_gather(shard is not None)):
                self.last_status = "hit"
                yield from _rows(shard, chunk_rows)  # type: ignore[arg-type]
                return
            feats = [extract(x) for x in chunks()]
        written = self._store(path, key, feats, comm)
        self.last_status = "miss" if written else "unwritten"
        while feats:
            yield from _rows([feats.pop(0)], chunk_rows)

    def _load(self, path: Path, key: str, rank: int) -> Optional[List[Tensor]]:
        """This rank's shard from ``path`` (memory-mapped), or None; rank 0 checks the checksum and warns."""
        try:
            blob = torch.load(path, map_location="cpu", mmap=True, weights_only=True)
            if not isinstance(blob, dict) or blob.get("key") != key:
                raise ValueError("its key does not match its name")
            shards = blob["shards"]
            if rank == 0 and _checksum(shards) != blob.get("sha256"):
                raise ValueError("its checksum does not match its features")
            return list(shards[rank])
        except Exception as err:  # noqa: BLE001 - any unreadable file is a miss, said once
            if rank == 0:
                warnings.warn(
                    f"RealFeatureCache: ignoring the corrupt or truncated cache file {str(path)!r} ({type(err).__name__}: "
                    f"{str(err)[:200]}); the real features are extracted again and the file rewritten",
                    UserWarning, stacklevel=3,
                )
            return None

    def _store(self, path: Path, key: str, feats: List[Tensor], comm: "_Comm") -> bool:
        """Rank 0 writes every rank's features atomically; returns (on every rank) whether it worked."""
        shards = comm.gather_to_zero([f.detach() for f in feats])
        ok = True
        if shards is not None:
            shards = [[t.cpu() for t in shard] for shard in shards]
            tmp = None
            try:
                self.cache_dir.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=self.cache_dir, prefix=".tmp-", suffix=".pt")
                with os.fdopen(fd, "wb") as fh:
                    torch.save({"key": key, "sha256": _checksum(shards), "shards": shards}, fh)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, path)
            except OSError as err:
                ok = False
                if tmp is not None and os.path.exists(tmp):
                    os.remove(tmp)
                warnings.warn(f"RealFeatureCache: could not write {str(path)!r}: {err}", UserWarning, stacklevel=3)
        return bool(comm.from_zero(lambda: ok))


class _Comm:
    """The few collectives the cache needs; trivial for one process."""

    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world
        if world > 1 and not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError(f"RealFeatureCache: world size {world} needs an initialised torch.distributed process group")

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
            raise ValueError(f"Expected every rank's real features to share one width and dtype, but got {sorted(shapes)}")
        tail, dtype_name = shapes.pop()
        dtype = getattr(torch, dtype_name.replace("torch.", ""))
        device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
        rows = max(m[0] for m in metas if m is not None)
        padded = torch.zeros((rows, *tail), dtype=dtype, device=device)
        if mine is not None:
            padded[: mine.shape[0]] = mine
        del mine
        bufs = [torch.empty_like(padded) for _ in range(self.world)] if self.rank == 0 else None
        dist.gather(padded, bufs, dst=0)
        if self.rank != 0:
            return None
        return [chunks] + [[b[: m[0]].cpu()] if m is not None else [] for b, m in zip(bufs[1:], metas[1:])]  # type: ignore[index]


def _checksum(shards: List[List[Tensor]]) -> str:
    sha = hashlib.sha256()
    for r, shard in enumerate(shards):
        sha.update(f"|rank{r}:{len(shard)}|".encode())
        for t in shard:
            sha.update(f"|{t.dtype}|{tuple(t.shape)}|".encode())
            sha.update(_bytes(t))
    return sha.hexdigest()


def _rows(shard: List[Tensor], chunk_rows: int) -> Iterator[Tensor]:
    for t in shard:
        for start in range(0, t.shape[0], chunk_rows):
            yield t[start : start + chunk_rows]
