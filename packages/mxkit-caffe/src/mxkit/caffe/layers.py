"""One converter per Caffe layer type: the Symbol it builds and how its blobs become parameters.

Each converter takes a :class:`LayerSpec` (the layer, its MXNet-style name, its input symbols)
and returns a :class:`Converted`: the output symbols, one per top, and a function turning the
layer's caffemodel blobs into named arguments and auxiliary states. Parameter names follow
MXNet's converter (``conv1_weight``, ``bn1_moving_mean``...), so checkpoints converted by
MXNet and by mxkit name the same things the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mxkit.caffe.layer_spec import (
    MAX_CHANNELS,
    BlobLookup,
    Converted,
    LayerSpec,
    Params,
    UnsupportedLayerError,
    blob_vector,
    bounded,
    need_blobs,
    symbol_module,
)
from mxkit.caffe.tensor_layers import (
    convert_concat,
    convert_crop,
    convert_eltwise,
    convert_flatten,
    convert_reshape,
    convert_slice,
    convert_softmax,
    convert_softmax_with_loss,
    convert_split,
)
from mxkit.core.errors import FormatError

__all__ = ["CONVERTERS", "INPUT_LAYERS", "SUPPORTED_TYPES", "BlobLookup", "Converted", "LayerSpec", "Params",
           "UnsupportedLayerError", "pooling_dims"]

# the converters build symbols through mxkit.symbol, imported when the first one runs
_sym = symbol_module


@dataclass
class _Dims:
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    pad: tuple[int, ...]
    dilate: tuple[int, ...] = field(default_factory=tuple)


def _spatial(spec: LayerSpec, param: Any, repeated: str, h: str, w: str, default: int, low: int,
             ndim: int) -> tuple[int, ...]:
    """A per-spatial-axis size from Caffe's repeated field or its _h/_w pair (ConvolutionParameter)."""
    has_h, has_w = param.HasField(h), param.HasField(w)
    values = list(getattr(param, repeated))
    if has_h or has_w:
        if values:
            raise spec.fail(f"give either {repeated} or {h}/{w}, not both")
        if ndim != 2:
            raise spec.fail(f"{h}/{w} are for 2-D convolutions only")
        return bounded(spec, f"{h}/{w}", (getattr(param, h), getattr(param, w)), low)
    if not values:
        return (default,) * ndim
    if len(values) == 1:
        values = values * ndim
    if len(values) != ndim:
        raise spec.fail(f"{repeated}={values} must have 1 or {ndim} values")
    return bounded(spec, repeated, values, low)


def _conv_dims(spec: LayerSpec, param: Any) -> _Dims:
    lengths = [len(param.kernel_size), len(param.stride), len(param.pad), len(param.dilation)]
    ndim = max([n for n in lengths if n > 1], default=2)
    if param.axis != 1:
        raise spec.fail(f"axis={param.axis}: only channels on axis 1 (NCHW) are supported")
    kernel = _spatial(spec, param, "kernel_size", "kernel_h", "kernel_w", 0, 1, ndim)
    if not param.kernel_size and not (param.HasField("kernel_h") or param.HasField("kernel_w")):
        raise spec.fail("kernel_size (or kernel_h and kernel_w) is required")
    return _Dims(kernel=kernel, stride=_spatial(spec, param, "stride", "stride_h", "stride_w", 1, 1, ndim),
                 pad=_spatial(spec, param, "pad", "pad_h", "pad_w", 0, 0, ndim),
                 dilate=_dilation(spec, param, ndim))


def _dilation(spec: LayerSpec, param: Any, ndim: int) -> tuple[int, ...]:
    values = list(param.dilation) or [1]
    if len(values) == 1:
        values = values * ndim
    if len(values) != ndim:
        raise spec.fail(f"dilation={values} must have 1 or {ndim} values")
    return bounded(spec, "dilation", values, 1)


# ---- convolution and fully connected ---------------------------------------------------------

def _swap_bgr(weight: np.ndarray) -> np.ndarray:
    swapped = weight.copy()
    swapped[:, [0, 2]] = weight[:, [2, 0]]
    return swapped


def convert_convolution(spec: LayerSpec) -> Converted:
    param = spec.layer.convolution_param
    dims = _conv_dims(spec, param)
    deconv = spec.layer.type == "Deconvolution"
    (num_output,) = bounded(spec, "num_output", [param.num_output], 1, MAX_CHANNELS)
    (group,) = bounded(spec, "group", [param.group], 1, MAX_CHANNELS)
    if num_output % group:
        raise spec.fail(f"num_output={num_output} is not a multiple of group={group}")
    sym = _sym()
    op = sym.Deconvolution if deconv else sym.Convolution
    out = op(spec.inputs[0], name=spec.name, num_filter=num_output, kernel=dims.kernel, stride=dims.stride,
             pad=dims.pad, dilate=dims.dilate, num_group=group, no_bias=not param.bias_term)
    swap = spec.swap_rgb and not deconv and group == 1 and spec.reads_network_input[0]

    def params(lookup: BlobLookup) -> Params:
        blobs = need_blobs(spec, lookup, 2 if param.bias_term else 1)
        weight = blobs[0]
        # Caffe keeps (out, in/group, *kernel) for convolution and (in, out/group, *kernel) for
        # deconvolution, as MXNet does; old files store a 4-D blob for every weight
        if weight.ndim != 2 + len(dims.kernel) or tuple(weight.shape[2:]) != dims.kernel:
            raise FormatError(f"layer {spec.caffe_name!r}: weight blob has shape {weight.shape}, which does not "
                              f"match kernel {dims.kernel}")
        if not deconv and weight.shape[0] != num_output:
            raise FormatError(f"layer {spec.caffe_name!r}: weight blob has shape {weight.shape} but num_output is "
                              f"{num_output}")
        if deconv and weight.shape[1] * group != num_output:
            raise FormatError(f"layer {spec.caffe_name!r}: deconvolution weight blob has shape {weight.shape} but "
                              f"num_output={num_output} with group={group} needs {num_output // group} on axis 1")
        if swap and weight.shape[1] in (3, 4):
            weight = _swap_bgr(weight)
        out_params: Params = {("arg", f"{spec.name}_weight"): weight}
        if param.bias_term:
            out_params[("arg", f"{spec.name}_bias")] = blob_vector(spec, blobs[1], num_output, "bias")
        return out_params

    return Converted([out], params)


def convert_inner_product(spec: LayerSpec) -> Converted:
    param = spec.layer.inner_product_param
    (num_output,) = bounded(spec, "num_output", [param.num_output], 1, MAX_CHANNELS)
    sym = _sym()
    data = spec.inputs[0]
    axis = int(param.axis)
    if axis == 1:
        flatten = True
    elif axis == -1:
        flatten = False
    elif 1 < axis <= 32:
        # Caffe flattens the axes from `axis` on into one; FullyConnected(flatten=False) then works on it
        data = sym.Reshape(data, shape=(0,) * axis + (-1,), name=f"{spec.name}_flatten")
        flatten = False
    else:
        raise spec.fail(f"axis={axis} is not supported (1, -1, or 2 and above)")
    out = sym.FullyConnected(data, name=spec.name, num_hidden=num_output, no_bias=not param.bias_term,
                             flatten=flatten)

    def params(lookup: BlobLookup) -> Params:
        blobs = need_blobs(spec, lookup, 2 if param.bias_term else 1)
        weight = blobs[0]
        if weight.size % num_output:
            raise FormatError(f"layer {spec.caffe_name!r}: weight blob of {weight.size} values is not "
                              f"num_output={num_output} rows")
        inputs = weight.size // num_output
        # transpose=true stores the weight as (inputs, outputs)
        weight = weight.reshape(inputs, num_output).T.copy() if param.transpose else weight.reshape(num_output,
                                                                                                   inputs)
        out_params: Params = {("arg", f"{spec.name}_weight"): weight}
        if param.bias_term:
            out_params[("arg", f"{spec.name}_bias")] = blob_vector(spec, blobs[1], num_output, "bias")
        return out_params

    return Converted([out], params)


# ---- pooling, normalisation ------------------------------------------------------------------

def pooling_dims(spec: LayerSpec) -> _Dims:
    """Kernel, stride and pad of a 2-D Pooling layer (Caffe's kernel_size / kernel_h / kernel_w...)."""
    param = spec.layer.pooling_param

    def pair(single: str, h: str, w: str, default: int, low: int) -> tuple[int, ...]:
        if param.HasField(h) or param.HasField(w):
            if param.HasField(single):
                raise spec.fail(f"give either {single} or {h}/{w}, not both")
            return bounded(spec, f"{h}/{w}", (getattr(param, h), getattr(param, w)), low)
        value = getattr(param, single) if param.HasField(single) else default
        return bounded(spec, single, (value, value), low)

    if param.global_pooling:
        return _Dims(kernel=(1, 1), stride=(1, 1), pad=(0, 0))
    if not (param.HasField("kernel_size") or param.HasField("kernel_h")):
        raise spec.fail("kernel_size (or kernel_h and kernel_w) is required unless global_pooling is set")
    return _Dims(kernel=pair("kernel_size", "kernel_h", "kernel_w", 0, 1),
                 stride=pair("stride", "stride_h", "stride_w", 1, 1), pad=pair("pad", "pad_h", "pad_w", 0, 0))


def convert_pooling(spec: LayerSpec) -> Converted:
    param = spec.layer.pooling_param
    pb = type(param)
    if param.pool == pb.MAX:
        pool_type = "max"
    elif param.pool == pb.AVE:
        pool_type = "avg"
    else:
        raise spec.fail(f"pool={pb.PoolMethod.Name(param.pool)} is not supported (MAX and AVE are)")
    dims = pooling_dims(spec)
    if any(p >= k for p, k in zip(dims.pad, dims.kernel)):
        raise spec.fail(f"pad={dims.pad} must be smaller than kernel={dims.kernel} (Caffe requires it too)")
    # Caffe rounds the output size up (CEIL), which is MXNet's 'full' convention
    convention = "valid" if param.round_mode == pb.FLOOR else "full"
    out = _sym().Pooling(spec.inputs[0], name=spec.name, kernel=dims.kernel, stride=dims.stride, pad=dims.pad,
                         pool_type=pool_type, global_pool=bool(param.global_pooling), pooling_convention=convention,
                         count_include_pad=True)
    return Converted([out])


def convert_lrn(spec: LayerSpec) -> Converted:
    param = spec.layer.lrn_param
    pb = type(param)
    (size,) = bounded(spec, "local_size", [param.local_size], 1, 4096)
    if size % 2 == 0:
        raise spec.fail(f"local_size={size} must be odd (Caffe requires it too)")
    sym = _sym()
    if param.norm_region == pb.ACROSS_CHANNELS:
        return Converted([sym.LRN(spec.inputs[0], name=spec.name, alpha=param.alpha, beta=param.beta, knorm=param.k,
                                  nsize=size)])
    # WITHIN_CHANNEL: x / (1 + alpha * mean of x^2 over a size x size window) ^ beta, the window
    # zero-padded by (size - 1) / 2 and always divided by size^2, as Caffe's AVE pooling does there
    x = spec.inputs[0]
    pad = (size - 1) // 2
    mean_square = sym.Pooling(sym.square(x, name=f"{spec.name}_square"), name=f"{spec.name}_pool",
                              kernel=(size, size), stride=(1, 1), pad=(pad, pad), pool_type="avg",
                              count_include_pad=True)
    scale = sym._plus_scalar(sym._mul_scalar(mean_square, scalar=param.alpha, name=f"{spec.name}_alpha"),
                             scalar=1.0, name=f"{spec.name}_one")
    norm = sym._power_scalar(scale, scalar=-param.beta, name=f"{spec.name}_norm")
    return Converted([sym.elemwise_mul(x, norm, name=spec.name)])


def convert_batch_norm(spec: LayerSpec) -> Converted:
    param = spec.layer.batch_norm_param
    eps = float(param.eps)
    if not eps > 0:
        raise spec.fail(f"eps={eps} must be positive")
    scale_layer = spec.folded_scale
    if scale_layer is not None:
        scale_param = scale_layer.scale_param
        if scale_param.axis != 1 or scale_param.num_axes != 1:
            raise spec.fail(f"the Scale layer {scale_layer.name!r} after it must scale axis 1 only "
                            f"(axis=1, num_axes=1)")
    out = _sym().BatchNorm(spec.inputs[0], name=spec.name, eps=eps, momentum=float(param.moving_average_fraction),
                           fix_gamma=scale_layer is None, use_global_stats=bool(param.use_global_stats))

    def params(lookup: BlobLookup) -> Params:
        mean, var, factor = need_blobs(spec, lookup, 3)[:3]
        channels = mean.size
        if factor.size != 1:
            raise FormatError(f"layer {spec.caffe_name!r}: the third BatchNorm blob (the moving-average scale "
                              f"factor) has {factor.size} values, 1 expected")
        # Caffe stores running sums scaled by a factor; the statistics are sum / factor (0 stays 0)
        rescale = 0.0 if float(factor.reshape(())) == 0 else 1.0 / float(factor.reshape(()))
        out_params: Params = {
            ("aux", f"{spec.name}_moving_mean"): (mean.reshape(channels) * rescale).astype(np.float32),
            ("aux", f"{spec.name}_moving_var"): (blob_vector(spec, var, channels, "variance") * rescale).astype(
                np.float32),
        }
        if scale_layer is None:
            gamma, beta = np.ones(channels, np.float32), np.zeros(channels, np.float32)
        else:
            scale_blobs = need_blobs(spec, lookup, 2 if scale_layer.scale_param.bias_term else 1, scale_layer.name)
            gamma = blob_vector(spec, scale_blobs[0], channels, f"Scale {scale_layer.name!r} scale")
            beta = (blob_vector(spec, scale_blobs[1], channels, f"Scale {scale_layer.name!r} bias")
                    if scale_layer.scale_param.bias_term else np.zeros(channels, np.float32))
        out_params[("arg", f"{spec.name}_gamma")] = gamma
        out_params[("arg", f"{spec.name}_beta")] = beta
        return out_params

    return Converted([out], params)


# ---- activations -----------------------------------------------------------------------------

def convert_relu(spec: LayerSpec) -> Converted:
    slope = float(spec.layer.relu_param.negative_slope)
    sym = _sym()
    if slope != 0:
        return Converted([sym.LeakyReLU(spec.inputs[0], name=spec.name, act_type="leaky", slope=slope)])
    return Converted([sym.Activation(spec.inputs[0], name=spec.name, act_type="relu")])


def convert_activation(act_type: str) -> Callable[[LayerSpec], Converted]:
    def convert(spec: LayerSpec) -> Converted:
        return Converted([_sym().Activation(spec.inputs[0], name=spec.name, act_type=act_type)])

    return convert


def convert_elu(spec: LayerSpec) -> Converted:
    alpha = float(spec.layer.elu_param.alpha)
    return Converted([_sym().LeakyReLU(spec.inputs[0], name=spec.name, act_type="elu", slope=alpha)])


def convert_prelu(spec: LayerSpec) -> Converted:
    shared = bool(spec.layer.prelu_param.channel_shared)
    out = _sym().LeakyReLU(spec.inputs[0], name=spec.name, act_type="prelu")

    def params(lookup: BlobLookup) -> Params:
        (slope,) = need_blobs(spec, lookup, 1)[:1]
        if shared and slope.size != 1:
            raise FormatError(f"layer {spec.caffe_name!r}: channel_shared PReLU has {slope.size} slopes, 1 expected")
        return {("arg", f"{spec.name}_gamma"): slope.reshape(slope.size)}

    return Converted([out], params)


def convert_abs(spec: LayerSpec) -> Converted:
    return Converted([_sym().abs(spec.inputs[0], name=spec.name)])


def convert_dropout(spec: LayerSpec) -> Converted:
    ratio = float(spec.layer.dropout_param.dropout_ratio)
    if not 0 <= ratio < 1:
        raise spec.fail(f"dropout_ratio={ratio} must lie in [0, 1)")
    return Converted([_sym().Dropout(spec.inputs[0], name=spec.name, p=ratio)])


def convert_power(spec: LayerSpec) -> Converted:
    param = spec.layer.power_param
    sym = _sym()
    out = spec.inputs[0]
    steps = []
    if param.scale != 1:
        steps.append(("_mul_scalar", float(param.scale)))
    if param.shift != 0:
        steps.append(("_plus_scalar", float(param.shift)))
    if param.power != 1:
        steps.append(("_power_scalar", float(param.power)))
    if not steps:  # the identity: y = x
        steps.append(("_mul_scalar", 1.0))
    for index, (op, scalar) in enumerate(steps):
        name = spec.name if index == len(steps) - 1 else f"{spec.name}_{op.strip('_')}"
        out = getattr(sym, op)(out, scalar=scalar, name=name)
    return Converted([out])


CONVERTERS: dict[str, Callable[[LayerSpec], Converted]] = {
    "Convolution": convert_convolution,
    "Deconvolution": convert_convolution,
    "InnerProduct": convert_inner_product,
    "Pooling": convert_pooling,
    "LRN": convert_lrn,
    "BatchNorm": convert_batch_norm,
    "ReLU": convert_relu,
    "PReLU": convert_prelu,
    "Sigmoid": convert_activation("sigmoid"),
    "TanH": convert_activation("tanh"),
    "ELU": convert_elu,
    "AbsVal": convert_abs,
    "Dropout": convert_dropout,
    "Power": convert_power,
    "Concat": convert_concat,
    "Eltwise": convert_eltwise,
    "Flatten": convert_flatten,
    "Reshape": convert_reshape,
    "Softmax": convert_softmax,
    "SoftmaxWithLoss": convert_softmax_with_loss,
    "Slice": convert_slice,
    "Crop": convert_crop,
    "Split": convert_split,
}
# the layers that make network inputs (their tops become variables)
INPUT_LAYERS = frozenset({"Input", "Data", "ImageData", "MemoryData", "DummyData", "HDF5Data", "WindowData"})
# Scale is converted only when folded into the BatchNorm before it
SUPPORTED_TYPES = frozenset(CONVERTERS) | INPUT_LAYERS | {"Scale"}
