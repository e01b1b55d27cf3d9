"""Loss heads: ``SoftmaxOutput``, ``LinearRegressionOutput``, ``LogisticRegressionOutput``,
``MAERegressionOutput``, and the elementwise ``smooth_l1``.

A loss head's forward is its prediction (softmax, identity, sigmoid); its backward is the
gradient of the loss it stands for with respect to ``data`` (``softmax - one_hot(label)``
and so on), scaled by ``grad_scale``. As in MXNet the incoming output gradient is
ignored (unless ``SoftmaxOutput(out_grad=True)``), so a head ends a graph.
"""

from __future__ import annotations

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import is_floating, write
from mxkit.ndarray.ops.nn_common import as_list, fmt, public
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define
from mxkit.ndarray.shapes import size_of

# ---- SoftmaxOutput ---------------------------------------------------------------------------

_SOFTMAX_OUTPUT_SCHEMA = schema([
    Param("grad_scale", "float", 1.0, doc="Scales the gradient."),
    Param("ignore_label", "float", -1.0, doc="The label whose samples get no gradient (with use_ignore)."),
    Param("multi_output", "bool", False,
          doc="Softmax over axis 1 of (N, C, ...) data with (N, ...) labels, one class per position."),
    Param("use_ignore", "bool", False, doc="Whether samples labelled ignore_label get no gradient."),
    Param("preserve_shape", "bool", False, doc="Softmax over the last axis, keeping the data shape."),
    Param("normalization", "str", "null", choices=("batch", "null", "valid"),
          doc="Divide the gradient by nothing, the batch size, or the number of labels not ignored."),
    Param("out_grad", "bool", False, doc="Multiply the gradient by the incoming output gradient."),
    Param("smooth_alpha", "float", 0.0, doc="Label smoothing: spread this much of the target over the other classes."),
])


def _softmax_output_label_shape(params: dict, data) -> tuple[int, ...]:
    data = tuple(int(d) for d in data)
    if params["multi_output"]:
        return (data[0], *data[2:])
    if params["preserve_shape"]:
        return data[:-1]
    return (data[0],)


def _softmax_output_shape(params: dict, in_shapes: list) -> list:
    data, label = in_shapes[0], in_shapes[1]
    if data is None or (len(data) < 2 and not params["preserve_shape"]):
        raise ShapeError(f"SoftmaxOutput: data shape {fmt(data)} needs a batch axis and a class axis")
    expected = _softmax_output_label_shape(params, data)
    # a label of the data's shape holds a probability per class (MXNet's soft labels)
    if label is not None and tuple(label) != expected and tuple(label) != tuple(data):
        mode = "multi_output=True" if params["multi_output"] else \
            "preserve_shape=True" if params["preserve_shape"] else "the default (one label per sample)"
        flat_ok = params["multi_output"] and tuple(label) == (data[0], size_of(data[2:]))
        if not flat_ok:
            raise ShapeError(f"SoftmaxOutput: label shape {fmt(label)} does not match data shape {fmt(data)}; "
                             f"with {mode} the label must have shape {expected}, or the data's shape for "
                             f"a probability per class")
    return [tuple(data)]


def _class_axis(params: dict, ndim: int) -> int:
    return 1 if params["multi_output"] else ndim - 1


def _softmax_rows(xp, x, params):
    """x viewed so the class axis is where MXNet normalises (flattened to (N, -1) by default)."""
    if params["multi_output"] or params["preserve_shape"]:
        return x
    return x.reshape(x.shape[0], -1)


def _softmax_output_kernel(xp, inputs, outputs, params):
    x = _softmax_rows(xp, inputs[0], params)
    axis = _class_axis(params, x.ndim)
    shifted = x - x.max(axis=axis, keepdims=True)
    e = xp.exp(shifted)
    write(xp, outputs[0], (e / e.sum(axis=axis, keepdims=True)).reshape(outputs[0].shape))


def _softmax_output_backward_kernel(xp, inputs, outputs, params):
    out_grad, output, label = inputs
    if label.shape == output.shape:
        # probabilities as labels: softmax - label, scaled, with no normalization or ignoring (as MXNet)
        grad = (output - label) * params["grad_scale"]
        if params["out_grad"]:
            grad = grad * out_grad
        write(xp, outputs[0], grad)
        outputs[1][...] = 0
        return
    prob = _softmax_rows(xp, output, params)
    axis = _class_axis(params, prob.ndim)
    classes = prob.shape[axis]
    label = label.reshape(prob.shape[:axis] + prob.shape[axis + 1:])
    index = label.astype(xp.int64) if is_floating(label.dtype) else label
    positions = xp.arange(classes).reshape((-1,) + (1,) * (prob.ndim - axis - 1))
    target = (xp.expand_dims(index, axis) == positions).astype(prob.dtype)
    alpha = params["smooth_alpha"]
    if alpha:
        target = target * (1 - alpha) + (1 - target) * (alpha / (classes - 1))
    grad = prob - target
    if params["use_ignore"]:
        grad = grad * xp.expand_dims(label != params["ignore_label"], axis)
    norm = params["normalization"]
    scale = params["grad_scale"]
    if norm == "batch":
        scale /= prob.shape[0]
    elif norm == "valid":
        # MXNet counts the labels that are not ignore_label (as ints), use_ignore or not
        valid = int((index.astype(xp.int64) != int(params["ignore_label"])).sum())
        scale /= max(valid, 1)
    if params["multi_output"] and norm != "valid":
        scale /= max(size_of(prob.shape[2:]), 1)  # MXNet averages over the positions too
    grad = grad * scale
    if params["out_grad"]:
        grad = grad * _softmax_rows(xp, out_grad, params)
    write(xp, outputs[0], grad.reshape(output.shape))
    outputs[1][...] = 0


define(OpDef(
    name="SoftmaxOutput", aliases=("Softmax",), infer_shape=_softmax_output_shape, kernel=_softmax_output_kernel,
    params=_SOFTMAX_OUTPUT_SCHEMA, num_inputs=2, input_names=("data", "label"),
    infer_dtype=lambda p, d: [d[0]],
    gradient=lambda F, p, i, o, g: as_list(F("_backward_SoftmaxOutput", g[0], o[0], i[1], **public(p))),
    backward_ignores=frozenset({0}),
    doc="Softmax prediction head; its gradient is that of the cross-entropy loss, softmax - one_hot(label) "
        "(softmax - label for a label of the data's shape: a probability per class).",
))
define(OpDef(
    name="_backward_SoftmaxOutput", params=_SOFTMAX_OUTPUT_SCHEMA, kernel=_softmax_output_backward_kernel,
    infer_shape=lambda p, s: [tuple(s[1]), tuple(s[2])], num_inputs=3,
    # "head_grad", not "out_grad": that name is taken by the out_grad parameter
    input_names=("head_grad", "output", "label"), num_outputs=2, output_names=("data", "label"),
    infer_dtype=lambda p, d: [d[1], d[2]],
    doc="Backward of SoftmaxOutput: (softmax - one_hot(label)) * grad_scale / normalisation; none for the label.",
))

# ---- regression heads ------------------------------------------------------------------------

_REGRESSION_SCHEMA = schema([Param("grad_scale", "float", 1.0, doc="Scales the gradient.")])


def _regression_shape(name: str):
    def infer(params: dict, in_shapes: list) -> list:
        data, label = tuple(in_shapes[0]), in_shapes[1]
        if label is not None:
            label = tuple(label)
            # MXNet accepts (N,) labels for (N, 1) predictions
            squeezed = len(data) == 2 and data[1] == 1 and label == (data[0],)
            if label != data and not squeezed:
                raise ShapeError(f"{name}: label shape {label} must equal the data shape {data}")
        return [data]

    return infer


def _sigmoid(xp, x):
    return 1 / (1 + xp.exp(-x))


# name: (prediction, gradient of the loss given prediction y and label t)
REGRESSIONS = {
    "LinearRegressionOutput": (lambda xp, x: x, lambda xp, y, t: y - t,
                               "Identity prediction; the gradient of the squared error, (y - label)."),
    "LogisticRegressionOutput": (_sigmoid, lambda xp, y, t: y - t,
                                 "Sigmoid prediction; the gradient of the logistic loss, (y - label)."),
    "MAERegressionOutput": (lambda xp, x: x, lambda xp, y, t: xp.sign(y - t),
                            "Identity prediction; the gradient of the absolute error, sign(y - label)."),
}


def _regression_kernel(predict):
    def kernel(xp, inputs, outputs, params):
        write(xp, outputs[0], predict(xp, inputs[0]))

    return kernel


def _regression_backward_kernel(loss_grad):
    def kernel(xp, inputs, outputs, params):
        output, label = inputs[1], inputs[2]
        label = label.reshape(output.shape)
        # MXNet averages over the outputs of one sample, not over the batch
        per_sample = output.size // output.shape[0] if output.ndim and output.shape[0] else 1
        write(xp, outputs[0], loss_grad(xp, output, label) * (params["grad_scale"] / per_sample))
        outputs[1][...] = 0

    return kernel


for _name, (_predict, _loss_grad, _doc) in REGRESSIONS.items():
    define(OpDef(
        name=_name, infer_shape=_regression_shape(_name), kernel=_regression_kernel(_predict),
        params=_REGRESSION_SCHEMA, num_inputs=2, input_names=("data", "label"), infer_dtype=lambda p, d: [d[0]],
        inplace=((0, 0, False),),
        gradient=lambda F, p, i, o, g, _backward=f"_backward_{_name}": as_list(
            F(_backward, g[0], o[0], i[1], **public(p))),
        backward_ignores=frozenset({0}), doc=_doc,
    ))
    define(OpDef(
        name=f"_backward_{_name}", params=_REGRESSION_SCHEMA, kernel=_regression_backward_kernel(_loss_grad),
        infer_shape=lambda p, s: [tuple(s[1]), tuple(s[2])], num_inputs=3,
        input_names=("out_grad", "output", "label"), num_outputs=2, output_names=("data", "label"),
        infer_dtype=lambda p, d: [d[1], d[2]], doc=f"Backward of {_name}.",
    ))

# ---- smooth_l1 -------------------------------------------------------------------------------

_SMOOTH_L1_SCHEMA = schema([Param("scalar", "float", 1.0, doc="sigma: the quadratic zone is |x| < 1 / sigma**2.")])


def _smooth_l1_kernel(xp, inputs, outputs, params):
    x = inputs[0]
    sigma2 = params["scalar"] ** 2
    absolute = xp.abs(x)
    write(xp, outputs[0], xp.where(absolute < 1 / sigma2, 0.5 * sigma2 * x * x, absolute - 0.5 / sigma2))


def _smooth_l1_backward_kernel(xp, inputs, outputs, params):
    out_grad, x = inputs
    sigma2 = params["scalar"] ** 2
    write(xp, outputs[0], out_grad * xp.where(xp.abs(x) < 1 / sigma2, sigma2 * x, xp.sign(x)))


define(OpDef(
    name="smooth_l1", infer_shape=lambda p, s: [tuple(s[0])], kernel=_smooth_l1_kernel, params=_SMOOTH_L1_SCHEMA,
    inplace=((0, 0, False),),
    gradient=lambda F, p, i, o, g: [F("_backward_smooth_l1", g[0], i[0], **public(p))],
    doc="Smooth L1: 0.5 * (sigma * x)**2 where |x| < 1 / sigma**2, else |x| - 0.5 / sigma**2.",
))
define(OpDef(
    name="_backward_smooth_l1", params=_SMOOTH_L1_SCHEMA, kernel=_smooth_l1_backward_kernel,
    infer_shape=lambda p, s: [tuple(s[1])], num_inputs=2, input_names=("out_grad", "data"),
    inplace=((0, 0, False),), doc="Backward of smooth_l1.",
))

# ---- MakeLoss and make_loss --------------------------------------------------------------------

_MAKE_LOSS_SCHEMA = schema([
    Param("grad_scale", "float", 1.0, doc="The gradient of every element."),
    Param("valid_thresh", "float", 0.0, doc="Elements above it count as valid (normalization='valid')."),
    Param("normalization", "str", "null", choices=("null", "batch", "valid"),
          doc="Divide the gradient by nothing, the batch size (first axis), or the number of valid elements."),
])


def _identity_kernel(xp, inputs, outputs, params):
    write(xp, outputs[0], inputs[0])


def _make_loss_backward_kernel(xp, inputs, outputs, params):
    output = inputs[0]
    scale = params["grad_scale"]
    if params["normalization"] == "batch":
        scale /= output.shape[0] if output.ndim else 1
    elif params["normalization"] == "valid":
        scale /= max(int((output > params["valid_thresh"]).sum()), 1)
    outputs[0][...] = scale


define(OpDef(
    name="MakeLoss", infer_shape=lambda p, s: [tuple(s[0])], kernel=_identity_kernel, params=_MAKE_LOSS_SCHEMA,
    inplace=((0, 0, True),),
    gradient=lambda F, p, i, o, g: [F("_backward_MakeLoss", o[0], **public(p))],
    doc="Marks its input as a loss: the output is the input, the gradient grad_scale (normalised), whatever "
        "the head gradient.",
))
define(OpDef(
    name="_backward_MakeLoss", params=_MAKE_LOSS_SCHEMA, kernel=_make_loss_backward_kernel,
    infer_shape=lambda p, s: [tuple(s[0])], num_inputs=1, input_names=("output",),
    doc="Backward of MakeLoss: grad_scale divided as normalization says (reads the output for 'valid').",
))
define(OpDef(
    name="make_loss", infer_shape=lambda p, s: [tuple(s[0])], kernel=_identity_kernel, inplace=((0, 0, True),),
    gradient=lambda F, p, i, o, g: [F("ones_like", o[0])],
    doc="Marks its input as a loss: the output is the input, the gradient ones, whatever the head gradient.",
))
