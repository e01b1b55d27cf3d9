"""More elementwise operators: the special functions ``gamma``, ``gammaln``, ``erfinv``,
``hard_sigmoid``, ``contrib.quadratic`` and ``contrib.div_sqrt_dim``, with their gradients.

The special functions are written in numpy here (mxkit-ndarray does not depend on scipy):
``lgamma`` and ``gamma`` come from the standard library per element, ``digamma`` (their
derivative) from the recurrence and the asymptotic series, ``erfinv`` from Newton steps on
``erf``. Each is accurate to a few units in the last place of float64.
"""

from __future__ import annotations

import math

from mxkit.ndarray.ops._helpers import first_shape, write
from mxkit.ndarray.ops.unary import UNARY
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define


def _host(x):
    import numpy as np

    return np.asarray(x.get() if type(x).__module__.startswith("cupy") else x, dtype=np.float64)


def _math_each(function, x, pole):
    import numpy as np

    def safe(v):
        try:
            return function(v)
        except (ValueError, OverflowError):
            return pole(v)

    values = _host(x)
    return np.vectorize(safe, otypes=[np.float64])(values) if values.size else values


def gammaln(x):
    """log |Gamma(x)| per element (inf at the poles 0, -1, -2...)."""
    return _math_each(math.lgamma, x, lambda v: math.inf)


def gamma(x):
    """Gamma(x) per element (inf, or NaN for non-positive integers, at the poles)."""
    return _math_each(math.gamma, x, lambda v: math.inf if v == 0 else (math.nan if v < 0 else math.inf))


def digamma(x):
    """d/dx log Gamma(x): shift x above 10 with psi(x) = psi(x + 1) - 1 / x, then the
    asymptotic series; negative x through the reflection psi(1 - x) - pi / tan(pi x)."""
    import numpy as np

    x = _host(x)
    reflect = x < 0.5
    z = np.where(reflect, 1.0 - x, x)
    result = np.zeros_like(z)
    while True:
        small = z < 10.0
        if not small.any():
            break
        result -= np.where(small, 1.0 / z, 0.0)
        z = np.where(small, z + 1.0, z)
    inv2 = 1.0 / (z * z)
    series = inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (1 / 240 - inv2 * (1 / 132)))))
    result += np.log(z) - 0.5 / z - series
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(reflect, result - math.pi / np.tan(math.pi * x), result)


def erfinv(y):
    """The inverse of erf on (-1, 1) (+-inf at +-1, NaN outside)."""
    import numpy as np

    y = _host(y)
    erf = np.vectorize(math.erf, otypes=[np.float64])
    inside = np.abs(y) < 1
    t = np.where(inside, y, 0.0)
    # Winitzki's closed form as the start, then Newton on erf(x) - y (quadratic convergence)
    a = 0.147
    log_term = np.log1p(-t * t)
    first = 2 / (math.pi * a) + log_term / 2
    x = np.sign(t) * np.sqrt(np.sqrt(first * first - log_term / a) - first)
    for _ in range(4):
        x = x - (erf(x) - t) / (2 / math.sqrt(math.pi) * np.exp(-x * x))
    edge = np.where(np.abs(y) == 1, np.where(y > 0, np.inf, -np.inf), np.nan)
    return np.where(inside, x, edge)


def _on(xp, function):
    return lambda xp_, x: xp_.asarray(function(x))


# the UNARY table of unary.py: name -> (forward, derivative, "x" or "y", aliases, doc)
_SPECIAL = {
    "gamma": (lambda xp, x: xp.asarray(gamma(x)), lambda xp, x: xp.asarray(gamma(x) * digamma(x)), "x", (),
              "The gamma function."),
    "gammaln": (lambda xp, x: xp.asarray(gammaln(x)), lambda xp, x: xp.asarray(digamma(x)), "x", (),
                "log |gamma(x)|."),
    "erfinv": (lambda xp, x: xp.asarray(erfinv(x)),
               lambda xp, y: (math.sqrt(math.pi) / 2) * xp.exp(y * y), "y", (), "The inverse error function."),
}


def _define_unary(name, forward, derivative, uses, doc):
    def kernel(xp, inputs, outputs, params):
        write(xp, outputs[0], forward(xp, inputs[0]))

    def backward(xp, inputs, outputs, params):
        write(xp, outputs[0], inputs[0] * derivative(xp, inputs[1]))

    def gradient(F, params, inputs, outputs, out_grads):
        return [F(f"_backward_{name}", out_grads[0], outputs[0] if uses == "y" else inputs[0])]

    define(OpDef(name=name, infer_shape=first_shape, kernel=kernel, gradient=gradient,
                 backward_ignores=frozenset({0}) if uses == "y" else frozenset(), doc=doc))
    define(OpDef(name=f"_backward_{name}", infer_shape=lambda p, s: [tuple(s[0])], kernel=backward, num_inputs=2,
                 input_names=("out_grad", "data" if uses == "x" else "output"), doc=f"Backward of {name}."))


for _name, (_forward, _derivative, _uses, _aliases, _doc) in _SPECIAL.items():
    if _name not in UNARY:
        _define_unary(_name, _forward, _derivative, _uses, _doc)


# ---- hard_sigmoid ----------------------------------------------------------------------------

_HARD_SIGMOID = schema([Param("alpha", "float", 0.2), Param("beta", "float", 0.5)])


def _hard_sigmoid_backward(xp, inputs, outputs, params):
    out_grad, x = inputs
    inner = params["alpha"] * x + params["beta"]
    write(xp, outputs[0], xp.where((inner > 0) & (inner < 1), out_grad * params["alpha"], 0))


define(OpDef(
    name="hard_sigmoid", infer_shape=first_shape, params=_HARD_SIGMOID,
    kernel=lambda xp, i, o, p: write(xp, o[0], xp.clip(p["alpha"] * i[0] + p["beta"], 0, 1)),
    gradient=lambda F, p, i, o, g: [F("_backward_hard_sigmoid", g[0], i[0], **p)],
    doc="max(0, min(1, alpha * x + beta)).",
))
define(OpDef(
    name="_backward_hard_sigmoid", infer_shape=lambda p, s: [tuple(s[0])], kernel=_hard_sigmoid_backward,
    params=_HARD_SIGMOID, num_inputs=2, input_names=("out_grad", "data"), doc="Backward of hard_sigmoid.",
))


# ---- quadratic, div_sqrt_dim -------------------------------------------------------------------

_QUADRATIC = schema([Param("a", "float", 0.0), Param("b", "float", 0.0), Param("c", "float", 0.0)])

define(OpDef(
    name="_contrib_quadratic", infer_shape=first_shape, params=_QUADRATIC,
    kernel=lambda xp, i, o, p: write(xp, o[0], p["a"] * i[0] * i[0] + p["b"] * i[0] + p["c"]),
    gradient=lambda F, p, i, o, g: [F("_contrib_backward_quadratic", g[0], i[0], **p)],
    doc="a * x^2 + b * x + c.",
))
define(OpDef(
    name="_contrib_backward_quadratic", infer_shape=lambda p, s: [tuple(s[0])], params=_QUADRATIC,
    kernel=lambda xp, i, o, p: write(xp, o[0], i[0] * (2 * p["a"] * i[1] + p["b"])),
    num_inputs=2, input_names=("out_grad", "data"), doc="Backward of quadratic.",
))


def _inverse_sqrt_last(x):
    return 1.0 / math.sqrt(x.shape[-1]) if x.ndim else 1.0


define(OpDef(
    name="_contrib_div_sqrt_dim", infer_shape=first_shape,
    kernel=lambda xp, i, o, p: write(xp, o[0], i[0] * _inverse_sqrt_last(i[0])),
    gradient=lambda F, p, i, o, g: [F("_contrib_div_sqrt_dim", g[0])],
    doc="x / sqrt(x.shape[-1]) (the scaling of dot-product attention).",
))
