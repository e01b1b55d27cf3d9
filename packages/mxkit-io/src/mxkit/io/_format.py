"""The RecordIO wire format of dmlc-core (what MXNet's ``.rec`` files are made of).

A record is a u32 magic ``0xCED7230A`` (little-endian), a u32 ``lrec = cflag << 29 |
length``, the payload and zero padding to a multiple of 4 bytes. A writer never lets the
magic word appear 4-byte aligned inside a payload: it cuts the payload there into parts
(cflag 1 first, 2 middle, 3 last; 0 for a record in one piece) and drops the magic, which
the reader puts back. Every aligned magic in a file is therefore a part header, and one
with cflag 0 or 1 is the head of a record: that is what lets a reader start anywhere.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import IO

import numpy as np
from mxkit.core.errors import DTypeError, FormatError
from mxkit.io._streams import SEQUENTIAL_CHUNK_BYTES

MAGIC = 0xCED7230A
MAGIC_BYTES = struct.pack("<I", MAGIC)
MAX_RECORD_BYTES = 1 << 29
_LENGTH_MASK = MAX_RECORD_BYTES - 1
_FIRST_FLAG = 1 << 29  # lrec values below this have cflag 0
_HEADER = struct.Struct("<II")
_PADDING = (b"", b"\0\0\0", b"\0\0", b"\0")

# cflag values: a whole record, or the first / a middle / the last part of a split one.
WHOLE, FIRST, MIDDLE, LAST = 0, 1, 2, 3

#: Buffer of the file objects that records are read through: small payloads come out of
#: it, larger ones are read past it straight into their own bytes (see RecordReader).
READ_BUFFER_BYTES = 64 << 10


def as_payload(buf: object) -> bytes | bytearray:
    """Check that ``buf`` is a bytes-like record payload of a legal size.

    A memoryview becomes bytes (its raw bytes, whatever its format and shape), so that
    the search for magic words sees bytes and not items.
    """
    if isinstance(buf, str):
        raise DTypeError(
            f"a record payload must be bytes, got str {buf[:20]!r}...; encode it first, e.g. text.encode()"
        )
    if not isinstance(buf, (bytes, bytearray, memoryview)):
        raise DTypeError(
            f"a record payload must be bytes-like (bytes, bytearray, memoryview), got {type(buf).__name__}"
        )
    if isinstance(buf, memoryview):
        buf = buf.tobytes()
    size = len(buf)
    if size >= MAX_RECORD_BYTES:
        raise FormatError(
            f"a record of {size} bytes is too large: RecordIO records must be under 2**29 = "
            f"{MAX_RECORD_BYTES} bytes; split the data over several records"
        )
    return buf


def aligned_magic_positions(data: bytes | bytearray) -> list[int]:
    """Offsets of every 4-byte-aligned occurrence of the magic word in ``data``."""
    positions = []
    start = data.find(MAGIC_BYTES)
    while start >= 0:
        if start % 4 == 0:
            positions.append(start)
            start = data.find(MAGIC_BYTES, start + 4)
        else:
            start = data.find(MAGIC_BYTES, start + 1)
    return positions


def encode_record(payload: bytes | bytearray | memoryview) -> list[bytes | bytearray | memoryview]:
    """The pieces to write for one record, byte for byte what dmlc-core's writer emits."""
    payload = as_payload(payload)
    length = len(payload)
    cuts = aligned_magic_positions(payload) if MAGIC_BYTES in payload else []
    pieces: list[bytes | bytearray | memoryview] = []
    part_start = 0
    for cut in cuts:
        cflag = FIRST if part_start == 0 else MIDDLE
        pieces.append(_HEADER.pack(MAGIC, cflag << 29 | (cut - part_start)))
        if cut != part_start:
            pieces.append(payload[part_start:cut])
        part_start = cut + 4
    cflag = LAST if part_start != 0 else WHOLE
    pieces.append(_HEADER.pack(MAGIC, cflag << 29 | (length - part_start)))
    if length != part_start:
        pieces.append(payload[part_start:] if part_start else payload)
    # Only the final part can end unaligned: every cut sits on a multiple of 4.
    pieces.append(_PADDING[length % 4])
    return pieces


class RecordReader:
    """Reads records from a buffered binary file handle.

    Each part is read as an 8-byte header and then its payload with one ``read`` of the
    exact length: the file object serves small payloads from its buffer and reads large
    ones straight into the new ``bytes``, so a large payload is copied once, as a plain
    ``file.read`` would. (Cutting records out of big chunks would copy every byte twice;
    ``benchmarks/io.py`` measures both against the raw read loop.) Open local files with
    ``buffering=READ_BUFFER_BYTES``.

    Parameters
    ----------
    handle : binary file object
        Open for reading, positioned at ``start``; the reader owns its position from now on.
    name : str
        How errors name the file.
    start : int
        File offset of the handle's current position.
    """

    def __init__(self, handle: IO[bytes], name: str, start: int = 0):
        self.handle = handle
        self.name = name
        self._position = start

    def tell(self) -> int:
        """File offset of the next record (or part) to read."""
        return self._position

    def seek(self, offset: int) -> None:
        """Move to ``offset`` (a buffered file object makes short moves cheap)."""
        if offset != self._position:
            self.handle.seek(offset)
            self._position = offset

    def _read_exact(self, size: int) -> bytes:
        data = self.handle.read(size)
        if len(data) == size or not data:
            return data
        # Short reads happen on some fsspec files and pipes, not at EOF only.
        pieces = [data]
        got = len(data)
        while got < size:
            more = self.handle.read(size - got)
            if not more:
                break
            pieces.append(more)
            got += len(more)
        return b"".join(pieces)

    def _check_framing(self, header_offset: int, length: int) -> None:
        """The bytes after a record must be the next header's magic, or the end of the
        file: a length field shorter than the truth would otherwise pass unnoticed. Which
        of the two is damaged (this record's length or the next header) cannot be told
        apart, so the error names both and this record is not returned."""
        peek = getattr(self.handle, "peek", None)
        following = peek(8)[:8] if peek is not None else b""
        if len(following) < 8:  # no peek, or a buffer boundary: read and step back
            following = self._read_exact(8)
            if following:
                self.handle.seek(self._position)
        if not following or (len(following) == 8 and following[:4] == MAGIC_BYTES):
            return
        after = (f"after the record at byte offset {header_offset}, which declares {length} payload bytes: if "
                 f"that length is wrong, that record is damaged too")
        head = following[:4]
        if (len(head) == 4 and head != MAGIC_BYTES) or not MAGIC_BYTES.startswith(head):
            found = int.from_bytes(following[:4].ljust(4, b"\0"), "little")
            raise self._corrupt(
                self._position, f"bad magic 0x{found:08X} where a record header 0x{MAGIC:08X} should be ({after})")
        raise self._corrupt(
            self._position, f"truncated record header ({len(following)} of 8 bytes before the end) ({after})")

    def _corrupt(self, offset: int, what: str) -> FormatError:
        error = FormatError(
            f"corrupt RecordIO file {self.name!r} at byte offset {offset}: {what}; "
            f"`mxkit rec verify` lists every damaged record"
        )
        error.offset = offset  # type: ignore[attr-defined]
        error.reason = what  # type: ignore[attr-defined]
        # The handle's position is unknown after a failed read: re-seek on the next call.
        self.handle.seek(offset)
        self._position = offset
        return error

    def read(self) -> bytes | None:
        """The next record's payload, or None at the end of the file."""
        # The common case, a whole record read in full, in as few steps as possible.
        read = self.handle.read
        header = read(8)
        if len(header) == 8:
            magic, lrec = _HEADER.unpack(header)
            if magic == MAGIC and lrec < _FIRST_FLAG:  # cflag 0
                payload = read(lrec)
                padding = -lrec & 3
                if len(payload) == lrec and (not padding or len(read(padding)) == padding):
                    start = self._position
                    self._position += 8 + lrec + padding
                    self._check_framing(start, lrec)
                    return payload
        # Anything else (end of file, split record, damage, short read): start over carefully.
        self.handle.seek(self._position)
        return self._read_carefully()

    def _read_carefully(self) -> bytes | None:
        parts: list[bytes] | None = None
        record_start = self._position
        read = self.handle.read
        while True:
            header_offset = self._position
            header = read(8)
            if len(header) < 8:
                if len(header) > 0:
                    header += self._read_exact(8 - len(header))
                if not header:
                    if parts is None:
                        return None
                    raise self._corrupt(record_start, "the file ends inside a split record")
                if len(header) < 8:
                    raise self._corrupt(
                        header_offset, f"truncated record header ({len(header)} of 8 bytes before the end)"
                    )
            magic, lrec = _HEADER.unpack(header)
            if magic != MAGIC:
                raise self._corrupt(
                    header_offset, f"bad magic 0x{magic:08X} where a record header 0x{MAGIC:08X} should be"
                )
            cflag = lrec >> 29
            length = lrec & _LENGTH_MASK
            payload = read(length) if length else b""
            if len(payload) < length:
                payload += self._read_exact(length - len(payload))
            padding = -length & 3
            tail = read(padding) if padding else b""
            if len(payload) < length or len(tail) < padding:
                raise self._corrupt(
                    header_offset,
                    f"truncated record: the header declares {length} payload bytes ({length + padding} with "
                    f"padding) but only {len(payload) + len(tail)} remain in the file",
                )
            self._position = header_offset + 8 + length + padding
            if cflag == WHOLE:
                if parts is not None:
                    raise self._corrupt(header_offset, f"a whole record inside the split record at {record_start}")
                self._check_framing(header_offset, length)
                return payload
            if cflag == FIRST:
                if parts is not None:
                    raise self._corrupt(
                        header_offset, f"a new record starts inside the split record at {record_start}"
                    )
                parts = [payload]
            elif parts is None:
                raise self._corrupt(
                    header_offset,
                    f"a continuation part (cflag {cflag}) where a record should start (cflag 0 or 1)",
                )
            else:
                parts.append(payload)
                if cflag == LAST:
                    self._check_framing(header_offset, length)
                    return MAGIC_BYTES.join(parts)


def iter_record_heads(
    handle: IO[bytes], start: int = 0, stop: int | None = None
) -> Iterator[int]:
    """File offsets of record heads (aligned magic with cflag 0 or 1) in ``[start, stop)``.

    Scans raw bytes with numpy, without parsing records, so it also finds the heads after
    a damaged region: it is how a reader resynchronises, shards and rebuilds an index.
    """
    offset = (start + 3) & ~3
    handle.seek(offset)
    carry = b""
    while stop is None or offset < stop:
        chunk = handle.read(SEQUENTIAL_CHUNK_BYTES)
        data = carry + chunk
        if len(data) < 8:
            return
        usable = len(data) & ~3
        words = np.frombuffer(data, dtype="<u4", count=usable // 4)
        # A head needs the word after it; the last word waits for the next chunk.
        hits = np.flatnonzero((words[:-1] == MAGIC) & ((words[1:] >> 29) <= FIRST))
        for word_index in hits.tolist():
            head = offset + 4 * word_index
            if stop is not None and head >= stop:
                return
            yield head
        if not chunk:
            return
        consumed = usable - 4
        carry = data[consumed:]
        offset += consumed


def next_record_head(handle: IO[bytes], offset: int, stop: int | None = None) -> int | None:
    """The first record head at or after ``offset`` (before ``stop``), or None."""
    for head in iter_record_heads(handle, offset, stop):
        return head
    return None
