"""Features files of ``lightning-prd features`` as entries of :class:`~lightning_prd.features.RealFeatureCache`.

A features file serves the cache when its provenance holds a ``cache`` object (written by
:func:`~lightning_prd.features.write_features` with ``sample_digests=`` and ``cache=``):

* ``cache["key"]``: the cache's key without ``num_real`` and the real set
  (:func:`~lightning_prd.features.cache.cache_provenance`: extractor identity, device type, torch's default
  dtype and autocast state, torch version, cache format), which the file's rows stand for;
* ``cache["sha256"]``: the checksum of the stored features and the per-sample digests;

and an entry :data:`SAMPLES_ENTRY`, uint8 ``[N, 32]``: row ``i`` is the SHA-256 of the sample whose features
are row ``i`` of ``features``, taken as the cache takes it (:class:`~lightning_prd.features._cache_io.RowDigests`).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
import torch
from torch import Tensor

from lightning_prd.features._cache_io import checksum
from lightning_prd.features.reference_files import PROVENANCE_FORMAT

#: the entry of a features file that holds one SHA-256 digest per sample, uint8 ``[N, 32]``
SAMPLES_ENTRY = "sample_sha256"


def _cache_entry(provenance: Any) -> Optional[Dict[str, Any]]:
    """The ``cache`` object of a lightning-prd provenance, or None."""
    if not isinstance(provenance, dict) or provenance.get("format") != PROVENANCE_FORMAT:
        return None
    entry = provenance.get("cache")
    return entry if isinstance(entry, dict) and isinstance(entry.get("key"), str) else None


def features_files(folder: Path, key: str) -> List[Path]:
    """The ``.npz`` files at the top of ``folder`` whose provenance names the cache key ``key``, by name;
    only the ``provenance`` entry of each is read. Files that are not such features files are skipped."""
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob("*.npz")):
        try:
            with np.load(path, allow_pickle=False) as archive:
                if "provenance" not in archive.files or SAMPLES_ENTRY not in archive.files:
                    continue
                entry = _cache_entry(json.loads(str(archive["provenance"][()])))
        except Exception:  # noqa: BLE001 - a file of another kind, or damaged: not a candidate
            continue
        if entry is not None and entry["key"] == key:
            found.append(path)
    return found


def read_features_file(path: Path, key: str, mine: List[bytes], rank: int) -> Optional[Tensor]:
    """The features of this rank's samples ``mine`` (digests, in order) from the features file ``path``; None
    when the file lacks one of them. A file that no longer names ``key``, or whose checksum (checked on rank 0)
    or shapes do not match, is ignored with one warning."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            entry = _cache_entry(json.loads(str(archive["provenance"][()])))
            ids = np.asarray(archive[SAMPLES_ENTRY])
            feats = np.asarray(archive["features"])
        if entry is None or entry["key"] != key:
            raise ValueError("its provenance no longer names this cache key")
        if ids.dtype != np.uint8 or ids.ndim != 2 or ids.shape[1] != 32 or feats.ndim != 2:
            raise ValueError(f"its entries have shapes {ids.shape} and {feats.shape}, not [N, 32] and [N, D]")
        if ids.shape[0] != feats.shape[0]:
            raise ValueError(f"it holds {ids.shape[0]} sample digests for {feats.shape[0]} features")
        features, digests = torch.from_numpy(feats), torch.from_numpy(ids)
        if rank == 0 and checksum(features, digests) != entry.get("sha256"):
            raise ValueError("its checksum does not match its features")
        flat = ids.tobytes()
        where: Dict[bytes, int] = {}
        for i in range(ids.shape[0]):
            where.setdefault(flat[32 * i : 32 * i + 32], i)
        if any(d not in where for d in mine):
            return None  # a file of other samples: not a hit, not damage
        return features.index_select(0, torch.tensor([where[d] for d in mine], dtype=torch.long))
    except Exception as err:  # noqa: BLE001 - any unreadable file is a miss, said once
        if rank == 0:
            warnings.warn(
                f"RealFeatureCache: ignoring the features file {str(path)!r} ({type(err).__name__}: "
                f"{str(err)[:200]}); the real features are read from another file or extracted",
                UserWarning,
                stacklevel=4,
            )
        return None
