"""``softmax``, ``log_softmax`` and ``softmin`` along an axis, with MXNet's options: a
``temperature``, an output ``dtype`` (the arithmetic runs in at least float32, so a float16
input gives float32-accurate results) and ``use_length`` (a second input: how many leading
entries along the axis take part; the rest of the output is 0)."""

from __future__ import annotations

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define
from mxkit.ndarray.shapes import normalize_axis

_SCHEMA = schema([
    Param("axis", "int", -1, doc="The axis the distribution runs along."),
    Param("temperature", "float", None, optional=True, doc="Inputs are divided by it first (1 when None)."),
    Param("dtype", "dtype", None, optional=True, doc="Output dtype (the input's when None)."),
    Param("use_length", "bool", False, optional=True,
          doc="Take a second input, length: the entries along axis that take part, per position."),
])

# name -> (sign applied to the input, log output)
_KINDS = {"softmax": (1.0, False), "log_softmax": (1.0, True), "softmin": (-1.0, False)}


def _inputs(params):
    return ("data", "length") if params.get("use_length") else ("data",)


def _shape(name):
    def infer(params, in_shapes):
        data = tuple(in_shapes[0])
        axis = normalize_axis(params["axis"], len(data), name)
        if params.get("use_length"):
            expected = data[:axis] + data[axis + 1:]
            if tuple(in_shapes[1]) != expected:
                raise ShapeError(f"{name}: length has shape {tuple(in_shapes[1])}; with data {data} and axis="
                                 f"{params['axis']} it must be {expected} (data without the axis)")
        return [data]

    return infer


def _dtype(params, in_dtypes):
    return [params["dtype"] or in_dtypes[0]]


def _compute_dtype(xp, dtype):
    return xp.result_type(dtype, xp.float32)


def _mask(xp, params, shape, axis, length):
    """True where an entry takes part (its index along ``axis`` is below ``length``)."""
    index = xp.arange(shape[axis]).reshape((-1,) + (1,) * (len(shape) - axis - 1))
    return index < xp.expand_dims(length, axis)


def _kernel(name):
    sign, log = _KINDS[name]

    def kernel(xp, inputs, outputs, params):
        x = inputs[0].astype(_compute_dtype(xp, inputs[0].dtype)) * sign
        t = params["temperature"]
        if t is not None and t != 1.0:
            x = x / t
        axis = normalize_axis(params["axis"], x.ndim, name)
        mask = _mask(xp, params, x.shape, axis, inputs[1]) if params.get("use_length") else None
        if mask is not None:
            x = xp.where(mask, x, -xp.inf)
        top = x.max(axis=axis, keepdims=True)
        shifted = x - xp.where(xp.isfinite(top), top, 0)
        e = xp.exp(shifted)
        total = e.sum(axis=axis, keepdims=True)
        result = shifted - xp.log(total) if log else e / xp.where(total > 0, total, 1)
        if mask is not None:
            result = xp.where(mask, result, 0)
        write(xp, outputs[0], result)

    return kernel


def _backward_kernel(name):
    sign, log = _KINDS[name]

    def kernel(xp, inputs, outputs, params):
        out_grad, y = inputs[0], inputs[1]
        compute = _compute_dtype(xp, y.dtype)
        out_grad, y = out_grad.astype(compute), y.astype(compute)
        axis = normalize_axis(params["axis"], y.ndim, name)
        if params.get("use_length"):
            out_grad = xp.where(_mask(xp, params, y.shape, axis, inputs[2]), out_grad, 0)
        if log:
            grad = out_grad - xp.exp(y) * out_grad.sum(axis=axis, keepdims=True)
        else:
            grad = y * (out_grad - (out_grad * y).sum(axis=axis, keepdims=True))
        t = params["temperature"]
        scale = sign / (t if t is not None else 1.0)
        write(xp, outputs[0], grad * scale if scale != 1.0 else grad)

    return kernel


def _gradient(backward):
    def gradient(F, params, inputs, outputs, out_grads):
        if params.get("use_length"):
            return [F(backward, out_grads[0], outputs[0], inputs[1], **params), None]
        return [F(backward, out_grads[0], outputs[0], **params)]

    return gradient


for _name in _KINDS:
    define(OpDef(
        name=_name, infer_shape=_shape(_name), kernel=_kernel(_name), params=_SCHEMA,
        num_inputs=lambda p: 2 if p.get("use_length") else 1, input_names=_inputs, infer_dtype=_dtype,
        gradient=_gradient(f"_backward_{_name}"), backward_ignores=frozenset({0}),
        doc=f"{_name} along an axis" + (" (softmax of the negated input)." if _name == "softmin" else "."),
    ))
    define(OpDef(
        name=f"_backward_{_name}", infer_shape=lambda p, s: [tuple(s[1])], kernel=_backward_kernel(_name),
        params=_SCHEMA, num_inputs=lambda p: 3 if p.get("use_length") else 2,
        input_names=lambda p: ("out_grad", "output", "length") if p.get("use_length") else ("out_grad", "output"),
        infer_dtype=lambda p, d: [d[1]], doc=f"Backward of {_name}.",
    ))
