"""MXNet's image augmenters (``mx.image.*Aug``) and ``CreateAugmenter``.

An augmenter is a callable from an HxWxC NDArray to another; ``dumps()`` describes it as
JSON (``[class name in lower case, its arguments]``), as MXNet's do. Crops, resizes and
flips keep the dtype; the colour augmenters expect float images, which is why
``CreateAugmenter`` puts a ``CastAug`` before them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
from mxkit import ndarray as nd
from mxkit.core.errors import ConfigError, ShapeError
from mxkit.mx.image.functions import (
    _interp_method,
    center_crop,
    color_normalize,
    imresize,
    random_crop,
    random_size_crop,
    resize_short,
)

__all__ = [
    "Augmenter",
    "BrightnessJitterAug",
    "CastAug",
    "CenterCropAug",
    "ColorJitterAug",
    "ColorNormalizeAug",
    "ContrastJitterAug",
    "CreateAugmenter",
    "ForceResizeAug",
    "HorizontalFlipAug",
    "HueJitterAug",
    "LightingAug",
    "RandomCropAug",
    "RandomGrayAug",
    "RandomOrderAug",
    "RandomSizedCropAug",
    "ResizeAug",
    "SaturationJitterAug",
    "SequentialAug",
]

# ITU-R 601 luma weights of R, G, B (MXNet's contrast and saturation jitter)
_LUMA = [[[0.299, 0.587, 0.114]]]


class Augmenter:
    """Base class of image augmenters: ``aug(src)`` returns the augmented image.

    Parameters
    ----------
    **kwargs
        The arguments that :meth:`dumps` reports (arrays as lists).
    """

    def __init__(self, **kwargs: Any):
        self._kwargs = {}
        for key, value in kwargs.items():
            if isinstance(value, nd.NDArray):
                value = value.asnumpy()
            if isinstance(value, np.ndarray):
                value = value.tolist()
            self._kwargs[key] = value

    def dumps(self) -> str:
        """JSON ``[name, arguments]`` of this augmenter."""
        return json.dumps([self.__class__.__name__.lower(), self._kwargs])

    def __call__(self, src: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define __call__(src)")


class SequentialAug(Augmenter):
    """Apply the augmenters ``ts`` in order."""

    def __init__(self, ts: Sequence[Augmenter]):
        super().__init__()
        self.ts = list(ts)

    def dumps(self) -> list[Any]:  # type: ignore[override]
        """``[name, [each augmenter's dumps()]]``."""
        return [self.__class__.__name__.lower(), [t.dumps() for t in self.ts]]

    def __call__(self, src: Any) -> Any:
        for aug in self.ts:
            src = aug(src)
        return src


class RandomOrderAug(SequentialAug):
    """Apply the augmenters ``ts`` in a random order (drawn anew for every image)."""

    def __call__(self, src: Any) -> Any:
        random.shuffle(self.ts)
        return super().__call__(src)


class ResizeAug(Augmenter):
    """Resize the shorter edge to ``size`` (see :func:`resize_short`)."""

    def __init__(self, size: int, interp: int = 2):
        super().__init__(size=size, interp=interp)
        self.size = size
        self.interp = interp

    def __call__(self, src: Any) -> Any:
        return resize_short(src, self.size, self.interp)


class ForceResizeAug(Augmenter):
    """Resize to ``size`` (w, h) whatever the aspect ratio."""

    def __init__(self, size: tuple[int, int], interp: int = 2):
        super().__init__(size=size, interp=interp)
        self.size = size
        self.interp = interp

    def __call__(self, src: Any) -> Any:
        sizes = (int(src.shape[0]), int(src.shape[1]), self.size[1], self.size[0])
        return imresize(src, *self.size, interp=_interp_method(self.interp, sizes))


class RandomCropAug(Augmenter):
    """Crop ``size`` (w, h) at a random position (see :func:`random_crop`)."""

    def __init__(self, size: tuple[int, int], interp: int = 2):
        super().__init__(size=size, interp=interp)
        self.size = size
        self.interp = interp

    def __call__(self, src: Any) -> Any:
        return random_crop(src, self.size, self.interp)[0]


class RandomSizedCropAug(Augmenter):
    """Crop a random area and aspect ratio, resized to ``size`` (see :func:`random_size_crop`)."""

    def __init__(self, size: tuple[int, int], area: float | tuple[float, float], ratio: tuple[float, float],
                 interp: int = 2, **kwargs: Any):
        if "min_area" in kwargs:  # MXNet's older name
            area = kwargs.pop("min_area")
        if kwargs:
            raise ConfigError(f"RandomSizedCropAug: unexpected arguments {sorted(kwargs)}")
        super().__init__(size=size, area=area, ratio=ratio, interp=interp)
        self.size = size
        self.area = area
        self.ratio = ratio
        self.interp = interp

    def __call__(self, src: Any) -> Any:
        return random_size_crop(src, self.size, self.area, self.ratio, self.interp)[0]


class CenterCropAug(Augmenter):
    """Crop ``size`` (w, h) at the centre (see :func:`center_crop`)."""

    def __init__(self, size: tuple[int, int], interp: int = 2):
        super().__init__(size=size, interp=interp)
        self.size = size
        self.interp = interp

    def __call__(self, src: Any) -> Any:
        return center_crop(src, self.size, self.interp)[0]


class BrightnessJitterAug(Augmenter):
    """Scale the pixels by ``1 + u``, ``u`` uniform in [-brightness, brightness]."""

    def __init__(self, brightness: float):
        super().__init__(brightness=brightness)
        self.brightness = brightness

    def __call__(self, src: Any) -> Any:
        alpha = 1.0 + random.uniform(-self.brightness, self.brightness)
        src *= alpha
        return src


class ContrastJitterAug(Augmenter):
    """Blend the image with its mean grey level: ``alpha * src + (1 - alpha) * mean_gray``."""

    def __init__(self, contrast: float):
        super().__init__(contrast=contrast)
        self.contrast = contrast

    def __call__(self, src: Any) -> Any:
        alpha = 1.0 + random.uniform(-self.contrast, self.contrast)
        gray = src * nd.array(_LUMA, ctx=src.context, dtype=src.dtype)
        gray = (3.0 * (1.0 - alpha) / gray.size) * nd.sum(gray)
        src *= alpha
        src += gray
        return src


class SaturationJitterAug(Augmenter):
    """Blend each pixel with its own grey level: ``alpha * src + (1 - alpha) * gray``."""

    def __init__(self, saturation: float):
        super().__init__(saturation=saturation)
        self.saturation = saturation

    def __call__(self, src: Any) -> Any:
        alpha = 1.0 + random.uniform(-self.saturation, self.saturation)
        gray = src * nd.array(_LUMA, ctx=src.context, dtype=src.dtype)
        gray = nd.sum(gray, axis=2, keepdims=True)
        gray *= 1.0 - alpha
        src *= alpha
        src += gray
        return src


class HueJitterAug(Augmenter):
    """Rotate the hue by ``u * pi``, ``u`` uniform in [-hue, hue], in YIQ space."""

    # RGB -> YIQ and back (the approximate linear hue rotation MXNet uses)
    _TYIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])
    _ITYIQ = np.array([[1.0, 0.956, 0.621], [1.0, -0.272, -0.647], [1.0, -1.107, 1.705]])

    def __init__(self, hue: float):
        super().__init__(hue=hue)
        self.hue = hue

    def __call__(self, src: Any) -> Any:
        alpha = random.uniform(-self.hue, self.hue)
        u, w = np.cos(alpha * np.pi), np.sin(alpha * np.pi)
        rotation = np.array([[1.0, 0.0, 0.0], [0.0, u, -w], [0.0, w, u]])
        transform = np.dot(np.dot(self._ITYIQ, rotation), self._TYIQ).T
        return nd.dot(src, nd.array(transform, ctx=src.context, dtype=src.dtype))


class ColorJitterAug(RandomOrderAug):
    """Brightness, contrast and saturation jitter (those above 0), in a random order."""

    def __init__(self, brightness: float, contrast: float, saturation: float):
        ts: list[Augmenter] = []
        if brightness > 0:
            ts.append(BrightnessJitterAug(brightness))
        if contrast > 0:
            ts.append(ContrastJitterAug(contrast))
        if saturation > 0:
            ts.append(SaturationJitterAug(saturation))
        super().__init__(ts)


class LightingAug(Augmenter):
    """AlexNet's PCA lighting noise: add ``eigvec @ (alpha * eigval)``, ``alpha ~ N(0, alphastd)``.

    ``alpha`` is drawn from numpy's global generator, as in MXNet.
    """

    def __init__(self, alphastd: float, eigval: Any, eigvec: Any):
        super().__init__(alphastd=alphastd, eigval=eigval, eigvec=eigvec)
        self.alphastd = alphastd
        self.eigval = np.asarray(eigval, dtype=np.float64)
        self.eigvec = np.asarray(eigvec, dtype=np.float64)
        if self.eigval.shape != (3,) or self.eigvec.shape != (3, 3):
            raise ShapeError(f"LightingAug: eigval must have shape (3,) and eigvec (3, 3), got "
                             f"{self.eigval.shape} and {self.eigvec.shape}")

    def __call__(self, src: Any) -> Any:
        alpha = np.random.normal(0, self.alphastd, size=(3,))
        rgb = np.dot(self.eigvec * alpha, self.eigval)
        src += nd.array(rgb, ctx=src.context, dtype=src.dtype)
        return src


class ColorNormalizeAug(Augmenter):
    """Subtract ``mean`` and divide by ``std`` per channel (see :func:`color_normalize`)."""

    def __init__(self, mean: Any, std: Any):
        super().__init__(mean=mean, std=std)
        self.mean = None if mean is None else np.asarray(_numpy(mean), dtype=np.float32)
        self.std = None if std is None else np.asarray(_numpy(std), dtype=np.float32)

    def __call__(self, src: Any) -> Any:
        mean = None if self.mean is None else nd.array(self.mean, ctx=src.context, dtype=src.dtype)
        std = None if self.std is None else nd.array(self.std, ctx=src.context, dtype=src.dtype)
        return color_normalize(src, mean, std)


class RandomGrayAug(Augmenter):
    """With probability ``p``, replace every channel by the grey level (three channels stay)."""

    _MAT = ((0.21, 0.21, 0.21), (0.72, 0.72, 0.72), (0.07, 0.07, 0.07))

    def __init__(self, p: float):
        super().__init__(p=p)
        self.p = p

    def __call__(self, src: Any) -> Any:
        if random.random() < self.p:
            src = nd.dot(src, nd.array(np.array(self._MAT), ctx=src.context, dtype=src.dtype))
        return src


class HorizontalFlipAug(Augmenter):
    """With probability ``p``, mirror the image left to right."""

    def __init__(self, p: float):
        super().__init__(p=p)
        self.p = p

    def __call__(self, src: Any) -> Any:
        if random.random() < self.p:
            src = nd.flip(src, axis=1)
        return src


class CastAug(Augmenter):
    """Cast to ``typ`` (float32 by default)."""

    def __init__(self, typ: str = "float32"):
        super().__init__(type=typ)
        self.typ = typ

    def __call__(self, src: Any) -> Any:
        return src.astype(self.typ)


def _numpy(value: Any) -> Any:
    return value.asnumpy() if isinstance(value, nd.NDArray) else value


# ImageNet's RGB mean and standard deviation and the PCA of its pixels (MXNet's defaults)
_IMAGENET_MEAN = np.array([123.68, 116.28, 103.53])
_IMAGENET_STD = np.array([58.395, 57.12, 57.375])
_IMAGENET_EIGVAL = np.array([55.46, 4.794, 1.148])
_IMAGENET_EIGVEC = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140], [-0.5836, -0.6948, 0.4203]])


def _channel_stat(value: Any, name: str) -> Any:
    if value is True:
        return _IMAGENET_MEAN if name == "mean" else _IMAGENET_STD
    if value is None or value is False:
        return None
    array = np.asarray(_numpy(value), dtype=np.float64)
    if array.ndim != 1 or array.shape[0] not in (1, 3):
        raise ShapeError(f"CreateAugmenter: {name} must have 1 or 3 values (per channel), got shape {array.shape}")
    return array


def CreateAugmenter(data_shape: Sequence[int], resize: int = 0, rand_crop: bool = False,
                    rand_resize: bool = False, rand_mirror: bool = False, mean: Any = None, std: Any = None,
                    brightness: float = 0, contrast: float = 0, saturation: float = 0, hue: float = 0,
                    pca_noise: float = 0, rand_gray: float = 0, inter_method: int = 2,
                    **kwargs: Any) -> list[Augmenter]:
    """The augmenter list of MXNet's default image pipeline (MXNet's ``CreateAugmenter``).

    In order: resize the shorter edge to ``resize`` (if > 0); a random-sized crop
    (``rand_resize``, which needs ``rand_crop``), a random crop (``rand_crop``) or a centre
    crop to ``data_shape``'s (h, w); a mirror with probability 0.5 (``rand_mirror``); a cast
    to float32; colour jitter; hue jitter; PCA lighting noise; random grey; normalisation
    by ``mean`` and ``std`` (``True``: ImageNet's).

    Parameters
    ----------
    data_shape : tuple of int
        ``(channels, height, width)`` of the output.
    **kwargs
        Ignored (MXNet passes the image iterator's other arguments through).
    """
    if len(data_shape) != 3:
        raise ShapeError(f"CreateAugmenter: data_shape must be (channels, height, width), got {tuple(data_shape)}")
    auglist: list[Augmenter] = []
    if resize > 0:
        auglist.append(ResizeAug(resize, inter_method))
    crop_size = (int(data_shape[2]), int(data_shape[1]))
    if rand_resize:
        if not rand_crop:
            raise ConfigError("CreateAugmenter: rand_resize=True needs rand_crop=True")
        auglist.append(RandomSizedCropAug(crop_size, 0.08, (3.0 / 4.0, 4.0 / 3.0), inter_method))
    elif rand_crop:
        auglist.append(RandomCropAug(crop_size, inter_method))
    else:
        auglist.append(CenterCropAug(crop_size, inter_method))
    if rand_mirror:
        auglist.append(HorizontalFlipAug(0.5))
    auglist.append(CastAug())
    if brightness or contrast or saturation:
        auglist.append(ColorJitterAug(brightness, contrast, saturation))
    if hue:
        auglist.append(HueJitterAug(hue))
    if pca_noise > 0:
        auglist.append(LightingAug(pca_noise, _IMAGENET_EIGVAL, _IMAGENET_EIGVEC))
    if rand_gray > 0:
        auglist.append(RandomGrayAug(rand_gray))
    mean_values = _channel_stat(mean, "mean")
    std_values = _channel_stat(std, "std")
    if mean_values is not None or std_values is not None:
        auglist.append(ColorNormalizeAug(mean_values, std_values))
    return auglist
