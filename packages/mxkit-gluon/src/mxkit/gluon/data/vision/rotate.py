"""``Rotate`` and ``RandomRotation``: float32 ``(C, H, W)`` tensors or ``(N, C, H, W)`` batches turned
about their centre by bilinear sampling (MXNet 1.9.1's ``mx.image.imrotate``, on the
``BilinearSampler`` operator: cells sampled outside the image read 0).

The sampling grid is the output's pixel grid, centred, rotated by the angle (counter-clockwise
for a positive angle in the image's row-down coordinates, as MXNet), then normalised to [-1, 1]
per axis; ``zoom_in`` scales it so that no outside cell shows, ``zoom_out`` so that the whole
rotated image shows.
"""

from __future__ import annotations

import math
from numbers import Number
from typing import Any

import numpy as np
from mxkit.gluon.block import Block
from mxkit.gluon.parameter import GluonError


def rotate_batch(src: Any, degrees: Any, zoom_in: bool = False, zoom_out: bool = False) -> Any:
    """``src`` (float32, ``(C, H, W)`` or ``(N, C, H, W)``) rotated by ``degrees`` (a number, or
    one per image of a batch)."""
    from mxkit import ndarray

    if zoom_in and zoom_out:
        raise GluonError("rotate: zoom_in and zoom_out cannot both be True")
    if np.dtype(src.dtype) != np.float32:
        raise TypeError(f"rotate takes float32 images (call it after ToTensor), got {np.dtype(src.dtype).name}")
    single = src.ndim == 3
    if single:
        if not isinstance(degrees, Number):
            raise TypeError(f"rotating one image takes one angle, got {type(degrees).__name__}")
        src = src.expand_dims(axis=0)
    elif src.ndim != 4:
        raise GluonError(f"rotate takes a (C, H, W) image or an (N, C, H, W) batch, got shape {src.shape}")
    count, _, h, w = src.shape
    angles = np.full(count, float(degrees)) if isinstance(degrees, Number) else np.asarray(degrees, np.float64)
    if angles.shape != (count,):
        raise GluonError(f"rotate: {angles.size} angles for {count} images; give one per image")
    radians = np.pi * angles / 180.0
    hscale, wscale = (h - 1) / 2.0, (w - 1) / 2.0
    rows = np.arange(h, dtype=np.float64)[:, None].repeat(w, axis=1) - hscale
    cols = np.arange(w, dtype=np.float64)[None, :].repeat(h, axis=0) - wscale
    cos, sin = np.cos(radians)[:, None, None], np.sin(radians)[:, None, None]
    x = (cols * cos - rows * sin) / wscale
    y = (cols * sin + rows * cos) / hscale
    scale = np.ones((count, 1, 1))
    if zoom_in or zoom_out:
        rho, corner = math.hypot(h, w), math.atan(h / w)
        spin = np.abs(radians)
        max_x = np.maximum(np.abs(rho * np.cos(corner + spin)), np.abs(rho * np.cos(corner - spin)))
        max_y = np.maximum(np.abs(rho * np.sin(corner + spin)), np.abs(rho * np.sin(corner - spin)))
        if zoom_out:
            scale = np.maximum(max_x / w, max_y / h)[:, None, None]
        else:
            scale = np.minimum(w / max_x, h / max_y)[:, None, None]
    grid = np.stack([x * scale, y * scale], axis=1).astype(np.float32)
    out = ndarray.BilinearSampler(src, ndarray.array(grid, ctx=src.context))
    return out[0] if single else out


class Rotate(Block):
    """Rotate float32 tensors by ``rotation_degrees`` (see :func:`rotate_batch`)."""

    def __init__(self, rotation_degrees: float, zoom_in: bool = False, zoom_out: bool = False) -> None:
        super().__init__()
        if zoom_in and zoom_out:
            raise GluonError("Rotate: zoom_in and zoom_out cannot both be True")
        self._args = (rotation_degrees, zoom_in, zoom_out)

    def forward(self, x: Any) -> Any:
        return rotate_batch(x, *self._args)


class RandomRotation(Block):
    """With probability ``rotate_with_proba``, rotate by an angle drawn uniformly from
    ``angle_limits`` (one per image of a batch; numpy's global generator, as MXNet)."""

    def __init__(self, angle_limits: Any, zoom_in: bool = False, zoom_out: bool = False,
                 rotate_with_proba: float = 1.0) -> None:
        super().__init__()
        lower, upper = angle_limits
        if lower >= upper:
            raise ValueError(f"RandomRotation: angle_limits must be (lower, upper) with lower < upper, got "
                             f"{angle_limits!r}")
        if not 0.0 <= rotate_with_proba <= 1.0:
            raise ValueError(f"RandomRotation: rotate_with_proba must be a probability in [0, 1], got "
                             f"{rotate_with_proba!r}")
        if zoom_in and zoom_out:
            raise GluonError("RandomRotation: zoom_in and zoom_out cannot both be True")
        self._limits = (float(lower), float(upper))
        self._zoom = (zoom_in, zoom_out)
        self._proba = float(rotate_with_proba)

    def forward(self, x: Any) -> Any:
        if np.random.random() > self._proba:
            return x
        if np.dtype(x.dtype) != np.float32:
            raise TypeError(f"RandomRotation takes float32 images (call it after ToTensor), got "
                            f"{np.dtype(x.dtype).name}")
        angles = np.random.uniform(*self._limits) if x.ndim == 3 else np.random.uniform(*self._limits, size=len(x))
        return rotate_batch(x, angles, *self._zoom)


__all__ = ["RandomRotation", "Rotate", "rotate_batch"]
