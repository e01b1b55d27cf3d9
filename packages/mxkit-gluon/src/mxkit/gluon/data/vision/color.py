"""Colour transforms of ``(H, W, 3)`` RGB images (uint8 or float): MXNet 1.9.1's
``RandomBrightness``, ``RandomContrast``, ``RandomSaturation``, ``RandomHue``,
``RandomColorJitter`` and ``RandomLighting``, with the formulas of its image operators.

Each draws its factor from numpy's global generator (as ``RandomFlipLeftRight`` here) and
applies a deterministic ``adjust_*`` function, computed in float32; a uint8 result is clipped to
[0, 255] and truncated, as MXNet's ``saturate_cast``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mxkit.gluon.block import Block
from mxkit.gluon.parameter import GluonError

#: the luma weights of R, G and B (ITU-R BT.601), MXNet's ``coef``
LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)
_TO_YIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]], dtype=np.float32)
_FROM_YIQ = np.array([[1.0, 0.956, 0.621], [1.0, -0.272, -0.647], [1.0, -1.107, 1.705]], dtype=np.float32)
#: AlexNet's PCA of ImageNet's RGB values: eigenvalues and eigenvectors (columns)
_EIGVAL = np.array([55.46, 4.794, 1.148], dtype=np.float32)
_EIGVEC = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140], [-0.5836, -0.6948, 0.4203]],
                   dtype=np.float32)


def _rgb(x: Any, what: str) -> tuple[np.ndarray, np.dtype]:
    from mxkit import ndarray

    if not isinstance(x, ndarray.NDArray) or x.ndim != 3 or x.shape[2] != 3:
        shape = getattr(x, "shape", type(x).__name__)
        raise GluonError(f"{what} takes an (H, W, 3) RGB image NDArray, got {shape}")
    values = x.asnumpy()
    return values.astype(np.float32), values.dtype


def _back(values: np.ndarray, dtype: np.dtype, like: Any) -> Any:
    from mxkit import ndarray

    if dtype == np.uint8:
        values = np.clip(values, 0, 255)
    return ndarray.array(values.astype(dtype), ctx=like.context, dtype=dtype)


def adjust_brightness(image: np.ndarray, alpha: float) -> np.ndarray:
    """``image * alpha``."""
    return image * np.float32(alpha)


def adjust_contrast(image: np.ndarray, alpha: float) -> np.ndarray:
    """Blend with the image's mean luma: ``image * alpha + mean_gray * (1 - alpha)``."""
    gray = float((image @ LUMA).mean())
    return image * np.float32(alpha) + np.float32(gray * (1 - alpha))


def adjust_saturation(image: np.ndarray, alpha: float) -> np.ndarray:
    """Blend each pixel with its luma: ``image * alpha + gray * (1 - alpha)``."""
    gray = (image @ LUMA)[..., None]
    return image * np.float32(alpha) + gray * np.float32(1 - alpha)


def adjust_hue(image: np.ndarray, alpha: float) -> np.ndarray:
    """Turn the chroma in YIQ space by ``alpha * pi`` radians."""
    u, w = np.cos(alpha * np.pi), np.sin(alpha * np.pi)
    turn = np.array([[1, 0, 0], [0, u, -w], [0, w, u]], dtype=np.float32)
    return image @ (_FROM_YIQ @ turn @ _TO_YIQ).T


def adjust_lighting(image: np.ndarray, alphas: Any) -> np.ndarray:
    """Add ``eigvec @ (alphas * eigval)`` to every pixel (AlexNet's PCA lighting noise)."""
    return image + _EIGVEC @ (np.asarray(alphas, dtype=np.float32) * _EIGVAL)


def _factor(limit: float, what: str) -> float:
    if limit < 0:
        raise GluonError(f"{what} must be >= 0, got {limit!r}")
    return float(limit)


class _RandomAdjust(Block):
    _adjust: Any = None
    _centre = 1.0

    def __init__(self, limit: float) -> None:
        super().__init__()
        self._limit = _factor(limit, type(self).__name__)

    def forward(self, x: Any) -> Any:
        values, dtype = _rgb(x, type(self).__name__)
        alpha = self._centre + np.random.uniform(-self._limit, self._limit)
        return _back(type(self)._adjust(values, alpha), dtype, x)


class RandomBrightness(_RandomAdjust):
    """Scale the values by ``1 + uniform(-brightness, brightness)``."""

    _adjust = staticmethod(adjust_brightness)


class RandomContrast(_RandomAdjust):
    """Blend with the mean luma by ``1 + uniform(-contrast, contrast)``."""

    _adjust = staticmethod(adjust_contrast)


class RandomSaturation(_RandomAdjust):
    """Blend with each pixel's luma by ``1 + uniform(-saturation, saturation)``."""

    _adjust = staticmethod(adjust_saturation)


class RandomHue(_RandomAdjust):
    """Turn the chroma by ``uniform(-hue, hue) * pi`` radians."""

    _adjust = staticmethod(adjust_hue)
    _centre = 0.0


class RandomColorJitter(Block):
    """Brightness, contrast and saturation (those given as > 0) in a random order, then hue."""

    def __init__(self, brightness: float = 0, contrast: float = 0, saturation: float = 0, hue: float = 0) -> None:
        super().__init__()
        self._limits = [_factor(v, f"RandomColorJitter {n}") for n, v in
                        (("brightness", brightness), ("contrast", contrast), ("saturation", saturation))]
        self._hue = _factor(hue, "RandomColorJitter hue")

    def forward(self, x: Any) -> Any:
        values, dtype = _rgb(x, "RandomColorJitter")
        steps = (adjust_brightness, adjust_contrast, adjust_saturation)
        for index in np.random.permutation(3):
            if self._limits[index] > 0:
                values = steps[index](values, 1 + np.random.uniform(-self._limits[index], self._limits[index]))
        if self._hue > 0:
            values = adjust_hue(values, np.random.uniform(-self._hue, self._hue))
        return _back(values, dtype, x)


class RandomLighting(Block):
    """AlexNet's PCA lighting noise with weights drawn from ``Normal(0, alpha)``."""

    def __init__(self, alpha: float) -> None:
        super().__init__()
        self._alpha = _factor(alpha, "RandomLighting alpha")

    def forward(self, x: Any) -> Any:
        values, dtype = _rgb(x, "RandomLighting")
        return _back(adjust_lighting(values, np.random.normal(0, self._alpha, size=3)), dtype, x)


__all__ = ["LUMA", "RandomBrightness", "RandomColorJitter", "RandomContrast", "RandomHue", "RandomLighting",
           "RandomSaturation", "adjust_brightness", "adjust_contrast", "adjust_hue", "adjust_lighting",
           "adjust_saturation"]
