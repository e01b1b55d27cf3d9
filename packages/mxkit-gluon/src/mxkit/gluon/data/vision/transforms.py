"""Image transforms (``mx.gluon.data.vision.transforms``), as Blocks; the resizing and
cropping ones are in :mod:`mxkit.gluon.data.vision.resize_crop`.

Images are ``(H, W, C)`` arrays (uint8 or float) until :class:`ToTensor` makes them
``(C, H, W)`` float32 in [0, 1], as in MXNet.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mxkit.gluon.block import Block, HybridBlock
from mxkit.gluon.data.vision.color import (
    RandomBrightness,
    RandomColorJitter,
    RandomContrast,
    RandomHue,
    RandomLighting,
    RandomSaturation,
)
from mxkit.gluon.data.vision.resize_crop import CenterCrop, CropResize, RandomResizedCrop, Resize
from mxkit.gluon.data.vision.rotate import RandomRotation, Rotate
from mxkit.gluon.nn.basic_layers import HybridSequential, Sequential
from mxkit.gluon.parameter import GluonError


class Compose(Sequential):
    """Apply ``transforms`` in order."""

    def __init__(self, transforms: list[Any]) -> None:
        super().__init__()
        with self.name_scope():
            for transform in transforms:
                self.add(transform)


class HybridCompose(HybridSequential):
    """Apply hybrid ``transforms`` in order."""

    def __init__(self, transforms: list[Any]) -> None:
        super().__init__()
        with self.name_scope():
            for transform in transforms:
                self.add(transform)


class Cast(HybridBlock):
    """Cast to ``dtype``."""

    def __init__(self, dtype: Any = "float32") -> None:
        super().__init__()
        self._dtype = np.dtype(dtype).name

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.Cast(x, dtype=self._dtype)


class ToTensor(HybridBlock):
    """``(H, W, C)`` (or ``(N, H, W, C)``) values in [0, 255] to ``(C, H, W)`` float32 in [0, 1]."""

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        from mxkit import ndarray

        if F is ndarray and x.ndim not in (3, 4):
            raise GluonError(f"ToTensor takes (H, W, C) or (N, H, W, C) images, got shape {x.shape}")
        axes = (2, 0, 1) if (F is not ndarray or x.ndim == 3) else (0, 3, 1, 2)
        return F.transpose(F.Cast(x, dtype="float32"), axes=axes) / 255.0


class Normalize(HybridBlock):
    """``(x - mean) / std`` per channel of a ``(C, H, W)`` or ``(N, C, H, W)`` tensor."""

    def __init__(self, mean: Any = 0.0, std: Any = 1.0) -> None:
        super().__init__()
        self._mean = tuple(np.atleast_1d(np.asarray(mean, dtype=np.float32)).tolist())
        self._std = tuple(np.atleast_1d(np.asarray(std, dtype=np.float32)).tolist())
        if any(s == 0 for s in self._std):
            raise GluonError(f"Normalize: std must not contain 0, got {std}")

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        from mxkit import ndarray

        if F is not ndarray:
            # traced: MXNet's image operator (1 or 3 channels, checked when the graph's shapes are)
            return F.image.normalize(x, mean=self._mean, std=self._std)
        if x.ndim not in (3, 4):
            raise GluonError(f"Normalize takes a (C, H, W) tensor or an (N, C, H, W) batch, got shape {x.shape}")
        channel_axis = x.ndim - 3
        channels = x.shape[channel_axis]
        for what, values in (("mean", self._mean), ("std", self._std)):
            if len(values) not in (1, channels):
                raise GluonError(f"Normalize: {len(values)} {what} values for {channels} channels; give one, or one "
                                 f"per channel")
        shape = [1] * x.ndim
        shape[channel_axis] = -1
        mean = ndarray.array(np.array(self._mean, dtype=np.float32).reshape(shape))
        std = ndarray.array(np.array(self._std, dtype=np.float32).reshape(shape))
        return ndarray.broadcast_div(ndarray.broadcast_sub(x, mean), std)


class RandomApply(Sequential):
    """Apply ``transforms`` with probability ``p`` (Python's ``random``, as MXNet), else pass the
    input through."""

    def __init__(self, transforms: Any, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= float(p) <= 1.0:
            raise GluonError(f"RandomApply: p must be a probability in [0, 1], got {p!r}")
        self.transforms = transforms
        self.p = float(p)

    def forward(self, x: Any) -> Any:
        import random

        return self.transforms(x) if random.random() < self.p else x


class RandomFlipLeftRight(Block):
    """Mirror an ``(H, W, C)`` image horizontally with probability 1/2 (numpy's global generator)."""

    def forward(self, x: Any) -> Any:
        from mxkit import ndarray

        return ndarray.flip(x, axis=1) if np.random.random() < 0.5 else x


__all__ = ["Cast", "CenterCrop", "Compose", "CropResize", "HybridCompose", "Normalize", "RandomApply",
           "RandomBrightness", "RandomColorJitter", "RandomContrast", "RandomFlipLeftRight", "RandomHue",
           "RandomLighting", "RandomResizedCrop", "RandomRotation", "RandomSaturation", "Resize", "Rotate", "ToTensor"]
