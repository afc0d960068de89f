"""``--real`` PATH in every form :func:`~lightning_prd.features.read_reference` reads, told apart by content.

:func:`load_set` is :func:`lightning_prd.cli.inputs.load_set` for ``--fake`` and for image folders.
A ``--real`` file goes by what its first bytes say (:func:`~lightning_prd.features.safe_pickle.sniff`)
and the entries inside, whatever its name:

* a ``.npy``, a ``.npz`` or ``.pt``/``.pth`` dict whose entries form no other tool's layout, and a
  ``.pt`` tensor: read as before (:func:`lightning_prd.cli.inputs.read_file`): ``--key``/``--real-key``
  pick the entry, the first is taken otherwise, and with ``--extractor`` the array may hold images;
* a file in another layout (:data:`LAYOUT_ENTRIES`; a ``.npz`` is told by its entry names and the
  header of ``arr_0``, without loading the data), or of any other name: :func:`read_reference`.
  ``--real-key`` naming the entry that layout keeps its features in reads the layout; naming another
  entry reads that entry as above. Then:

  - **features** (lightning-prd, dgm-eval, clean-fid, NVlabs with ``capture_all``) serve every score
    and are used as they are, also when ``--extractor`` embeds ``--fake``. The extractor the file
    names must be ``--extractor`` (aliases resolved, case ignored), else an error names both; a file
    that names none gives a one-line warning when ``--extractor`` is given.
  - **images** (guided-diffusion's ``arr_0``, uint8 ``[N, H, W, 3]``) are embedded with
    ``--extractor``, as an image folder is (``--num-samples`` subsamples them first).
  - **statistics** (a mean and a covariance: FID statistics, torch-fidelity's statistics cache,
    EDM2, NVlabs without ``capture_all``) serve the Fréchet distance only: without ``--only frechet``
    an error says what the file holds, what needs per-sample features and what would serve.
    ``--detector`` picks the statistics of an EDM2 pickle and is an error for any other file.

``--test``, the held-out real set of C_T and FLD, is read by the same rules (``--test-key`` for
``--real-key``); a statistics file is refused there, as those scores need per-sample features.

Pickles are read by a restricted unpickler and ``torch.save`` files with ``weights_only=True``: a
file from elsewhere is data, and one that asks to run code is refused with one line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from lightning_prd.cli.inputs import (
    FEATURE_SUFFIXES,
    CLIError,
    _Array,
    _as_float_features,
    _extract,
    _Source,
    _subsample_rows,
    container_of,
    key_of,
    progress_on,
    read_file,
    split_outputs,
)
from lightning_prd.cli.inputs import load_set as load_plain
from lightning_prd.cli.precision import precision_of
from lightning_prd.features.reference_files import NAMED_LAYOUTS, ReferenceSet, read_reference
from lightning_prd.features.registry import canonical_name

#: the containers the plain reader takes for each suffix; anything else is read by content
_PLAIN = {
    ".npy": {"npy"},
    ".npz": {"npz", "zip"},
    ".pt": {"torch", "zip", "pickle"},
    ".pth": {"torch", "zip", "pickle"},
}
#: the entry names that make a file of entries another tool's layout, in the order
#: :func:`read_reference` tries them, with the entry holding its features (None: none, or not one entry)
LAYOUT_ENTRIES: Sequence[Tuple[Tuple[str, ...], Optional[str]]] = tuple(
    (needed, entry)
    for _, needed, entry in NAMED_LAYOUTS  # (the entries a layout needs, its features' entry)
)
#: the scores a statistics file cannot serve, as its error names them
NEEDS_FEATURES = (
    "the k-NN scores (precision, recall, density, coverage), PRD, alpha-precision/beta-recall "
    "and every score but the Fréchet distance"
)
ONLY_FRECHET = "pass --only frechet to score the Fréchet distance alone"
#: the scores a statistics file given as the held-out set ``--test`` cannot serve
HELD_OUT_NEEDS = "the held-out scores (C_T, FLD)"
#: the sets read by content, in every form of the module docstring (``--test``: the held-out real set)
BY_CONTENT = ("--real", "--test")


def _header_is_images(archive: np.lib.npyio.NpzFile, entry: str) -> bool:
    """Whether ``entry`` of a .npz is a uint8 ``[N, H, W, 3]`` array, read from its header only."""
    fmt = np.lib.format
    if archive.zip is None:
        return False
    with archive.zip.open(f"{entry}.npy") as member:
        version = fmt.read_magic(member)
        reader = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}.get(version)
        if reader is None:
            value = archive[entry]
            shape, dtype = value.shape, value.dtype
        else:
            shape, _, dtype = reader(member)
    return len(shape) == 4 and shape[-1] == 3 and dtype == np.uint8


#: the layouts a ``torch.save`` dict is read in (the other tools write theirs as .npz or pickles)
_TORCH_LAYOUTS = (("features", "provenance"), ("mu", "sigma"))


def _layout_entry(names: Sequence[str], arr_0_images: bool, torch_dict: bool = False) -> Tuple[bool, Optional[str]]:
    """(whether ``names`` form another tool's layout, the entry holding its features)."""
    have = set(names)
    for needed, entry in LAYOUT_ENTRIES:
        if torch_dict and needed not in _TORCH_LAYOUTS:
            continue
        if set(needed) <= have and (entry != "arr_0" or arr_0_images):
            return True, entry
    return False, None


def _npz_names(path: Path) -> Optional[Tuple[List[str], bool]]:
    """A .npz's entry names and whether ``arr_0`` holds images; None when the archive cannot be opened."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            names = list(archive.files)
            return names, "arr_0" in names and _header_is_images(archive, "arr_0")
    except Exception:  # noqa: BLE001 - the plain reader reports the damage in its words
        return None


def _reference(path: Path, key: Optional[str], detector: Optional[str], flag: str = "--real") -> ReferenceSet:
    try:
        return read_reference(path, name=flag, key=key, detector=detector)
    except (ValueError, FileNotFoundError) as err:
        raise CLIError(" ".join(str(err).replace("argument `detector`", "--detector").split())) from None


def _try_reference(path: Path, detector: Optional[str] = None, flag: str = "--real") -> Optional[ReferenceSet]:
    """The file read with no key, or None when it cannot be."""
    try:
        return read_reference(path, name=flag, detector=detector)
    except (ValueError, FileNotFoundError):
        return None


def read_real(
    path: Path, path_text: str, args: argparse.Namespace, flag: str = "--real"
) -> Union[None, _Array, ReferenceSet]:
    """The ``--real`` (or ``--test``) file: None (the plain reader reads it), its array (read by the plain
    reader) or its :class:`ReferenceSet` (another layout). See the module docstring for the rule."""
    key, key_flag = key_of(args, flag)
    kind = container_of(path, flag, path_text)
    # EDM2's files are pickles; --detector picks the statistics of --real's only
    detector = getattr(args, "detector", None) if kind == "pickle" and flag == "--real" else None
    suffix = path.suffix.lower()
    if suffix in FEATURE_SUFFIXES and kind in _PLAIN[suffix] | {"", "unknown"}:
        if kind in ("npy", "", "unknown", "zip"):
            return None
        if kind == "npz":
            peek = _npz_names(path)
            known, entry = _layout_entry(*peek) if peek is not None else (False, None)
            return _reference(path, None, detector, flag) if known and key in (None, entry) else None
        try:
            array = read_file(path, path_text, flag, key, key_flag)
        except CLIError:
            # e.g. torch-fidelity's statistics: NumPy arrays in a torch.save dict
            ref = _try_reference(path, detector, flag)
            if ref is not None and ref.source != "array" and key in (None, ref.entry):
                return ref
            raise
        known, entry = _layout_entry(array.names, False, torch_dict=True)
        return _reference(path, None, detector, flag) if known and key in (None, entry) else array
    if kind == "npy":
        ref = _reference(path, None if key_flag == "--key" else key, detector, flag)
    else:
        try:
            ref = _reference(path, key, detector, flag)
        except CLIError:
            bare = _try_reference(path, detector, flag) if key_flag == "--key" else None
            if bare is None or bare.entry is not None:  # the shared --key is ignored by one unnamed array only
                raise
            ref = bare
    return _Array(ref.features, ref.entry) if ref.source == "array" and ref.features is not None else ref


def _warn(args: argparse.Namespace, message: str) -> None:
    print(f"lightning-prd {args.command}: warning: {message}", file=sys.stderr)


def _check_extractor(ref: ReferenceSet, where: str, what: str, args: argparse.Namespace, flag: str = "--real") -> None:
    """The extractor ``ref`` names against ``--extractor`` (the network ``--fake`` is embedded with)."""
    if args.extractor is None:
        return
    if ref.extractor is None:
        _warn(
            args,
            f"{flag} {where} does not say which extractor made its {what}; --fake is embedded with "
            f"--extractor {args.extractor}: make sure it is the same network",
        )
    elif canonical_name(ref.extractor) != canonical_name(args.extractor):
        raise CLIError(
            f"--extractor {args.extractor}: {flag} {where} holds {what} made with {ref.extractor!r}, not "
            f"{args.extractor!r}; embed --fake with the network of {flag}, or pass --fake as features it made "
            "(without --extractor)"
        )


def load_set(
    path_text: str,
    flag: str,
    args: argparse.Namespace,
    extractor: object,
    device: torch.device,
    *,
    embed_only: bool = False,
) -> _Source:
    """One ``--real``/``--test``/``--fake`` set: features ``[n, D]``, or for a statistics ``--real`` its mean and
    covariance. ``--test`` (the held-out real set) is read as ``--real`` is, by content, and must hold
    per-sample features (or images to embed).

    ``embed_only`` (``lightning-prd features``): ``--real`` must hold samples to embed (images), not
    features or statistics.
    """
    path = Path(path_text).expanduser()
    detector = getattr(args, "detector", None) if flag == "--real" else None
    by_content = flag in BY_CONTENT
    found = read_real(path, path_text, args, flag) if by_content and path.is_file() else None
    if not isinstance(found, ReferenceSet):
        if detector is not None:
            raise CLIError(f"--detector {detector}: only for an EDM2 reference pickle, but --real {path_text} is none")
        return load_plain(path_text, flag, args, extractor, device, array=found)
    ref = found
    if detector is not None and ref.source != "edm2":
        raise CLIError(f"--detector {detector}: only for an EDM2 reference pickle, but --real {path_text} is none")
    where = f"{path_text} ({ref.source}" + (f", entry {ref.entry!r})" if ref.entry is not None else ")")
    if ref.images is not None:
        return _embedded(ref.images, ref, path, where, args, extractor, device, flag)
    if embed_only:
        held = "features" if ref.features is not None else "only the mean and covariance of features"
        raise CLIError(
            f"--real {where} holds {held}, not samples to embed; `lightning-prd features` embeds images "
            "(a folder of PNG/JPEG images, a file of images, or a guided-diffusion reference batch)"
        )
    if ref.features is None:
        if flag != "--real":
            try:
                ref.require_features(HELD_OUT_NEEDS)
            except ValueError as err:
                raise CLIError(" ".join(str(err).split())) from None
        return _statistics(ref, path, where, args)
    _check_extractor(ref, where, "features", args, flag)
    total = int(ref.features.shape[0])
    rows = _subsample_rows(total, args.num_samples, args.seed)
    feats = ref.features if rows is None else ref.features[rows]
    return _Source(
        features=_as_float_features(feats, flag, where, extracted=False),
        path=str(path),
        kind="features",
        total=total,
        key=ref.entry,
        layout=ref.source,
        made_with=ref.extractor,
    )


def _embedded(
    images: torch.Tensor,
    ref: ReferenceSet,
    path: Path,
    where: str,
    args: argparse.Namespace,
    extractor: object,
    device: torch.device,
    flag: str = "--real",
) -> _Source:
    """The features of ``images``, guided-diffusion's uint8 ``[N, H, W, 3]``, embedded with ``--extractor``."""
    shape = "x".join(str(s) for s in images.shape[1:])
    if extractor is None:
        raise CLIError(
            f"{flag} {where} holds {images.shape[0]:,} {shape} uint8 images: pass --extractor NAME "
            "(e.g. --extractor inception --weights FILE) to embed them"
        )
    rows = _subsample_rows(int(images.shape[0]), args.num_samples, args.seed)
    kept = images if rows is None else images[rows]
    feats, extras = split_outputs(
        _extract(
            extractor,
            kept.permute(0, 3, 1, 2).contiguous(),  # channels first, laid out as an image folder's batches are
            flag,
            where,
            batch_size=args.batch_size,
            device=device,
            progress=progress_on(args),
            desc=f"{flag[2:]} images",
            extractor_precision=precision_of(args),
        ),
        flag,
        where,
    )
    return _Source(
        features=_as_float_features(feats, flag, where, extracted=True),
        path=str(path),
        kind="images",
        total=int(images.shape[0]),
        key=ref.entry,
        layout=ref.source,
        extras=extras,
    )


def _statistics(ref: ReferenceSet, path: Path, where: str, args: argparse.Namespace) -> _Source:
    """A statistics ``--real``: its float64 mean and covariance, for ``--only frechet``."""
    if ref.mean is None or ref.cov is None:  # read_reference gives features, images or both moments
        raise CLIError(f"--real {where}: holds neither features, images nor statistics")
    if getattr(args, "only", None) != "frechet":
        try:
            ref.require_features(NEEDS_FEATURES)
        except ValueError as err:
            raise CLIError(f"{' '.join(str(err).split())}; or {ONLY_FRECHET}") from None
    _check_extractor(ref, where, "statistics", args)
    if args.num_samples is not None:
        _warn(args, f"--num-samples {args.num_samples} subsamples --fake only: --real {where} holds statistics")
    return _Source(
        features=torch.empty(0, ref.mean.shape[0], dtype=torch.float64),
        path=str(path),
        kind="statistics",
        total=ref.num_samples or 0,
        key=ref.entry,
        layout=ref.source,
        made_with=ref.extractor,
        statistics=(ref.mean, ref.cov),
    )
