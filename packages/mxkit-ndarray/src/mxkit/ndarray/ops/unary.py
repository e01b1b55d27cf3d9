"""Elementwise unary math: ``exp``, ``log``, ``relu``, ``sigmoid``... and their backward operators.

Each entry names the forward function and its derivative as a function of the input
``x`` or of the output ``y`` (whichever MXNet keeps; ``y`` lets the input be freed).
The backward operator ``_backward_<name>(out_grad, x_or_y)`` is registered too, so a
graph executor builds the same backward nodes as NDArray's autograd.
"""

from __future__ import annotations

import math
from typing import Any

from mxkit.ndarray.ops._helpers import elementwise_shape, first_shape, no_gradient, write
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import ALL_INPUTS, OpDef, define


def _sigmoid(xp: Any, x: Any) -> Any:
    return 1.0 / (1.0 + xp.exp(-x))


def _softrelu(xp: Any, x: Any) -> Any:
    # log(1 + exp(x)) without overflow for large x
    return xp.logaddexp(0, x)


def _erf(xp: Any, x: Any) -> Any:
    special = getattr(xp, "special", None)
    if special is not None and hasattr(special, "erf"):
        return special.erf(x)
    import numpy as np

    return np.vectorize(math.erf, otypes=[x.dtype])(x)


# name: (forward(xp, x), derivative(xp, v), v is "x" or "y", aliases, doc)
UNARY: dict[str, tuple[Any, Any, str, tuple[str, ...], str]] = {
    "relu": (lambda xp, x: xp.maximum(x, 0), lambda xp, y: (y > 0), "y", (), "Rectified linear unit max(x, 0)."),
    "sigmoid": (_sigmoid, lambda xp, y: y * (1 - y), "y", (), "Logistic sigmoid 1 / (1 + exp(-x))."),
    "tanh": (lambda xp, x: xp.tanh(x), lambda xp, y: 1 - y * y, "y", (), "Hyperbolic tangent."),
    "softrelu": (_softrelu, lambda xp, y: -xp.expm1(-y), "y", (), "Soft ReLU log(1 + exp(x))."),
    "softsign": (lambda xp, x: x / (1 + xp.abs(x)), lambda xp, x: 1 / (1 + xp.abs(x)) ** 2, "x", (),
                 "x / (1 + |x|)."),
    "exp": (lambda xp, x: xp.exp(x), lambda xp, y: y, "y", (), "Exponential e**x."),
    "expm1": (lambda xp, x: xp.expm1(x), lambda xp, y: y + 1, "y", (), "exp(x) - 1, exact for small x."),
    "log": (lambda xp, x: xp.log(x), lambda xp, x: 1 / x, "x", (), "Natural logarithm."),
    "log10": (lambda xp, x: xp.log10(x), lambda xp, x: 1 / (x * math.log(10)), "x", (), "Base-10 logarithm."),
    "log2": (lambda xp, x: xp.log2(x), lambda xp, x: 1 / (x * math.log(2)), "x", (), "Base-2 logarithm."),
    "log1p": (lambda xp, x: xp.log1p(x), lambda xp, x: 1 / (1 + x), "x", (), "log(1 + x), exact for small x."),
    "sqrt": (lambda xp, x: xp.sqrt(x), lambda xp, y: 0.5 / y, "y", (), "Square root."),
    "rsqrt": (lambda xp, x: 1 / xp.sqrt(x), lambda xp, x: -0.5 / (x * xp.sqrt(x)), "x", (),
              "Reciprocal square root 1 / sqrt(x)."),
    "cbrt": (lambda xp, x: xp.cbrt(x), lambda xp, y: 1 / (3 * y * y), "y", (), "Cube root."),
    "rcbrt": (lambda xp, x: 1 / xp.cbrt(x), lambda xp, x: -1 / (3 * x * xp.cbrt(x)), "x", (),
              "Reciprocal cube root."),
    "square": (lambda xp, x: x * x, lambda xp, x: 2 * x, "x", (), "x * x."),
    "reciprocal": (lambda xp, x: 1 / x, lambda xp, x: -1 / (x * x), "x", (), "1 / x."),
    "negative": (lambda xp, x: -x, lambda xp, x: -xp.ones_like(x), "x", (), "-x."),
    "abs": (lambda xp, x: xp.abs(x), lambda xp, x: xp.sign(x), "x", (), "Absolute value."),
    "sin": (lambda xp, x: xp.sin(x), lambda xp, x: xp.cos(x), "x", (), "Sine."),
    "cos": (lambda xp, x: xp.cos(x), lambda xp, x: -xp.sin(x), "x", (), "Cosine."),
    "tan": (lambda xp, x: xp.tan(x), lambda xp, y: 1 + y * y, "y", (), "Tangent."),
    "arcsin": (lambda xp, x: xp.arcsin(x), lambda xp, x: 1 / xp.sqrt(1 - x * x), "x", (), "Inverse sine."),
    "arccos": (lambda xp, x: xp.arccos(x), lambda xp, x: -1 / xp.sqrt(1 - x * x), "x", (), "Inverse cosine."),
    "arctan": (lambda xp, x: xp.arctan(x), lambda xp, x: 1 / (1 + x * x), "x", (), "Inverse tangent."),
    "sinh": (lambda xp, x: xp.sinh(x), lambda xp, x: xp.cosh(x), "x", (), "Hyperbolic sine."),
    "cosh": (lambda xp, x: xp.cosh(x), lambda xp, x: xp.sinh(x), "x", (), "Hyperbolic cosine."),
    "arcsinh": (lambda xp, x: xp.arcsinh(x), lambda xp, x: 1 / xp.sqrt(x * x + 1), "x", (),
                "Inverse hyperbolic sine."),
    "arccosh": (lambda xp, x: xp.arccosh(x), lambda xp, x: 1 / xp.sqrt(x * x - 1), "x", (),
                "Inverse hyperbolic cosine."),
    "arctanh": (lambda xp, x: xp.arctanh(x), lambda xp, x: 1 / (1 - x * x), "x", (),
                "Inverse hyperbolic tangent."),
    "degrees": (lambda xp, x: x * (180 / math.pi), lambda xp, x: xp.full_like(x, 180 / math.pi), "x", (),
                "Radians to degrees."),
    "radians": (lambda xp, x: x * (math.pi / 180), lambda xp, x: xp.full_like(x, math.pi / 180), "x", (),
                "Degrees to radians."),
    "erf": (_erf, lambda xp, x: (2 / math.sqrt(math.pi)) * xp.exp(-x * x), "x", (), "Gauss error function."),
    "identity": (lambda xp, x: x, lambda xp, x: xp.ones_like(x), "x", ("_copy",), "A copy of the input."),
}

# piecewise-constant functions: zero gradient
STEP: dict[str, tuple[Any, str]] = {
    "sign": (lambda xp, x: xp.sign(x), "Sign: -1, 0 or 1."),
    "floor": (lambda xp, x: xp.floor(x), "Largest integer not above x."),
    "ceil": (lambda xp, x: xp.ceil(x), "Smallest integer not below x."),
    "round": (lambda xp, x: xp.where(x >= 0, xp.floor(x + 0.5), xp.ceil(x - 0.5)),
              "Round half away from zero."),
    "rint": (lambda xp, x: xp.rint(x), "Round half to even."),
    "trunc": (lambda xp, x: xp.trunc(x), "Round toward zero."),
    "fix": (lambda xp, x: xp.trunc(x), "Round toward zero."),
    "logical_not": (lambda xp, x: (x == 0), "1 where x is 0, else 0."),
    "zeros_like": (lambda xp, x: xp.zeros_like(x), "An array of zeros shaped like the input."),
    "ones_like": (lambda xp, x: xp.ones_like(x), "An array of ones shaped like the input."),
}


def _forward_kernel(forward):
    def kernel(xp, inputs, outputs, params):
        write(xp, outputs[0], forward(xp, inputs[0]))

    return kernel


def _backward_kernel(derivative):
    def kernel(xp, inputs, outputs, params):
        out_grad, value = inputs
        write(xp, outputs[0], out_grad * derivative(xp, value))

    return kernel


def _gradient(backward_name: str, uses: str):
    def gradient(F, params, inputs, outputs, out_grads):
        value = outputs[0] if uses == "y" else inputs[0]
        return [F(backward_name, out_grads[0], value)]

    return gradient


for _name, (_forward, _derivative, _uses, _aliases, _doc) in UNARY.items():
    _backward = f"_backward_{_name}"
    define(OpDef(
        name=_name, infer_shape=first_shape, kernel=_forward_kernel(_forward), aliases=_aliases,
        inplace=((0, 0, _name == "identity"),), gradient=_gradient(_backward, _uses),
        backward_ignores=frozenset({0}) if _uses == "y" else frozenset(), doc=_doc,
    ))
    define(OpDef(
        name=_backward, infer_shape=elementwise_shape(_backward), kernel=_backward_kernel(_derivative),
        num_inputs=2, input_names=("out_grad", "data" if _uses == "x" else "output"),
        inplace=((0, 0, False),), doc=f"Backward of {_name}: out_grad * d{_name}.",
    ))

for _name, (_forward, _doc) in STEP.items():
    define(OpDef(name=_name, infer_shape=first_shape, kernel=_forward_kernel(_forward),
                 inplace=((0, 0, False),), gradient=no_gradient, doc=_doc))


def _activation_kernel(xp, inputs, outputs, params):
    write(xp, outputs[0], UNARY[params["act_type"]][0](xp, inputs[0]))


def _activation_gradient(F, params, inputs, outputs, out_grads):
    act = params["act_type"]
    return [F("_backward_" + act, out_grads[0], outputs[0] if UNARY[act][2] == "y" else inputs[0])]


define(OpDef(
    name="Activation", infer_shape=first_shape, kernel=_activation_kernel,
    params=schema([Param("act_type", "str", choices=("relu", "sigmoid", "tanh", "softrelu", "softsign"),
                         doc="The activation function.")]),
    inplace=((0, 0, False),), gradient=_activation_gradient,
    doc="Applies an activation function elementwise.",
))


def _cast_kernel(xp, inputs, outputs, params):
    write(xp, outputs[0], inputs[0])


define(OpDef(
    name="Cast", infer_shape=first_shape, kernel=_cast_kernel, aliases=("cast",),
    params=schema([Param("dtype", "dtype", doc="The output dtype.")]),
    gradient=lambda F, p, i, o, g: [F("_backward_Cast", g[0], i[0])],
    backward_ignores=frozenset({0}), doc="Casts the input to another dtype.",
))
define(OpDef(
    name="_backward_Cast", infer_shape=first_shape, kernel=_cast_kernel, num_inputs=2,
    input_names=("out_grad", "data"), infer_dtype=lambda p, dtypes: [dtypes[1]], reads_shape_only=frozenset({1}),
    doc="Backward of Cast: the gradient cast back to the input's dtype (only its dtype is read).",
))


# ---- AMP's casts: MXNet's mixed-precision graphs (mx.contrib.amp) carry these nodes -------------

# floating dtypes, narrowest first (bfloat16 and float16 are both 2 bytes; bfloat16 counts as the narrower)
_FLOATS = ("bfloat16", "float16", "float32", "float64")


def _amp_cast_dtype(params: dict, dtypes: list) -> list:
    # only floating inputs change type; integers and booleans pass through as they are
    return [params["dtype"] if dtypes[0] in _FLOATS else dtypes[0]]


def _amp_multicast_dtypes(params: dict, dtypes: list) -> list:
    floats = [d for d in dtypes if d in _FLOATS]
    if not floats:
        return list(dtypes)
    pick = min if params["cast_narrow"] else max
    target = pick(floats, key=_FLOATS.index)
    return [target if d in _FLOATS else d for d in dtypes]


def _amp_multicast_kernel(xp, inputs, outputs, params):
    for source, target in zip(inputs, outputs):
        write(xp, target, source)


define(OpDef(
    name="amp_cast", infer_shape=first_shape, kernel=_cast_kernel, infer_dtype=_amp_cast_dtype,
    params=schema([Param("dtype", "dtype", doc="The floating dtype floating inputs are cast to.")]),
    gradient=lambda F, p, i, o, g: [F("_backward_Cast", g[0], i[0])], backward_ignores=frozenset({0}),
    doc="AMP's cast: a floating input becomes ``dtype``; other dtypes pass through unchanged.",
))
define(OpDef(
    name="amp_multicast", infer_shape=lambda p, s: [tuple(x) for x in s], kernel=_amp_multicast_kernel,
    infer_dtype=_amp_multicast_dtypes,
    params=schema([Param("num_outputs", "int", doc="The number of inputs (and outputs)."),
                   Param("cast_narrow", "bool", False, doc="Cast to the narrowest floating dtype, not the widest.")]),
    num_inputs=lambda p: p["num_outputs"], num_outputs=lambda p: p["num_outputs"],
    input_names=lambda p: tuple(f"data_{i}" for i in range(p["num_outputs"])),
    gradient=lambda F, p, i, o, g: [F("_backward_Cast", grad, x) for grad, x in zip(g, i)],
    backward_ignores=ALL_INPUTS,
    doc="AMP's multi-cast: every floating input is cast to the widest floating dtype among them (the "
        "narrowest with cast_narrow); other dtypes pass through.",
))
