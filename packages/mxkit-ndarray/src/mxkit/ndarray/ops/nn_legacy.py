"""MXNet 1.x layers that old code and saved models still use: ``SoftmaxActivation``,
``L2Normalization``, ``Crop`` and the ``SVMOutput`` loss head, with their backward operators."""

from __future__ import annotations

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.ops.nn_common import as_list, fmt, public
from mxkit.ndarray.params import Param, ParamError, schema
from mxkit.ndarray.registry import ALL_INPUTS, OpDef, define

# ---- SoftmaxActivation -----------------------------------------------------------------------

_SOFTMAX_ACTIVATION_SCHEMA = schema([
    Param("mode", "str", "instance", choices=("channel", "instance"),
          doc="instance: softmax over the last axis (each sample of 2-D data); channel: over axis 1."),
])


def _softmax_activation_shape(params: dict, in_shapes: list) -> list:
    data = tuple(in_shapes[0])
    if len(data) < 2:
        raise ShapeError(f"SoftmaxActivation: data shape {fmt(data)} needs a batch axis and a class axis "
                         f"(mode={params['mode']!r})")
    return [data]


def _softmax_view(x, params):
    """``x`` arranged so that the softmax runs over axis 1.

    mode=instance flattens as mshadow's ``FlatTo2D`` does, keeping the last axis: on data of
    more than two axes MXNet 1.x normalises over the last axis, not over the whole sample.
    """
    return x.reshape(-1, x.shape[-1]) if params["mode"] == "instance" else x


def _softmax_activation_kernel(xp, inputs, outputs, params):
    x = _softmax_view(inputs[0], params)
    e = xp.exp(x - x.max(axis=1, keepdims=True))
    write(xp, outputs[0], (e / e.sum(axis=1, keepdims=True)).reshape(outputs[0].shape))


def _softmax_activation_backward_kernel(xp, inputs, outputs, params):
    out_grad, output = (_softmax_view(a, params) for a in inputs)
    grad = output * (out_grad - (out_grad * output).sum(axis=1, keepdims=True))
    write(xp, outputs[0], grad.reshape(outputs[0].shape))


define(OpDef(
    name="SoftmaxActivation", infer_shape=_softmax_activation_shape, kernel=_softmax_activation_kernel,
    params=_SOFTMAX_ACTIVATION_SCHEMA,
    gradient=lambda F, p, i, o, g: [F("_backward_SoftmaxActivation", g[0], o[0], **public(p))],
    backward_ignores=frozenset({0}),
    doc="Softmax over each sample (mode='instance') or over the channel axis (mode='channel'); deprecated "
        "in MXNet in favour of softmax, kept for old models.",
))
define(OpDef(
    name="_backward_SoftmaxActivation", params=_SOFTMAX_ACTIVATION_SCHEMA,
    kernel=_softmax_activation_backward_kernel, infer_shape=lambda p, s: [tuple(s[1])], num_inputs=2,
    input_names=("out_grad", "output"), inplace=((0, 0, False),),
    doc="Backward of SoftmaxActivation: y * (g - sum(g * y)) over the softmax axis.",
))

# ---- L2Normalization -------------------------------------------------------------------------

_L2_SCHEMA = schema([
    Param("eps", "float", 1e-10, doc="Added to the sum of squares before the square root."),
    Param("mode", "str", "instance", choices=("channel", "instance", "spatial"),
          doc="instance: one norm per sample; channel: per position across axis 1; spatial: per sample "
              "and channel across the spatial axes."),
])


def _l2_axes(params: dict, ndim: int) -> tuple[int, ...]:
    mode = params["mode"]
    if mode == "instance":
        return tuple(range(1, ndim))
    if mode == "channel":
        return (1,)
    return tuple(range(2, ndim))


def _l2_shape(params: dict, in_shapes: list) -> list:
    data = tuple(in_shapes[0])
    if params["eps"] < 0:
        raise ParamError(f"L2Normalization: eps={params['eps']} must be >= 0 (it keeps the norm of a zero "
                         f"vector away from 0)")
    least = 2 if params["mode"] == "instance" else 3
    if len(data) < least:
        raise ShapeError(f"L2Normalization: mode={params['mode']!r} needs data with at least {least} axes, "
                         f"got shape {fmt(data)}")
    return [data]


def _l2_norm(xp, x, params):
    return xp.sqrt((x * x).sum(axis=_l2_axes(params, x.ndim), keepdims=True) + x.dtype.type(params["eps"]))


def _l2_kernel(xp, inputs, outputs, params):
    x = inputs[0]
    write(xp, outputs[0], x / _l2_norm(xp, x, params))


def _l2_backward_kernel(xp, inputs, outputs, params):
    out_grad, x = inputs
    norm = _l2_norm(xp, x, params)
    y = x / norm
    dot = (out_grad * y).sum(axis=_l2_axes(params, x.ndim), keepdims=True)
    write(xp, outputs[0], (out_grad - y * dot) / norm)


define(OpDef(
    name="L2Normalization", infer_shape=_l2_shape, kernel=_l2_kernel, params=_L2_SCHEMA,
    gradient=lambda F, p, i, o, g: [F("_backward_L2Normalization", g[0], i[0], **public(p))],
    doc="x / sqrt(sum(x ** 2) + eps) with the sum per sample, per channel position or per spatial map.",
))
define(OpDef(
    name="_backward_L2Normalization", params=_L2_SCHEMA, kernel=_l2_backward_kernel,
    infer_shape=lambda p, s: [tuple(s[1])], num_inputs=2, input_names=("out_grad", "data"),
    doc="Backward of L2Normalization: (g - y * sum(g * y)) / norm.",
))

# ---- Crop ------------------------------------------------------------------------------------

_CROP_SCHEMA = schema([
    Param("num_args", "int", doc="1: crop to h_w; 2: crop to the height and width of the second input."),
    Param("offset", "shape", (0, 0), doc="(y, x) of the crop's top-left corner (without center_crop)."),
    Param("h_w", "shape", (0, 0), doc="(height, width) of the crop (with num_args=1)."),
    Param("center_crop", "bool", False, doc="Centre the crop instead of using offset."),
])


def _crop_box(params: dict, data: tuple, like: tuple | None) -> tuple[int, int, int, int]:
    """(top, left, height, width) of the crop of NCHW ``data``, checked."""
    if params["num_args"] not in (1, 2):
        raise ParamError(f"Crop: num_args={params['num_args']} must be 1 (crop to h_w) or 2 (crop to the "
                         f"shape of a second input)")
    if len(params["offset"]) != 2 or len(params["h_w"]) != 2:
        raise ParamError(f"Crop: offset={params['offset']} and h_w={params['h_w']} must each be two ints (y, x)")
    if len(data) != 4:
        raise ShapeError(f"Crop: data must be 4-D (batch, channel, height, width), got shape {fmt(data)}")
    if params["num_args"] == 2:
        if like is None or len(like) < 2:
            raise ShapeError(f"Crop: with num_args=2 the second input gives the height and width; got shape "
                             f"{fmt(like)}")
        height, width = int(like[-2]), int(like[-1])
    else:
        height, width = params["h_w"]
        if height <= 0 or width <= 0:
            raise ParamError(f"Crop: h_w={params['h_w']} must be a positive (height, width) with num_args=1")
    if height > data[2] or width > data[3]:
        raise ShapeError(f"Crop: the crop ({height}, {width}) is larger than the input's (height, width) "
                         f"{data[2:]}")
    if params["center_crop"]:
        top, left = (data[2] - height) // 2, (data[3] - width) // 2
    else:
        top, left = params["offset"]
        if top < 0 or left < 0 or top + height > data[2] or left + width > data[3]:
            raise ShapeError(f"Crop: offset={params['offset']} with crop size ({height}, {width}) leaves the "
                             f"input's (height, width) {data[2:]}; the offset must be in [0, "
                             f"{(data[2] - height, data[3] - width)}]")
    return top, left, height, width


def _crop_shape(params: dict, in_shapes: list) -> list:
    data = tuple(in_shapes[0])
    like = tuple(in_shapes[1]) if len(in_shapes) > 1 else None
    _, _, height, width = _crop_box(params, data, like)
    return [(data[0], data[1], height, width)]


def _crop_kernel(xp, inputs, outputs, params):
    data = inputs[0]
    top, left, height, width = _crop_box(params, data.shape, inputs[1].shape if len(inputs) > 1 else None)
    write(xp, outputs[0], data[:, :, top:top + height, left:left + width])


def _crop_backward_kernel(xp, inputs, outputs, params):
    out_grad = inputs[0]
    grad = outputs[0]
    top, left, height, width = _crop_box(params, grad.shape, inputs[2].shape if len(inputs) > 2 else None)
    grad[...] = 0
    grad[:, :, top:top + height, left:left + width] = out_grad
    if len(outputs) > 1:
        outputs[1][...] = 0


def _crop_gradient(F, params, inputs, outputs, out_grads):
    grads = F("_backward_Crop", out_grads[0], *inputs, **public(params))
    # one input: F returns the gradient itself (a graph entry is a tuple, so no as_list)
    return list(grads) if params["num_args"] == 2 else [grads]


def _crop_inputs(params: dict) -> tuple[str, ...]:
    # MXNet 1.9.1 declares Crop's inputs as variable arguments: they are named arg0, arg1
    # (data=, crop_like= keywords fail there), and auto-created variables are <name>_arg0
    return ("arg0", "arg1") if params["num_args"] == 2 else ("arg0",)


define(OpDef(
    name="Crop", infer_shape=_crop_shape, kernel=_crop_kernel, params=_CROP_SCHEMA,
    num_inputs=lambda p: 2 if p["num_args"] == 2 else 1, input_names=_crop_inputs,
    gradient=_crop_gradient,
    backward_ignores=ALL_INPUTS,
    doc="Crops the height and width of NCHW data to h_w, or to the shape of a second input, at offset or "
        "centred; deprecated in MXNet in favour of slice, kept for old models (FCN).",
))
define(OpDef(
    name="_backward_Crop", params=_CROP_SCHEMA, kernel=_crop_backward_kernel,
    infer_shape=lambda p, s: [tuple(x) for x in s[1:]],
    num_inputs=lambda p: 3 if p["num_args"] == 2 else 2,
    input_names=lambda p: ("out_grad", *_crop_inputs(p)),
    num_outputs=lambda p: 2 if p["num_args"] == 2 else 1, output_names=_crop_inputs,
    infer_dtype=lambda p, d: list(d[1:]), reads_shape_only=frozenset({1}),
    doc="Backward of Crop: the output gradient placed at the crop, zero elsewhere; none for crop_like.",
))

# ---- SVMOutput -------------------------------------------------------------------------------

_SVM_SCHEMA = schema([
    Param("margin", "float", 1.0, doc="The margin of the hinge."),
    Param("regularization_coefficient", "float", 1.0, doc="Scales the gradient."),
    Param("use_linear", "bool", False, doc="L1-SVM (linear hinge) instead of the default L2-SVM (squared hinge)."),
])


def _svm_shape(params: dict, in_shapes: list) -> list:
    data, label = tuple(in_shapes[0]), in_shapes[1]
    if len(data) < 2:
        raise ShapeError(f"SVMOutput: data shape {fmt(data)} needs a batch axis and a class axis")
    if label is not None and tuple(label) != (data[0],):
        raise ShapeError(f"SVMOutput: label shape {fmt(label)} must be ({data[0]},), one class per sample of "
                         f"data {fmt(data)}")
    return [data]


def _svm_backward_kernel(xp, inputs, outputs, params):
    output, label = inputs[1], inputs[2]
    scores = output.reshape(output.shape[0], -1)
    classes = scores.shape[1]
    target = xp.arange(classes)[None, :] == label.astype(xp.int64).reshape(-1, 1)
    margin, coefficient = scores.dtype.type(params["margin"]), scores.dtype.type(params["regularization_coefficient"])
    # the hinge on the target class is margin - score, on every other class margin + score
    hinge = xp.where(target, margin - scores, margin + scores)
    active = (hinge > 0).astype(scores.dtype)
    direction = xp.where(target, -coefficient, coefficient)
    if params["use_linear"]:
        grad = direction * active
    else:
        grad = 2 * direction * active * hinge
    write(xp, outputs[0], grad.reshape(output.shape))
    outputs[1][...] = 0


define(OpDef(
    name="SVMOutput", infer_shape=_svm_shape, kernel=lambda xp, i, o, p: write(xp, o[0], i[0]), params=_SVM_SCHEMA,
    num_inputs=2, input_names=("data", "label"), infer_dtype=lambda p, d: [d[0]], inplace=((0, 0, True),),
    gradient=lambda F, p, i, o, g: as_list(F("_backward_SVMOutput", g[0], o[0], i[1], **public(p))),
    backward_ignores=frozenset({0}),
    doc="Support vector machine head: the output is the data; the gradient is that of the (squared) hinge "
        "loss against the label, whatever the head gradient.",
))
define(OpDef(
    name="_backward_SVMOutput", params=_SVM_SCHEMA, kernel=_svm_backward_kernel,
    infer_shape=lambda p, s: [tuple(s[1]), tuple(s[2])], num_inputs=3, input_names=("out_grad", "output", "label"),
    num_outputs=2, output_names=("data", "label"), infer_dtype=lambda p, d: [d[1], d[2]],
    reads_shape_only=frozenset({0}),
    doc="Backward of SVMOutput: the hinge loss gradient; none for the label.",
))
