"""Real features cached on disk across runs: :class:`RealFeatureCache`.

Comparing runs means many fits against the same real set; embedding it (e.g. 50,000 images
through Inception) costs minutes per run. The cache stores the extracted real features in
``cache_dir`` under a key that changes whenever the features could change:

* the **real set**: one SHA-256 per sample (dtype, shape, bytes) as it is read, through the
  same path that feeds the extractor; the key holds these digests sorted, so it does not depend
  on the batch size, on the order of the samples, or on how many processes read them and which
  rows each one reads. A file written by a run under any world size is read by a run under any
  other: each rank gets the features of its own samples, in the order it reads them;
* the **extractor**: module and class qualname; SHA-256 of every parameter and buffer (name,
  dtype, shape, bytes), so another weights file or another dtype never hits; every
  submodule's class, public attributes and forward hooks; the input contract (``num_features``,
  ``input_dtype``, ``input_range``, ``input_size``); the fingerprint's part of the extractor
  (:func:`~lightning_prd.features.base.describe_extractor`: its ``name``, ``arch`` and ``preprocessing``:
  resize, quantisation, input size, normalisation; not the weights file's ``weights_sha256``, which
  records provenance: the tensors key the weights, so the same weights from another file hit), which a protocol's score
  carries, so a cached file never serves another resize or quantisation even when a class keeps
  that setting in a private attribute or a property; the user-given ``name``. A public attribute
  is keyed whatever it holds, however deeply nested: numbers, strings, enums, paths, torch
  dtypes and devices, tensors (by their bytes), NumPy arrays, scalars and random generators,
  lists, tuples, sets, dicts, modules (by their weights and attributes), classes, functions
  (name, bytecode, defaults, closure), bound methods, ``functools.partial`` (function, args,
  keywords) and plain Python objects (class and every attribute). A value it cannot key
  deterministically (a lock, a file, a generator, an object whose state lives in C) is refused
  with a ``TypeError`` naming the attribute, when the callback is built and when the cache is
  read. A module's attributes whose name starts with ``_`` are internal state (torch's
  machinery, scratch buffers, memos) and are not keyed: a module setting that changes the
  features must be a public attribute, a parameter or a buffer. The globals a function reads
  and the code of the classes are not keyed;
* ``num_real``, the device type, torch's default dtype, the precision the extractor ran in
  (``extractor_precision``: :func:`~lightning_prd.features.precision.describe_precision`, so a file written
  under ``"ieee"`` never serves ``"fast"``, nor one ``"fast"`` state another) and the autocast state inside
  the extraction (off under ``"ieee"``), and the torch version.

The cache holds copies: every feature chunk is copied as the extractor returns it, so an
extractor that writes into one persistent output buffer (or real samples refilled into one
input buffer) stores what was computed, chunk by chunk. A plain function or lambda as the
extractor cannot be fingerprinted (its code may read weights from anywhere): give it a
``name`` that you change whenever it changes. Files are ``real-<key>.pt``, written by rank 0
only, atomically (a temporary file in the same folder, then ``os.replace``), and hold a
SHA-256 checksum of the features: a truncated or corrupt file is ignored with one warning and
rewritten. Loading memory-maps the file and copies this rank's rows once. Under DDP
``cache_dir`` must be on a filesystem every rank sees.

**Features files as cache entries.** A features file that ``lightning-prd features`` wrote
(:func:`~lightning_prd.features.write_features` with ``sample_digests=`` and ``cache=``), placed at the
top of ``cache_dir`` under any name ending in ``.npz``, serves as a hit too. Its provenance holds a
``cache`` object (:func:`cache_provenance`) whose ``key`` is this cache's key without ``num_real``
and the real set: the extractor's identity as above (so another network, weights file, setting or
name misses), the device type, torch's default dtype, extractor precision and autocast state, the torch version. In
place of the real set it holds one SHA-256 per row, of the sample that row was computed from, taken
as the cache takes it (the same dtype, shape and bytes: an image folder is read by both as uint8
``[3, H, W]`` per image). It serves any real set all of whose samples it holds, whatever
``num_real`` and in any order (each rank gets the features of its own samples); a file that lacks
one of them is not a hit, and the features are extracted and written as ``real-<key>.pt``. The
cache's own file, when there is one, is read first, then the features files by name. A features
file is checked against the SHA-256 checksum its provenance records; a damaged one is ignored with
one warning, never rewritten. Its features are what the file holds (float16 and bfloat16 outputs
are stored as float32, which the metrics upcast them to anyway). A cache with a ``name``
matches only files whose key was made with that name (``cache_provenance(..., name=...)``;
the command line writes none).

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

from lightning_prd.features._cache_files import features_files, read_features_file
from lightning_prd.features._cache_io import (
    Comm,
    Keyer,
    RowDigests,
    atomic_save,
    checksum,
    qualname,
    rows,
    set_digest,
)
from lightning_prd.features.base import describe_extractor
from lightning_prd.features.precision import (
    DEFAULT_EXTRACTOR_PRECISION,
    check_extractor_precision,
    describe_precision,
    precision_context,
)
from lightning_prd.functional.engine.inputs import check_positive_int

FORMAT = 2
Chunks = Callable[[], Iterable[Tensor]]
_CONTRACT = ("num_features", "input_dtype", "input_range", "input_size")


def _autocast(device_type: str) -> bool:
    try:
        return bool(torch.is_autocast_enabled(device_type))
    except TypeError:  # torch < 2.4: one query per device type
        return bool(torch.is_autocast_cpu_enabled() if device_type == "cpu" else torch.is_autocast_enabled())


def _copy(out: Any) -> Any:
    """The cache's own copy of an extractor output (which may be a buffer the extractor refills)."""
    return out.detach().clone() if isinstance(out, Tensor) else out


def check_cacheable(extractor: Any, name: Optional[str] = None) -> Optional[nn.Module]:
    """The module whose weights identify ``extractor`` (itself, or the owner of a bound method); None for
    ``None`` and for a named plain callable. ``ValueError`` for an unnamed plain callable; ``TypeError``
    naming the attribute for a public setting the key cannot cover (module docstring). Reads no tensor."""
    if inspect.ismethod(extractor) and isinstance(extractor.__self__, nn.Module):
        module: Optional[nn.Module] = extractor.__self__
    elif extractor is None or isinstance(extractor, nn.Module):
        module = extractor
    elif name is None:
        raise ValueError(
            f"Expected argument `feature_extractor` to be an nn.Module (whose weights the disk cache can hash), but "
            f"got {type(extractor).__name__} {getattr(extractor, '__qualname__', '')!r}: pass "
            f"cache_dir=RealFeatureCache(PATH, name='...') with a name that changes whenever the callable does"
        )
    else:
        return None
    if module is not None:
        _module_identity(module, Keyer(hash_tensors=False))
    return module


def _module_identity(module: nn.Module, keyer: Keyer) -> Dict[str, Any]:
    out = keyer.module(module, "feature_extractor")
    out["contract"] = {k: keyer.key(getattr(module, k, None), f"feature_extractor.{k}") for k in _CONTRACT}
    described = describe_extractor(module)  # JSON-safe: name, arch, preprocessing (the weights: by their bytes)
    out["fingerprint"] = {k: v for k, v in described.items() if k != "weights_sha256"}
    return out


def _meta(extractor: Any, name: Optional[str], num_real: Optional[int], device: Any, precision: str) -> Dict[str, Any]:
    """The cache key of an extraction under ``extractor_precision=precision``, without the real set (module
    docstring)."""
    device = torch.device(device if device is not None else "cpu")
    return {
        "format": FORMAT,
        "extractor": extractor_identity(extractor, name),
        "num_real": num_real,
        "device": device.type,
        "default_dtype": str(torch.get_default_dtype()),
        "extractor_precision": describe_precision(precision, device),
        "autocast": precision != "ieee" and _autocast(device.type),
        "torch": torch.__version__,
    }


def _file_key(meta: Dict[str, Any]) -> str:
    """The key a features file is matched by: the cache key without ``num_real`` (and the real set)."""
    rest = {k: v for k, v in meta.items() if k != "num_real"}
    return hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()


def cache_provenance(
    extractor: Any,
    *,
    device: Union[None, str, torch.device] = None,
    name: Optional[str] = None,
    extractor_precision: str = DEFAULT_EXTRACTOR_PRECISION,
) -> Dict[str, Any]:
    """The ``cache`` object a features file records to serve :class:`RealFeatureCache` (module docstring):
    ``"key"``, the SHA-256 the cache matches it by, and what went into it that can differ between two
    machines (``"device"`` type, ``"default_dtype"``, ``"extractor_precision"``, ``"autocast"``, ``"torch"``
    version), to read. Call it in the state the extractor ran in, on the device it ran on, with the
    ``extractor_precision`` it ran under; ``name`` as the cache's. Raises like :func:`check_cacheable`.

    Example:
        >>> from lightning_prd.features import RandomConvNet
        >>> entry = cache_provenance(RandomConvNet(num_features=4, size=8))
        >>> sorted(entry), entry["device"], entry["extractor_precision"], len(entry["key"])
        (['autocast', 'default_dtype', 'device', 'extractor_precision', 'key', 'torch'], 'cpu', 'ieee', 64)
    """
    precision = check_extractor_precision(extractor_precision)
    meta = _meta(extractor, name, None, device, precision)
    shown = {k: meta[k] for k in ("device", "default_dtype", "extractor_precision", "autocast", "torch")}
    return {"key": _file_key(meta), **shown}


def extractor_identity(extractor: Any, name: Optional[str] = None) -> Dict[str, Any]:
    """The extractor's part of the cache key (module docstring); raises like :func:`check_cacheable`.

    Example:
        >>> from lightning_prd.features import Identity
        >>> ident = extractor_identity(Identity(3))
        >>> ident["class"], ident["contract"]["num_features"]
        ('lightning_prd.features.base.Identity', 3)
    """
    out: Dict[str, Any] = {"name": name}
    module = check_cacheable(extractor, name)
    if extractor is None:
        out["class"] = "flatten"
    elif module is None:
        out["class"] = qualname(extractor) + f":{getattr(extractor, '__qualname__', '')}"
    else:
        out.update(_module_identity(module, Keyer()))
        out["method"] = extractor.__func__.__qualname__ if module is not extractor else None
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
        #: the file the last call read (a hit) or wrote (a miss); None when it wrote none
        self.last_file: Optional[Path] = None

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
        extractor_precision: str = DEFAULT_EXTRACTOR_PRECISION,
    ) -> Iterator[Tensor]:
        """This rank's real features, in chunks of at most ``chunk_rows`` rows: from the cache, or
        ``extract(chunk)`` for every chunk of ``chunks()`` (a copy of each output is kept, then written).
        Under DDP (``world > 1``) every rank must call it (collectives); ``chunks()`` yields this rank's
        samples, any rows in any order: a hit gives the features of exactly these samples, in this order,
        whatever world size wrote the file. Each ``extract(chunk)`` runs in
        :func:`~lightning_prd.features.precision.precision_context` of ``extractor_precision``, which the key
        holds. ``TypeError`` for an extractor setting the key cannot cover."""
        chunk_rows = check_positive_int(chunk_rows, "chunk_rows")
        precision = check_extractor_precision(extractor_precision)
        meta = _meta(extractor, self.name, num_real, device, precision)

        def run(x: Tensor) -> Any:
            with precision_context(precision):
                return _copy(extract(x))

        stem = "real-" + hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()[:24]
        comm = Comm(rank, world)
        files: List[Path] = comm.from_zero(lambda: features_files(self.cache_dir, _file_key(meta)))
        known = bool(files) or comm.from_zero(lambda: any(self.cache_dir.glob(f"{stem}-*.pt")))
        feats: Optional[List[Any]] = None
        digests = RowDigests()
        if known:  # digests first: a hit never calls the extractor
            for x in chunks():
                digests.update(x)
        else:  # no file can match: digest while extracting, in one pass
            feats = []
            for x in chunks():
                digests.update(x)
                feats.append(run(x))
        per_rank = comm.all_gather(digests.joined())
        data = set_digest(per_rank)
        key = json.dumps({**meta, "data": data}, sort_keys=True)
        path = self.cache_dir / f"{stem}-{data}.pt"
        if feats is None:
            own = [path] if comm.from_zero(path.is_file) else []
            for source in own + files:  # the cache's own file first, then features files, by name
                if source == path:
                    mine = self._load(path, key, digests.digests, rank)
                else:
                    mine = read_features_file(source, _file_key(meta), digests.digests, rank)
                loaded = comm.all_gather(mine is not None)
                if source == path and loaded[0] and not all(loaded) and rank == 0:
                    warnings.warn(
                        f"RealFeatureCache: ranks {[r for r, ok in enumerate(loaded) if not ok]} "
                        f"could not read {str(path)!r}: "
                        "`cache_dir` must be on a filesystem every rank sees",
                        UserWarning,
                        stacklevel=3,
                    )
                if all(loaded):
                    self.last_status, self.last_file = "hit", source
                    yield from rows([mine], chunk_rows)  # type: ignore[list-item]
                    return
            again, feats = RowDigests(), []
            for x in chunks():
                again.update(x)
                feats.append(run(x))
            if not all(comm.all_gather(again.digests == digests.digests)):
                if rank == 0:
                    warnings.warn(
                        "RealFeatureCache: the real samples differed between two reads "
                        "(a shuffling DataLoader or random augmentation?); their features are not cached",
                        UserWarning,
                        stacklevel=3,
                    )
                self.last_status, self.last_file = "unwritten", None
                while feats:
                    yield from rows([feats.pop(0)], chunk_rows)
                return
        written = self._store(path, key, feats, per_rank, comm)
        self.last_status, self.last_file = ("miss", path) if written else ("unwritten", None)
        while feats:
            yield from rows([feats.pop(0)], chunk_rows)

    def _load(self, path: Path, key: str, mine: List[bytes], rank: int) -> Optional[Tensor]:
        """A copy of the features of this rank's samples ``mine`` (row digests, in order) from ``path``
        (memory-mapped), or None; rank 0 checks the checksum and warns."""
        try:
            blob = torch.load(path, map_location="cpu", mmap=True, weights_only=True)
            if not isinstance(blob, dict) or blob.get("key") != key:
                raise ValueError("its key does not match its name")
            feats, ids = blob["features"], blob["rows"]
            if rank == 0 and checksum(feats, ids) != blob.get("sha256"):
                raise ValueError("its checksum does not match its features")
            flat = ids.numpy().tobytes()
            where: Dict[bytes, int] = {}
            for i in range(len(flat) // 32):
                where.setdefault(flat[32 * i : 32 * i + 32], i)
            missing = sum(d not in where for d in mine)
            if missing:
                raise ValueError(f"it lacks {missing} of this rank's samples")
            return feats.index_select(0, torch.tensor([where[d] for d in mine], dtype=torch.long))
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

    def _store(self, path: Path, key: str, feats: List[Any], per_rank: List[bytes], comm: Comm) -> bool:
        """Rank 0 writes every rank's features, in rank order, with the digest of each sample; returns (on every
        rank) whether it worked. Not written when some rank's outputs are not one row per sample of one
        width and dtype (the metric then says what is wrong with them)."""
        layouts = {(f.dtype, tuple(f.shape[1:])) if isinstance(f, Tensor) and f.ndim else None for f in feats}
        fits = None not in layouts and len(layouts) < 2
        fits = fits and sum(int(f.shape[0]) for f in feats) * 32 == len(per_rank[comm.rank])
        if not all(comm.all_gather(fits)):
            if comm.rank == 0:
                warnings.warn(
                    "RealFeatureCache: the real features are not cached: the extractor did not return one "
                    "row per sample, of one width and dtype",
                    UserWarning,
                    stacklevel=4,
                )
            return False
        shards = comm.gather_to_zero([f.detach() for f in feats])
        ok = True
        if shards is not None:
            features = torch.cat([t.cpu() for shard in shards for t in shard])
            del shards
            ids = torch.frombuffer(bytearray(b"".join(per_rank)), dtype=torch.uint8).reshape(-1, 32)
            try:
                atomic_save({"key": key, "sha256": checksum(features, ids), "features": features, "rows": ids}, path)
            except OSError as err:
                ok = False
                warnings.warn(f"RealFeatureCache: could not write {str(path)!r}: {err}", UserWarning, stacklevel=3)
        return bool(comm.from_zero(lambda: ok))
