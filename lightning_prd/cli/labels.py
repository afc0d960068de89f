"""Class labels of ``evaluate --real-labels PATH --fake-labels PATH``: one integer per sample.

A labels file is one of

* ``.npy``: a 1-D integer array;
* ``.npz``: the array named ``labels``, else its only array (so a ``.npz`` holding ``features`` and
  ``labels`` serves as both ``--real`` with ``--real-key features`` and ``--real-labels``);
* ``.pt`` / ``.pth``: a 1-D integer tensor, or a dict's tensor ``labels`` (else its only tensor);
* ``.txt``: integers separated by white space, typically one per line; lines starting with ``#`` are
  comments.

Labels are integers (any signed or unsigned width); floating-point, boolean and string labels are
refused with a line that says how to convert them, as ``per_class_metrics`` refuses them. The
``i``-th label belongs to the ``i``-th sample in the order the set is read (a folder: its sorted
image paths), before ``--num-samples`` subsamples the set and its labels alike.

Example:
    >>> import numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "labels.txt")
    >>> _ = open(path, "w").write("# class of each sample\\n0\\n2\\n1\\n")
    >>> read_labels(path, "--real-labels").labels.tolist()
    [0, 2, 1]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch
from torch import Tensor

from lightning_prd.cli.inputs import _MAGIC, _WHAT, CLIError, _load_error

LABEL_SUFFIXES = (".npy", ".npz", ".pt", ".pth", ".txt")
#: the entry a .npz / a .pt dict keeps its labels in when it holds several
LABELS_ENTRY = "labels"
_INT64 = np.iinfo(np.int64)


@dataclass
class Labels:
    """The labels read from one file: int64 ``[n]`` on the CPU, and where they came from."""

    labels: Tensor
    path: str
    key: Optional[str] = None

    def describe(self) -> Dict[str, Any]:
        return {"path": self.path, "key": self.key, "num_labels": int(self.labels.shape[0])}


def check_labels_path(text: str, flag: str) -> Path:
    """The path of ``flag``, if it is an existing file of a labels type (one line naming the flag otherwise)."""
    path = Path(text).expanduser()
    if not path.exists():
        raise CLIError(f"{flag} {text}: no such file or directory")
    if path.is_dir():
        raise CLIError(f"{flag} {text}: expected a file of class labels, but this is a directory")
    if path.suffix.lower() not in LABEL_SUFFIXES:
        raise CLIError(
            f"{flag} {text}: unsupported file type {path.suffix or '(none)'!r}; expected {', '.join(LABEL_SUFFIXES)}"
        )
    return path


def read_labels(text: str, flag: str) -> Labels:
    """The labels of ``flag``'s file; every problem a :class:`CLIError` naming ``flag``, the file and the value."""
    path = check_labels_path(text, flag)
    suffix = path.suffix.lower()
    try:
        if suffix == ".txt":
            values, key = _read_text(path), None
        else:
            values, key = _read_array(path, suffix)
    except CLIError as err:
        raise CLIError(f"{flag} {text}: {err}") from err
    except OSError as err:
        raise CLIError(f"{flag} {text}: cannot read the file: {err.strerror or err}") from err
    except Exception as err:  # noqa: BLE001 - an unreadable file: one line naming it
        reason = "not a text file" if isinstance(err, UnicodeDecodeError) else _load_error(suffix, err)
        reason = reason.replace("not numeric features", "not integer class labels")
        raise CLIError(f"{flag} {text}: cannot read the file: {reason}") from err
    where = f"{text} ({'array' if suffix == '.npz' else 'tensor'} {key!r})" if key is not None else text
    return Labels(_as_labels(values, flag, where), str(path), key)


def _read_text(path: Path) -> np.ndarray:
    values = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.lstrip().startswith("#"):
            continue
        for token in line.split():
            try:
                values.append(int(token))
            except ValueError:
                shown = token if len(token) <= 20 else token[:17] + "..."
                raise CLIError(
                    f"line {number}: expected integer class labels, but got {shown!r}; map class names or "
                    "floating-point labels to integers first"
                ) from None
    if not values:
        raise CLIError("expected one integer class label per sample, but the file holds none")
    if any(v < _INT64.min or v > _INT64.max for v in values):
        raise CLIError("expected class labels that fit in 64 bits, but some do not")
    return np.array(values, dtype=np.int64)


def _read_array(path: Path, suffix: str) -> Tuple[Any, Optional[str]]:
    """The labels array of a .npy / .npz / .pt file, and the entry it came from."""
    with path.open("rb") as handle:
        head = handle.read(8)
    if not head:
        raise CLIError("cannot read the file: the file is empty")
    if not head.startswith(_MAGIC[suffix]):
        raise CLIError(f"cannot read the file: not {_WHAT[suffix]} (it does not start with the {suffix} file header)")
    from lightning_prd.features.safe_pickle import load_data, torch_load_safe

    if suffix == ".npy":
        return load_data(path, "npy"), None
    if suffix == ".npz":
        with load_data(path, "npz") as data:
            return _entry(list(data.files), "arrays", lambda name: data[name])
    obj = torch_load_safe(path)
    if isinstance(obj, dict):
        tensors = [str(k) for k, v in obj.items() if isinstance(v, (Tensor, np.ndarray))]
        return _entry(tensors, "tensors", lambda name: obj[name])
    if not isinstance(obj, (Tensor, np.ndarray)):
        held = type(obj).__name__
        raise CLIError(f"expected a tensor of class labels (or a dict of tensors), but the file holds a {held}")
    return obj, None


def _entry(names: list, what: str, get: Any) -> Tuple[Any, Optional[str]]:
    if LABELS_ENTRY in names:
        return get(LABELS_ENTRY), LABELS_ENTRY
    if len(names) == 1:
        return get(names[0]), names[0]
    listed = ", ".join(names[:10]) or "none"
    raise CLIError(f"expected an entry named {LABELS_ENTRY!r} or a single one, but the file holds {what}: {listed}")


def _as_labels(values: Any, flag: str, where: str) -> Tensor:
    """``values`` checked as 1-D integer labels, as int64 on the CPU."""
    if isinstance(values, Tensor):
        values = values.detach().cpu()
        if values.layout != torch.strided:
            values = values.to_dense()
        if values.is_floating_point() or values.is_complex() or values.dtype == torch.bool:
            raise CLIError(_not_integers(flag, where, str(values.dtype).replace("torch.", "")))
        values = values.numpy()
    array = np.asarray(values)
    if array.dtype.kind not in "iu":
        raise CLIError(_not_integers(flag, where, str(array.dtype)))
    if array.ndim != 1:
        raise CLIError(
            f"{flag} {where}: expected a 1-D array of class labels, one per sample, but got shape {array.shape}"
        )
    if array.shape[0] == 0:
        raise CLIError(f"{flag} {where}: expected one class label per sample, but the array is empty")
    if array.dtype == np.uint64 and int(array.max()) > _INT64.max:
        largest = int(array.max())
        raise CLIError(f"{flag} {where}: expected class labels that fit in 64 bits, but the largest is {largest}")
    return torch.from_numpy(array.astype(np.int64, copy=True))


def _not_integers(flag: str, where: str, dtype: str) -> str:
    if dtype.startswith(("<U", ">U", "|S", "<S", "|U", "object", "str")):
        hint = "map class names to integers first (e.g. their index in the sorted list of names)"
    elif dtype.startswith("bool"):
        hint = "save the class index of each sample (0 and 1 for two classes) as integers"
    else:
        hint = "save them as integers (e.g. numpy's .astype(int), torch's .long()) if they are class indices"
    return f"{flag} {where}: expected integer class labels, but got dtype {dtype}; {hint}"


def labels_for(labels: Labels, flag: str, set_flag: str, set_path: str, total: int) -> Labels:
    """``labels`` checked against the ``total`` samples of the set they label (before ``--num-samples``)."""
    count = int(labels.labels.shape[0])
    if count != total:
        raise CLIError(
            f"{flag} {labels.path}: {count} labels, but {set_flag} {set_path} holds {total} samples "
            "(one label per sample, in the order they are read)"
        )
    return labels
