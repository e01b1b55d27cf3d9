"""Binary arithmetic and comparison: elementwise (same shape), broadcast and with a scalar.

Every function is given once as ``forward(xp, a, b)`` with its partial derivatives
``(d/da, d/db)(xp, a, b, y)``; the elementwise, broadcast and scalar variants and their
backward operators (``_backward_broadcast_add``...) are generated from that table, with
MXNet's names and aliases.
"""

from __future__ import annotations

from typing import Any

from mxkit.ndarray.ops._helpers import elementwise_shape, first_shape, is_floating, no_gradient, sum_to_shape, write
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define
from mxkit.ndarray.shapes import broadcast_shape


def _mod(xp: Any, a: Any, b: Any) -> Any:
    # Python's modulo (the sign follows the divisor), as MXNet's mshadow_op::mod
    return xp.mod(a, b)


def _floating(*values: Any) -> bool:
    return any(getattr(v, "dtype", None) is not None and is_floating(v.dtype) for v in values) or \
        all(isinstance(v, float) for v in values)


# key: (forward, d/da, d/db)   -- None derivative: piecewise constant (comparison)
FUNCTIONS: dict[str, tuple[Any, Any, Any]] = {
    "add": (lambda xp, a, b: xp.add(a, b), lambda xp, a, b, y: 1, lambda xp, a, b, y: 1),
    "sub": (lambda xp, a, b: xp.subtract(a, b), lambda xp, a, b, y: 1, lambda xp, a, b, y: -1),
    "mul": (lambda xp, a, b: xp.multiply(a, b), lambda xp, a, b, y: b, lambda xp, a, b, y: a),
    "div": (lambda xp, a, b: xp.true_divide(a, b) if is_floating(a.dtype) else a // b,
            lambda xp, a, b, y: 1 / b, lambda xp, a, b, y: -a / (b * b)),
    # MXNet's mod_grad / mod_rgrad: 1 and -floor(a / b) for floating types, 0 for integer ones
    "mod": (_mod, lambda xp, a, b, y: 1 if _floating(a, b) else 0,
            lambda xp, a, b, y: -xp.floor(a / b) if _floating(a, b) else 0),
    "power": (lambda xp, a, b: xp.power(a, b), lambda xp, a, b, y: b * xp.power(a, b - 1),
              lambda xp, a, b, y: y * xp.log(xp.where(a > 0, a, 1))),
    "maximum": (lambda xp, a, b: xp.maximum(a, b), lambda xp, a, b, y: a >= b, lambda xp, a, b, y: a < b),
    "minimum": (lambda xp, a, b: xp.minimum(a, b), lambda xp, a, b, y: a <= b, lambda xp, a, b, y: a > b),
    "hypot": (lambda xp, a, b: xp.hypot(a, b), lambda xp, a, b, y: a / y, lambda xp, a, b, y: b / y),
    "equal": (lambda xp, a, b: a == b, None, None),
    "not_equal": (lambda xp, a, b: a != b, None, None),
    "greater": (lambda xp, a, b: a > b, None, None),
    "greater_equal": (lambda xp, a, b: a >= b, None, None),
    "lesser": (lambda xp, a, b: a < b, None, None),
    "lesser_equal": (lambda xp, a, b: a <= b, None, None),
    "logical_and": (lambda xp, a, b: xp.logical_and(a, b), None, None),
    "logical_or": (lambda xp, a, b: xp.logical_or(a, b), None, None),
    "logical_xor": (lambda xp, a, b: xp.logical_xor(a, b), None, None),
}

# MXNet's operator names per function: (elementwise name and aliases, broadcast name and aliases)
ELEMWISE_NAMES = {
    "add": ("elemwise_add", ("_plus", "_add")),
    "sub": ("elemwise_sub", ("_minus", "_sub")),
    "mul": ("elemwise_mul", ("_mul",)),
    "div": ("elemwise_div", ("_div",)),
}
BROADCAST_ALIASES = {"add": ("broadcast_plus",), "sub": ("broadcast_minus",)}
SCALAR_NAMES = {"add": "_plus_scalar", "sub": "_minus_scalar", "mul": "_mul_scalar", "div": "_div_scalar"}
# scalar op names with the scalar on the left (scalar - x, scalar / x...)
REVERSE_SCALAR_NAMES = {"sub": "_rminus_scalar", "div": "_rdiv_scalar", "mod": "_rmod_scalar",
                        "power": "_rpower_scalar"}


def _same_dtypes(name):
    def infer(params, dtypes):
        if dtypes[0] != dtypes[1]:
            from mxkit.core.errors import DTypeError

            raise DTypeError(f"{name}: both inputs must have one dtype, got {dtypes[0]} and {dtypes[1]}; "
                             f"cast one with astype()")
        return [dtypes[0]]

    return infer


def _binary_kernel(forward):
    def kernel(xp, inputs, outputs, params):
        write(xp, outputs[0], forward(xp, inputs[0], inputs[1]))

    return kernel


def _fast_add_kernel(xp, inputs, outputs, params):
    xp.add(inputs[0], inputs[1], out=outputs[0], casting="unsafe")


def _fast_mul_kernel(xp, inputs, outputs, params):
    xp.multiply(inputs[0], inputs[1], out=outputs[0], casting="unsafe")


def _fast_sub_kernel(xp, inputs, outputs, params):
    xp.subtract(inputs[0], inputs[1], out=outputs[0], casting="unsafe")


_FAST = {"add": _fast_add_kernel, "mul": _fast_mul_kernel, "sub": _fast_sub_kernel}


def _binary_backward_kernel(forward, d_lhs, d_rhs):
    def kernel(xp, inputs, outputs, params):
        out_grad, lhs, rhs = inputs
        y = forward(xp, lhs, rhs)
        write(xp, outputs[0], sum_to_shape(xp, out_grad * d_lhs(xp, lhs, rhs, y), outputs[0].shape))
        write(xp, outputs[1], sum_to_shape(xp, out_grad * d_rhs(xp, lhs, rhs, y), outputs[1].shape))

    return kernel


def _binary_backward_shape(params, in_shapes):
    return [tuple(in_shapes[1]), tuple(in_shapes[2])]


def _binary_gradient(backward_name):
    def gradient(F, params, inputs, outputs, out_grads):
        return list(F(backward_name, out_grads[0], inputs[0], inputs[1]))

    return gradient


def _composed_gradient(key):
    """Gradients of add/sub/mul/div built from differentiable forward operators, so that
    they can be differentiated again (``autograd.grad(..., create_graph=True)``)."""

    def gradient(F, params, inputs, outputs, out_grads):
        lhs, rhs = inputs
        g = out_grads[0]
        if key == "add":
            d_lhs, d_rhs = g, g
        elif key == "sub":
            d_lhs, d_rhs = g, F("negative", g)
        elif key == "mul":
            d_lhs, d_rhs = F("broadcast_mul", g, rhs), F("broadcast_mul", g, lhs)
        else:  # div
            d_lhs = F("broadcast_div", g, rhs)
            d_rhs = F("negative", F("broadcast_div", F("broadcast_mul", g, outputs[0]), rhs))
        return [F("_reduce_sum_like", d_lhs, lhs), F("_reduce_sum_like", d_rhs, rhs)]

    return gradient


def _pick_gradient(key, backward, differentiable):
    if key in ("add", "sub", "mul", "div"):
        return _composed_gradient(key)
    return _binary_gradient(backward) if differentiable else no_gradient


def _broadcast_infer(name):
    def infer(params, in_shapes):
        lhs, rhs = in_shapes
        if lhs == rhs and 0 not in lhs:
            return [tuple(lhs)]
        return [broadcast_shape(tuple(lhs), tuple(rhs), name)]

    return infer


# MXNet's binary operators have no parameter parser and ignore any keyword given to them.
_FREE_FORM_SCHEMA = schema(ignores_unknown=True)


def _define_binary(key: str, name: str, aliases: tuple[str, ...], infer) -> None:
    forward, d_lhs, d_rhs = FUNCTIONS[key]
    differentiable = d_lhs is not None
    backward = f"_backward_{name}"
    kernel = _FAST.get(key, _binary_kernel(forward))
    define(OpDef(
        name=name, infer_shape=infer, kernel=kernel, num_inputs=2, input_names=("lhs", "rhs"),
        params=_FREE_FORM_SCHEMA, aliases=aliases, inplace=((0, 0, False), (1, 0, False)),
        infer_dtype=_same_dtypes(name),
        gradient=_pick_gradient(key, backward, differentiable),
        backward_ignores=frozenset({0, 1}) if key in ("add", "sub") else frozenset(),
        doc=f"{key} of two arrays" + (" with broadcasting." if name.startswith("broadcast") else
                                      " of the same shape."),
    ))
    if differentiable:
        define(OpDef(
            name=backward, infer_shape=_binary_backward_shape,
            kernel=_binary_backward_kernel(forward, d_lhs, d_rhs), num_inputs=3, num_outputs=2,
            input_names=("out_grad", "lhs", "rhs"), output_names=("lhs_grad", "rhs_grad"),
            infer_dtype=lambda p, dtypes: [dtypes[1], dtypes[2]],
            doc=f"Backward of {name}: the gradients of lhs and rhs, summed over broadcast axes.",
        ))


for _key in FUNCTIONS:
    _elem_name, _elem_aliases = ELEMWISE_NAMES.get(_key, (f"_{_key}", ()))
    _define_binary(_key, _elem_name, _elem_aliases, elementwise_shape(_elem_name))
    _define_binary(_key, f"broadcast_{_key}", BROADCAST_ALIASES.get(_key, ()),
                   _broadcast_infer(f"broadcast_{_key}"))


# ---- with a scalar ---------------------------------------------------------------------

_SCALAR_SCHEMA = schema([Param("scalar", "float", doc="The scalar operand.")])


def _scalar_value(xp, x, scalar):
    # MXNet casts the scalar to the array's dtype first: int32 array + 1.5 adds 1.
    if x.dtype.kind in "iub":
        return x.dtype.type(int(scalar)) if x.dtype.kind != "b" else scalar
    return x.dtype.type(scalar)


def _scalar_kernel(forward, reverse):
    def kernel(xp, inputs, outputs, params):
        x = inputs[0]
        s = _scalar_value(xp, x, params["scalar"])
        write(xp, outputs[0], forward(xp, s, x) if reverse else forward(xp, x, s))

    return kernel


def _fast_scalar_kernel(ufunc_name):
    def kernel(xp, inputs, outputs, params):
        x = inputs[0]
        getattr(xp, ufunc_name)(x, _scalar_value(xp, x, params["scalar"]), out=outputs[0], casting="unsafe")

    return kernel


def _scalar_backward_kernel(forward, derivative, reverse):
    def kernel(xp, inputs, outputs, params):
        out_grad, x = inputs
        s = _scalar_value(xp, x, params["scalar"])
        if reverse:
            grad = derivative(xp, s, x, forward(xp, s, x))
        else:
            grad = derivative(xp, x, s, forward(xp, x, s))
        write(xp, outputs[0], out_grad * grad)

    return kernel


def _scalar_gradient(backward_name):
    def gradient(F, params, inputs, outputs, out_grads):
        return [F(backward_name, out_grads[0], inputs[0], scalar=params["scalar"])]

    return gradient


def _composed_scalar_gradient(name):
    """Scalar-op gradients from differentiable forward operators (twice differentiable)."""

    def gradient(F, params, inputs, outputs, out_grads):
        g, s = out_grads[0], params["scalar"]
        if name in ("_plus_scalar", "_minus_scalar"):
            return [F("_copy", g)]
        if name == "_rminus_scalar":
            return [F("negative", g)]
        if name == "_mul_scalar":
            return [F("_mul_scalar", g, scalar=s)]
        if name == "_div_scalar":
            return [F("_div_scalar", g, scalar=s)]
        # _power_scalar: s * x ** (s - 1)
        local = F("_mul_scalar", F("_power_scalar", inputs[0], scalar=s - 1), scalar=s)
        return [F("broadcast_mul", g, local)]

    return gradient


_COMPOSED_SCALAR = ("_plus_scalar", "_minus_scalar", "_rminus_scalar", "_mul_scalar", "_div_scalar",
                    "_power_scalar")


def _define_scalar(key: str, name: str, reverse: bool) -> None:
    forward, d_lhs, d_rhs = FUNCTIONS[key]
    derivative = d_rhs if reverse else d_lhs
    backward = f"_backward{name}"
    fast = {"add": "add", "mul": "multiply", "sub": "subtract"}.get(key) if not reverse else None
    define(OpDef(
        name=name, infer_shape=first_shape,
        kernel=_fast_scalar_kernel(fast) if fast else _scalar_kernel(forward, reverse),
        params=_SCALAR_SCHEMA, inplace=((0, 0, False),),
        gradient=(_composed_scalar_gradient(name) if name in _COMPOSED_SCALAR
                  else _scalar_gradient(backward) if derivative is not None else no_gradient),
        doc=f"{key} of an array and a scalar" + (" (scalar on the left)." if reverse else "."),
    ))
    if derivative is not None:
        define(OpDef(
            name=backward, infer_shape=elementwise_shape(backward),
            kernel=_scalar_backward_kernel(forward, derivative, reverse), params=_SCALAR_SCHEMA,
            num_inputs=2, input_names=("out_grad", "data"), doc=f"Backward of {name}.",
        ))


for _key in FUNCTIONS:
    _define_scalar(_key, SCALAR_NAMES.get(_key, f"_{_key}_scalar"), reverse=False)
for _key, _name in REVERSE_SCALAR_NAMES.items():
    _define_scalar(_key, _name, reverse=True)


# ---- reducing a broadcast gradient back to an input's shape ----------------------------

def _sum_like_kernel(xp, inputs, outputs, params):
    write(xp, outputs[0], sum_to_shape(xp, inputs[0], outputs[0].shape))


define(OpDef(
    name="_reduce_sum_like", infer_shape=lambda p, s: [tuple(s[1])], kernel=_sum_like_kernel,
    num_inputs=2, input_names=("data", "like"), backward_ignores=frozenset({1}), reads_shape_only=frozenset({1}),
    infer_dtype=lambda p, dtypes: [dtypes[0]],
    gradient=lambda F, p, i, o, g: [F("broadcast_like", g[0], i[0]), None],
    doc="Sums ``data`` over the axes broadcasting stretched, to the shape of ``like``.",
))


def _broadcast_like_axes(data: tuple, like: tuple, lhs_axes: tuple, rhs_axes: tuple) -> tuple:
    """MXNet's ``lhs_axes``/``rhs_axes``: axis ``lhs_axes[i]`` of ``data`` (of length 1)
    takes the length of axis ``rhs_axes[i]`` of ``like``; the other axes stay."""
    from mxkit.core.errors import ShapeError

    if len(lhs_axes) != len(rhs_axes):
        raise ShapeError(f"broadcast_like: lhs_axes {lhs_axes} and rhs_axes {rhs_axes} must have the same length")
    if not lhs_axes:
        raise ShapeError("broadcast_like: lhs_axes and rhs_axes are empty; give the axes, or leave both out to "
                         "broadcast lhs to rhs's whole shape")
    out = list(data)
    for lhs_axis, rhs_axis in zip(lhs_axes, rhs_axes):
        if not -len(data) <= lhs_axis < len(data) or not -len(like) <= rhs_axis < len(like):
            raise ShapeError(f"broadcast_like: axes {lhs_axis} of {data} and {rhs_axis} of {like} are out of range")
        if data[lhs_axis] not in (1, like[rhs_axis]):
            raise ShapeError(f"broadcast_like: axis {lhs_axis} of {data} has length {data[lhs_axis]}, which cannot "
                             f"be broadcast to {like[rhs_axis]} (axis {rhs_axis} of {like})")
        out[lhs_axis] = like[rhs_axis]
    return tuple(out)


def _broadcast_like_kernel(xp, inputs, outputs, params):
    write(xp, outputs[0], xp.broadcast_to(inputs[0], outputs[0].shape))


def _broadcast_like_shape(params, in_shapes):
    data, like = tuple(in_shapes[0]), tuple(in_shapes[1])
    lhs_axes, rhs_axes = params.get("lhs_axes"), params.get("rhs_axes")
    if lhs_axes is not None or rhs_axes is not None:
        return [_broadcast_like_axes(data, like, lhs_axes or (), rhs_axes or ())]
    out = broadcast_shape(data, like, "broadcast_like")
    if out != like:
        from mxkit.core.errors import ShapeError

        raise ShapeError(f"broadcast_like: {data} cannot be broadcast to {like}")
    return [like]


define(OpDef(
    name="broadcast_like", infer_shape=_broadcast_like_shape, kernel=_broadcast_like_kernel,
    params=schema([Param("lhs_axes", "shape", None, optional=True, doc="Axes of lhs to broadcast (None: all)."),
                   Param("rhs_axes", "shape", None, optional=True, doc="The axes of rhs whose lengths they take.")]),
    num_inputs=2, input_names=("lhs", "rhs"), backward_ignores=frozenset({1}), reads_shape_only=frozenset({1}),
    infer_dtype=lambda p, dtypes: [dtypes[0]],
    gradient=lambda F, p, i, o, g: [F("_reduce_sum_like", g[0], i[0]), None],
    doc="Broadcasts ``lhs`` to the shape of ``rhs``.",
))


def _broadcast_to_shape(params, in_shapes):
    src = tuple(in_shapes[0])
    target = params["shape"]
    if len(target) < len(src):
        from mxkit.core.errors import ShapeError

        raise ShapeError(f"broadcast_to: target shape {target} has fewer dimensions than {src}")
    src = (1,) * (len(target) - len(src)) + src
    target = tuple(s if t == 0 else t for s, t in zip(src, target))
    return [broadcast_shape(src, target, "broadcast_to")]


define(OpDef(
    name="broadcast_to", infer_shape=_broadcast_to_shape, kernel=_broadcast_like_kernel,
    params=schema([Param("shape", "shape", (), doc="The target shape (0 keeps the input's dimension).")]),
    gradient=lambda F, p, i, o, g: [F("_reduce_sum_like", g[0], i[0])],
    backward_ignores=frozenset({0}), doc="Broadcasts the input to a shape.",
))


def _broadcast_axis_shape(params, in_shapes):
    shape = list(in_shapes[0])
    axes, sizes = params["axis"], params["size"]
    if len(axes) != len(sizes):
        from mxkit.core.errors import ShapeError

        raise ShapeError(f"broadcast_axis: axis {axes} and size {sizes} must have the same length")
    for axis, size in zip(axes, sizes):
        from mxkit.ndarray.shapes import normalize_axis

        axis = normalize_axis(axis, len(shape), "broadcast_axis")
        if shape[axis] != 1:
            from mxkit.core.errors import ShapeError

            raise ShapeError(f"broadcast_axis: axis {axis} has size {shape[axis]}, must be 1 to broadcast")
        shape[axis] = size
    return [tuple(shape)]


define(OpDef(
    name="broadcast_axis", infer_shape=_broadcast_axis_shape, kernel=_broadcast_like_kernel,
    aliases=("broadcast_axes",),
    params=schema([Param("axis", "shape", ()), Param("size", "shape", ())]),
    gradient=lambda F, p, i, o, g: [F("_reduce_sum_like", g[0], i[0])],
    backward_ignores=frozenset({0}), doc="Broadcasts size-1 axes to the given sizes.",
))
