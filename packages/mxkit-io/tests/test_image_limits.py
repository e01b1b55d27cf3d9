"""Decoded pixels are capped from the header (config image_max_pixels) before decoding."""

import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit.core import config
from mxkit.core.errors import FormatError
from mxkit.io import image
from mxkit.io.image_header import check_image_pixels, image_dimensions

cv2 = pytest.importorskip("cv2")


def png_header(width, height):
    """The signature and IHDR chunk of a PNG claiming ``width`` x ``height`` (8-bit gray)."""
    body = b"IHDR" + struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + body + struct.pack(">I", zlib.crc32(body))


@settings(max_examples=15, deadline=None)
@given(width=st.integers(1, 70), height=st.integers(1, 70), fmt=st.sampled_from([".png", ".jpg", ".bmp"]),
       channels=st.sampled_from([1, 3]))
def test_header_dimensions_agree_with_the_decoder(width, height, fmt, channels):
    pixels = np.random.default_rng(width * height).integers(0, 255, (height, width, channels), dtype=np.uint8)
    ok, buf = cv2.imencode(fmt, pixels)
    assert ok
    data = buf.tobytes()
    decoded = cv2.imdecode(buf, cv2.IMREAD_UNCHANGED)
    assert image_dimensions(data) == (decoded.shape[1], decoded.shape[0])


def test_a_pixel_bomb_is_refused_before_any_decoding(monkeypatch):
    bomb = png_header(20000, 20000) + b"\x00" * 64  # ~100 bytes claiming 400 million pixels

    class NoDecoding:
        def imdecode(self, *args):
            raise AssertionError("the decoder must not run")

    monkeypatch.setattr(image, "cv2_module", lambda: NoDecoding())
    with pytest.raises(FormatError, match=r"20000x20000 = 400000000 pixels is larger than config "
                                          r"image_max_pixels = 67108864.*MXKIT_IMAGE_MAX_PIXELS"):
        image.imdecode(bomb)


def test_the_limit_is_configurable():
    _, buf = cv2.imencode(".jpg", np.zeros((30, 40, 3), np.uint8))
    assert image.imdecode(buf.tobytes()).shape == (30, 40, 3)
    with config.override(image_max_pixels=1000):
        with pytest.raises(FormatError, match="40x30 = 1200 pixels"):
            image.imdecode(buf.tobytes())
        check_image_pixels(png_header(10, 100))  # exactly at the limit: fine


@pytest.mark.parametrize("data", [b"\x89PNG\r\n\x1a\n\x00\x00", b"\xff\xd8\xff\xe0\x00\x10JFIF", b"\xff\xd8\x00"])
def test_a_cut_header_is_a_format_error(data):
    with pytest.raises(FormatError):
        check_image_pixels(data)


def test_image_record_iter_refuses_a_bomb_naming_the_record(tmp_path):
    from mxkit.io import ImageRecordIter, IRHeader, MXRecordIO, pack

    path = tmp_path / "bomb.rec"
    with MXRecordIO(str(path), "w") as writer:
        writer.write(pack(IRHeader(0, 1.0, 7, 0), png_header(20000, 20000) + b"\x00" * 64))
    data_iter = ImageRecordIter(str(path), (3, 8, 8), 1)
    try:
        with pytest.raises(FormatError, match=r"record id 7 of .*bomb.rec'.*20000x20000.*image_max_pixels"):
            next(data_iter)
    finally:
        data_iter.close()
