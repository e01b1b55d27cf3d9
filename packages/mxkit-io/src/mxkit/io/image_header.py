"""Image dimensions read from the header, before any pixel is decoded.

A few hundred bytes of PNG can claim 20000x20000 pixels (1.2 GB decoded): the decoders
check :func:`check_image_pixels` first, against config ``image_max_pixels``.
"""

from __future__ import annotations

import struct

from mxkit.core.config import get
from mxkit.core.errors import FormatError

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# JPEG start-of-frame markers (baseline, progressive, lossless, arithmetic ...): they carry the size
_JPEG_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def image_dimensions(data: bytes | memoryview) -> tuple[int, int] | None:
    """(width, height) from a PNG, JPEG, GIF or BMP header; None for another format.

    Raises
    ------
    FormatError
        If the data starts like one of these formats but its header is cut short.
    """
    head = bytes(data[:32])
    if head.startswith(_PNG_SIGNATURE):
        if len(head) < 24 or head[12:16] != b"IHDR":
            raise FormatError("PNG data whose first chunk is not a whole IHDR chunk")
        width, height = struct.unpack(">II", head[16:24])
        return width, height
    if head.startswith(b"GIF87a") or head.startswith(b"GIF89a"):
        if len(head) < 10:
            raise FormatError("GIF data cut inside its header")
        width, height = struct.unpack("<HH", head[6:10])
        return width, height
    if head.startswith(b"BM") and len(head) >= 26:
        width, height = struct.unpack("<ii", head[18:26])
        return abs(width), abs(height)
    if head.startswith(b"\xff\xd8"):
        return _jpeg_dimensions(data)
    return None


def _jpeg_dimensions(data: bytes | memoryview) -> tuple[int, int]:
    view = memoryview(data)
    at = 2
    while at + 4 <= len(view):
        if view[at] != 0xFF:
            raise FormatError(f"JPEG data with no marker at byte {at}")
        marker = view[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            at += 2
            continue
        (length,) = struct.unpack(">H", view[at + 2:at + 4])
        if marker in _JPEG_SOF:
            if at + 9 > len(view):
                break
            height, width = struct.unpack(">HH", view[at + 5:at + 9])
            return width, height
        if marker == 0xDA or length < 2:  # scan data before any frame header: malformed
            break
        at += 2 + length
    raise FormatError("JPEG data without a frame header (SOF) before its image data")


def check_image_pixels(data: bytes | memoryview) -> None:
    """Refuse an image whose header claims more than config ``image_max_pixels`` pixels.

    Raises
    ------
    FormatError
        Naming the size, the limit and how to raise it.
    """
    dimensions = image_dimensions(data)
    if dimensions is None:
        return
    width, height = dimensions
    limit = int(get("image_max_pixels"))
    if width * height > limit:
        raise FormatError(
            f"an image of {width}x{height} = {width * height} pixels is larger than config image_max_pixels "
            f"= {limit}; decoding it would take {width * height * 3} bytes or more. Raise the limit (environment "
            f"MXKIT_IMAGE_MAX_PIXELS, mxkit.toml, or mxkit.core.config.override(image_max_pixels=...)) "
            f"if such images are expected")


__all__ = ["check_image_pixels", "image_dimensions"]
