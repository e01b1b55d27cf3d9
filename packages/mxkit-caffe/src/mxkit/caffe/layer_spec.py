"""What every layer converter takes and returns, and the checks they share.

A converter takes a :class:`LayerSpec` (the layer, its MXNet-style name, its input symbols)
and returns a :class:`Converted`: the output symbols, one per top, and a function turning the
layer's caffemodel blobs into named arguments and auxiliary states.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from mxkit.core.errors import FormatError

# converted parameters: ("arg" or "aux", name) -> array
Params = dict[tuple[str, str], np.ndarray]
# the blobs of one layer by its Caffe name (None: the caffemodel has no such layer)
BlobLookup = Callable[[str], "list[np.ndarray] | None"]

# bounds on sizes taken from a prototxt, far beyond any real network
MAX_SIZE = 1 << 20
MAX_CHANNELS = 1 << 24


class UnsupportedLayerError(FormatError):
    """A layer (or a setting of one) that the converter cannot express; raised before anything is written."""


@dataclass
class LayerSpec:
    """What a converter gets: the layer, its symbol name, the input symbols and where they come from."""

    layer: Any
    name: str
    inputs: list[Any]
    reads_network_input: list[bool]  # per input: a network input, or made of one by channel-agnostic layers
    folded_scale: Any = None  # for a BatchNorm: the Scale layer merged into it
    swap_rgb: bool = False  # BGR -> RGB on the input channels of a convolution's weights

    @property
    def caffe_name(self) -> str:
        """The layer's name as the prototxt writes it."""
        return str(self.layer.name)

    def fail(self, reason: str) -> UnsupportedLayerError:
        """The error for a setting of this layer that cannot be converted, naming the layer and its type."""
        return UnsupportedLayerError(f"layer {self.caffe_name!r} of type {self.layer.type}: {reason}")


@dataclass
class Converted:
    """The output symbols (one per top) and the conversion of the layer's blobs to parameters."""

    outputs: list[Any]
    params: Callable[[BlobLookup], Params] | None = None


def symbol_module() -> Any:
    """mxkit.symbol, imported when a converter first runs."""
    import mxkit.symbol as sym

    return sym


def bounded(spec: LayerSpec, what: str, values: Sequence[int], low: int, high: int = MAX_SIZE) -> tuple[int, ...]:
    """``values`` as ints, each checked to lie in ``low..high`` (sizes read from a file are bounded)."""
    values = tuple(int(v) for v in values)
    for value in values:
        if not low <= value <= high:
            raise spec.fail(f"{what}={list(values)} must lie in {low}..{high}")
    return values


def axis_value(spec: LayerSpec, value: int, what: str = "axis") -> int:
    """An axis read from a layer's parameters, checked to be one a tensor of up to 32 dimensions has."""
    value = int(value)
    if not -32 <= value < 32:
        raise spec.fail(f"{what}={value} is not a valid axis")
    return value


def need_blobs(spec: LayerSpec, lookup: BlobLookup, count: int, layer_name: str | None = None) -> list[np.ndarray]:
    """The caffemodel blobs of the layer (or of ``layer_name``), at least ``count`` of them."""
    name = layer_name or spec.caffe_name
    blobs = lookup(name)
    if blobs is None:
        raise FormatError(f"the caffemodel has no layer {name!r} (type {spec.layer.type}), whose weights the "
                          f"prototxt needs; are the prototxt and caffemodel of one network?")
    if len(blobs) < count:
        raise FormatError(f"layer {name!r} in the caffemodel has {len(blobs)} blobs, {count} expected")
    return blobs


def blob_vector(spec: LayerSpec, blob: np.ndarray, size: int, what: str) -> np.ndarray:
    """``blob`` as a vector of ``size`` values (old files store vectors as 4-D blobs)."""
    if blob.size != size:
        raise FormatError(f"layer {spec.caffe_name!r}: {what} blob has shape {blob.shape} ({blob.size} values), "
                          f"{size} expected")
    return blob.reshape(size)
