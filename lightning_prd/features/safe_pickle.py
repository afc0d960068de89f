"""Files from elsewhere opened as data and never run: what kind of file, a restricted unpickler, safe ``torch.load``.

:func:`sniff` tells the kind of a file by its first bytes, never its name (:data:`CONTAINERS`), and
:func:`load_data` opens it: NumPy files with ``allow_pickle=False``, pickles and ``torch.save``
files as below.

Unpickling runs whatever Python callable the file names, so a pickle from elsewhere is never
handed to :func:`pickle.load` or to ``torch.load(weights_only=False)``. The reference files other
tools write are pickles of plain data (dicts, lists, numbers, strings, NumPy arrays), and this
module loads exactly that:

* :class:`DataUnpickler` resolves only the globals plain data needs (:data:`ALLOWED_GLOBALS`):
  NumPy arrays, dtypes and scalars, under their NumPy 1 (``numpy.core``) and NumPy 2
  (``numpy._core``) paths (``multiarray._reconstruct``, ``multiarray.scalar``,
  ``numeric._frombuffer``); ``_codecs.encode`` for latin-1 text only (how protocol-2 pickles
  store ``bytes``); ``collections.OrderedDict``; the builtin containers
  ``set``, ``frozenset``, ``bytearray``, ``complex``; NVlabs' ``dnnlib.EasyDict`` (as a plain dict)
  and NVlabs' ``metrics.metric_utils.FeatureStats`` (StyleGAN2-ADA, StyleGAN3) as
  :class:`FeatureStatsState`, a stand-in that records the pickled fields and nothing else.
  Any other global raises :class:`RefusedGlobal` before it is looked up, so nothing is imported
  or called; persistent ids are refused too.
* :func:`load_torch` is ``torch.load(weights_only=True)`` with the same NumPy globals allowed, so
  a ``torch.save`` of NumPy arrays (torch-fidelity's statistics cache) loads and nothing else does.

Example:
    >>> import io, pickle
    >>> import numpy as np
    >>> DataUnpickler(io.BytesIO(pickle.dumps({"mu": np.zeros(2)}))).load()
    {'mu': array([0., 0.])}
    >>> class Hostile:
    ...     def __reduce__(self):
    ...         return (print, ("this never runs",))
    >>> DataUnpickler(io.BytesIO(pickle.dumps(Hostile()))).load()
    Traceback (most recent call last):
    ...
    lightning_prd.features.safe_pickle.RefusedGlobal: builtins.print
"""

from __future__ import annotations

import collections
import pickle
import re
import zipfile
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import torch


class RefusedGlobal(pickle.UnpicklingError):
    """A pickle named a Python global that plain data does not need; its message is ``module.name``."""

    def __init__(self, qualname: str) -> None:
        super().__init__(qualname)
        self.qualname = qualname


class FeatureStatsState:
    """Stand-in for NVlabs' ``metrics.metric_utils.FeatureStats``: the pickled fields in :attr:`fields`.

    Unpickling an object creates it without ``__init__`` and hands its ``__dict__`` to
    ``__setstate__``; this class keeps that dict and runs nothing of NVlabs' code.
    """

    def __init__(self) -> None:
        self.fields: Dict[str, Any] = {}

    def __setstate__(self, state: Any) -> None:
        if not isinstance(state, dict):
            raise pickle.UnpicklingError(f"FeatureStats state is a {type(state).__name__}, not a dict of fields")
        self.fields = {str(k): v for k, v in state.items()}


class _EasyDict(dict):
    """NVlabs' ``dnnlib.EasyDict`` (a dict with attribute access) read as a plain dict."""


def _numpy_globals() -> Dict[str, Any]:
    """NumPy's pickling helpers under both of their import paths, taken from live objects (no import by name)."""
    reconstruct = np.zeros(1).__reduce__()[0]
    scalar = np.float64(0).__reduce__()[0]
    frombuffer = np.zeros(1).__reduce_ex__(5)[0]  # protocol 5 stores an array's bytes as one buffer
    out: Dict[str, Any] = {"numpy.ndarray": np.ndarray, "numpy.dtype": np.dtype}
    for core in ("numpy.core", "numpy._core"):
        out[f"{core}.multiarray._reconstruct"] = reconstruct
        out[f"{core}.multiarray.scalar"] = scalar
        out[f"{core}.numeric._frombuffer"] = frombuffer
    return out


def _latin1_bytes(text: str, encoding: str = "latin1") -> bytes:
    """``_codecs.encode`` as protocol-2 pickles use it for ``bytes`` (latin-1 text); no other codec."""
    if encoding not in ("latin1", "latin-1") or not isinstance(text, str):
        raise pickle.UnpicklingError(f"refused _codecs.encode with the codec {encoding!r}")
    return text.encode("latin1")


#: every global a pickle of plain data may name, ``"module.name"`` -> the object it resolves to
ALLOWED_GLOBALS: Dict[str, Any] = {
    **_numpy_globals(),
    "_codecs.encode": _latin1_bytes,
    "collections.OrderedDict": collections.OrderedDict,
    **{f"{m}.{t.__name__}": t for m in ("builtins", "__builtin__") for t in (set, frozenset, bytearray, complex)},
    "dnnlib.EasyDict": _EasyDict,
    "dnnlib.util.EasyDict": _EasyDict,
    "metrics.metric_utils.FeatureStats": FeatureStatsState,
}


class DataUnpickler(pickle.Unpickler):
    """A :class:`pickle.Unpickler` that resolves only :data:`ALLOWED_GLOBALS` and no persistent ids.

    Anything else raises :class:`RefusedGlobal` (a :class:`pickle.UnpicklingError`) naming the
    global; the global is neither imported nor called.
    """

    def find_class(self, module: str, name: str) -> Any:
        qualname = f"{module}.{name}"
        if qualname not in ALLOWED_GLOBALS:
            raise RefusedGlobal(qualname)
        return ALLOWED_GLOBALS[qualname]

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("the pickle refers to objects stored outside it (a persistent id)")


def load_pickle(path: Path) -> Any:
    """The plain data pickled in ``path`` (:class:`DataUnpickler`; raises what it raises)."""
    with path.open("rb") as handle:
        return DataUnpickler(handle).load()


#: the dtype kinds whose instances torch's weights-only unpickler must be told it may build
_DTYPE_CODES = "?bBhHiIlLqQefdgFDGUS"


def _torch_numpy_globals() -> List[Any]:
    dtype_types = list({type(np.dtype(code)) for code in _DTYPE_CODES})
    return [(obj, qualname) for qualname, obj in _numpy_globals().items()] + dtype_types


def load_torch(path: Path) -> Any:
    """``torch.load(path, map_location="cpu", weights_only=True)`` that also takes NumPy arrays and scalars.

    torch's weights-only unpickler refuses every other global with a :class:`pickle.UnpicklingError`
    whose message names it (:func:`refused_in_torch_error` reads it back).
    """
    with torch.serialization.safe_globals(_torch_numpy_globals()):
        return torch.load(path, map_location="cpu", weights_only=True)


def refused_in_torch_error(err: BaseException) -> str:
    """The global a weights-only ``torch.load`` refused, read from its error message; ``""`` if none."""
    found = re.search(r"GLOBAL ([\w.]+)", str(err))
    return found.group(1) if found else ""


def refused_global(err: BaseException) -> str:
    """The global that :class:`DataUnpickler` or a weights-only ``torch.load`` refused, else ``""``."""
    return err.qualname if isinstance(err, RefusedGlobal) else refused_in_torch_error(err)


#: the kinds of file :func:`sniff` tells apart, as messages name them
CONTAINERS = {
    "npy": "a .npy array",
    "npz": "a .npz archive",
    "zip": "a zip archive (.npz or torch.save)",
    "torch": "a torch.save file",
    "pickle": "a pickle",
}
#: how a legacy (non-zip) ``torch.save`` file starts: its magic number, pickled with protocol 2
TORCH_LEGACY_MAGIC = b"\x80\x02\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19."


def sniff(path: Path) -> str:
    """The kind of file ``path`` is by its first bytes: a key of :data:`CONTAINERS`, ``""`` (empty) or ``"unknown"``.

    ``\\x93NUMPY`` is a ``.npy``; a zip archive is a ``torch.save`` file when it holds a ``data.pkl``
    (``.npz`` members are ``*.npy``), ``"zip"`` when its directory cannot be read; torch's magic number
    is a legacy ``torch.save``; any other protocol 2+ pickle (``\\x80``) is a pickle.
    """
    with path.open("rb") as handle:
        head = handle.read(len(TORCH_LEGACY_MAGIC))
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith(b"PK"):
        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
        except zipfile.BadZipFile:
            return "zip"
        return "torch" if any(n.rpartition("/")[2] == "data.pkl" for n in names) else "npz"
    if head.startswith(TORCH_LEGACY_MAGIC):
        return "torch"
    return "pickle" if head.startswith(b"\x80") else ("unknown" if head else "")


def load_data(path: Path, kind: str) -> Any:
    """The contents of ``path`` of kind ``kind`` (from :func:`sniff`), as data.

    A ``.npy`` gives its array, a ``.npz`` (or ``"zip"``) an open :class:`numpy.lib.npyio.NpzFile`
    (the caller closes it; entries load on access), both with ``allow_pickle=False``; a
    ``torch.save`` file what :func:`load_torch` gives; a pickle what :func:`load_pickle` gives.
    """
    if kind in ("npy", "npz", "zip"):
        return np.load(path, allow_pickle=False)
    return load_torch(path) if kind == "torch" else load_pickle(path)


def one_line(err: BaseException, limit: int = 200) -> str:
    """The first sentence of an exception's message on one line (no ANSI codes), at most ``limit`` characters."""
    text = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", str(err)).split()) or type(err).__name__
    text = re.split(r"(?<=[a-z0-9)\]])\. ", text, maxsplit=1)[0]
    return text if len(text) <= limit else text[: limit - 3] + "..."
