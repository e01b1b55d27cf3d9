"""``softmax_cross_entropy``: the summed cross-entropy of softmax(data) against class labels,
an ordinary differentiable operator (not a loss head: its gradient takes the output gradient)."""

from __future__ import annotations

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.registry import OpDef, define


def _shape(params, in_shapes):
    data, label = tuple(in_shapes[0]), tuple(in_shapes[1])
    if len(data) != 2 or label != data[:1]:
        raise ShapeError(f"softmax_cross_entropy: data must be (batch, classes) and label (batch,), got {data} "
                         f"and {label}")
    return [(1,)]


def _log_softmax(xp, x):
    x = x.astype(xp.result_type(x.dtype, xp.float32))
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=1, keepdims=True))


def _picks(xp, label, classes):
    return xp.clip(label.astype("int64"), 0, classes - 1)


def _kernel(xp, inputs, outputs, params):
    data, label = inputs
    log_p = _log_softmax(xp, data)
    picked = log_p[xp.arange(data.shape[0]), _picks(xp, label, data.shape[1])]
    write(xp, outputs[0], -picked.sum(keepdims=True))


def _backward_kernel(xp, inputs, outputs, params):
    out_grad, data, label = inputs
    grad = xp.exp(_log_softmax(xp, data))
    grad[xp.arange(data.shape[0]), _picks(xp, label, data.shape[1])] -= 1
    write(xp, outputs[0], grad * out_grad.reshape(()))


define(OpDef(
    name="softmax_cross_entropy", infer_shape=_shape, kernel=_kernel, num_inputs=2, input_names=("data", "label"),
    gradient=lambda F, p, i, o, g: [F("_backward_softmax_cross_entropy", g[0], i[0], i[1]), None],
    doc="sum over the batch of -log softmax(data)[label]; output shape (1,).",
))
define(OpDef(
    name="_backward_softmax_cross_entropy", infer_shape=lambda p, s: [tuple(s[1])], kernel=_backward_kernel,
    num_inputs=3, input_names=("out_grad", "data", "label"), infer_dtype=lambda p, d: [d[1]],
    doc="Backward of softmax_cross_entropy: (softmax(data) - one_hot(label)) * out_grad.",
))
