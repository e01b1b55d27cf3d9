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

# the colour formulas of the image operators (mx.nd.image.*), re-exported under gluon's names
from mxkit.ndarray.ops.image import (
    LUMA,
    adjust_brightness,
    adjust_contrast,
    adjust_hue,
    adjust_hue_hls,
    adjust_lighting,
    adjust_saturation,
)


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
    """Shift the hue (HLS) by ``uniform(-hue, hue) * 360`` degrees: MXNet 1.9.1's RandomHue, whose
    ``random_hue`` factors ``(1 - hue, 1 + hue)`` shift by whole turns plus that much."""

    _adjust = staticmethod(adjust_hue_hls)
    _centre = 0.0


class RandomColorJitter(Block):
    """Brightness, contrast and saturation (those given as > 0) in a random order, then the HLS hue
    shift of :class:`RandomHue`."""

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
            values = adjust_hue_hls(values, np.random.uniform(-self._hue, self._hue))
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
           "RandomSaturation", "adjust_brightness", "adjust_contrast", "adjust_hue", "adjust_hue_hls",
           "adjust_lighting", "adjust_saturation"]
