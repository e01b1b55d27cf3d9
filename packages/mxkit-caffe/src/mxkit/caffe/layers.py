"""One converter per Caffe layer type: the Symbol it builds and how its blobs become parameters.

Each converter takes a :class:`LayerSpec` (the layer, its MXNet-style name, its input symbols)
and returns a :class:`Converted`: the output symbols, one per top, and a function turning the
layer's caffemodel blobs into named arguments and auxiliary states. Parameter names follow
MXNet's converter (``conv1_weight``, ``bn1_moving_mean``...), so checkpoints converted by
MXNet and by mxkit name the same things the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mxkit.core.errors import FormatError

# a converted parameter: (kind "arg" or "aux", name) -> array
Params = dict[tuple[str, str], np.ndarray]
# the blobs of one layer by its Caffe name (None: the caffemodel has no such layer)
BlobLookup = Callable[[str], "list[np.ndarray] | None"]

# bounds on sizes taken from a prototxt, far beyond any real network
_MAX_SIZE = 1 << 20
_MAX_CHANNELS = 1 << 24


class UnsupportedLayerError(FormatError):
    """A layer (or a setting of one) that the converter cannot express; raised before anything is written."""


@dataclass
class LayerSpec:
    """What a converter gets: the layer, its symbol name, the input symbols and where they come from."""

    layer: Any
    name: str
    inputs: list[Any]
    reads_network_input: list[bool]
    folded_scale: Any = None  # for a BatchNorm: the Scale layer merged into it
    swap_rgb: bool = False  # BGR -> RGB on the input channels of a convolution's weights

    @property
    def caffe_name(self) -> str:
        return str(self.layer.name)

    def fail(self, reason: str) -> UnsupportedLayerError:
        return UnsupportedLayerError(f"layer {self.caffe_name!r} of type {self.layer.type}: {reason}")


@dataclass
class Converted:
    """The output symbols (one per top) and the conversion of the layer's blobs to parameters."""

    outputs: list[Any]
    params: Callable[[BlobLookup], Params] | None = None


@dataclass
class _Dims:
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    pad: tuple[int, ...]
    dilate: tuple[int, ...] = field(default_factory=tuple)


def _sym() -> Any:
    import mxkit.symbol as sym

    return sym


def _bounded(spec: LayerSpec, what: str, values: Sequence[int], low: int, high: int = _MAX_SIZE) -> tuple[int, ...]:
    values = tuple(int(v) for v in values)
    for value in values:
        if not low <= value <= high:
            raise spec.fail(f"{what}={list(values)} must lie in {low}..{high}")
    return values


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
        return _bounded(spec, f"{h}/{w}", (getattr(param, h), getattr(param, w)), low)
    if not values:
        return (default,) * ndim
    if len(values) == 1:
        values = values * ndim
    if len(values) != ndim:
        raise spec.fail(f"{repeated}={values} must have 1 or {ndim} values")
    return _bounded(spec, repeated, values, low)


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
    return _bounded(spec, "dilation", values, 1)


def _need_blobs(spec: LayerSpec, lookup: BlobLookup, count: int, layer_name: str | None = None) -> list[np.ndarray]:
    name = layer_name or spec.caffe_name
    blobs = lookup(name)
    if blobs is None:
        raise FormatError(f"the caffemodel has no layer {name!r} (type {spec.layer.type}), whose weights the "
                          f"prototxt needs; are the prototxt and caffemodel of one network?")
    if len(blobs) < count:
        raise FormatError(f"layer {name!r} in the caffemodel has {len(blobs)} blobs, {count} expected")
    return blobs


def _vector(spec: LayerSpec, blob: np.ndarray, size: int, what: str) -> np.ndarray:
    if blob.size != size:
        raise FormatError(f"layer {spec.caffe_name!r}: {what} blob has shape {blob.shape} ({blob.size} values), "
                          f"{size} expected")
    return blob.reshape(size)


# ---- convolution and fully connected ---------------------------------------------------------

def _swap_bgr(weight: np.ndarray) -> np.ndarray:
    swapped = weight.copy()
    swapped[:, [0, 2]] = weight[:, [2, 0]]
    return swapped


def convert_convolution(spec: LayerSpec) -> Converted:
    param = spec.layer.convolution_param
    dims = _conv_dims(spec, param)
    deconv = spec.layer.type == "Deconvolution"
    (num_output,) = _bounded(spec, "num_output", [param.num_output], 1, _MAX_CHANNELS)
    (group,) = _bounded(spec, "group", [param.group], 1, _MAX_CHANNELS)
    if num_output % group:
        raise spec.fail(f"num_output={num_output} is not a multiple of group={group}")
    sym = _sym()
    op = sym.Deconvolution if deconv else sym.Convolution
    out = op(spec.inputs[0], name=spec.name, num_filter=num_output, kernel=dims.kernel, stride=dims.stride,
             pad=dims.pad, dilate=dims.dilate, num_group=group, no_bias=not param.bias_term)
    swap = spec.swap_rgb and not deconv and group == 1 and spec.reads_network_input[0]

    def params(lookup: BlobLookup) -> Params:
        blobs = _need_blobs(spec, lookup, 2 if param.bias_term else 1)
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
            out_params[("arg", f"{spec.name}_bias")] = _vector(spec, blobs[1], num_output, "bias")
        return out_params

    return Converted([out], params)


def convert_inner_product(spec: LayerSpec) -> Converted:
    param = spec.layer.inner_product_param
    (num_output,) = _bounded(spec, "num_output", [param.num_output], 1, _MAX_CHANNELS)
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
        blobs = _need_blobs(spec, lookup, 2 if param.bias_term else 1)
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
            out_params[("arg", f"{spec.name}_bias")] = _vector(spec, blobs[1], num_output, "bias")
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
            return _bounded(spec, f"{h}/{w}", (getattr(param, h), getattr(param, w)), low)
        value = getattr(param, single) if param.HasField(single) else default
        return _bounded(spec, single, (value, value), low)

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
    (size,) = _bounded(spec, "local_size", [param.local_size], 1, 4096)
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
        mean, var, factor = _need_blobs(spec, lookup, 3)[:3]
        channels = mean.size
        if factor.size != 1:
            raise FormatError(f"layer {spec.caffe_name!r}: the third BatchNorm blob (the moving-average scale "
                              f"factor) has {factor.size} values, 1 expected")
        # Caffe stores running sums scaled by a factor; the statistics are sum / factor (0 stays 0)
        rescale = 0.0 if float(factor.reshape(())) == 0 else 1.0 / float(factor.reshape(()))
        out_params: Params = {
            ("aux", f"{spec.name}_moving_mean"): (mean.reshape(channels) * rescale).astype(np.float32),
            ("aux", f"{spec.name}_moving_var"): (_vector(spec, var, channels, "variance") * rescale).astype(
                np.float32),
        }
        if scale_layer is None:
            gamma, beta = np.ones(channels, np.float32), np.zeros(channels, np.float32)
        else:
            scale_blobs = _need_blobs(spec, lookup, 2 if scale_layer.scale_param.bias_term else 1, scale_layer.name)
            gamma = _vector(spec, scale_blobs[0], channels, f"Scale {scale_layer.name!r} scale")
            beta = (_vector(spec, scale_blobs[1], channels, f"Scale {scale_layer.name!r} bias")
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
        (slope,) = _need_blobs(spec, lookup, 1)[:1]
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


# ---- shapes and multiple inputs --------------------------------------------------------------

def _axis(spec: LayerSpec, value: int, what: str = "axis") -> int:
    value = int(value)
    if not -32 <= value < 32:
        raise spec.fail(f"{what}={value} is not a valid axis")
    return value


def convert_concat(spec: LayerSpec) -> Converted:
    param = spec.layer.concat_param
    axis = _axis(spec, param.concat_dim if param.HasField("concat_dim") else param.axis)
    if len(spec.inputs) == 1:
        return Converted([spec.inputs[0]])
    return Converted([_sym().Concat(*spec.inputs, name=spec.name, dim=axis, num_args=len(spec.inputs))])


def convert_eltwise(spec: LayerSpec) -> Converted:
    param = spec.layer.eltwise_param
    pb = type(param)
    sym = _sym()
    inputs = spec.inputs
    coeffs = list(param.coeff)
    if coeffs and (param.operation != pb.SUM or len(coeffs) != len(inputs)):
        raise spec.fail(f"coeff={coeffs} needs operation SUM and one coefficient per bottom ({len(inputs)})")
    if len(inputs) < 2:
        raise spec.fail(f"Eltwise needs at least 2 bottoms, got {len(inputs)}")
    if param.operation == pb.SUM:
        if coeffs and any(c != 1 for c in coeffs):
            inputs = [x if c == 1 else sym._mul_scalar(x, scalar=float(c), name=f"{spec.name}_coeff{i}")
                      for i, (x, c) in enumerate(zip(inputs, coeffs))]
        op_name = "elemwise_add"
    elif param.operation == pb.PROD:
        op_name = "elemwise_mul"
    else:  # MAX
        op_name = "_maximum"
    out = inputs[0]
    for index, other in enumerate(inputs[1:], start=1):
        name = spec.name if index == len(inputs) - 1 else f"{spec.name}_{index}"
        out = getattr(sym, op_name)(out, other, name=name)
    return Converted([out])


def convert_flatten(spec: LayerSpec) -> Converted:
    param = spec.layer.flatten_param
    axis, end_axis = _axis(spec, param.axis), _axis(spec, param.end_axis, "end_axis")
    sym = _sym()
    if end_axis != -1 or axis < 1:
        raise spec.fail(f"axis={axis}, end_axis={end_axis}: only flattening from an axis >= 1 to the last one "
                        f"is supported")
    if axis == 1:
        return Converted([sym.Flatten(spec.inputs[0], name=spec.name)])
    return Converted([sym.Reshape(spec.inputs[0], name=spec.name, shape=(0,) * axis + (-1,))])


def convert_reshape(spec: LayerSpec) -> Converted:
    param = spec.layer.reshape_param
    dims = [int(d) for d in param.shape.dim]
    for d in dims:
        if not -1 <= d < (1 << 31):
            raise spec.fail(f"shape dim {d} must be -1 (infer), 0 (copy) or positive")
    if dims.count(-1) > 1:
        raise spec.fail(f"shape {dims} may infer (-1) only one dimension")
    axis, num_axes = _axis(spec, param.axis), int(param.num_axes)
    if axis < 0:
        raise spec.fail(f"axis={axis}: only a non-negative axis is supported")
    # Caffe's 0 and -1 mean what MXNet's Reshape codes 0 and -1 mean; the axes before `axis` are
    # copied, and those after the replaced range (-2: all the rest) when the range has len(dims) axes
    if num_axes == -1:
        shape = (0,) * axis + tuple(dims)
    elif num_axes == len(dims):
        shape = (0,) * axis + tuple(dims) + (-2,)
    else:
        raise spec.fail(f"num_axes={num_axes} with {len(dims)} new dims: only num_axes=-1 or num_axes equal to "
                        f"the number of dims is supported")
    return Converted([_sym().Reshape(spec.inputs[0], name=spec.name, shape=shape)])


def convert_softmax(spec: LayerSpec) -> Converted:
    axis = _axis(spec, spec.layer.softmax_param.axis)
    return Converted([_sym().softmax(spec.inputs[0], name=spec.name, axis=axis)])


def convert_softmax_with_loss(spec: LayerSpec) -> Converted:
    layer = spec.layer
    if len(spec.inputs) != 2:
        raise spec.fail(f"SoftmaxWithLoss needs 2 bottoms (scores and labels), got {len(spec.inputs)}")
    if layer.softmax_param.axis != 1:
        raise spec.fail(f"softmax axis={layer.softmax_param.axis}: only axis 1 is supported")
    loss = layer.loss_param
    pb = type(loss)
    # multi_output: softmax over axis 1 whatever the rank, labels shaped as the data without axis 1
    options: dict[str, Any] = {"multi_output": True}
    if loss.HasField("ignore_label"):
        options.update(use_ignore=True, ignore_label=float(loss.ignore_label))
    normalization = loss.normalization
    if loss.HasField("normalize") and not loss.HasField("normalization"):
        normalization = pb.VALID if loss.normalize else pb.BATCH_SIZE
    # Caffe divides the loss by: FULL every label, VALID the labels not ignored, BATCH_SIZE the
    # batch size, NONE nothing; MXNet's 'valid' counts labels other than ignore_label (every
    # label when none is ignored), 'batch' the batch size, 'null' nothing
    options["normalization"] = {pb.FULL: "valid", pb.VALID: "valid", pb.BATCH_SIZE: "batch",
                                pb.NONE: "null"}[normalization]
    if normalization == pb.FULL and loss.HasField("ignore_label"):
        raise spec.fail("normalization FULL with ignore_label (dividing by every label, ignored ones too) has no "
                        "MXNet counterpart; use VALID")
    if len(layer.loss_weight):
        options["grad_scale"] = float(layer.loss_weight[0])
    return Converted([_sym().SoftmaxOutput(spec.inputs[0], spec.inputs[1], name=spec.name, **options)])


def convert_slice(spec: LayerSpec) -> Converted:
    param = spec.layer.slice_param
    axis = _axis(spec, param.slice_dim if param.HasField("slice_dim") else param.axis)
    tops = len(spec.layer.top)
    points = [int(p) for p in param.slice_point]
    sym = _sym()
    if not points:
        if tops == 1:
            return Converted([spec.inputs[0]])
        out = sym.SliceChannel(spec.inputs[0], name=spec.name, num_outputs=tops, axis=axis)
        return Converted([out[i] for i in range(tops)])
    if len(points) != tops - 1:
        raise spec.fail(f"slice_point={points} must give one point fewer than the {tops} tops")
    if any(not 0 < p < (1 << 31) for p in points) or points != sorted(set(points)):
        raise spec.fail(f"slice_point={points} must be positive and increasing")
    # the last slice runs to the end: MXNet's JSON must say end "None" (an absent end does not load)
    bounds = [0, *points, "None"]
    outputs = [sym.slice_axis(spec.inputs[0], name=f"{spec.name}_{i}" if tops > 1 else spec.name, axis=axis,
                              begin=bounds[i], end=bounds[i + 1]) for i in range(tops)]
    return Converted(outputs)


def convert_crop(spec: LayerSpec) -> Converted:
    param = spec.layer.crop_param
    if len(spec.inputs) != 2:
        raise spec.fail(f"Crop needs 2 bottoms (the data and the blob giving the size), got {len(spec.inputs)}")
    axis = _axis(spec, param.axis)
    if axis not in (2, -2):
        raise spec.fail(f"axis={axis}: only cropping height and width of NCHW data (axis 2) is supported")
    offsets = _bounded(spec, "offset", param.offset, 0, 1 << 31)
    if len(offsets) == 0:
        offset = (0, 0)
    elif len(offsets) == 1:
        offset = (offsets[0], offsets[0])
    elif len(offsets) == 2:
        offset = offsets
    else:
        raise spec.fail(f"offset={list(offsets)} must have 0, 1 or 2 values for axis 2 of 4-D data")
    out = _sym().Crop(*spec.inputs, name=spec.name, num_args=2, offset=offset, center_crop=False)
    return Converted([out])


def convert_split(spec: LayerSpec) -> Converted:
    return Converted([spec.inputs[0]] * len(spec.layer.top))


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
