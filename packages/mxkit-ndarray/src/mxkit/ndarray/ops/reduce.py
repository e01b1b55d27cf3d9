"""Reductions: ``sum``, ``mean``, ``prod``, ``max``, ``min``, ``norm``, ``argmax``, ``argmin``.

They take MXNet's ``axis`` (``None`` or ``()`` for all axes), ``keepdims`` and ``exclude``
(reduce every axis *but* those named).
"""

from __future__ import annotations

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import no_gradient, write
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define
from mxkit.ndarray.shapes import normalize_axis, reduce_axes, reduced_shape, size_of

_REDUCE_PARAMS = [
    Param("axis", "shape", None, optional=True, doc="Axes to reduce; None or () for all."),
    Param("keepdims", "bool", False, doc="Keep reduced axes with size 1."),
    Param("exclude", "bool", False, doc="Reduce every axis except those in ``axis``."),
]
_REDUCE_SCHEMA = schema(_REDUCE_PARAMS)


def _axes(params, shape, name):
    return reduce_axes(params.get("axis"), len(shape), params.get("exclude", False), name)


def _reduce_shape(name):
    def infer(params, in_shapes):
        shape = tuple(in_shapes[0])
        axes = _axes(params, shape, name)
        if name in ("max", "min") and any(shape[a] == 0 for a in (axes or range(len(shape)))):
            raise ShapeError(f"{name}: cannot reduce an empty axis of shape {shape} (the {name} of no elements "
                             f"is undefined)")
        # MXNet 1.x has no 0-d arrays: reducing every axis gives shape (1,)
        return [reduced_shape(shape, axes, params["keepdims"]) or (1,)]

    return infer


def _accumulated(x):
    """``x``, widened to float32 when it is bfloat16: ml_dtypes' sums add in bfloat16 (a sum of 1000 ones is
    256); MXNet accumulates half-precision reductions in float32, and the result is rounded once when written."""
    return x.astype("float32") if x.dtype.kind == "V" and x.dtype.name == "bfloat16" else x


def _reduce_kernel(name, method):
    def kernel(xp, inputs, outputs, params):
        x = inputs[0] if method in ("max", "min") else _accumulated(inputs[0])
        axes = _axes(params, x.shape, name)
        result = getattr(xp, method)(x, axis=axes, keepdims=True) if axes else x
        write(xp, outputs[0], result.reshape(outputs[0].shape))

    return kernel


def _keepdims_shape(params, shape, name):
    return reduced_shape(shape, _axes(params, shape, name), True)


def _backward_reduce_kernel(name, local_grad):
    def kernel(xp, inputs, outputs, params):
        out_grad, x = inputs[0], inputs[1]
        keep = _keepdims_shape(params, x.shape, name)
        grad = out_grad.reshape(keep)
        y = inputs[2].reshape(keep) if len(inputs) > 2 else None
        write(xp, outputs[0], local_grad(xp, grad, x, y, params, keep))

    return kernel


def _mean_local(xp, grad, x, y, params, keep):
    count = max(size_of(x.shape) // max(size_of(keep), 1), 1)
    return xp.broadcast_to(grad / count, x.shape)


def _norm_local(xp, grad, x, y, params, keep):
    if params.get("ord", 2) == 1:
        return grad * xp.sign(x)
    return grad * x / xp.where(y == 0, 1, y)


REDUCTIONS = {
    # name: (xp method, local gradient, needs the output, aliases)
    "sum": ("sum", lambda xp, g, x, y, p, k: xp.broadcast_to(g, x.shape), False, ("sum_axis",)),
    "mean": ("mean", _mean_local, False, ()),
    "prod": ("prod", lambda xp, g, x, y, p, k: g * y / x, True, ()),
    "max": ("max", lambda xp, g, x, y, p, k: g * (x == y), True, ("max_axis",)),
    "min": ("min", lambda xp, g, x, y, p, k: g * (x == y), True, ("min_axis",)),
    "nansum": ("nansum", lambda xp, g, x, y, p, k: xp.where(xp.isnan(x), 0, xp.broadcast_to(g, x.shape)),
               False, ()),
    "nanprod": ("nanprod", lambda xp, g, x, y, p, k: xp.where(xp.isnan(x), 0, g * y / x), True, ()),
}


def _reduce_gradient(backward, needs_output):
    def gradient(F, params, inputs, outputs, out_grads):
        args = (out_grads[0], inputs[0], outputs[0]) if needs_output else (out_grads[0], inputs[0])
        return [F(backward, *args, **{k: v for k, v in params.items() if not k.startswith("_")})]

    return gradient


def _define_reduction(name, method, local, needs_output, aliases, params=_REDUCE_SCHEMA, kernel=None,
                      infer_dtype=None):
    backward = f"_backward_{name}"
    define(OpDef(
        name=name, infer_shape=_reduce_shape(name), kernel=kernel or _reduce_kernel(name, method),
        params=params, aliases=aliases, gradient=_reduce_gradient(backward, needs_output),
        **({"infer_dtype": infer_dtype} if infer_dtype else {}),
        doc=f"The {name} of array elements over the given axes.",
    ))
    define(OpDef(
        name=backward, infer_shape=lambda p, s: [tuple(s[1])], kernel=_backward_reduce_kernel(name, local),
        params=params, num_inputs=3 if needs_output else 2,
        input_names=("out_grad", "data", "output") if needs_output else ("out_grad", "data"),
        infer_dtype=lambda p, dtypes: [dtypes[0]],
        # spreading (sum) or averaging-spreading (mean) is linear in out_grad; its adjoint is
        # the reduction itself, which makes these two twice differentiable
        gradient=(lambda F, p, i, o, g: [F(name, g[0], **p), None]) if name in ("sum", "mean") else None,
        backward_ignores=frozenset(), doc=f"Backward of {name}: the gradient spread back over the reduced axes.",
    ))


for _name, (_method, _local, _needs_output, _aliases) in REDUCTIONS.items():
    _define_reduction(_name, _method, _local, _needs_output, _aliases)


def _square_sum_kernel(xp, inputs, outputs, params):
    x = _accumulated(inputs[0])
    axes = _axes(params, x.shape, "_square_sum")
    squared = x * x
    result = xp.sum(squared, axis=axes, keepdims=True) if axes else squared
    write(xp, outputs[0], result.reshape(outputs[0].shape))


# MXNet's _square_sum (sum(square(x), axis)), which sparse models call on row_sparse weights;
# mx.nd._internal._square_sum of a row_sparse array keeps its rows (mxkit.ndarray.sparse_ops)
_define_reduction("_square_sum", "sum", lambda xp, g, x, y, p, k: 2 * x * xp.broadcast_to(g, x.shape), False, (),
                  kernel=_square_sum_kernel)


def _norm_kernel(xp, inputs, outputs, params):
    x = _accumulated(inputs[0])
    axes = _axes(params, x.shape, "norm")
    if params["ord"] == 1:
        result = xp.abs(x).sum(axis=axes, keepdims=True)
    else:
        result = xp.sqrt((x * x).sum(axis=axes, keepdims=True))
    write(xp, outputs[0], result.reshape(outputs[0].shape))


_NORM_SCHEMA = schema([Param("ord", "int", 2, choices=None, doc="1 or 2."), *_REDUCE_PARAMS,
                       Param("out_dtype", "dtype", None, optional=True, doc="Output dtype (the input's when None).")])
_define_reduction("norm", None, _norm_local, True, (), params=_NORM_SCHEMA, kernel=_norm_kernel,
                  infer_dtype=lambda p, d: [p["out_dtype"] or d[0]])


# ---- arg reductions ---------------------------------------------------------------------

_ARG_SCHEMA = schema([
    Param("axis", "int", None, optional=True, doc="The axis; None flattens the input."),
    Param("keepdims", "bool", False),
])


def _arg_shape(name):
    def infer(params, in_shapes):
        shape = tuple(in_shapes[0])
        axis = params["axis"]
        if axis is None:
            return [(1,) * len(shape) if params["keepdims"] and shape else (1,)]
        axis = normalize_axis(axis, len(shape), name)
        return [reduced_shape(shape, (axis,), params["keepdims"]) or (1,)]

    return infer


def _arg_kernel(method):
    def kernel(xp, inputs, outputs, params):
        x = inputs[0]
        axis = params["axis"]
        result = getattr(xp, method)(x, axis=axis)
        write(xp, outputs[0], xp.reshape(result, outputs[0].shape))

    return kernel


for _name in ("argmax", "argmin"):
    # MXNet returns the indices in the input's dtype (float32 for float32 data)
    define(OpDef(name=_name, infer_shape=_arg_shape(_name), kernel=_arg_kernel(_name), params=_ARG_SCHEMA,
                 gradient=no_gradient, doc=f"Indices of the {_name[3:]}imum values along an axis."))


define(OpDef(
    name="argmax_channel", infer_shape=lambda p, s: [tuple(s[0][:-1])],
    kernel=lambda xp, i, o, p: write(xp, o[0], xp.argmax(i[0], axis=-1)), gradient=no_gradient,
    doc="Indices of the maximum along the last axis.",
))
