"""Writing a features file with its provenance: the layout :func:`~lightning_prd.features.read_reference` reads back.

:func:`write_features` writes a ``.npz`` with two entries: ``features``, the float ``[N, D]`` array
(float16/bfloat16 stored as float32, float32 and float64 as they are), and ``provenance``, a JSON
object stored as a 0-d unicode array: ``"format": "lightning-prd/features"``, ``"num_samples"`` (N),
``"num_features"`` (D), and where known ``"extractor"`` (the network's name), ``"weights_sha256"``
(SHA-256 of the weights file), ``"preprocessing"`` (what was done to the samples before the network)
and ``"version"`` (of this package).

With ``sample_digests`` (one SHA-256 per row, of the sample it was computed from, as
:class:`~lightning_prd.features.RealFeatureCache` digests samples) and ``cache``
(:func:`~lightning_prd.features.cache.cache_provenance` of the extractor as it ran), the file also
serves as an entry of the real-feature cache when placed in ``cache_dir``: a third entry
``sample_sha256`` holds the digests (uint8 ``[N, 32]``) and ``provenance["cache"]`` the cache
object plus ``"sha256"``, the checksum of the stored features and the digests
(:mod:`lightning_prd.features._cache_files`). ``lightning-prd features`` writes both.

The write is atomic: the file is written under a temporary name in the target's folder, flushed
to disk and renamed over the target, so a reader sees the old file or the whole new one, never a
part. A target that is one of ``inputs`` (compared by identity: a hard or symbolic link of an
input is that input) is refused before anything is written.

Example:
    >>> import os, tempfile
    >>> import torch
    >>> from lightning_prd.features import read_reference
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "real.npz")
    ...     provenance = write_features(path, torch.ones(5, 3), extractor="random-cnn", version="1.0")
    ...     ref = read_reference(path)
    >>> ref.source, ref.extractor, ref.provenance["num_samples"], tuple(ref.features.shape)
    ('lightning-prd', 'random-cnn', 5, (5, 3))
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Union

import numpy as np
import torch

from lightning_prd.features._cache_files import SAMPLES_ENTRY
from lightning_prd.features._cache_io import checksum
from lightning_prd.features.images import file_sha256
from lightning_prd.features.reference_files import PROVENANCE_FORMAT
from lightning_prd.functional.engine.inputs import as_features

#: the distribution whose version is recorded when none is given
DISTRIBUTION = "lightning-prd"

PathLike = Union[str, "os.PathLike[str]"]


def _installed_version() -> Optional[str]:
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def write_features(
    path: PathLike,
    features: Any,
    *,
    extractor: Optional[str] = None,
    weights: Optional[PathLike] = None,
    preprocessing: Any = None,
    version: Optional[str] = None,
    inputs: Sequence[PathLike] = (),
    sample_digests: Optional[Sequence[bytes]] = None,
    cache: Optional[Mapping[str, Any]] = None,
) -> Dict[str, Any]:
    """Write ``features`` ``[N, D]`` and their provenance to the ``.npz`` file ``path``, atomically.

    Args:
        path: the target; must end in ``.npz``. Missing parent folders are not created.
        features: a tensor or array ``[N, D]`` of finite floats, ``N >= 1``.
        extractor: the name of the network that made them (``"inception"``, ``"random-cnn"``).
        weights: the weights file of that network; its SHA-256 is recorded (the path is not).
        preprocessing: what was done to the samples before the network (a string or a
            JSON-serialisable dict, e.g. the input size and normalisation).
        version: the version of this package to record; default: the installed distribution's.
        inputs: the files the features were made from; ``path`` may be none of them.
        sample_digests: the SHA-256 digest (32 bytes) of each row's sample, in row order; with ``cache``.
        cache: the extractor's :func:`~lightning_prd.features.cache.cache_provenance`; with ``sample_digests``.

    Returns:
        The provenance dict written.

    Raises:
        ValueError: ``path`` does not end in ``.npz``, is a folder or one of ``inputs``; features
            that are not finite floats ``[N, D]``; ``preprocessing`` that is not JSON-serialisable;
            ``sample_digests`` that are not N digests of 32 bytes, or one of ``sample_digests`` and
            ``cache`` without the other.
        TypeError: integer, bool or complex features.
        OSError: the file cannot be written (nothing is left behind under the temporary name).
    """
    target = Path(path)
    if target.suffix.lower() != ".npz":
        raise ValueError(f"Expected argument `path` to name a .npz file, but got {str(path)!r}")
    if target.is_dir():
        raise ValueError(f"Expected argument `path` to name a file, but {target} is a directory")
    for source in inputs:
        if _same_file(target, Path(source)):
            raise ValueError(f"Expected argument `path` not to be an input, but {target} is the input {source}")
    x = as_features(features, "features").cpu()
    provenance: Dict[str, Any] = {
        "format": PROVENANCE_FORMAT,
        "num_samples": int(x.shape[0]),
        "num_features": int(x.shape[1]),
    }
    if extractor is not None:
        provenance["extractor"] = str(extractor)
    if weights is not None:
        provenance["weights_sha256"] = file_sha256(weights)
    if preprocessing is not None:
        provenance["preprocessing"] = preprocessing
    found = version if version is not None else _installed_version()
    if found is not None:
        provenance["version"] = str(found)
    array = x.numpy()
    digests = _digests(sample_digests, cache, int(x.shape[0]))
    if digests is not None and cache is not None:
        provenance["cache"] = {**cache, "sha256": checksum(torch.from_numpy(array), torch.from_numpy(digests))}
    try:
        text = json.dumps(provenance, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ValueError(f"Expected argument `preprocessing` to be JSON-serialisable, but {err}") from None
    _write_atomic(target, array, text, digests)
    return provenance


def _digests(sample_digests: Optional[Sequence[bytes]], cache: Optional[Mapping[str, Any]], n: int) -> Any:
    """``sample_digests`` as a uint8 ``[n, 32]`` array, checked with ``cache``; None without them."""
    if (sample_digests is None) != (cache is None):
        given, missing = ("sample_digests", "cache") if cache is None else ("cache", "sample_digests")
        raise ValueError(f"Expected argument `{missing}` with argument `{given}`, but got {missing}=None")
    if sample_digests is None or cache is None:
        return None
    if not isinstance(cache, Mapping) or not isinstance(cache.get("key"), str):
        raise ValueError(f"Expected argument `cache` to be a mapping with a text 'key', but got {cache!r:.200}")
    try:
        json.dumps(dict(cache), allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ValueError(f"Expected argument `cache` to be JSON-serialisable, but {err}") from None
    items = list(sample_digests)
    bad = next((d for d in items if not isinstance(d, (bytes, bytearray)) or len(d) != 32), None)
    if len(items) != n or bad is not None:
        shown = f"{len(items)} digests" if bad is None else f"a digest {bad!r:.60}"
        raise ValueError(f"Expected argument `sample_digests` to be {n} SHA-256 digests of 32 bytes, but got {shown}")
    return np.frombuffer(b"".join(items), dtype=np.uint8).reshape(n, 32).copy()


def _write_atomic(target: Path, array: np.ndarray, provenance: str, digests: Optional[np.ndarray]) -> None:
    """``np.savez`` to a temporary file beside ``target``, flushed, then renamed over it."""
    temp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # permissions as the umask gives a new file
    entries: Dict[str, Any] = {"features": array, "provenance": np.array(provenance)}
    if digests is not None:
        entries[SAMPLES_ENTRY] = digests
    try:
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, **entries)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
