"""MXNet's ``mx.image`` functions on NDArrays: decode, read, resize, pad, crop, normalise.

Images are HxWxC NDArrays (RGB after decoding, as in MXNet). The pixel work is OpenCV's
(the optional extra ``mxkit[image]``), through mxkit-io's decoder, so a picture decoded
here is the one ``ImageRecordIter`` sees. Resizing passes the interpolation code straight
to OpenCV as MXNet's ``_cvimresize`` does (0 nearest, 1 bilinear, 2 bicubic, 3 area,
4 Lanczos), so resized pixels match MXNet's for the same OpenCV version.

Random choices (crop positions, sizes) come from Python's ``random`` module, as in MXNet,
so ``random.seed`` makes them repeatable.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
from mxkit import ndarray as nd
from mxkit.core.errors import ConfigError, FormatError, ShapeError
from mxkit.io.image import cv2_module
from mxkit.io.image import imdecode as _decode_bgr
from mxkit.ndarray.ops.image import scale_down

__all__ = [
    "center_crop",
    "color_normalize",
    "copyMakeBorder",
    "fixed_crop",
    "imdecode",
    "imread",
    "imresize",
    "random_crop",
    "random_size_crop",
    "resize_short",
    "scale_down",
]

# OpenCV's interpolation codes that cv2.resize takes (MXNet passes its ``interp`` through)
_RESIZE_CODES = (0, 1, 2, 3, 4)
# OpenCV's border types that copyMakeBorder takes: constant, replicate, reflect, wrap, reflect_101
_BORDER_TYPES = (0, 1, 2, 3, 4)


def _to_numpy(src: Any, what: str) -> np.ndarray:
    array = src.asnumpy() if isinstance(src, nd.NDArray) else np.asarray(src)
    if array.ndim not in (2, 3):
        raise ShapeError(f"{what}: an image must be HxW or HxWxC, got shape {tuple(array.shape)}")
    return array


def _like(result: np.ndarray, src: Any, out: Any = None) -> nd.NDArray:
    """``result`` as an NDArray on the source's device, or written into ``out``."""
    ctx = src.context if isinstance(src, nd.NDArray) else None
    array = nd.array(result, ctx=ctx, dtype=result.dtype)
    if out is not None:
        if tuple(out.shape) != tuple(result.shape):
            raise ShapeError(f"out has shape {tuple(out.shape)}, the result is {tuple(result.shape)}")
        out[:] = array
        return out
    return array


def _decode(data: np.ndarray, flag: int, to_rgb: bool | int, where: str) -> np.ndarray:
    if flag not in (0, 1):
        raise ConfigError(f"{where}: flag must be 1 (three channels) or 0 (grayscale), got {flag!r}")
    if data.size == 0:
        raise FormatError(f"{where}: the buffer is empty; expected the bytes of a JPEG or PNG image")
    img = _decode_bgr(data, iscolor=flag)
    if img.ndim == 2:
        return np.asarray(img[:, :, None])  # MXNet keeps the channel axis: HxWx1
    if to_rgb:
        img = img[:, :, ::-1]
    return np.ascontiguousarray(img)


def imdecode(buf: Any, flag: int = 1, to_rgb: bool | int = 1, out: Any = None) -> nd.NDArray:
    """Decode a JPEG or PNG image into an HxWxC uint8 NDArray (MXNet's ``mx.image.imdecode``).

    Parameters
    ----------
    buf : bytes, bytearray, numpy.ndarray or NDArray
        The encoded image.
    flag : {1, 0}
        1 for three channels, 0 for grayscale (HxWx1).
    to_rgb : bool
        RGB order (MXNet's default) rather than OpenCV's BGR.
    out : NDArray, optional
        Written in place and returned.

    Raises
    ------
    FormatError
        If ``buf`` is empty or not an image (an MXNetError, as in MXNet).
    """
    if isinstance(buf, nd.NDArray):
        data = buf.asnumpy().astype(np.uint8, copy=False).reshape(-1)
    elif isinstance(buf, np.ndarray):
        data = np.ascontiguousarray(buf, dtype=np.uint8).reshape(-1)
    elif isinstance(buf, (bytes, bytearray, memoryview)):
        data = np.frombuffer(buf, dtype=np.uint8)
    else:
        raise FormatError(f"imdecode: buf must be bytes, bytearray, a numpy array or an NDArray, "
                          f"got {type(buf).__name__}")
    return _like(_decode(data, flag, to_rgb, "imdecode"), None, out)


def imread(filename: str | os.PathLike[str], flag: int = 1, to_rgb: bool | int = 1, out: Any = None) -> nd.NDArray:
    """Read and decode an image file (MXNet's ``mx.image.imread``); see :func:`imdecode`.

    Raises
    ------
    FormatError
        If the file does not exist or is not an image.
    """
    try:
        with open(filename, "rb") as handle:
            data = np.frombuffer(handle.read(), dtype=np.uint8)
    except OSError as exc:
        raise FormatError(f"imread: cannot read {os.fspath(filename)!r}: {exc.strerror or exc}") from None
    return _like(_decode(data, flag, to_rgb, f"imread {os.fspath(filename)!r}"), None, out)


def _check_interp(interp: int, what: str) -> int:
    if interp not in _RESIZE_CODES:
        raise ConfigError(f"{what}: interp must be one of {_RESIZE_CODES} (OpenCV's nearest, bilinear, bicubic, "
                          f"area, Lanczos), got {interp!r}")
    return int(interp)


def imresize(src: Any, w: int, h: int, interp: int = 1, out: Any = None) -> nd.NDArray:
    """Resize ``src`` (HxWxC) to ``w`` x ``h`` with OpenCV (MXNet's ``mx.image.imresize``).

    ``interp`` goes to OpenCV unchanged: 0 nearest, 1 bilinear, 2 bicubic, 3 area, 4 Lanczos.
    """
    code = _check_interp(interp, "imresize")
    if int(w) <= 0 or int(h) <= 0:
        raise ShapeError(f"imresize: the size must be positive, got w={w}, h={h}")
    img = _to_numpy(src, "imresize")
    resized = cv2_module().resize(img, (int(w), int(h)), interpolation=code)
    if img.ndim == 3 and resized.ndim == 2:  # OpenCV drops a single channel axis
        resized = resized[:, :, None]
    return _like(resized, src, out)


def copyMakeBorder(src: Any, top: int, bot: int, left: int, right: int, type: int = 0,
                   value: float = 0.0, values: Sequence[float] | None = None, out: Any = None) -> nd.NDArray:
    """Pad an image with a border (MXNet's ``mx.image.copyMakeBorder``, OpenCV's border types).

    ``type``: 0 constant (``value``, or one value per channel in ``values``), 1 replicate,
    2 reflect, 3 wrap, 4 reflect_101.
    """
    if type not in _BORDER_TYPES:
        raise ConfigError(f"copyMakeBorder: type must be one of {_BORDER_TYPES} (constant, replicate, reflect, "
                          f"wrap, reflect_101), got {type!r}")
    sizes = (int(top), int(bot), int(left), int(right))
    if min(sizes) < 0:
        raise ShapeError(f"copyMakeBorder: border sizes must be >= 0, got {sizes}")
    img = _to_numpy(src, "copyMakeBorder")
    fill = [float(v) for v in values] if values else [float(value)] * 4
    padded = cv2_module().copyMakeBorder(img, *sizes, borderType=type, value=fill)
    if img.ndim == 3 and padded.ndim == 2:
        padded = padded[:, :, None]
    return _like(padded, src, out)


def _interp_method(interp: int, sizes: tuple[int, int, int, int] | tuple[()] = ()) -> int:
    """MXNet's choices 9 (by direction) and 10 (random) resolved to a code 0-4."""
    if interp == 9:
        if sizes:
            old_h, old_w, new_h, new_w = sizes
            if new_h > old_h and new_w > old_w:
                return 2
            if new_h < old_h and new_w < old_w:
                return 3
            return 1
        return 2
    if interp == 10:
        return random.randint(0, 4)
    return _check_interp(interp, "interpolation")


def _hwc_shape(src: Any) -> tuple[int, int]:
    if len(src.shape) != 3:
        raise ShapeError(f"an image must be HxWxC, got shape {tuple(src.shape)}")
    return int(src.shape[0]), int(src.shape[1])


def resize_short(src: Any, size: int, interp: int = 2) -> nd.NDArray:
    """Resize so that the shorter edge is ``size``, keeping the aspect ratio (integer division)."""
    h, w = _hwc_shape(src)
    if h > w:
        new_h, new_w = size * h // w, size
    else:
        new_h, new_w = size, size * w // h
    return imresize(src, new_w, new_h, interp=_interp_method(interp, (h, w, new_h, new_w)))


def fixed_crop(src: Any, x0: int, y0: int, w: int, h: int, size: tuple[int, int] | None = None,
               interp: int = 2) -> nd.NDArray:
    """The ``w`` x ``h`` window at (``x0``, ``y0``), resized to ``size`` (w, h) if given."""
    height, width = _hwc_shape(src)
    if x0 < 0 or y0 < 0 or w <= 0 or h <= 0 or x0 + w > width or y0 + h > height:
        raise ShapeError(f"fixed_crop: the window x0={x0}, y0={y0}, w={w}, h={h} is not inside the "
                         f"{width}x{height} image")
    out = nd.slice(src, begin=(y0, x0, 0), end=(y0 + h, x0 + w, int(src.shape[2])))
    if size is not None and (w, h) != tuple(size):
        out = imresize(out, *size, interp=_interp_method(interp, (h, w, size[1], size[0])))
    return out


def random_crop(src: Any, size: tuple[int, int], interp: int = 2) -> tuple[nd.NDArray, tuple[int, int, int, int]]:
    """A crop of ``size`` (w, h) at a random position; an image smaller than ``size`` is
    cropped as large as fits and resized up. Returns the crop and ``(x0, y0, w, h)``."""
    h, w = _hwc_shape(src)
    new_w, new_h = scale_down((w, h), size)
    x0 = random.randint(0, w - new_w)
    y0 = random.randint(0, h - new_h)
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def center_crop(src: Any, size: tuple[int, int], interp: int = 2) -> tuple[nd.NDArray, tuple[int, int, int, int]]:
    """The central crop of ``size`` (w, h), resized up if the image is smaller; returns the
    crop and ``(x0, y0, w, h)``."""
    h, w = _hwc_shape(src)
    new_w, new_h = scale_down((w, h), size)
    x0 = int((w - new_w) / 2)
    y0 = int((h - new_h) / 2)
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def color_normalize(src: Any, mean: Any, std: Any = None) -> Any:
    """``(src - mean) / std`` per channel, in place on ``src`` (as MXNet does)."""
    if mean is not None:
        src -= mean
    if std is not None:
        src /= std
    return src


def random_size_crop(src: Any, size: tuple[int, int], area: float | tuple[float, float],
                     ratio: tuple[float, float], interp: int = 2,
                     **kwargs: Any) -> tuple[nd.NDArray, tuple[int, int, int, int]]:
    """A crop of random area (a fraction of the image in ``area``: a minimum, or a range)
    and aspect ratio (in ``ratio``), resized to ``size``; falls back to :func:`center_crop`
    after 10 draws that do not fit. Returns the crop and ``(x0, y0, w, h)``."""
    h, w = _hwc_shape(src)
    src_area = h * w
    if "min_area" in kwargs:  # MXNet's older name of ``area``
        area = kwargs.pop("min_area")
    if kwargs:
        raise ConfigError(f"random_size_crop: unexpected arguments {sorted(kwargs)}")
    if isinstance(area, (int, float)):
        area = (float(area), 1.0)
    if not 0 < area[0] <= area[1] <= 1:
        raise ConfigError(f"random_size_crop: area must be a fraction range in (0, 1], got {area}")
    for _ in range(10):
        target_area = random.uniform(area[0], area[1]) * src_area
        log_ratio = (np.log(ratio[0]), np.log(ratio[1]))
        new_ratio = np.exp(random.uniform(*log_ratio))
        new_w = round(float(np.sqrt(target_area * new_ratio)))
        new_h = round(float(np.sqrt(target_area / new_ratio)))
        if 0 < new_w <= w and 0 < new_h <= h:
            x0 = random.randint(0, w - new_w)
            y0 = random.randint(0, h - new_h)
            return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)
    return center_crop(src, size, interp)
