"""Splitting a record file into ``num_parts`` pieces of whole records.

The rule is dmlc-core's InputSplit (what MXNet's ``ImageRecordIter(num_parts=,
part_index=)`` uses): the file is cut into equal byte ranges (rounded up to 4 bytes), and
each cut is moved forward to the next record head, so the parts are disjoint, complete,
and together hold every record once.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator

from mxkit.core.errors import ConfigError, FormatError
from mxkit.io._format import MAGIC, READ_BUFFER_BYTES, RecordReader, next_record_head
from mxkit.io._streams import file_size, open_binary

__all__ = ["iter_part_records", "part_byte_range", "part_record_offsets"]

_HEADER = struct.Struct("<II")


def _check_part(num_parts: int, part_index: int) -> None:
    if num_parts < 1:
        raise ConfigError(f"num_parts must be at least 1, got {num_parts}")
    if not 0 <= part_index < num_parts:
        raise ConfigError(f"part_index must be in 0..{num_parts - 1} for num_parts={num_parts}, got {part_index}")


def part_byte_range(uri: str | os.PathLike[str], num_parts: int = 1, part_index: int = 0) -> tuple[int, int]:
    """``(begin, end)`` byte offsets of part ``part_index``: both record heads or the file end."""
    _check_part(num_parts, part_index)
    size = file_size(uri)
    step = -(-size // num_parts)
    step = (step + 3) & ~3
    nominal_begin = min(step * part_index, size)
    nominal_end = min(step * (part_index + 1), size)
    with open_binary(uri, "rb") as handle:
        begin = nominal_begin if nominal_begin in (0, size) else next_record_head(handle, nominal_begin)
        end = nominal_end if nominal_end == size else next_record_head(handle, nominal_end)
    return (size if begin is None else begin), (size if end is None else end)


def part_record_offsets(uri: str | os.PathLike[str], num_parts: int = 1, part_index: int = 0) -> list[int]:
    """Byte offsets of the records of one part, found by hopping from header to header."""
    text = os.fspath(uri)
    begin, end = part_byte_range(text, num_parts, part_index)
    offsets = []
    with open_binary(text, "rb") as handle:
        position = begin
        handle.seek(position)
        while position < end:
            header = handle.read(8)
            if len(header) < 8:
                raise FormatError(
                    f"corrupt RecordIO file {text!r} at byte offset {position}: truncated record header "
                    f"({len(header)} of 8 bytes before the end)"
                )
            magic, lrec = _HEADER.unpack(header)
            if magic != MAGIC:
                raise FormatError(
                    f"corrupt RecordIO file {text!r} at byte offset {position}: bad magic 0x{magic:08X} "
                    f"where a record header should be; `mxkit rec verify` lists every damaged record"
                )
            length = lrec & ((1 << 29) - 1)
            if lrec >> 29 <= 1:
                offsets.append(position)
            position += 8 + length + (-length & 3)
            handle.seek(position)
        if position > end:
            raise FormatError(
                f"corrupt RecordIO file {text!r}: the record before byte offset {end} runs past it "
                f"to {position} (truncated file?)"
            )
    return offsets


def iter_part_records(
    uri: str | os.PathLike[str], num_parts: int = 1, part_index: int = 0
) -> Iterator[tuple[int, bytes]]:
    """``(offset, payload)`` of every record of one part, read sequentially in big chunks."""
    text = os.fspath(uri)
    begin, end = part_byte_range(text, num_parts, part_index)
    with open_binary(text, "rb", buffering=READ_BUFFER_BYTES) as handle:
        handle.seek(begin)
        reader = RecordReader(handle, text, start=begin)
        while True:
            offset = reader.tell()
            if offset >= end:
                return
            payload = reader.read()
            if payload is None:
                return
            yield offset, payload
