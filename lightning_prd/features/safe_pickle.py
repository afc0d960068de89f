"""Files from elsewhere opened as data and never run: what kind of file, a restricted unpickler, safe ``torch.load``.

:func:`sniff` tells the kind of a file by its first bytes, never its name (:data:`CONTAINERS`), and
:func:`load_data` opens it: NumPy files with ``allow_pickle=False`` once their headers' shapes fit
in the file (:func:`check_npy_sizes`), pickles and ``torch.save`` files as below.

Unpickling runs whatever Python callable the file names, so a pickle from elsewhere is never
handed to :func:`pickle.load` or to ``torch.load(weights_only=False)``. The reference files other
tools write are pickles of plain data (dicts, lists, numbers, strings, NumPy arrays), and this
module loads exactly that:

* :class:`DataUnpickler` resolves only the globals plain data needs (:data:`ALLOWED_GLOBALS`):
  NumPy arrays, dtypes and scalars, under their NumPy 1 (``numpy.core``) and NumPy 2
  (``numpy._core``) paths (``multiarray._reconstruct``, ``multiarray.scalar``,
  ``numeric._frombuffer``); ``_codecs.encode`` for latin-1 text only (how protocol-2 pickles
  store ``bytes``); ``collections.OrderedDict``; the builtin containers ``set``, ``frozenset``,
  ``bytearray``, ``complex`` (and ``bytes()``, the empty bytes); NVlabs' ``dnnlib.EasyDict`` (as a
  plain dict) and NVlabs' ``metrics.metric_utils.FeatureStats`` (StyleGAN2-ADA, StyleGAN3) as
  :class:`FeatureStatsState`, a stand-in that records the pickled fields and nothing else.
  Any other global raises :class:`RefusedGlobal` before it is looked up, so nothing is imported
  or called; persistent ids are refused too.
* Each allowed global is a stand-in that takes only the arguments NumPy's and Python's own pickles
  pass (:mod:`lightning_prd.features._pickle_calls`): ``bytearray`` copies bytes, never allocates a
  size; ``numpy.ndarray`` is never called, so every array holds the file's bytes; no call copies
  a value the pickle holds twice. Anything else raises :class:`RefusedCall` naming the global.
  :func:`load_pickle` also checks the lengths the pickle declares against the bytes it holds
  before CPython's unpickler allocates them (:func:`check_lengths`). Reading a file thus costs
  memory in proportion to its size.
* :func:`load_torch` is ``torch.load(weights_only=True)`` with the same NumPy stand-ins allowed, so
  a ``torch.save`` of NumPy arrays (torch-fidelity's statistics cache) loads and nothing else does;
  ``builtins.bytearray``, which torch's loader would call with any size, is refused.

Example:
    >>> import io, pickle
    >>> import numpy as np
    >>> DataUnpickler(io.BytesIO(pickle.dumps({"mu": np.zeros(2)}))).load()
    {'mu': array([0., 0.])}
    >>> class Hostile:
    ...     def __reduce__(self):
    ...         return (print, ("this never runs",))
    >>> class Allocates:
    ...     def __reduce__(self):
    ...         return (bytearray, (10**9,))
    >>> for payload in (Hostile(), Allocates()):
    ...     try:
    ...         DataUnpickler(io.BytesIO(pickle.dumps(payload))).load()
    ...     except RefusedGlobal as err:
    ...         print(type(err).__name__, err.qualname)
    RefusedGlobal builtins.print
    RefusedCall builtins.bytearray
"""

from __future__ import annotations

import io
import math
import pickle
import pickletools
import re
import struct
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

from lightning_prd.features._pickle_calls import Copies, RefusedCall, RefusedGlobal, checked_globals


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


#: every global a pickle of plain data may name; each resolves to a stand-in that checks its arguments
#: (:func:`~lightning_prd.features._pickle_calls.checked_globals`)
ALLOWED_GLOBALS = tuple(sorted(checked_globals(Copies(), FeatureStatsState)))


class DataUnpickler(pickle.Unpickler):
    """A :class:`pickle.Unpickler` that resolves only :data:`ALLOWED_GLOBALS` and no persistent ids.

    Anything else raises :class:`RefusedGlobal` (a :class:`pickle.UnpicklingError`) naming the
    global; the global is neither imported nor called. An allowed global called with arguments plain
    data never passes, or copying a value the pickle has copied before, raises :class:`RefusedCall`.
    """

    def __init__(self, file: Any) -> None:
        super().__init__(file)
        self._globals = checked_globals(Copies(), FeatureStatsState)

    def find_class(self, module: str, name: str) -> Any:
        qualname = f"{module}.{name}"
        if qualname not in self._globals:
            raise RefusedGlobal(qualname)
        return self._globals[qualname]

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("the pickle refers to objects stored outside it (a persistent id)")


_OPCODES = {ord(op.code): op for op in pickletools.opcodes}
#: how an opcode whose argument is counted stores the count: struct format and size
_COUNTS = {
    pickletools.TAKEN_FROM_ARGUMENT1: ("<B", 1),
    pickletools.TAKEN_FROM_ARGUMENT4: ("<i", 4),
    pickletools.TAKEN_FROM_ARGUMENT4U: ("<I", 4),
    pickletools.TAKEN_FROM_ARGUMENT8U: ("<Q", 8),
}


def check_lengths(data: bytes) -> None:
    """Refuse a pickle whose opcodes declare more bytes than it holds, before an unpickler allocates them.

    CPython's unpickler allocates a counted string, bytes or frame at its declared length before it
    reads it. Here each opcode's argument is stepped over (nothing is copied) and every count and frame
    length is checked against the bytes left, up to ``STOP``.

    Example:
        >>> import struct
        >>> check_lengths(pickle.dumps([b"abc", "text"], protocol=5))
        >>> check_lengths(b"\\x80\\x05\\x8e" + struct.pack("<Q", 10**9) + b"abc.")
        Traceback (most recent call last):
        ...
        _pickle.UnpicklingError: a BINBYTES8 at byte 2 declares 1,000,000,000 bytes, but 4 remain
    """
    pos, end = 0, len(data)
    while pos < end:
        op = _OPCODES.get(data[pos])
        if op is None or op.name == "STOP":
            return  # the unpickler stops there, or reports the unknown opcode itself
        start, pos = pos, pos + 1
        arg = op.arg
        if arg is None:
            continue
        if arg.n >= 0:
            pos += arg.n
            if op.name == "FRAME" and pos <= end:
                (declared,) = struct.unpack_from("<Q", data, pos - 8)
            else:
                continue
        elif arg.n == pickletools.UP_TO_NEWLINE:
            for _ in range(2 if arg.name.endswith("_pair") else 1):
                newline = data.find(b"\n", pos)
                pos = end + 1 if newline < 0 else newline + 1
            continue
        else:
            fmt, size = _COUNTS[arg.n]
            if pos + size > end:
                break
            (declared,) = struct.unpack_from(fmt, data, pos)
            pos += size
            if 0 <= declared <= end - pos:
                pos += declared
                continue
        if declared < 0 or declared > end - pos:
            raise pickle.UnpicklingError(
                f"a {op.name} at byte {start} declares {declared:,} bytes, but {max(end - pos, 0):,} remain"
            )
    raise pickle.UnpicklingError("pickle data was truncated (it ends before its STOP)")


def load_pickle(path: Path) -> Any:
    """The plain data pickled in ``path`` (:class:`DataUnpickler`; raises what it raises).

    The file is read whole (its size in memory) and :func:`check_lengths` checked before it is unpickled.
    """
    data = path.read_bytes()
    check_lengths(data)
    return DataUnpickler(io.BytesIO(data)).load()


#: the dtype kinds whose instances torch's weights-only unpickler must be told it may build
_DTYPE_CODES = "?bBhHiIlLqQefdgFDGUS"


def _torch_numpy_globals(copies: Copies) -> List[Any]:
    numpy = {k: v for k, v in checked_globals(copies, FeatureStatsState).items() if k.startswith("numpy.")}
    dtype_types = list({type(np.dtype(code)) for code in _DTYPE_CODES})
    # torch builds (``__setstate__``) only instances of allowed types: the arrays ``_reconstruct`` returns. A
    # name with a newline is never read from a pickle's GLOBAL, so ``numpy.ndarray`` itself stays uncallable.
    built = [(np.ndarray, "\nnumpy.ndarray as built by _reconstruct")]
    return [(obj, qualname) for qualname, obj in numpy.items()] + dtype_types + built


def _torch_pickles(path: Path) -> List[bytes]:
    """The pickles of a ``torch.save`` file: ``data.pkl`` of a zip, the leading four of a legacy file."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            return [archive.read(n) for n in archive.namelist() if n.rpartition("/")[2] == "data.pkl"]
    data, out, start = path.read_bytes(), [], 0
    for _ in range(4):  # magic number, protocol, system info, the object
        end = start
        for _opcode, _arg, pos in pickletools.genops(data[start:]):
            end = start + int(pos or 0) + 1
        out.append(data[start:end])
        start = end
    return out


def refuse_torch_bytearray(path: Path) -> None:
    """Refuse a ``torch.save`` file that names ``builtins.bytearray``, which torch's loader calls with any size.

    torch's weights-only loader allows ``bytearray(n)``; tensors, arrays and statistics never need it.
    Damaged files are left to ``torch.load`` to report.
    """
    try:
        pickles = _torch_pickles(path)
    except (ValueError, EOFError, OSError, zipfile.BadZipFile, NotImplementedError):
        return
    for data in pickles:
        try:
            for opcode, arg, _pos in pickletools.genops(data):
                name = str(arg).replace(" ", ".")
                if opcode.name == "GLOBAL" and name in ("builtins.bytearray", "__builtin__.bytearray"):
                    raise RefusedCall(
                        name,
                        "in a torch.save file (torch's loader would allocate any size it names)",
                    )
        except (ValueError, EOFError):
            return


def torch_load_safe(path: Path) -> Any:
    """``torch.load(path, map_location="cpu", weights_only=True)`` of a state dict, ``builtins.bytearray`` refused.

    A refused global raises :class:`RefusedGlobal` (or :class:`RefusedCall`) naming it, in place of torch's
    paragraph; other errors are torch's.
    """
    refuse_torch_bytearray(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        refused = refused_in_torch_error(err)
        if refused:
            raise RefusedGlobal(refused) from None
        raise


def torch_load_problem(err: BaseException) -> str:
    """What a failed weights-only ``torch.load`` says, on one line, without torch's advice to unpickle unsafely.

    Example:
        >>> torch_load_problem(RefusedGlobal("os.system"))
        'it asks to load the Python global `os.system`, which is refused'
    """
    if isinstance(err, RefusedCall):
        return f"it makes a call that is refused ({err})"
    refused = refused_global(err)
    if refused:
        return f"it asks to load the Python global `{refused}`, which is refused"
    inner = re.search(r"WeightsUnpickler error: ([^\n]+)", str(err))
    return one_line(RuntimeError(inner.group(1))) if inner else one_line(err)


def load_torch(path: Path) -> Any:
    """``torch.load(path, map_location="cpu", weights_only=True)`` that also takes NumPy arrays and scalars.

    torch's weights-only unpickler refuses every other global with a :class:`pickle.UnpicklingError`
    whose message names it (:func:`refused_in_torch_error` reads it back). NumPy's helpers are the
    checking stand-ins of :class:`DataUnpickler`, and ``builtins.bytearray`` is refused
    (:func:`refuse_torch_bytearray`); a refused call is raised as :class:`RefusedCall`.
    """
    refuse_torch_bytearray(path)
    copies = Copies()
    try:
        with torch.serialization.safe_globals(_torch_numpy_globals(copies)):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        if copies.refused is not None:
            raise copies.refused from None
        raise


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


#: the most ``deflate`` can expand its input (a zip member's true size is at most this times its stored size)
DEFLATE_RATIO = 1032


def _npy_nbytes(handle: Any) -> Optional[Tuple[int, int]]:
    """(bytes the array declares, bytes its header took) of the ``.npy`` at ``handle``; None when not told."""
    version = np.lib.format.read_magic(handle)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(handle)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(handle)
    else:
        return None
    return math.prod(shape) * dtype.itemsize, handle.tell()


def check_npy_sizes(path: Path, kind: str) -> None:
    """Refuse a ``.npy``, or a ``.npz`` member, whose header declares more bytes than the file holds.

    NumPy allocates an array at the shape its header declares before it reads the data; a zip member
    holds at most its stored size (uncompressed) or :data:`DEFLATE_RATIO` times it (deflated). Damage
    is left to :func:`numpy.load` to report.
    """
    try:
        if kind == "npy":
            with path.open("rb") as handle:
                found = _npy_nbytes(handle)
            members = [("", found, path.stat().st_size)] if found else []
        else:
            members = []
            with zipfile.ZipFile(path) as archive:
                for info in archive.infolist():
                    stored = (
                        info.compress_size
                        if info.compress_type == zipfile.ZIP_STORED
                        else info.compress_size * DEFLATE_RATIO
                    )
                    with archive.open(info) as member:
                        found = _npy_nbytes(member)
                    if found:
                        members.append((info.filename, found, min(info.file_size, stored)))
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, NotImplementedError):
        return
    for name, (declared, header), size in members:
        if declared > size - header:
            entry = f"its entry {name!r}" if name else "it"
            raise ValueError(
                f"the file is truncated or corrupt: {entry} declares an array of {declared:,} bytes, "
                f"but holds {max(size - header, 0):,}"
            )


def load_data(path: Path, kind: str) -> Any:
    """The contents of ``path`` of kind ``kind`` (from :func:`sniff`), as data.

    A ``.npy`` gives its array, a ``.npz`` (or ``"zip"``) an open :class:`numpy.lib.npyio.NpzFile`
    (the caller closes it; entries load on access), both with ``allow_pickle=False`` after
    :func:`check_npy_sizes`; a ``torch.save`` file what :func:`load_torch` gives; a pickle what
    :func:`load_pickle` gives.
    """
    if kind in ("npy", "npz", "zip"):
        check_npy_sizes(path, kind)
        return np.load(path, allow_pickle=False)
    return load_torch(path) if kind == "torch" else load_pickle(path)


def one_line(err: BaseException, limit: int = 200) -> str:
    """The first sentence of an exception's message on one line (no ANSI codes), at most ``limit`` characters."""
    text = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", str(err)).split()) or type(err).__name__
    text = re.split(r"(?<=[a-z0-9)\]])\. ", text, maxsplit=1)[0]
    return text if len(text) <= limit else text[: limit - 3] + "..."
