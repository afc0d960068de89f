"""Whether a TensorBoard event file is whole: the framing and CRC32C checksums of every TFRecord.

An event file is a sequence of records, each an 8-byte little-endian data length, the masked
CRC32C of those 8 bytes, the data, and the masked CRC32C of the data. TensorBoard's reader stops
without a word at the first record that is cut off or fails a checksum, so what follows it is
never read; :func:`find_damage` finds that record, so that a reader can say how much was read.

The CRC32C (Castagnoli) of a large record is computed in lanes with numpy (the checksum is linear,
so the lanes' checksums combine into the whole one); small records take a table loop.

Example:
    >>> import os, struct, tempfile
    >>> def record(data):
    ...     head = struct.pack("<Q", len(data))
    ...     return head + struct.pack("<I", masked_crc32c(head)) + data + struct.pack("<I", masked_crc32c(data))
    >>> path = os.path.join(tempfile.mkdtemp(), "events.out.tfevents.0")
    >>> with open(path, "wb") as fh:
    ...     _ = fh.write(record(b"first") + record(b"second")[:-1])
    >>> find_damage(path).describe()
    'damaged at byte 21 (record 2 is cut off): read 21 of 42 bytes (1 whole record)'
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np

_MASK = 0xFFFFFFFF


def _byte_table() -> List[int]:
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1  # the reflected Castagnoli polynomial
        table.append(crc)
    return table


_TABLE = _byte_table()
_NP_TABLE = np.array(_TABLE, dtype=np.uint32)
_LANES_FROM = 4096  # records at least this long are checked in lanes
_SHIFTS: Dict[int, List[List[int]]] = {}


def _zeros_operator(length: int) -> List[List[int]]:
    """Tables ``t[i][b]`` such that running ``length`` zero bytes through state ``s`` gives
    ``t[0][s & 255] ^ t[1][s >> 8 & 255] ^ t[2][s >> 16 & 255] ^ t[3][s >> 24]``."""
    if length not in _SHIFTS:
        columns = []  # the state after one zero byte, for each bit of the state: a 32x32 matrix over GF(2)
        for bit in range(32):
            s = 1 << bit
            columns.append(_TABLE[s & 0xFF] ^ (s >> 8))

        def apply(cols: List[int], s: int) -> int:
            out = 0
            for j in range(32):
                if s >> j & 1:
                    out ^= cols[j]
            return out

        result = [1 << j for j in range(32)]  # identity
        power, n = columns, length
        while n:
            if n & 1:
                result = [apply(power, c) for c in result]
            power = [apply(power, c) for c in power]
            n >>= 1
        _SHIFTS[length] = [[apply(result, v << (8 * i)) for v in range(256)] for i in range(4)]
    return _SHIFTS[length]


def crc32c(data: bytes) -> int:
    """The CRC32C (Castagnoli) checksum of ``data``, as TFRecord files use it."""
    crc, n = _MASK, len(data)
    start = 0
    if n >= _LANES_FROM:
        lane = 1 << max(6, (n.bit_length() + 1) // 2)  # about sqrt(n) bytes per lane
        lanes = n // lane
        block = np.frombuffer(data, dtype=np.uint8, count=lanes * lane).reshape(lanes, lane).T.copy()
        states = np.zeros(lanes, dtype=np.uint32)  # every lane from state 0; the start state is shifted in below
        for column in block:
            states = _NP_TABLE[(states ^ column) & 0xFF] ^ (states >> 8)
        t0, t1, t2, t3 = _zeros_operator(lane)
        for state in states.tolist():
            crc = t0[crc & 0xFF] ^ t1[crc >> 8 & 0xFF] ^ t2[crc >> 16 & 0xFF] ^ t3[crc >> 24] ^ state
        start = lanes * lane
    table = _TABLE
    for byte in data[start:]:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ _MASK


def masked_crc32c(data: bytes) -> int:
    """The masked CRC32C that TFRecord files store (the checksum rotated and offset)."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & _MASK


@dataclass(frozen=True)
class Damage:
    """The first record of ``file`` that is not whole.

    Attributes:
        file: the event file.
        offset: the byte where that record starts: every byte before it is whole records.
        size: the file's size in bytes.
        records: the number of whole records before it.
        reason: what is wrong with it.
    """

    file: str
    offset: int
    size: int
    records: int
    reason: str

    def describe(self) -> str:
        """``damaged at byte N (why): read N of M bytes (k whole records)``."""
        plural = "" if self.records == 1 else "s"
        return (
            f"damaged at byte {self.offset} ({self.reason}): read {self.offset} of {self.size} bytes "
            f"({self.records} whole record{plural})"
        )


def find_damage(path: str) -> Optional[Damage]:
    """The first record of the event file ``path`` that is cut off or fails a checksum; None if it is whole.

    Raises:
        OSError: the file cannot be read.
    """
    size = os.path.getsize(path)
    offset = records = 0
    with open(path, "rb") as fh:
        while offset < size:
            number = records + 1
            head = fh.read(12)
            if len(head) < 12:
                return Damage(path, offset, size, records, f"record {number} is cut off")
            length, length_crc = struct.unpack("<QI", head)
            if masked_crc32c(head[:8]) != length_crc:
                reason = f"record {number}'s length checksum fails"
                if records == 0:
                    reason += ": not a TensorBoard event file, or damaged at its start"
                return Damage(path, offset, size, records, reason)
            if length + 16 > size - offset:
                return Damage(path, offset, size, records, f"record {number} is cut off")
            data = fh.read(length)
            (data_crc,) = struct.unpack("<I", fh.read(4))
            if masked_crc32c(data) != data_crc:
                return Damage(path, offset, size, records, f"record {number}'s data checksum fails")
            offset += 16 + length
            records += 1
    return None
