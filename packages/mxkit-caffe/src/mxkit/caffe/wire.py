"""A bounds-checked walk over protobuf's wire format, to say where a binary file is broken.

protobuf's own parser answers a damaged caffemodel with "Error parsing message" and no
position. Walking the outer message field by field (tag, wire type, length) before parsing
finds the first field that runs past the end of the file or has an impossible tag, and so
gives the byte offset and the layer the damage is in.
"""

from __future__ import annotations

from dataclasses import dataclass

from mxkit.core.errors import FormatError

# wire types of protobuf's encoding
VARINT, FIXED64, LENGTH_DELIMITED, START_GROUP, END_GROUP, FIXED32 = 0, 1, 2, 3, 4, 5
_MAX_VARINT_BYTES = 10
_MAX_FIELD_NUMBER = (1 << 29) - 1


class WireError(FormatError):
    """Bytes that are not a well-formed protobuf message; ``offset`` is where the walk stopped."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(f"byte offset {offset}: {reason}")
        self.offset = offset
        self.reason = reason


@dataclass(frozen=True)
class WireField:
    """One field of a message: its number, wire type, and where it and its payload are."""

    number: int
    wire_type: int
    start: int  # offset of the tag
    payload_start: int  # offset of the payload (of a length-delimited field: after the length)
    end: int  # offset just past the field


def read_varint(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``pos`` and the offset after it; :class:`WireError` past ``end`` or over 10 bytes."""
    value = 0
    for index in range(_MAX_VARINT_BYTES):
        if pos + index >= end:
            raise WireError(pos, f"a varint is cut off by the end of the data at byte offset {end}")
        byte = buf[pos + index]
        value |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            return value, pos + index + 1
    raise WireError(pos, "a varint is longer than 10 bytes")


def scan_fields(buf: bytes | memoryview, start: int = 0, end: int | None = None) -> list[WireField]:
    """The fields of the message in ``buf[start:end]``, each checked to lie inside it.

    Raises
    ------
    WireError
        At the first tag, length or payload that is impossible or runs past ``end``.
    """
    end = len(buf) if end is None else end
    fields = []
    pos = start
    while pos < end:
        tag, after_tag = read_varint(buf, pos, end)
        number, wire_type = tag >> 3, tag & 7
        if not 1 <= number <= _MAX_FIELD_NUMBER:
            raise WireError(pos, f"field number {number} is not valid (1 to {_MAX_FIELD_NUMBER})")
        if wire_type == VARINT:
            _, field_end = read_varint(buf, after_tag, end)
            payload = after_tag
        elif wire_type in (FIXED64, FIXED32):
            size = 8 if wire_type == FIXED64 else 4
            payload, field_end = after_tag, after_tag + size
            if field_end > end:
                raise WireError(pos, f"field {number} needs {size} bytes but only {end - after_tag} remain")
        elif wire_type == LENGTH_DELIMITED:
            length, payload = read_varint(buf, after_tag, end)
            field_end = payload + length
            if field_end > end:
                raise WireError(pos, f"field {number} declares {length} bytes but only {end - payload} remain "
                                     f"(the data ends at byte offset {end})")
        else:  # groups are not used by Caffe's schema, and 6 and 7 are not wire types at all
            raise WireError(pos, f"field {number} has wire type {wire_type}, which Caffe's schema never uses")
        fields.append(WireField(number, wire_type, pos, payload, field_end))
        pos = field_end
    return fields


def leading_string(buf: bytes | memoryview, start: int, end: int, number: int) -> str | None:
    """The string field ``number`` among the intact leading fields of ``buf[start:end]``, if any.

    Used to name the layer whose bytes are cut off: its name (field 1) is usually written first.
    """
    pos = start
    try:
        while pos < end:
            tag, after_tag = read_varint(buf, pos, end)
            if tag & 7 != LENGTH_DELIMITED:
                return None
            length, payload = read_varint(buf, after_tag, end)
            if payload + length > end:
                return None
            if tag >> 3 == number:
                return bytes(buf[payload:payload + length]).decode("utf-8", errors="replace")
            pos = payload + length
    except WireError:
        return None
    return None
