"""Image encoding, decoding and the augmentations of MXNet's default image pipeline.

OpenCV does the pixel work (optional extra ``mxkit-io[image]``); its functions release
the GIL, which is what lets the decode threads of ``ImageRecordIter`` run in parallel.
Images are HxWxC uint8 arrays in OpenCV's BGR order, as in MXNet's record files.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mxkit.core.errors import ConfigError, FormatError, MissingComponentError, ShapeError
from mxkit.io.image_header import check_image_pixels

__all__ = ["center_crop", "crop_at", "imdecode", "imencode", "random_crop", "resize_short"]


def cv2_module() -> Any:
    """OpenCV, or a MissingComponentError that says how to install it."""
    try:
        import cv2
    except ModuleNotFoundError as exc:
        if exc.name != "cv2":
            raise
        raise MissingComponentError(
            "image encoding and decoding need OpenCV, which is not installed; "
            "install it with `pip install 'mxkit[image]'` (or `'mxkit-io[image]'` for the io component alone)"
        ) from None
    return cv2


def imencode(img: np.ndarray, img_fmt: str = ".jpg", quality: int = 95) -> bytes:
    """Encode ``img`` as JPEG (``quality`` 0-100) or PNG (``quality`` = compression 0-9).

    A PNG compression above 9 means 9, as in OpenCV (so MXNet's default of 95 works).
    """
    cv2 = cv2_module()
    fmt = img_fmt.lower()
    if fmt in (".jpg", ".jpeg"):
        if not 0 <= quality <= 100:
            raise ConfigError(f"JPEG quality must be in 0..100, got {quality}")
        params = [cv2.IMWRITE_JPEG_QUALITY, int(quality)]
    elif fmt == ".png":
        if quality < 0:
            raise ConfigError(f"PNG compression must be in 0..9 (higher means 9), got {quality}")
        # MXNet passes its default quality (95) straight to OpenCV, which caps it at 9.
        params = [cv2.IMWRITE_PNG_COMPRESSION, min(int(quality), 9)]
    else:
        raise ConfigError(f"image format must be '.jpg', '.jpeg' or '.png', got {img_fmt!r}")
    img = np.asarray(img)
    if img.dtype != np.uint8 or img.ndim not in (2, 3):
        raise ShapeError(
            f"an image to encode must be a uint8 array of HxW or HxWxC, got {img.dtype} {img.shape}"
        )
    ok, buf = cv2.imencode(fmt, img, params)
    if not ok:
        raise FormatError(f"OpenCV could not encode a {img.shape} image as {fmt}")
    return bytes(buf.tobytes())


def imdecode(buf: bytes | np.ndarray, iscolor: int = -1) -> np.ndarray:
    """Decode JPEG/PNG bytes into a BGR (or grayscale) uint8 array.

    ``iscolor``: 1 forces 3 channels, 0 forces grayscale, -1 keeps the file's channels.

    Raises
    ------
    FormatError
        If the data is not an image, or its header claims more pixels than config
        ``image_max_pixels`` (checked before decoding).
    """
    cv2 = cv2_module()
    data = np.frombuffer(buf, dtype=np.uint8) if not isinstance(buf, np.ndarray) else buf
    check_image_pixels(memoryview(np.ascontiguousarray(data[:65536]).reshape(-1)))  # before any pixel is decoded
    img = cv2.imdecode(data, iscolor) if data.size else None
    if img is None:
        head = bytes(data[:8])
        raise FormatError(
            f"could not decode {data.size} bytes as an image (starts with {head!r}); "
            f"expected JPEG or PNG data as written by pack_img or im2rec"
        )
    return img  # type: ignore[no-any-return]


def resize_short(img: np.ndarray, size: int, interpolation: int = 1) -> np.ndarray:
    """Resize so that the shorter edge is ``size`` pixels, keeping the aspect ratio.

    The longer edge is ``size * long // short`` (integer division), as in MXNet's image
    augmenter and im2rec, so resized pixels match theirs.
    """
    cv2 = cv2_module()
    height, width = img.shape[:2]
    if height > width:
        new_w, new_h = size, max(1, size * height // width)
    else:
        new_w, new_h = max(1, size * width // height), size
    if (new_h, new_w) == (height, width):
        return img
    return cv2.resize(img, (new_w, new_h), interpolation=interpolation)  # type: ignore[no-any-return]


def _check_fits(img: np.ndarray, height: int, width: int) -> None:
    if img.shape[0] < height or img.shape[1] < width:
        raise ShapeError(
            f"an image of {img.shape[0]}x{img.shape[1]} is smaller than the crop {height}x{width}; "
            f"resize the images first (resize=, or im2rec --resize) to at least the data shape"
        )


def center_crop(img: np.ndarray, height: int, width: int) -> np.ndarray:
    """The central ``height`` x ``width`` window of ``img`` (a view)."""
    _check_fits(img, height, width)
    top = (img.shape[0] - height) // 2
    left = (img.shape[1] - width) // 2
    return img[top:top + height, left:left + width]


def crop_at(img: np.ndarray, height: int, width: int, row_fraction: float, column_fraction: float) -> np.ndarray:
    """The ``height`` x ``width`` window at fractions in [0, 1) of the free rows and columns."""
    _check_fits(img, height, width)
    top = int(row_fraction * (img.shape[0] - height + 1))
    left = int(column_fraction * (img.shape[1] - width + 1))
    return img[top:top + height, left:left + width]


def random_crop(img: np.ndarray, height: int, width: int, rng: np.random.Generator) -> np.ndarray:
    """A ``height`` x ``width`` window of ``img`` at a position drawn from ``rng`` (a view)."""
    _check_fits(img, height, width)
    top = int(rng.integers(0, img.shape[0] - height + 1))
    left = int(rng.integers(0, img.shape[1] - width + 1))
    return img[top:top + height, left:left + width]
