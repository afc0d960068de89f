"""Reading a reference set from a file that this package or another tool wrote, recognised by its content.

:func:`read_reference` tells the kind of file by its first bytes, never its name or suffix
(:func:`~lightning_prd.features.safe_pickle.sniff`: ``.npy``, ``.npz``, ``torch.save``, pickle), and
the layout by the entries inside. Each form, what it serves, and how it is recognised:

* **Features** ``[N, D]``: a ``.npy``; a ``.npz`` with one array; a ``torch.save`` of a tensor or of
  a dict with one tensor (torch-fidelity's features cache ``<input>-<extractor>-features-<layer>.pt``
  is a tensor) — every score — one unnamed array or a single entry; ``key=`` picks one of several.
* **lightning-prd features** (below) — every score — entries ``features`` and ``provenance``.
* **dgm-eval** representations (``--save``: ``reps``, ``model``, ``hparams``) — every score — ``reps``.
* **clean-fid** KID features (``make_custom_stats``: ``<name>_<mode>_custom_na_kid.npz``) — every
  score — ``feats``.
* **NVlabs** StyleGAN2-ADA/StyleGAN3 ``FeatureStats`` cache pickle (``FeatureStats.save`` pickles its
  fields; a pickled ``FeatureStats`` object reads the same) — every score with ``capture_all``, else
  the Fréchet distance — fields ``capture_all``, ``num_items``, ``raw_mean``, ``raw_cov``.
* **guided-diffusion** reference batch (``VIRTUAL_*.npz``: ``arr_0`` images, ``mu``, ``sigma``) —
  every score, once the images are embedded — ``arr_0`` uint8 ``[N, H, W, 3]``.
* **FID statistics** (pytorch-fid ``--save-stats``, clean-fid ``make_custom_stats``, EDM's ``.npz``
  refs; one layout, source ``"fid-stats"``) — the Fréchet distance — ``mu`` and ``sigma`` in a
  ``.npz`` or a pickle.
* **torch-fidelity** statistics cache (``<input>-<extractor>-stat-fid-<layer>.pt``) — the Fréchet
  distance — ``mu`` and ``sigma`` in a ``torch.save`` dict.
* **EDM2** reference pickle (``{"fid": {"mu", "sigma"}, "fd_dinov2": {...}, "num_images": N}``) — the
  Fréchet distance — a pickled dict of ``{mu, sigma}`` dicts; ``detector=`` picks one.

The lightning-prd layout, which ``lightning-prd features`` writes: ``features`` is the float
``[N, D]`` array; ``provenance`` is a JSON object, stored as a 0-d unicode array in a ``.npz`` or a
``str`` in a ``torch.save`` dict, with ``"format": "lightning-prd/features"`` and, where known,
``"extractor"``, ``"num_samples"`` (must equal N), ``"weights_sha256"``, ``"preprocessing"`` and
``"version"`` (of this package).

:attr:`ReferenceSet.extractor` is the network the file names: lightning-prd's ``provenance
["extractor"]`` as written; dgm-eval's ``model`` string as written (``"dinov2"`` is ViT-L/14 unless
dgm-eval ran with ``--arch``, which the file does not record); EDM2's ``fid`` -> ``"inception-v3-tf"``
and ``fd_dinov2`` -> ``"dinov2-vit-l14"``; guided-diffusion's ``mu``/``sigma`` -> ``"inception-v3-tf"``
(pool_3 of the TF graph). The other layouts do not say (clean-fid, pytorch-fid and torch-fidelity
put it in the file name only), and it is ``None``.

A covariance (``sigma``, or NVlabs' derived one) must be one up to rounding: symmetric, and no eigenvalue
below -1e-6 of its trace (:func:`~lightning_prd.functional.engine.stats.covariance_defect`); the file is refused
otherwise, naming it, when it is read. Covariances are kept as written: pytorch-fid, clean-fid, torch-fidelity,
EDM2 and guided-diffusion divide by ``N - 1`` (as :func:`~lightning_prd.functional.frechet_distance` does);
NVlabs' FeatureStats by ``N`` (``raw_cov / N - mean mean^T``, as its ``get_mean_cov``). guided-diffusion's
``mu``/``sigma`` come from the whole dataset and ``arr_0`` is a 10,000-image subset; its spatial ``mu_s``/``sigma_s``
(sFID) and dgm-eval's pickled ``hparams`` are not read. Pickles go through
:mod:`lightning_prd.features.safe_pickle` and ``torch.save`` files through ``torch.load(weights_only=True)``:
files from elsewhere are data, never code.

Example:
    >>> import os, tempfile
    >>> import numpy as np
    >>> feats = np.random.default_rng(0).normal(size=(100, 4))
    >>> with tempfile.TemporaryDirectory() as folder:  # pytorch-fid --save-stats writes this layout
    ...     path = os.path.join(folder, "stats.bin")  # any name: the content tells the layout
    ...     with open(path, "wb") as handle:
    ...         np.savez_compressed(handle, mu=feats.mean(0), sigma=np.cov(feats, rowvar=False))
    ...     ref = read_reference(path, name="real")
    >>> ref.source, ref.serves, tuple(ref.cov.shape)
    ('fid-stats', 'the Fréchet distance', (4, 4))
    >>> ref.require_features("precision and recall (k-NN scores)")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: Expected argument `real` to hold per-sample features for precision and recall (k-NN scores), ...
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np
import torch
from torch import Tensor

from lightning_prd.features.reference_entries import (
    FileContext,
    ReferenceFileError,
    check_covariance,
    count_of,
    features_of,
    moments_of,
    tensor_of,
    text_of,
)
from lightning_prd.features.safe_pickle import (
    CONTAINERS,
    FeatureStatsState,
    RefusedCall,
    load_data,
    one_line,
    refused_global,
    sniff,
)

#: ``provenance["format"]`` of the features files this package writes
PROVENANCE_FORMAT = "lightning-prd/features"
#: EDM2's statistic names -> the network each was computed with
EDM2_DETECTORS = {"fid": "inception-v3-tf", "fd_dinov2": "dinov2-vit-l14"}
#: the layouts :func:`read_reference` accepts, as its errors list them
ACCEPTED_LAYOUTS = (
    "one [N, D] array (or `key=` naming an entry), `features`+`provenance` (lightning-prd), `reps` (dgm-eval), "
    "`feats` (clean-fid KID), `mu`+`sigma` (pytorch-fid, clean-fid, torch-fidelity), `arr_0` uint8 images "
    "(guided-diffusion), NVlabs FeatureStats fields, {detector: {mu, sigma}} (EDM2)"
)
#: where per-sample features come from, for each statistics-only layout
_FEATURE_HINTS = {
    "fid-stats": "clean-fid writes them beside its statistics as `<name>_<mode>_custom_na_kid.npz` "
    "(pytorch-fid saves statistics only)",
    "torch-fidelity": "torch-fidelity's features cache `<input>-<extractor>-features-<layer>.pt` in the same folder",
    "nvlabs": "a FeatureStats cache made with capture_all=True (as the pr50k3 metric keeps)",
    "edm2": "EDM2 saves statistics only",
}


@dataclass(frozen=True, eq=False)
class ReferenceSet:
    """A reference set read from a file: per-sample features, images to embed, or only their statistics.

    Attributes:
        source: the layout (``"lightning-prd"``, ``"array"``, ``"dgm-eval"``, ``"clean-fid"``, ``"nvlabs"``,
            ``"guided-diffusion"``, ``"fid-stats"``, ``"torch-fidelity"``, ``"edm2"``; see the module's table).
        path: the file, as given.
        name: the argument it was given as (``"real"``, ``"--real"``), for messages.
        features: ``[N, D]`` float32/float64 features, or ``None``.
        mean, cov: float64 ``[D]`` and ``[D, D]`` statistics as the file holds them, or ``None``.
        images: guided-diffusion's ``arr_0`` as given, a uint8 ``[N, H, W, 3]`` (channels last) tensor, or ``None``.
        num_samples: N for features or images, else the count the statistics came from if the file says.
        extractor: the network the file names (see the module docstring), or ``None``.
        entry: the entry the features (or statistics) were read from, ``None`` for an unnamed array.
        provenance: the lightning-prd provenance dict, or ``None``.
    """

    source: str
    path: str
    name: str = "real"
    features: Optional[Tensor] = None
    mean: Optional[Tensor] = None
    cov: Optional[Tensor] = None
    images: Optional[Tensor] = None
    num_samples: Optional[int] = None
    extractor: Optional[str] = None
    entry: Optional[str] = None
    provenance: Optional[Dict[str, Any]] = None

    def __repr__(self) -> str:
        shapes = {
            k: list(getattr(self, k).shape)
            for k in ("features", "mean", "cov", "images")
            if getattr(self, k) is not None
        }
        held = ", ".join(f"{k}={v}" for k, v in shapes.items())
        return f"ReferenceSet(source={self.source!r}, path={self.path!r}, {held}, extractor={self.extractor!r})"

    @property
    def serves(self) -> str:
        """``"every score"`` with features, ``"every score, once the images are embedded"`` with images,
        else ``"the Fréchet distance"``."""
        if self.features is not None:
            return "every score"
        return "every score, once the images are embedded" if self.images is not None else "the Fréchet distance"

    def require_features(self, what: str) -> Tensor:
        """The per-sample features; a :class:`ValueError` saying what the file holds if it holds none.

        ``what`` names the scores that need them, e.g. ``"precision and recall (k-NN scores)"``.
        """
        if self.features is not None:
            return self.features
        start = f"Expected argument `{self.name}` to hold per-sample features for {what}, but {self.path}"
        if self.images is not None:
            shape = "x".join(str(s) for s in self.images.shape[1:])
            raise ValueError(
                f"{start} ({self.source}) holds {self.images.shape[0]:,} {shape} uint8 images, not features; "
                "embed them with an image feature extractor first"
            )
        dim = "?" if self.mean is None else f"{self.mean.shape[0]:,}"
        count = "" if self.num_samples is None else f" over {self.num_samples:,} samples"
        hint = _FEATURE_HINTS.get(self.source, "")
        raise ValueError(
            f"{start} ({self.source}) holds only the mean and covariance of {dim} features{count}; "
            f"use a features file instead: {hint + ', or ' if hint else ''}one written by `lightning-prd features`"
        )


def read_reference(
    path: Union[str, Path], *, name: str = "real", key: Optional[str] = None, detector: Optional[str] = None
) -> ReferenceSet:
    """Read a reference set from ``path``, whatever tool wrote it (the module's table), detected by content.

    Args:
        path: the file.
        name: the argument it came from (``"real"``, ``"--real"``), named in every error.
        key: the entry holding the features in a file of several entries; for a known layout whose
            features are under that entry the layout is kept, otherwise the entry is read as plain features.
        detector: which statistics of an EDM2 reference pickle (``"fid"``, ``"fd_dinov2"``); needed when
            the file holds several. Only for EDM2 files.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: a directory, an unreadable, corrupt or unknown file, a refused pickle global, or
            entries of the wrong shape; one line naming ``name`` and ``path``.
    """
    file = Path(path)
    if not file.exists():
        raise FileNotFoundError(f"Expected argument `{name}` to be an existing file, but {file} does not exist")
    if file.is_dir():
        raise ValueError(f"Expected argument `{name}` to be a reference file, but {file} is a directory")
    ctx = FileContext(name, file, "file")
    try:
        ctx.container = sniff(file)
        if ctx.container in ("", "unknown"):
            raise ctx.fail("is empty" if not ctx.container else "is none of .npy, .npz, torch.save or pickle")
        contents = load_data(file, ctx.container)
        if isinstance(contents, np.lib.npyio.NpzFile):
            with contents:
                return _build(None, contents, ctx, key, detector)
        if isinstance(contents, FeatureStatsState):
            contents = contents.fields
        if isinstance(contents, Mapping):
            return _build(None, {str(k): v for k, v in contents.items()}, ctx, key, detector)
        return _build(contents, None, ctx, key, detector)
    except ReferenceFileError:
        raise
    except Exception as err:  # numpy, zipfile, pickle and torch report damage in many types
        what = CONTAINERS.get(ctx.container, "a file")
        refused = refused_global(err)
        if isinstance(err, RefusedCall):
            raise ctx.fail(
                f"makes a call that is refused ({err}): files from elsewhere are read as data, and nothing "
                "they declare is allocated",
                f"{what} of plain data",
            ) from None
        if refused:
            raise ctx.fail(
                f"asks to load the Python global `{refused}`, which is refused: files from elsewhere are read as "
                "data and nothing in this one was run",
                f"{what} of plain data",
            ) from None
        raise ctx.fail(f"could not be read as {what} ({one_line(err)})", "a readable reference file") from None


def _build(
    whole: Any, entries: Optional[Mapping[str, Any]], ctx: FileContext, key: Optional[str], detector: Optional[str]
) -> ReferenceSet:
    """The reference set in a bare array (``whole``) or in a file of named ``entries``."""
    base: Dict[str, Any] = {"source": "array", "path": str(ctx.path), "name": ctx.name}
    if entries is None:
        if key is not None:
            raise ctx.fail("holds one unnamed array, not entries", f"a file with an entry {key!r}")
        _no_detector(ctx, detector, "array")
        feats = features_of(whole, ctx, "the array")
        return ReferenceSet(**base, features=feats, num_samples=feats.shape[0])
    names = list(entries)
    memo: Dict[str, Any] = {}

    def get(entry: str) -> Any:
        if entry not in memo:
            try:
                memo[entry] = entries[entry]
            except ValueError as err:  # an object array of a .npz, refused by allow_pickle=False
                if "allow_pickle" not in str(err):
                    raise
                raise ctx.fail(
                    f"holds Python objects in entry {entry!r} (dtype object), which are not loaded",
                    "a file of numeric arrays",
                ) from None
        return memo[entry]

    if key is not None and key not in names:
        raise ctx.fail(f"has no entry {key!r} (entries: {_names(names)})", f"a file with an entry {key!r}")
    layout = _layout(names, get, ctx)
    if layout is None and key is None:
        raise ctx.fail(f"holds entries {_names(names)} in no known layout; accepted: {ACCEPTED_LAYOUTS}")
    if key is not None and _FEATURE_ENTRY.get(layout or "", "") != key and not (layout == "array" and names == [key]):
        layout = "array"
        names = [key]
    _no_detector(ctx, detector, layout or "array")
    return ReferenceSet(
        **{**base, "source": layout or "array"}, **_fields(layout or "array", names, get, ctx, detector)
    )


def _names(names: List[str], limit: int = 12) -> str:
    shown = ", ".join(repr(n) for n in names[:limit])
    return (shown + f", ... ({len(names)} in all)" if len(names) > limit else shown) or "none"


def _is_images(value: Any) -> bool:
    return (
        isinstance(value, (np.ndarray, Tensor))
        and value.ndim == 4
        and value.shape[-1] == 3
        and (value.dtype in (np.uint8, torch.uint8))
    )


def _layout(names: List[str], get: Callable[[str], Any], ctx: FileContext) -> Optional[str]:
    have = set(names)
    for layout, needed, _ in NAMED_LAYOUTS:
        if set(needed) <= have and (layout != "guided-diffusion" or _is_images(get("arr_0"))):
            if layout == "mu-sigma":
                return "torch-fidelity" if ctx.container == "torch" else "fid-stats"
            return layout
    if ctx.container == "pickle" and any(_is_stats(get(n)) for n in names):
        return "edm2"
    return "array" if len(names) == 1 else None


def _is_stats(value: Any) -> bool:
    return isinstance(value, Mapping) and {"mu", "sigma"} <= set(value)


def _no_detector(ctx: FileContext, detector: Optional[str], layout: str) -> None:
    if detector is not None and layout != "edm2":
        raise ReferenceFileError(
            f"Expected argument `detector` to be None for {ctx.path} ({layout}), which holds one set, "
            f"but got {detector!r}; only EDM2 reference pickles hold several"
        )


def _fields(
    layout: str, names: List[str], get: Callable[[str], Any], ctx: FileContext, detector: Any
) -> Dict[str, Any]:
    """The :class:`ReferenceSet` fields, besides ``source``, ``path`` and ``name``, of a file in ``layout``."""
    if layout in ("array", *_FEATURE_ENTRY):
        entry = _FEATURE_ENTRY.get(layout, names[0])
        feats = features_of(get(entry), ctx, f"entry {entry!r}")
        out: Dict[str, Any] = {"features": feats, "num_samples": feats.shape[0], "entry": entry}
        if layout == "dgm-eval" and "model" in names:
            out["extractor"] = text_of(get("model")) or None
        if layout == "lightning-prd":
            out["provenance"] = _provenance(get("provenance"), feats.shape[0], ctx)
            out["extractor"] = out["provenance"].get("extractor")
        return out
    if layout == "guided-diffusion":
        images = tensor_of(get("arr_0"), ctx, "entry 'arr_0'")
        stats = moments_of(get("mu"), get("sigma"), ctx, "the file") if {"mu", "sigma"} <= set(names) else {}
        extractor = "inception-v3-tf" if stats else None
        return {"images": images, "num_samples": images.shape[0], "extractor": extractor, "entry": "arr_0", **stats}
    if layout in ("fid-stats", "torch-fidelity"):
        return moments_of(get("mu"), get("sigma"), ctx, "the file")
    return _nvlabs(names, get, ctx) if layout == "nvlabs" else _edm2(names, get, ctx, detector)


def _provenance(value: Any, n: int, ctx: FileContext) -> Dict[str, Any]:
    try:
        provenance = value if isinstance(value, dict) else json.loads(text_of(value))
    except ValueError:
        provenance = None
    expected = "a lightning-prd features file"
    if not isinstance(provenance, dict) or not isinstance(provenance.get("extractor", ""), str):
        raise ctx.fail("holds a `provenance` entry that is not a JSON object with a text `extractor`", expected)
    if provenance.get("num_samples", n) != n:
        raise ctx.fail(f"records num_samples={provenance['num_samples']!r} but holds {n} features", expected)
    return provenance


def _nvlabs(names: List[str], get: Callable[[str], Any], ctx: FileContext) -> Dict[str, Any]:
    n = count_of(get("num_items"))
    if n is None or n < 1:
        raise ctx.fail(f"records num_items={get('num_items')!r}", "a FeatureStats cache of at least one sample")
    out: Dict[str, Any] = {"num_samples": n}
    chunks = get("all_features") if "all_features" in names else None
    if get("capture_all") and isinstance(chunks, list) and chunks:
        if not all(isinstance(c, np.ndarray) and c.ndim == 2 for c in chunks):
            raise ctx.fail("holds `all_features` that are not 2-D arrays", "a FeatureStats cache")
        out["features"] = features_of(np.concatenate(chunks, axis=0), ctx, "`all_features`")
        if out["features"].shape[0] != n:
            raise ctx.fail(f"holds {out['features'].shape[0]} features but num_items={n}", "a FeatureStats cache")
    if "capture_mean_cov" in names and get("capture_mean_cov"):
        raw = moments_of(get("raw_mean"), get("raw_cov"), ctx, "`raw_mean`/`raw_cov`", raw=True)
        mean = raw["mean"] / n  # FeatureStats.get_mean_cov: sums over N, then the biased covariance
        out.update(mean=mean, cov=raw["cov"] / n - torch.outer(mean, mean))
        check_covariance(out["cov"], ctx, "`raw_cov` / num_items - mean mean^T, as FeatureStats forms it")
    if len(out) == 1:
        raise ctx.fail("holds neither features (capture_all) nor statistics (capture_mean_cov)", "a FeatureStats cache")
    return out


def _edm2(names: List[str], get: Callable[[str], Any], ctx: FileContext, detector: Any) -> Dict[str, Any]:
    choices = [n for n in names if _is_stats(get(n))]
    if detector is None and len(choices) == 1:
        detector = choices[0]
    if detector not in choices:
        raise ReferenceFileError(
            f"Expected argument `detector` to name one of the statistics in {ctx.path}: "
            f"{', '.join(repr(c) for c in choices)}, but got {detector!r}"
        )
    stats = moments_of(get(detector)["mu"], get(detector)["sigma"], ctx, f"entry {detector!r}")
    num = count_of(get("num_images")) if "num_images" in names else None
    return {"num_samples": num, "extractor": EDM2_DETECTORS.get(detector, detector), "entry": detector, **stats}


#: layouts told by entry names, tried in order: (layout, the entries it needs, the entry of its per-sample rows);
#: guided-diffusion's needs uint8 [N, H, W, 3] images in arr_0; "mu-sigma": torch-fidelity's in a torch.save dict
NAMED_LAYOUTS: Tuple[Tuple[str, Tuple[str, ...], Optional[str]], ...] = (
    ("nvlabs", ("capture_all", "num_items", "raw_mean", "raw_cov"), None),
    ("lightning-prd", ("features", "provenance"), "features"),
    ("dgm-eval", ("reps",), "reps"),
    ("clean-fid", ("feats",), "feats"),
    ("guided-diffusion", ("arr_0",), "arr_0"),
    ("mu-sigma", ("mu", "sigma"), None),
)
#: the entry each features layout keeps its per-sample features in
_FEATURE_ENTRY = {
    layout: entry for layout, _, entry in NAMED_LAYOUTS if entry is not None and layout != "guided-diffusion"
}
