"""``softmax`` and ``log_softmax`` along an axis."""

from __future__ import annotations

from mxkit.ndarray.ops._helpers import elementwise_shape, first_shape, write
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define
from mxkit.ndarray.shapes import normalize_axis

_SCHEMA = schema([Param("axis", "int", -1), Param("temperature", "float", None, optional=True)])


def _scaled(x, params):
    t = params["temperature"]
    return x if t is None or t == 1.0 else x / t


def _softmax_kernel(xp, inputs, outputs, params):
    x = _scaled(inputs[0], params)
    axis = normalize_axis(params["axis"], x.ndim, "softmax")
    e = xp.exp(x - x.max(axis=axis, keepdims=True))
    write(xp, outputs[0], e / e.sum(axis=axis, keepdims=True))


def _log_softmax_kernel(xp, inputs, outputs, params):
    x = _scaled(inputs[0], params)
    axis = normalize_axis(params["axis"], x.ndim, "log_softmax")
    shifted = x - x.max(axis=axis, keepdims=True)
    write(xp, outputs[0], shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True)))


def _softmax_backward(xp, inputs, outputs, params):
    out_grad, y = inputs
    axis = normalize_axis(params["axis"], y.ndim, "softmax")
    grad = y * (out_grad - (out_grad * y).sum(axis=axis, keepdims=True))
    write(xp, outputs[0], _scaled(grad, params))


def _log_softmax_backward(xp, inputs, outputs, params):
    out_grad, y = inputs
    axis = normalize_axis(params["axis"], y.ndim, "log_softmax")
    grad = out_grad - xp.exp(y) * out_grad.sum(axis=axis, keepdims=True)
    write(xp, outputs[0], _scaled(grad, params))


for _name, _forward, _backward in (("softmax", _softmax_kernel, _softmax_backward),
                                   ("log_softmax", _log_softmax_kernel, _log_softmax_backward)):
    define(OpDef(
        name=_name, infer_shape=first_shape, kernel=_forward, params=_SCHEMA,
        gradient=(lambda b: lambda F, p, i, o, g: [F(b, g[0], o[0], **p)])(f"_backward_{_name}"),
        backward_ignores=frozenset({0}), doc=f"{_name} along an axis.",
    ))
    define(OpDef(name=f"_backward_{_name}", infer_shape=elementwise_shape(_name), kernel=_backward,
                 params=_SCHEMA, num_inputs=2, input_names=("out_grad", "output"), doc=f"Backward of {_name}."))
