"""Pickles, torch.save and NumPy files from elsewhere cost memory in proportion to their size, and every array holds
their bytes (lightning_prd/features/safe_pickle.py, lightning_prd/features/_pickle_calls.py).

The hostile files are written opcode by opcode (pickletools' names in the comments); reading each is measured
with tracemalloc, which counts every Python and NumPy allocation.
"""

from __future__ import annotations

import io
import pickle
import struct
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from lightning_prd.features.reference_files import read_reference
from lightning_prd.features.safe_pickle import DataUnpickler, RefusedCall, load_pickle

MIB = 1 << 20


def _int(n: int) -> bytes:
    return b"J" + struct.pack("<i", n)  # BININT


def _text(s: str) -> bytes:
    data = s.encode()
    return b"X" + struct.pack("<I", len(data)) + data  # BINUNICODE


def _encode_many(text_size: int, copies: int) -> bytes:
    """A list of ``copies`` calls ``_codecs.encode(t, "latin1")`` on one memoised text ``t`` of ``text_size``."""
    first = b"c_codecs\nencode\nq\x00" + _text("x" * text_size) + b"q\x01" + _text("latin1") + b"q\x02\x86R"
    again = b"h\x00h\x01h\x02\x86R"  # BINGET the function, the text and the codec; TUPLE2; REDUCE
    return b"\x80\x02](" + first + again * (copies - 1) + b"e."  # EMPTY_LIST MARK ... APPENDS STOP


def _frozenset_many(items: int, copies: int) -> bytes:
    """A list of ``copies`` calls ``frozenset(l)`` on one memoised list ``l`` of ``items`` small ints."""
    values = b"](" + b"".join(_int(i) for i in range(items)) + b"eq\x01"  # a list of distinct ints, memoised
    first = b"c__builtin__\nfrozenset\nq\x00" + values + b"\x85R"
    return b"\x80\x02](" + first + b"h\x00h\x01\x85R" * (copies - 1) + b"e."


def _torch_bytearray(path: Path, size: int) -> None:
    class Allocates:
        def __reduce__(self):
            return (bytearray, (size,))

    torch.save({"mu": Allocates()}, path)


def _npy_header(shape: tuple) -> bytes:
    """A version 1.0 ``.npy`` header of float64 ``shape`` (NumPy's format: magic, length, padded dict)."""
    text = f"{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}"
    text += " " * (63 - 10 - len(text)) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode()


def _npz(path: Path, size: int) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("mu.npy", _npy_header((size // 8,)) + bytes(16))
        archive.writestr("sigma.npy", _npy_header((2, 2)) + bytes(32))


SIZE = 128 * MIB
#: name -> (the file's bytes or a writer, what its refusal names)
ALLOCATING = {
    "bytearray(n)": (b"\x80\x02c__builtin__\nbytearray\n" + _int(SIZE) + b"\x85R.", "__builtin__.bytearray"),
    "bytearray(n), protocol 4": (
        b"\x80\x04\x8c\x08builtins\x8c\tbytearray\x93" + _int(SIZE) + b"\x85R.",  # STACK_GLOBAL
        "builtins.bytearray",
    ),
    "bytes8 of a declared length": (
        b"\x80\x05\x8e" + struct.pack("<Q", SIZE) + b"abc.",
        "BINBYTES8 at byte 2 declares 134,217,728 bytes",
    ),
    "frame of a declared length": (
        b"\x80\x04\x95" + struct.pack("<Q", SIZE) + b"N.",
        "FRAME at byte 2 declares 134,217,728 bytes",
    ),
    "encode of one text 100 times": (_encode_many(MIB, 100), "_codecs.encode"),
    "frozenset of one list 100 times": (_frozenset_many(20_000, 100), "__builtin__.frozenset"),
    "bytearray(n) in a torch.save file": (_torch_bytearray, "__builtin__.bytearray"),
    ".npy declaring a shape": (_npy_header((SIZE // 8, 1)) + bytes(16), "declares an array of 134,217,728 bytes"),
    ".npz member declaring a shape": (_npz, "entry 'mu.npy' declares an array of 134,217,728 bytes"),
}


@pytest.mark.parametrize("case", list(ALLOCATING))
def test_reading_costs_memory_in_proportion_to_the_file(tmp_path, case):
    content, refused = ALLOCATING[case]
    path = tmp_path / "stats.pkl"
    if callable(content):
        content(path, SIZE)
    else:
        path.write_bytes(content)
    size = path.stat().st_size
    tracemalloc.start()
    try:
        with pytest.raises(ValueError) as info:
            read_reference(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # measured: 0.013 MiB to refuse bytearray(700_000_000) in 33 bytes, which allocated 667.6 MiB when it was allowed
    assert peak < 1 * MIB + 32 * size, f"{peak / MIB:.1f} MiB to read a file of {size:,} bytes"
    text = str(info.value)
    assert "\n" not in text and str(path) in text and refused in text, text
    assert "weights_only=False" not in text


#: pickles that ask for an array without giving its values
UNFILLED = {
    # GLOBAL numpy.ndarray, the shape (1048576, 8), TUPLE1, REDUCE: the 49 bytes of uninitialised features
    "ndarray(shape)": b"\x80\x02cnumpy\nndarray\n" + _int(1 << 20) + b"K\x08\x86\x85R.",
    "ndarray.__new__(shape)": b"\x80\x02cnumpy\nndarray\n" + _int(1 << 20) + b"K\x08\x86\x85\x81.",  # NEWOBJ
    "_reconstruct(ndarray, shape) without its bytes": (
        b"\x80\x02cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\n" + _int(1 << 20) + b"K\x08\x86C\x01b\x87R."
    ),
}


@pytest.mark.parametrize("case", list(UNFILLED))
@pytest.mark.parametrize("container", ["pickle", "torch"])
def test_every_array_holds_the_files_bytes(tmp_path, case, container):
    path = tmp_path / "features.pkl"
    if container == "pickle":
        path.write_bytes(UNFILLED[case])
    else:
        if case == "ndarray.__new__(shape)":
            pytest.skip("torch.save writes a class call as REDUCE; NEWOBJ is covered by the pickle case")
        reconstruct = np.zeros(1).__reduce__()[0]

        class Unfilled:  # the same call, written by torch.save
            def __reduce__(self):
                if case.startswith("_reconstruct"):
                    return (reconstruct, (np.ndarray, (1 << 20, 8), b"b"))
                return (np.ndarray, ((1 << 20, 8),))

        torch.save({"features": Unfilled()}, path)
    with pytest.raises(ValueError) as info:
        read_reference(path)
    text = str(info.value)
    assert "\n" not in text and str(path) in text and "refused" in text, text
    assert ("_reconstruct" if case.startswith("_reconstruct") else "numpy.ndarray") in text, text


def _numpy1(data: bytes) -> bytes:
    """The pickle NumPy 1 writes: its helpers under ``numpy.core`` (GLOBAL lines, protocols 0 to 3)."""
    return data.replace(b"numpy._core", b"numpy.core")


LEGITIMATE = {
    "mu": np.arange(5, dtype=np.float64),
    "sigma": np.random.default_rng(0).normal(size=(64, 64)),
    "features": np.random.default_rng(1).normal(size=(300, 16)).astype(np.float32),
    "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
    "big_endian": np.arange(4, dtype=">f8"),
    "empty": np.zeros((0, 4)),
    "labels": np.arange(7, dtype=np.uint8),
    "names": np.array(["a", "bc"]),
    "record": np.zeros(2, dtype=[("a", "f4"), ("b", "i8")]),
    "num_items": np.int64(300),
    "scale": np.float32(0.5),
    "complex": np.complex128(1 + 2j),
    "raw": bytearray(b"xyz"),
    "tags": {"fid", "kid"},
    "frozen": frozenset([1]),
    "z": 1 + 2j,
}


@pytest.mark.parametrize("numpy_major", [1, 2])
@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_plain_data_of_every_protocol_and_numpy_loads_unchanged(tmp_path, protocol, numpy_major):
    data = pickle.dumps(LEGITIMATE, protocol=protocol)
    if numpy_major == 1:
        if protocol > 3:
            pytest.skip("counted names (protocol 4+) are not rewritten here; NumPy 1's own are covered by 0-3")
        data = _numpy1(data)
        assert b"numpy.core" in data
    path = tmp_path / "data.pkl"
    path.write_bytes(data)
    got, unguarded = load_pickle(path), pickle.loads(data)
    assert got.keys() == LEGITIMATE.keys()
    for key, want in LEGITIMATE.items():
        assert type(got[key]) is type(want), key
        if isinstance(want, np.ndarray):  # protocols 0-2 drop a big-endian byte order, as pickle.loads does
            assert got[key].dtype == unguarded[key].dtype and np.array_equal(got[key], want), key
        else:
            assert got[key] == want, key


def test_a_value_named_twice_is_shared_not_copied():
    # one array named twice through the memo is one object: nothing is charged against the file's size
    features = np.zeros((1000, 100))
    data = pickle.dumps([features] * 50, protocol=2)
    got = DataUnpickler(io.BytesIO(data)).load()
    assert len(got) == 50 and all(g is got[0] for g in got) and got[0].shape == (1000, 100)


@pytest.mark.parametrize(
    "args, refused",
    [((3,), "(3)"), (("abc", "utf-8"), "utf-8"), (([1, 2],), "[1, 2]")],
    ids=["size", "other codec", "list"],
)
def test_bytearray_copies_bytes_or_latin1_text_only(args, refused):
    class Call:
        def __reduce__(self):
            return (bytearray, args)

    with pytest.raises(RefusedCall) as info:
        DataUnpickler(io.BytesIO(pickle.dumps(Call(), protocol=2))).load()
    assert info.value.qualname == "__builtin__.bytearray" and refused in str(info.value)
    for ok in (bytearray(b"\x00\xff"), bytearray()):
        for protocol in (2, 3, 5):
            assert DataUnpickler(io.BytesIO(pickle.dumps(ok, protocol=protocol))).load() == ok
