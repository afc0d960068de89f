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
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Union

import torch
from torch import Tensor, nn

from lightning_prd.features._cache_io import Comm, RowHasher, atomic_save, checksum, rows, tensor_bytes
from lightning_prd.functional.engine.inputs import check_positive_int

FORMAT = 1
Chunks = Callable[[], Iterable[Tensor]]
_PLAIN = (type(None), bool, int, float, str)
_SKIP = object()  # a value that is not part of the key


def _plain(value: Any) -> Any:
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (torch.dtype, torch.Size)):
        return str(value)
    if isinstance(value, Tensor):
        return f"tensor:{value.dtype}{tuple(value.shape)}:{hashlib.sha256(tensor_bytes(value)).hexdigest()}"
    if isinstance(value, (tuple, list)):
        items = [_plain(v) for v in value]
        return _SKIP if any(v is _SKIP for v in items) else items
    if inspect.isfunction(value) or inspect.isclass(value) or inspect.isbuiltin(value):
        return f"{value.__module__}.{value.__qualname__}"
    return _SKIP


def _autocast(device_type: str) -> bool:
    try:
        return bool(torch.is_autocast_enabled(device_type))
    except TypeError:  # torch < 2.4: one query per device type
        return bool(torch.is_autocast_cpu_enabled() if device_type == "cpu" else torch.is_autocast_enabled())


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
        sha.update(tensor_bytes(t))
    config = []
    for path, sub in module.named_modules():
        attrs = {k: _plain(v) for k, v in sorted(vars(sub).items()) if not k.startswith("_") and k != "training"}
        config.append([path, _qualname(sub), {k: v for k, v in attrs.items() if v is not _SKIP}])
    contract = {
        k: _plain(getattr(module, k, None)) for k in ("num_features", "input_dtype", "input_range", "input_size")
    }
    out.update(
        {
            "class": _qualname(module),
            "method": method,
            "weights_sha256": sha.hexdigest(),
            "config": config,
            "contract": {k: (None if v is _SKIP else v) for k, v in contract.items()},
        }
    )
    return out


class RealFeatureCache:
    """Real features on disk across runs (the key: module docstring); used by ``PRDCallback(cache_dir=...)``.

    Args:
        cache_dir: folder of the cache files (created when first written).
        name: a name added to the key; required for an extractor that is a plain function or
            lambda rather than an ``nn.Module``.
    """

    def __init__(self, cache_dir: Union[str, os.PathLike[str]], *, name: Optional[str] = None) -> None:
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
        self,
        extractor: Any,
        chunks: Chunks,
        extract: Callable[[Tensor], Tensor],
        *,
        num_real: Optional[int] = None,
        rank: int = 0,
        world: int = 1,
        device: Union[None, str, torch.device] = None,
        chunk_rows: int = 1024,
    ) -> Iterator[Tensor]:
        """This rank's real features, in chunks of at most ``chunk_rows`` rows: from the cache, or
        ``extract(chunk)`` for every chunk of ``chunks()`` (then written). Under DDP (``world > 1``)
        every rank must call it (collectives); ``chunks()`` yields this rank's samples."""
        chunk_rows = check_positive_int(chunk_rows, "chunk_rows")
        device = torch.device(device if device is not None else "cpu")
        meta = {
            "format": FORMAT,
            "extractor": extractor_identity(extractor, self.name),
            "num_real": num_real,
            "world_size": world,
            "device": device.type,
            "default_dtype": str(torch.get_default_dtype()),
            "autocast": _autocast(device.type),
            "torch": torch.__version__,
        }
        stem = "real-" + hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()[:24]
        comm = Comm(rank, world)
        known = comm.from_zero(lambda: any(self.cache_dir.glob(f"{stem}-*.pt")))
        feats: Optional[List[Tensor]] = None
        hasher = RowHasher()
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
            loaded = comm.all_gather(shard is not None)
            if loaded[0] and not all(loaded) and rank == 0:
                warnings.warn(
                    f"RealFeatureCache: ranks {[r for r, ok in enumerate(loaded) if not ok]} "
                    f"could not read {str(path)!r}: "
                    "`cache_dir` must be on a filesystem every rank sees",
                    UserWarning,
                    stacklevel=3,
                )
            if all(loaded):
                self.last_status = "hit"
                yield from rows(shard, chunk_rows)  # type: ignore[arg-type]
                return
            again, feats = RowHasher(), []
            for x in chunks():
                again.update(x)
                feats.append(extract(x))
            if not all(comm.all_gather(again.hexdigest() == hasher.hexdigest())):
                if rank == 0:
                    warnings.warn(
                        "RealFeatureCache: the real samples differed between two reads "
                        "(a shuffling DataLoader or random augmentation?); their features are not cached",
                        UserWarning,
                        stacklevel=3,
                    )
                self.last_status = "unwritten"
                while feats:
                    yield from rows([feats.pop(0)], chunk_rows)
                return
        written = self._store(path, key, feats, comm)
        self.last_status = "miss" if written else "unwritten"
        while feats:
            yield from rows([feats.pop(0)], chunk_rows)

    def _load(self, path: Path, key: str, rank: int) -> Optional[List[Tensor]]:
        """This rank's shard from ``path`` (memory-mapped), or None; rank 0 checks the checksum and warns."""
        try:
            blob = torch.load(path, map_location="cpu", mmap=True, weights_only=True)
            if not isinstance(blob, dict) or blob.get("key") != key:
                raise ValueError("its key does not match its name")
            shards = blob["shards"]
            if rank == 0 and checksum(shards) != blob.get("sha256"):
                raise ValueError("its checksum does not match its features")
            return list(shards[rank])
        except Exception as err:  # noqa: BLE001 - any unreadable file is a miss, said once
            if rank == 0:
                warnings.warn(
                    f"RealFeatureCache: ignoring the corrupt or truncated cache file {str(path)!r} "
                    f"({type(err).__name__}: "
                    f"{str(err)[:200]}); the real features are extracted again and the file rewritten",
                    UserWarning,
                    stacklevel=3,
                )
            return None

    def _store(self, path: Path, key: str, feats: List[Tensor], comm: Comm) -> bool:
        """Rank 0 writes every rank's features; returns (on every rank) whether it worked."""
        shards = comm.gather_to_zero([f.detach() for f in feats])
        ok = True
        if shards is not None:
            shards = [[t.cpu() for t in shard] for shard in shards]
            try:
                atomic_save({"key": key, "sha256": checksum(shards), "shards": shards}, path)
            except OSError as err:
                ok = False
                warnings.warn(f"RealFeatureCache: could not write {str(path)!r}: {err}", UserWarning, stacklevel=3)
        return bool(comm.from_zero(lambda: ok))
