"""Resizing and cropping transforms on ``(H, W, C)`` images or ``(N, H, W, C)`` batches
(MXNet 1.9.1's ``Resize``, ``CropResize``, ``CenterCrop``, ``RandomResizedCrop``).

Pixels are resampled by OpenCV (through mxkit-io), as MXNet's image operators and
``mx.image.imresize`` do, so the results match theirs; the dtype (uint8, float32, float64) is
kept. Sizes are ``(width, height)`` where a pair is given, as in MXNet.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
from mxkit.gluon.block import Block
from mxkit.gluon.parameter import GluonError
from mxkit.ndarray.ops.image import resized_size, scale_down

#: OpenCV's interpolation codes as MXNet numbers them: nearest, bilinear, bicubic, area, Lanczos
_INTERPOLATIONS = (0, 1, 2, 3, 4)


def _cv2() -> Any:
    from mxkit.io.image import cv2_module

    return cv2_module()


def _images(x: Any, what: str) -> np.ndarray:
    from mxkit import ndarray

    if not isinstance(x, ndarray.NDArray):
        raise GluonError(f"{what} takes an NDArray image, got {type(x).__name__}")
    if x.ndim not in (3, 4):
        raise GluonError(f"{what} takes an (H, W, C) image or an (N, H, W, C) batch, got shape {x.shape}")
    return x.asnumpy()


def _like(values: np.ndarray, x: Any) -> Any:
    from mxkit import ndarray

    return ndarray.array(values, ctx=x.context, dtype=values.dtype)


def _check_interpolation(interpolation: int, what: str) -> int:
    if interpolation not in _INTERPOLATIONS:
        raise GluonError(f"{what}: interpolation must be one of {_INTERPOLATIONS} (nearest, bilinear, bicubic, "
                         f"area, Lanczos), got {interpolation!r}")
    return int(interpolation)


def resize_image(image: np.ndarray, width: int, height: int, interpolation: int) -> np.ndarray:
    """One ``(H, W, C)`` image resized to ``width`` x ``height`` (OpenCV keeps the dtype)."""
    if (image.shape[1], image.shape[0]) == (width, height):
        return image.copy()
    resized = _cv2().resize(image, (width, height), interpolation=interpolation)
    return resized[:, :, None] if resized.ndim == 2 else resized


def _map_images(images: np.ndarray, fn: Any) -> np.ndarray:
    return fn(images) if images.ndim == 3 else np.stack([fn(image) for image in images])


def _target_size(size: Any, keep_ratio: bool, height: int, width: int, what: str) -> tuple[int, int]:
    """MXNet's ``(width, height)`` of the result: ``size`` for both edges, the shorter edge with
    ``keep_ratio`` (the longer scaled in integer arithmetic), or ``(w, h)``."""
    sizes = tuple(size) if isinstance(size, list | tuple) else (size,)
    if len(sizes) not in (1, 2) or not all(isinstance(s, int | np.integer) and s > 0 for s in sizes):
        raise GluonError(f"{what}: size must be a positive int or a (width, height) pair of them, got {size!r}")
    return resized_size(sizes, keep_ratio, height, width)  # the arithmetic of mx.nd.image.resize


class Resize(Block):
    """Resize to ``size``: an int for a square (or, with ``keep_ratio``, for the shorter edge, the
    other scaled to keep the aspect ratio), or ``(width, height)``."""

    def __init__(self, size: Any, keep_ratio: bool = False, interpolation: int = 1) -> None:
        super().__init__()
        self._size = size
        self._keep_ratio = bool(keep_ratio)
        self._interpolation = _check_interpolation(interpolation, "Resize")

    def forward(self, x: Any) -> Any:
        images = _images(x, "Resize")
        height, width = images.shape[-3:-1]
        new_w, new_h = _target_size(self._size, self._keep_ratio, height, width, "Resize")
        return _like(_map_images(images, lambda im: resize_image(im, new_w, new_h, self._interpolation)), x)


class CropResize(Block):
    """The ``width`` x ``height`` window at column ``x``, row ``y``; resized to ``size``
    (an int or ``(width, height)``) when given."""

    def __init__(self, x: int, y: int, width: int, height: int, size: Any = None, interpolation: int | None = None
                 ) -> None:
        super().__init__()
        self._box = (int(x), int(y), int(width), int(height))
        self._size = size
        self._interpolation = _check_interpolation(1 if interpolation is None else interpolation, "CropResize")

    def forward(self, x: Any) -> Any:
        images = _images(x, "CropResize")
        left, top, width, height = self._box
        rows, cols = images.shape[-3:-1]
        if width <= 0 or height <= 0 or left < 0 or top < 0 or left + width > cols or top + height > rows:
            raise GluonError(f"CropResize: the window x={left}, y={top}, width={width}, height={height} must have a "
                             f"positive size and lie inside the {cols}x{rows} (width x height) image")
        cropped = images[..., top:top + height, left:left + width, :]
        if self._size is None:
            return _like(np.ascontiguousarray(cropped), x)
        new_w, new_h = _target_size(self._size, False, height, width, "CropResize")
        return _like(_map_images(cropped, lambda im: resize_image(im, new_w, new_h, self._interpolation)), x)


def _fixed_crop(image: np.ndarray, x0: int, y0: int, w: int, h: int, size: tuple[int, int],
                interpolation: int) -> np.ndarray:
    window = image[y0:y0 + h, x0:x0 + w]
    return resize_image(window, size[0], size[1], interpolation)


def center_crop_image(image: np.ndarray, size: tuple[int, int], interpolation: int) -> np.ndarray:
    """The central window of ``size``'s aspect ratio (shrunk to fit), resized to ``size`` (MXNet's
    ``mx.image.center_crop``)."""
    h, w = image.shape[:2]
    new_w, new_h = scale_down((w, h), size)
    x0, y0 = int((w - new_w) / 2), int((h - new_h) / 2)
    return _fixed_crop(image, x0, y0, new_w, new_h, size, interpolation)


def _pair(size: Any, what: str) -> tuple[int, int]:
    pair = tuple(size) if isinstance(size, list | tuple) else (size, size)
    if len(pair) != 2 or not all(isinstance(s, int | np.integer) and s > 0 for s in pair):
        raise GluonError(f"{what}: size must be a positive int or a (width, height) pair of them, got {size!r}")
    return int(pair[0]), int(pair[1])


class CenterCrop(Block):
    """The central window of ``size`` (an int or ``(width, height)``); an image smaller than it
    gives the largest central window of its aspect ratio, resized up."""

    def __init__(self, size: Any, interpolation: int = 1) -> None:
        super().__init__()
        self._size = _pair(size, "CenterCrop")
        self._interpolation = _check_interpolation(interpolation, "CenterCrop")

    def forward(self, x: Any) -> Any:
        images = _images(x, "CenterCrop")
        return _like(_map_images(images, lambda im: center_crop_image(im, self._size, self._interpolation)), x)


class RandomResizedCrop(Block):
    """A window of random area (``scale`` of the image's) and aspect ratio (``ratio``, drawn
    log-uniformly), resized to ``size``; after 10 draws that do not fit, the center crop (MXNet's
    ``mx.image.random_size_crop``, on Python's ``random`` generator as there)."""

    def __init__(self, size: Any, scale: tuple[float, float] = (0.08, 1.0),
                 ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0), interpolation: int = 1) -> None:
        super().__init__()
        self._size = _pair(size, "RandomResizedCrop")
        if isinstance(scale, int | float):
            scale = (float(scale), 1.0)
        if not (len(scale) == 2 and 0 < scale[0] <= scale[1]):
            raise GluonError(f"RandomResizedCrop: scale must be (low, high) with 0 < low <= high, got {scale!r}")
        if not (len(ratio) == 2 and 0 < ratio[0] <= ratio[1]):
            raise GluonError(f"RandomResizedCrop: ratio must be (low, high) with 0 < low <= high, got {ratio!r}")
        self._scale, self._ratio = tuple(scale), tuple(ratio)
        self._interpolation = _check_interpolation(interpolation, "RandomResizedCrop")

    def _crop(self, image: np.ndarray) -> np.ndarray:
        h, w = image.shape[:2]
        area = h * w
        for _ in range(10):
            target = random.uniform(*self._scale) * area
            aspect = math.exp(random.uniform(math.log(self._ratio[0]), math.log(self._ratio[1])))
            new_w = round(math.sqrt(target * aspect))
            new_h = round(math.sqrt(target / aspect))
            if new_w <= w and new_h <= h:
                x0, y0 = random.randint(0, w - new_w), random.randint(0, h - new_h)
                return _fixed_crop(image, x0, y0, new_w, new_h, self._size, self._interpolation)
        return center_crop_image(image, self._size, self._interpolation)

    def forward(self, x: Any) -> Any:
        return _like(_map_images(_images(x, "RandomResizedCrop"), self._crop), x)


__all__ = ["CenterCrop", "CropResize", "RandomResizedCrop", "Resize", "center_crop_image", "resize_image"]
