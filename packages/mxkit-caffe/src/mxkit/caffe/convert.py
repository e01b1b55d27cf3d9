"""Caffe network definitions and weights to a Symbol and its parameters.

The walk follows Caffe's own net construction: layers in file order, each reading blobs by
name and writing its tops; a top with its bottom's name (``top == bottom``) replaces that
blob in place. Every layer is checked before any symbol is built, so an unsupported layer is
reported (with its name and type) before anything is written.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mxkit.caffe import reader
from mxkit.caffe.layers import (
    CONVERTERS,
    INPUT_LAYERS,
    SUPPORTED_TYPES,
    BlobLookup,
    Converted,
    LayerSpec,
    UnsupportedLayerError,
    pooling_dims,
)
from mxkit.core.errors import FormatError, MXKitError

# Caffe's default net state for deployment: phase TEST, level 0, no stages
_TEST_PHASE = 1
# layers that treat every channel alike: what they output from an image is still in the
# image's channel order, so the BGR -> RGB swap may be applied after them
_CHANNEL_AGNOSTIC = frozenset({"Power", "Dropout", "ReLU", "Sigmoid", "TanH", "ELU", "AbsVal", "Split"})


@dataclass
class ConvertedNet:
    """A converted network: the symbol, its inputs and how each layer's blobs become parameters."""

    symbol: Any
    input_shapes: dict[str, tuple[int, ...] | None]
    layers: list[tuple[LayerSpec, Converted]] = field(default_factory=list)

    @property
    def input_dim(self) -> tuple[int, ...] | None:
        """The shape of the first input (MXNet's converter returns it as ``input_dim``)."""
        return next(iter(self.input_shapes.values()), None)

    def convert_params(self, lookup: BlobLookup) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The argument and auxiliary arrays, from the blobs ``lookup`` gives by Caffe layer name."""
        arg_params: dict[str, np.ndarray] = {}
        aux_params: dict[str, np.ndarray] = {}
        for _spec, converted in self.layers:
            if converted.params is None:
                continue
            for (kind, name), value in converted.params(lookup).items():
                (arg_params if kind == "arg" else aux_params)[name] = np.ascontiguousarray(value, dtype=np.float32)
        return arg_params, aux_params


def mxnet_name(caffe_name: str) -> str:
    """The symbol name of a Caffe layer or blob: '-' and '/' become '_', as in MXNet's converter."""
    return re.sub(r"[-/]", "_", caffe_name)


def _rule_met(rule: Any) -> bool:
    """Caffe's StateMeetsRule for the TEST phase at level 0 with no stages."""
    if rule.HasField("phase") and rule.phase != _TEST_PHASE:
        return False
    if rule.HasField("min_level") and 0 < rule.min_level:
        return False
    if rule.HasField("max_level") and 0 > rule.max_level:
        return False
    return not len(rule.stage)  # a required stage is never present; not_stage never excludes


def layer_included(layer: Any) -> bool:
    """Whether Caffe includes ``layer`` in a TEST-phase net (its include / exclude rules)."""
    if len(layer.include):
        return any(_rule_met(rule) for rule in layer.include)
    return not any(_rule_met(rule) for rule in layer.exclude)


def _shape(dims: Sequence[int], what: str) -> tuple[int, ...]:
    shape = tuple(int(d) for d in dims)
    if not shape or any(not 0 < d < reader.MAX_DIM for d in shape) or math.prod(shape) > reader.MAX_ELEMENTS:
        raise FormatError(f"{what}: input shape {shape} must be 1 or more positive dimensions, "
                          f"at most {reader.MAX_ELEMENTS} elements")
    return shape


def _net_inputs(net: Any) -> list[tuple[str, tuple[int, ...] | None]]:
    """The inputs declared at the net level (``input`` with ``input_shape`` or ``input_dim``)."""
    names = list(net.input)
    if not names:
        if len(net.input_shape) or len(net.input_dim):
            raise FormatError("the prototxt gives input_shape/input_dim but no input name")
        return []
    if len(net.input_shape):
        if len(net.input_shape) not in (1, len(names)):
            raise FormatError(f"{len(names)} inputs but {len(net.input_shape)} input_shape entries")
        shapes = [net.input_shape[min(i, len(net.input_shape) - 1)].dim for i in range(len(names))]
        return [(n, _shape(s, f"input {n!r}")) for n, s in zip(names, shapes)]
    if len(net.input_dim):
        if len(net.input_dim) != 4 * len(names):
            raise FormatError(f"input_dim has {len(net.input_dim)} values; {len(names)} inputs need 4 each")
        return [(n, _shape(net.input_dim[4 * i:4 * i + 4], f"input {n!r}")) for i, n in enumerate(names)]
    return [(n, None) for n in names]


def _layer_input_shapes(layer: Any) -> list[tuple[int, ...] | None]:
    """The shape of each top of an input layer, when the prototxt says it."""
    tops = len(layer.top)
    if layer.type == "Input":
        shapes = layer.input_param.shape
        if len(shapes) not in (0, 1, tops):
            raise FormatError(f"Input layer {layer.name!r}: {len(shapes)} shapes for {tops} tops")
        if not len(shapes):
            return [None] * tops
        return [_shape(shapes[min(i, len(shapes) - 1)].dim, f"Input layer {layer.name!r}") for i in range(tops)]
    if layer.type == "DummyData" and len(layer.dummy_data_param.shape) == tops:
        dummy: list[tuple[int, ...] | None] = [_shape(s.dim, f"DummyData layer {layer.name!r}")
                                               for s in layer.dummy_data_param.shape]
        return dummy
    if layer.type == "MemoryData" and tops:
        p = layer.memory_data_param
        data = (p.batch_size, p.channels, p.height, p.width)
        memory: list[tuple[int, ...] | None] = [_shape(data, f"MemoryData layer {layer.name!r}")]
        return memory + [(int(p.batch_size),)] * (tops - 1)
    return [None] * tops


def _check_supported(layers: Sequence[Any]) -> None:
    unsupported = [f"{layer.name!r} (type {layer.type or '<none>'})" for layer in layers
                   if layer.type not in SUPPORTED_TYPES]
    if unsupported:
        raise UnsupportedLayerError(
            f"cannot convert {len(unsupported)} layer(s): {', '.join(unsupported)}; the supported types are "
            f"{', '.join(sorted(SUPPORTED_TYPES))}")


def _fold_pairs(layers: Sequence[Any]) -> dict[int, int]:
    """BatchNorm index -> the index of the Scale layer that reads its output and nothing else does.

    Caffe splits batch normalisation in two layers (BatchNorm: normalise, Scale: gamma and
    beta); MXNet's BatchNorm does both, so the pair becomes one operator, as MXNet's converter does.
    """
    pairs: dict[int, int] = {}
    producer: dict[str, int] = {}  # blob -> index of the layer that wrote its current version
    readers: dict[int, list[int]] = {}  # BatchNorm index -> the layers that read its output
    for index, layer in enumerate(layers):
        for bottom in layer.bottom:
            source = producer.get(bottom)
            if source is not None and layers[source].type == "BatchNorm":
                readers.setdefault(source, []).append(index)
        for top in layer.top:
            producer[top] = index
    for bn, users in readers.items():
        first = users[0]
        if layers[first].type == "Scale" and len(layers[first].bottom) == 1 and users == [first]:
            pairs[bn] = first
    return pairs


def convert_net(net: Any, *, bgr_to_rgb: bool = True,
                input_shapes: Mapping[str, Sequence[int]] | None = None) -> ConvertedNet:
    """Convert a parsed Caffe ``NetParameter`` (see :mod:`mxkit.caffe.reader`) to a :class:`ConvertedNet`.

    Parameters
    ----------
    net : caffe NetParameter
        The network definition (a deploy prototxt).
    bgr_to_rgb : bool
        Swap the first and third input channels of the weights of every convolution that reads
        a network input (directly or through layers that treat all channels alike: Power, ReLU,
        Dropout...), so that the converted model takes RGB images where Caffe took BGR.
    input_shapes : dict, optional
        Input shapes by blob name, overriding (or supplying) the prototxt's.

    Raises
    ------
    UnsupportedLayerError
        Naming every layer that cannot be converted, before any symbol is built.
    FormatError
        When the definition is inconsistent (a blob read before it is written, a shape out of bounds).
    """
    import mxkit.symbol as sym

    layers = [layer for layer in net.layer if layer_included(layer)]
    _check_supported(layers)
    overrides = {name: _shape(shape, f"input_shapes[{name!r}]") for name, shape in (input_shapes or {}).items()}

    blobs: dict[str, Any] = {}
    image_like: set[str] = set()  # network inputs, and what channel-agnostic layers made of them
    shapes: dict[str, tuple[int, ...] | None] = {}
    produced: list[str] = []  # blobs in the order they were (last) written
    consumed: set[str] = set()
    used_names: set[str] = set()

    def unique(name: str) -> str:
        candidate, suffix = name, 1
        while candidate in used_names:
            candidate, suffix = f"{name}_{suffix}", suffix + 1
        used_names.add(candidate)
        return candidate

    def add_input(blob: str, shape: tuple[int, ...] | None) -> None:
        if blob in blobs:
            raise FormatError(f"input blob {blob!r} is declared twice")
        name = unique(mxnet_name(blob))
        shape = overrides.get(blob, overrides.get(name, shape))
        blobs[blob] = sym.Variable(name)
        image_like.add(blob)
        shapes[name] = shape

    for blob, shape in _net_inputs(net):
        add_input(blob, shape)
    pairs = _fold_pairs(layers)
    folded_scales = {scale: bn for bn, scale in pairs.items()}
    result = ConvertedNet(symbol=None, input_shapes=shapes)

    for index, layer in enumerate(layers):
        if layer.type in INPUT_LAYERS:
            for blob, shape in zip(layer.top, _layer_input_shapes(layer)):
                add_input(blob, shape)
            continue
        for bottom in layer.bottom:
            if bottom not in blobs:
                raise FormatError(f"layer {layer.name!r} (type {layer.type}) reads blob {bottom!r}, which no earlier "
                                  f"layer or input produces")
        for top in layer.top:
            if top in blobs and top not in layer.bottom:
                raise FormatError(f"layer {layer.name!r} writes blob {top!r}, which an earlier layer already wrote "
                                  f"(only in-place layers, top == bottom, may reuse a name)")
        consumed.update(layer.bottom)
        if layer.type == "Scale":
            if index not in folded_scales:
                raise UnsupportedLayerError(
                    f"layer {layer.name!r} of type Scale: a Scale layer is converted only right after the "
                    f"BatchNorm it belongs to (reading that BatchNorm's output, which nothing else reads)")
            outputs = [blobs[layer.bottom[0]]] * len(layer.top)  # the BatchNorm already applies it
        else:
            spec = LayerSpec(layer=layer, name=unique(mxnet_name(layer.name)),
                             inputs=[blobs[b] for b in layer.bottom],
                             reads_network_input=[b in image_like for b in layer.bottom],
                             folded_scale=layers[pairs[index]] if index in pairs else None, swap_rgb=bgr_to_rgb)
            if not len(layer.bottom):
                raise spec.fail("it has no bottom")
            converted = CONVERTERS[layer.type](spec)
            if len(converted.outputs) != len(layer.top):
                raise spec.fail(f"{len(layer.top)} tops where the conversion makes {len(converted.outputs)}")
            result.layers.append((spec, converted))
            outputs = converted.outputs
        keeps_channels = layer.type in _CHANNEL_AGNOSTIC and all(b in image_like for b in layer.bottom)
        for top, output in zip(layer.top, outputs):
            blobs[top] = output
            if keeps_channels:
                image_like.add(top)
            else:
                image_like.discard(top)
            if top in produced:
                produced.remove(top)
            produced.append(top)
            consumed.discard(top)

    heads = [blobs[blob] for blob in produced if blob not in consumed]
    if not heads:
        raise FormatError("the network has no layer whose output is not read by another: nothing to convert")
    result.symbol = heads[0] if len(heads) == 1 else sym.Group(heads)
    _check_pooling_shapes(result)
    return result


def _caffe_pool_size(size: int, kernel: int, stride: int, pad: int) -> int:
    """Caffe's pooled size: ceil rounding, minus a last window that starts in the padding."""
    pooled = -(-(size + 2 * pad - kernel) // stride) + 1  # integer ceil
    if pad and (pooled - 1) * stride >= size + pad:
        pooled -= 1
    return pooled


def _check_pooling_shapes(result: ConvertedNet) -> None:
    """Refuse a pooling layer whose output size MXNet's 'full' rounding computes differently from Caffe.

    The two differ only when the last window would start inside the padding (Caffe drops it);
    known input shapes let us find those layers instead of converting them wrongly.
    """
    pools = [(spec, conv) for spec, conv in result.layers
             if spec.layer.type == "Pooling" and not spec.layer.pooling_param.global_pooling
             and spec.layer.pooling_param.round_mode == type(spec.layer.pooling_param).CEIL]
    if not pools or any(shape is None for shape in result.input_shapes.values()):
        return
    internals = result.symbol.get_internals()
    try:
        _, out_shapes, _ = internals.infer_shape_partial(**result.input_shapes)
    except MXKitError:  # a shape error surfaces where the weights are checked, or when the model is bound
        return
    by_name = dict(zip(internals.list_outputs(), out_shapes))
    for spec, converted in pools:
        in_shape = by_name.get(spec.inputs[0].list_outputs()[0])
        out_shape = by_name.get(converted.outputs[0].list_outputs()[0])
        if not in_shape or not out_shape or len(in_shape) != 4:
            continue
        dims = pooling_dims(spec)
        expected = tuple(_caffe_pool_size(s, k, st, p)
                         for s, k, st, p in zip(in_shape[2:], dims.kernel, dims.stride, dims.pad))
        empty = [s for s, n, st, p in zip(in_shape[2:], expected, dims.stride, dims.pad) if (n - 1) * st - p >= s]
        if empty and tuple(out_shape[2:]) == expected:
            raise UnsupportedLayerError(
                f"layer {spec.caffe_name!r} of type Pooling: for input shape {tuple(in_shape)} the last window of "
                f"Caffe's ceil rounding lies wholly past the input (kernel {dims.kernel} smaller than stride "
                f"{dims.stride}); Caffe outputs -FLT_MAX (MAX) or NaN (AVE) there; use round_mode: FLOOR")
        if tuple(out_shape[2:]) != expected:
            raise UnsupportedLayerError(
                f"layer {spec.caffe_name!r} of type Pooling: for input shape {tuple(in_shape)} Caffe pools to "
                f"{expected} (it drops a last window that starts in the padding) but MXNet's 'full' rounding "
                f"gives {tuple(out_shape[2:])}; such a kernel/stride/pad is not supported")


def load_caffemodel_blobs(path: str | os.PathLike[str]) -> dict[str, list[np.ndarray]]:
    """The blobs of every layer of a ``.caffemodel``, by Caffe layer name, as float32 arrays."""
    net = reader.read_caffemodel(path)
    blobs: dict[str, list[np.ndarray]] = {}
    for index, layer in enumerate(net.layer):
        if layer.name in blobs:
            raise FormatError(f"{os.fspath(path)}: two layers are named {layer.name!r} (the second is #{index})")
        blobs[layer.name] = [reader.blob_array(b, f"{os.fspath(path)}: layer {layer.name!r} blob {i}")
                             for i, b in enumerate(layer.blobs)]
    return blobs
