"""Reading the ``lightning-prd`` command's inputs: feature files and image folders.

Every problem with a file becomes a :class:`CLIError` whose one-line message names the flag
(``--real``/``--fake``), the file and what is wrong; :mod:`lightning_prd.cli` prints it and exits 1.
"""

from __future__ import annotations

import argparse
import pickle
import re
import struct
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from lightning_prd.cli.precision import precision_of
from lightning_prd.features.image_folder import image_batches, image_files
from lightning_prd.functional.engine.inputs import NARROW_FLOATS, as_features, non_finite_rows, torch_compatible

FEATURE_SUFFIXES = (".npy", ".npz", ".pt", ".pth")


class CLIError(Exception):
    """A problem with the user's input: reported as one line, exit status 1."""


class _Unreadable(CLIError):
    """A feature file that is not what its extension says, or is truncated or corrupt."""


def _subsample_rows(n: int, num_samples: Optional[int], seed: int) -> Optional[Tensor]:
    """Sorted indices of a seeded subsample without replacement, or None to keep every row."""
    if num_samples is None or n <= num_samples:
        return None
    gen = torch.Generator().manual_seed(seed)
    return torch.randperm(n, generator=gen)[:num_samples].sort().values


#: the first bytes of each feature file type: a .npy header, a zip archive (.npz and torch.save),
#: or a legacy torch.save pickle (protocol 2+)
_MAGIC = {".npy": (b"\x93NUMPY",), ".npz": (b"PK",), ".pt": (b"PK", b"\x80"), ".pth": (b"PK", b"\x80")}
_WHAT = {
    ".npy": "a NumPy .npy file",
    ".npz": "a NumPy .npz archive",
    ".pt": "a torch.save file",
    ".pth": "a torch.save file",
}


@dataclass
class _Array:
    """The array read from one feature file, and where it came from inside the file."""

    data: Tensor
    name: Optional[str] = None  # its name in a .npz / a .pt dict; None for a bare array
    picked: bool = False  # True when the first of several entries was taken (no key given)
    names: Tuple[str, ...] = ()  # the keys of a .pt dict


def _first_sentence(err: BaseException, limit: int = 200) -> str:
    """A short one-line form of an exception from numpy / torch (no ANSI codes, no paragraphs)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(err))
    text = " ".join(text.split()) or type(err).__name__
    first = re.split(r"(?<=[a-z0-9)\]])\. ", text, maxsplit=1)[0]
    return first if len(first) <= limit else first[: limit - 3] + "..."


def _load_error(suffix: str, err: BaseException) -> str:
    """Why a feature file could not be read, in words that do not send the user to unsafe loading."""
    text = " ".join(str(err).split())
    if isinstance(err, pickle.UnpicklingError) or "Weights only load failed" in text:
        from lightning_prd.features.safe_pickle import refused_global

        found = refused_global(err)
        if found:
            return (
                f"it holds Python objects that are not loaded for safety ({found}); "
                f"save a tensor, or a dict of tensors, with torch.save (or the array with numpy.save as .npy)"
            )
        return f"not {_WHAT[suffix]}, or the file is corrupt"
    if "allow_pickle" in text:
        return "it holds Python objects (dtype object), not numeric features"
    truncated = ("EOF", "PytorchStreamReader", "not fully written", "Bad CRC", "decompressing")
    if isinstance(err, (EOFError, struct.error, zipfile.BadZipFile)) or any(word in text for word in truncated):
        return f"the file is truncated or corrupt ({_first_sentence(err)})"
    return _first_sentence(err, 300)


def _from_numpy(array: np.ndarray) -> Tensor:
    try:
        return torch.from_numpy(torch_compatible(array))
    except TypeError:
        raise CLIError(
            f"unsupported dtype {array.dtype}; expected numeric features (float32, float64 or float16)"
        ) from None


def _read_array(path: Path, key: Optional[str], key_flag: Optional[str]) -> _Array:
    """The features in a .npy / .npz / .pt / .pth file (CLIError with the reason, without the file's name).

    ``key_flag`` is the option ``key`` came from; a per-set key (``--real-key``/``--fake-key``)
    on a file with a single unnamed array is an error, the shared ``--key`` is not.
    """
    suffix = path.suffix.lower()
    with path.open("rb") as handle:
        head = handle.read(8)
    if not head:
        raise _Unreadable("the file is empty")
    if not head.startswith(_MAGIC[suffix]):
        raise _Unreadable(f"not {_WHAT[suffix]} (it does not start with the {suffix} file header)")

    def unnamed(what: str) -> None:
        if key is not None and key_flag != "--key":
            raise CLIError(f"{key_flag} {key!r} names an entry, but {what}")

    from lightning_prd.features.safe_pickle import load_data, torch_load_safe

    if suffix == ".npy":
        unnamed("a .npy file holds one unnamed array")
        return _Array(_from_numpy(load_data(path, "npy")))
    if suffix == ".npz":
        with load_data(path, "npz") as data:
            names = list(data.files)
            if not names:
                raise CLIError("the .npz archive holds no arrays")
            if key is not None and key not in names:
                raise CLIError(f"no array named {key!r} (arrays: {', '.join(names)})")
            name = key if key is not None else names[0]
            return _Array(_from_numpy(data[name]), name, picked=key is None and len(names) > 1)
    obj = torch_load_safe(path)
    name, picked = None, False
    keys: Tuple[str, ...] = ()
    if isinstance(obj, dict):
        tensors = [k for k, v in obj.items() if isinstance(v, Tensor)]
        if key is not None and key not in tensors:
            raise CLIError(f"no tensor named {key!r} (tensors: {', '.join(map(str, tensors)) or 'none'})")
        if not tensors:
            raise CLIError(f"the dict holds no tensor (keys: {', '.join(map(str, obj))[:200] or 'none'})")
        name = key if key is not None else tensors[0]
        picked = key is None and len(tensors) > 1
        keys = tuple(map(str, obj))
        obj = obj[name]
    elif isinstance(obj, Tensor):
        unnamed("the file holds a single tensor, not a dict")
    if isinstance(obj, np.ndarray):
        obj = _from_numpy(obj)
    if not isinstance(obj, Tensor):
        raise CLIError(f"expected a tensor (or a dict of tensors), but the file holds a {type(obj).__name__}")
    obj = obj.detach()
    if obj.layout != torch.strided:  # a sparse tensor
        obj = obj.to_dense()
    return _Array(obj, None if name is None else str(name), picked, keys)


def _image_batches(
    files: Sequence[Path], batch_size: int, size: Optional[Tuple[int, int]], folder: Path, flag: str
) -> Iterator[Tensor]:
    """uint8 ``[B, 3, H, W]`` batches of consecutive images of one size (:func:`image_batches`)."""
    return image_batches(
        files,
        batch_size,
        size,
        unreadable=lambda path, err: CLIError(f"{flag}: cannot read image {path}: {_first_sentence(err)}"),
        mixed=lambda sizes: CLIError(
            f"{flag} {folder}: the images have different sizes ({sizes}) and the extractor declares no "
            f"input_size to resize them to"
        ),
    )


@dataclass
class _Source:
    """What was loaded from one PATH: its features (or, for a statistics file, only their mean and
    covariance, with ``features`` of shape ``[0, D]``) and a description for the table and the JSON."""

    features: Tensor
    path: str
    kind: str  # "features", "images" or "statistics"
    total: int  # samples available before --num-samples (a statistics file: the count it records, else 0)
    key: Optional[str] = None  # the array / tensor used, in a .npz or a .pt dict
    picked: bool = False  # True when ``key`` is the first of several, taken because none was named
    layout: Optional[str] = None  # the file's layout (ReferenceSet.source) when read by content
    made_with: Optional[str] = None  # the extractor the file names
    statistics: Optional[Tuple[Tensor, Tensor]] = None  # float64 mean [D] and covariance [D, D]
    extras: Dict[str, Tensor] = field(default_factory=dict)  # an extractor's other outputs (logits, spatial)

    @property
    def num(self) -> int:
        return self.total if self.statistics is not None else int(self.features.shape[0])

    @property
    def dim(self) -> int:
        return int(self.features.shape[1])

    def describe(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {
            "path": self.path,
            "key": self.key,
            "source": self.kind,
            "num_samples": self.num or None if self.statistics is not None else self.num,
            "num_available": self.total or None if self.statistics is not None else self.total,
        }
        if self.layout is not None:
            out.update(format=self.layout, extractor=self.made_with)
        return out


def container_of(path: Path, flag: str, path_text: str) -> str:
    """What kind of file ``path`` is by its first bytes (:func:`~lightning_prd.features.safe_pickle.sniff`)."""
    from lightning_prd.features.safe_pickle import sniff

    try:
        return sniff(path)
    except OSError as err:
        raise CLIError(f"{flag} {path_text}: cannot read the file: {err.strerror or err}") from None


def _check_path(path_text: str, flag: str, has_extractor: bool, *, by_content: bool = False) -> Path:
    """The PATH of ``--real``/``--fake``, if it is an existing feature file or a folder of images.

    With ``by_content`` (``--real``), a file of any other name is accepted when its first bytes are
    those of a .npy, a .npz, a ``torch.save`` file or a pickle (a reference file of another tool).
    """
    from lightning_prd.features.safe_pickle import CONTAINERS

    path = Path(path_text).expanduser()
    if not path.exists():
        raise CLIError(f"{flag} {path_text}: no such file or directory")
    if path.is_dir():
        if not image_files(path):
            raise CLIError(f"{flag} {path_text}: no PNG/JPEG images found in this folder")
        if not has_extractor:
            raise CLIError(
                f"{flag} {path_text} is an image folder: pass --extractor NAME "
                f"(e.g. --extractor inception --weights FILE) to embed the images"
            )
    elif path.suffix.lower() not in FEATURE_SUFFIXES:
        if by_content and container_of(path, flag, path_text) in CONTAINERS:
            return path
        others = ", a reference file of another tool (see --help)" if by_content else ""
        raise CLIError(
            f"{flag} {path_text}: unsupported file type {path.suffix or '(none)'!r}; expected "
            f"{', '.join(FEATURE_SUFFIXES)}{others} or a folder of PNG/JPEG images"
        )
    return path


def key_of(args: argparse.Namespace, flag: str) -> Tuple[Optional[str], Optional[str]]:
    """The entry ``--real-key``/``--fake-key`` (else ``--key``) names for ``flag``, and the option it came from."""
    own_key = getattr(args, f"{flag[2:]}_key", None)
    key: Optional[str] = own_key if own_key is not None else getattr(args, "key", None)
    return key, None if key is None else (f"{flag}-key" if own_key is not None else "--key")


def read_file(path: Path, path_text: str, flag: str, key: Optional[str], key_flag: Optional[str]) -> _Array:
    """The array of a .npy / .npz / .pt / .pth file; every problem a :class:`CLIError` naming ``flag`` and the file."""
    try:
        return _read_array(path, key, key_flag)
    except _Unreadable as err:
        raise CLIError(f"{flag} {path_text}: cannot read the file: {err}") from err
    except CLIError as err:
        raise CLIError(f"{flag} {path_text}: {err}") from err
    except Exception as err:  # noqa: BLE001 - unreadable file: one line naming it
        reason = _load_error(path.suffix.lower(), err)
        raise CLIError(f"{flag} {path_text}: cannot read the file: {reason}") from err


def progress_on(args: argparse.Namespace) -> bool:
    """Progress bars: on unless ``--quiet`` or stderr is not a terminal."""
    return not args.quiet and sys.stderr.isatty()


def load_set(
    path_text: str,
    flag: str,
    args: argparse.Namespace,
    extractor: Any,
    device: torch.device,
    *,
    array: Optional[_Array] = None,
) -> _Source:
    """Features ``[n, D]`` of one ``--real``/``--fake`` PATH (subsampled, extracted, checked).

    ``array``: the file's array when it was read already (:func:`read_file`).
    """
    path = _check_path(path_text, flag, extractor is not None, by_content=array is not None)
    progress = progress_on(args)
    if path.is_dir():
        files = image_files(path)
        rows = _subsample_rows(len(files), args.num_samples, args.seed)
        kept = files if rows is None else [files[i] for i in rows.tolist()]
        batches = _Counted(
            _image_batches(kept, args.batch_size, getattr(extractor, "input_size", None), path, flag), len(kept)
        )
        feats, extras = split_outputs(
            _extract(
                extractor,
                batches,
                flag,
                path_text,
                device=device,
                progress=progress,
                desc=f"{flag[2:]} images",
                extractor_precision=precision_of(args),
            ),
            flag,
            path_text,
        )
        return _Source(
            features=_as_float_features(feats, flag, path_text, extracted=True),
            path=str(path),
            kind="images",
            total=len(files),
            extras=extras,
        )
    if array is None:
        array = read_file(path, path_text, flag, *key_of(args, flag))
    data, where = array.data, path_text
    if isinstance(data, Tensor) and data.is_meta:
        raise CLIError(
            f"{flag} {path_text}: the tensor is on the meta device (it holds no data), shape {tuple(data.shape)}"
        )
    if array.name is not None:
        entry = "array" if path.suffix.lower() == ".npz" else "tensor"
        where = f"{path_text} ({entry} {array.name!r}" + (
            f", the first of several; choose one with {flag}-key)" if array.picked else ")"
        )
    total = int(data.shape[0]) if data.ndim else 0
    if data.ndim == 0 or total == 0:
        raise CLIError(f"{flag} {where}: expected at least one sample, but got shape {tuple(data.shape)}")
    rows = _subsample_rows(total, args.num_samples, args.seed)
    if rows is not None:
        data = data[rows]
    extras = {}
    if extractor is not None:
        feats, extras = split_outputs(
            _extract(
                extractor,
                data,
                flag,
                where,
                batch_size=args.batch_size,
                device=device,
                progress=progress,
                desc=flag[2:],
                extractor_precision=precision_of(args),
            ),
            flag,
            where,
        )
    else:
        if data.ndim != 2:
            raise CLIError(
                f"{flag} {where}: expected a 2-D [N, D] feature array, but got shape {tuple(data.shape)}; "
                f"pass --extractor to embed image arrays"
            )
        feats = data
    return _Source(
        features=_as_float_features(feats, flag, where, extracted=extractor is not None),
        path=str(path),
        kind="features",
        total=total,
        key=array.name,
        picked=array.picked,
        extras=extras,
    )


def _extract(extractor: Any, data: Any, flag: str, path: str, **kwargs: Any) -> Any:
    """:func:`~lightning_prd.features.extract_features`, with errors naming the input (a tensor, or the dict of
    an extractor with several outputs: :func:`split_outputs`)."""
    from lightning_prd.features import extract_features

    try:
        return extract_features(extractor, data, **kwargs)
    except CLIError:
        raise
    except (ValueError, TypeError, RuntimeError) as err:
        raise CLIError(
            f"{flag} {path}: the extractor failed on these samples: {' '.join(str(err).split())[:400]}"
        ) from err


#: the output of a several-output extractor that the scores are computed on (the FID Inception's pool features)
MAIN_OUTPUT = "pool"


def split_outputs(feats: Any, flag: str, where: str) -> Tuple[Tensor, Dict[str, Tensor]]:
    """``(features, other outputs)`` of what an extractor returned: a tensor has no other outputs; a dict gives
    its ``"pool"`` entry as the features and the rest (``logits``, ``spatial``) as extras."""
    if isinstance(feats, Tensor):
        return feats, {}
    if MAIN_OUTPUT not in feats:
        raise CLIError(
            f"{flag} {where}: the extractor returned the outputs {sorted(feats)}, none named {MAIN_OUTPUT!r} "
            "(the features the scores are computed on)"
        )
    extras = {k: v for k, v in feats.items() if k != MAIN_OUTPUT}
    return feats[MAIN_OUTPUT], extras


def _as_float_features(feats: Tensor, flag: str, where: str, *, extracted: bool) -> Tensor:
    """Checked features ``[n, D]``, as the functional core takes them: float16/bfloat16 upcast to
    float32 (the core's rule, so the scores equal those of the float32 values); integer, bool and
    complex features refused (the core raises ``TypeError`` on them); NaN/Inf refused."""
    if feats.is_complex():
        raise CLIError(f"{flag} {where}: expected real-valued features, but got dtype {feats.dtype}")
    if not feats.is_floating_point():
        hint = (
            "the extractor returned them"
            if extracted
            else "convert them to float32 if they are feature values, or pass --extractor if they are images"
        )
        raise CLIError(f"{flag} {where}: expected floating-point features, but got dtype {feats.dtype}; {hint}")
    if feats.dtype in NARROW_FLOATS:  # float16, bfloat16, float8: exact in float32
        feats = feats.to(torch.float32)
    bad = non_finite_rows(feats) if feats.ndim == 2 else 0
    if bad:
        raise CLIError(f"{flag} {where}: {bad} of {feats.shape[0]} samples hold NaN or Inf features")
    try:
        return as_features(feats, flag[2:])
    except (TypeError, ValueError) as err:
        raise CLIError(f"{flag} {where}: {err}") from err


class _Counted:
    """An iterable of batches that knows its number of samples (for the progress bar)."""

    def __init__(self, batches: Iterator[Tensor], total: int) -> None:
        self.batches, self.dataset = batches, range(total)

    def __iter__(self) -> Iterator[Tensor]:
        return self.batches
