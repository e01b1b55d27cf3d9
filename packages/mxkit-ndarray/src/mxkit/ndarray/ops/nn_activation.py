"""``LeakyReLU`` in all of MXNet's modes (leaky, prelu, rrelu, elu, selu, gelu) and its backward operator.

(``Activation``, softmax and log_softmax are defined in ``unary.py`` and ``nn_basic.py``.)
"""

from __future__ import annotations

import math

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.ops.nn_common import as_list, fmt, is_train, public
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define

# ---- LeakyReLU -------------------------------------------------------------------------------

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_LAMBDA = 1.0507009873554804934193349852946

_LEAKY_SCHEMA = schema([
    Param("act_type", "str", "leaky", choices=("elu", "gelu", "leaky", "prelu", "rrelu", "selu"),
          doc="The activation: leaky, prelu (learned slope per channel), rrelu, elu, selu or gelu."),
    Param("slope", "float", 0.25, doc="Negative slope of leaky, and the alpha of elu."),
    Param("lower_bound", "float", 0.125, doc="Lower bound of rrelu's random slope."),
    Param("upper_bound", "float", 0.334, doc="Upper bound of rrelu's random slope."),
])


def _leaky_input_names(params: dict) -> tuple[str, ...]:
    return ("data", "gamma") if params["act_type"] == "prelu" else ("data",)


def _leaky_shape(params: dict, in_shapes: list) -> list:
    data = tuple(in_shapes[0])
    if params["act_type"] == "prelu":
        gamma = in_shapes[1]
        if gamma is not None:
            prelu_gamma_shape(tuple(gamma), data)  # raises for a gamma that does not broadcast
    if params["act_type"] == "rrelu":
        return [data, data]
    return [data]


def prelu_gamma_shape(gamma: tuple, data: tuple) -> tuple:
    """The shape ``gamma`` takes against ``data`` in PReLU (MXNet's ``expand_shape``).

    Gamma's axes, from its last, land on the data's axes 1 and 0 only, each matching that
    axis or being 1: ``(C,)`` is one slope per channel, ``(N, C)`` one per sample and channel,
    ``(1,)`` one for all; the data's other axes get 1.

    Raises
    ------
    ShapeError
        When gamma's axes do not all land so.
    """
    result = [1] * len(data)
    position = len(gamma) - 1
    for axis in range(len(data) - 1, -1, -1):
        if position >= 0 and axis <= 1 and gamma[position] in (data[axis], 1):
            result[axis] = gamma[position]
            position -= 1
    if position != -1 or not data:
        channels = data[1] if len(data) > 1 else (data[0] if data else 1)
        raise ShapeError(f"LeakyReLU: act_type=prelu cannot broadcast gamma {fmt(gamma)} to data {fmt(data)}; "
                         f"gamma's axes match the data's axes 1 and 0 from its last: ({channels},) for one "
                         f"slope per channel, (1,) for one slope, or (batch, channels)")
    return tuple(result)


def _prelu_slope(xp, gamma, data):
    return gamma.reshape(prelu_gamma_shape(tuple(gamma.shape), tuple(data.shape)))


def _erf(xp, x):
    special = getattr(xp, "special", None)
    if special is not None and hasattr(special, "erf"):
        return special.erf(x)
    try:
        from scipy.special import erf

        return erf(x)
    except ImportError:
        import numpy as np

        return np.vectorize(math.erf, otypes=[x.dtype])(x)


def _leaky_kernel(xp, inputs, outputs, params):
    x = inputs[0]
    act = params["act_type"]
    if act == "leaky":
        result = xp.where(x > 0, x, params["slope"] * x)
    elif act == "prelu":
        result = xp.where(x > 0, x, _prelu_slope(xp, inputs[1], x) * x)
    elif act == "elu":
        result = xp.where(x > 0, x, params["slope"] * xp.expm1(xp.minimum(x, 0)))
    elif act == "selu":
        result = SELU_LAMBDA * xp.where(x > 0, x, SELU_ALPHA * xp.expm1(xp.minimum(x, 0)))
    elif act == "gelu":
        result = 0.5 * x * (1 + _erf(xp, x / math.sqrt(2)))
    else:  # rrelu: a random slope per element in training, the mean slope otherwise
        if is_train(params):
            low, high = params["lower_bound"], params["upper_bound"]
            slope = low + (high - low) * xp.asarray(params["_rng"].random(x.shape), dtype=x.dtype)
        else:
            slope = xp.full(x.shape, (params["lower_bound"] + params["upper_bound"]) / 2, dtype=x.dtype)
        result = xp.where(x > 0, x, slope * x)
        write(xp, outputs[1], slope)
    write(xp, outputs[0], result)


def _leaky_backward_kernel(xp, inputs, outputs, params):
    out_grad, x = inputs[0], inputs[1]
    act = params["act_type"]
    positive = x > 0
    if act == "leaky":
        write(xp, outputs[0], xp.where(positive, out_grad, params["slope"] * out_grad))
    elif act == "prelu":
        gamma = inputs[2]
        slope = _prelu_slope(xp, gamma, x)
        write(xp, outputs[0], xp.where(positive, out_grad, slope * out_grad))
        negative_part = xp.where(positive, 0, x * out_grad)
        axes = tuple(i for i, size in enumerate(slope.shape) if size == 1 and x.shape[i] != 1)
        write(xp, outputs[1], negative_part.sum(axis=axes).reshape(gamma.shape))
    elif act == "elu":
        write(xp, outputs[0], out_grad * xp.where(positive, 1, params["slope"] * xp.exp(xp.minimum(x, 0))))
    elif act == "selu":
        write(xp, outputs[0], out_grad * SELU_LAMBDA * xp.where(positive, 1, SELU_ALPHA * xp.exp(xp.minimum(x, 0))))
    elif act == "gelu":
        cdf = 0.5 * (1 + _erf(xp, x / math.sqrt(2)))
        pdf = xp.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
        write(xp, outputs[0], out_grad * (cdf + x * pdf))
    else:  # rrelu: inputs are out_grad, data, the slopes drawn in the forward pass
        write(xp, outputs[0], xp.where(positive, out_grad, inputs[2] * out_grad))


def _leaky_gradient(F, params, inputs, outputs, out_grads):
    act = params["act_type"]
    if act == "prelu":
        return as_list(F("_backward_LeakyReLU", out_grads[0], inputs[0], inputs[1], **public(params)))
    if act == "rrelu":
        return [F("_backward_LeakyReLU", out_grads[0], inputs[0], outputs[1], **public(params))]
    return [F("_backward_LeakyReLU", out_grads[0], inputs[0], **public(params))]


LEAKY_RELU = define(OpDef(
    name="LeakyReLU", infer_shape=_leaky_shape, kernel=_leaky_kernel, params=_LEAKY_SCHEMA,
    num_inputs=lambda p: 2 if p["act_type"] == "prelu" else 1, input_names=_leaky_input_names,
    num_outputs=lambda p: 2 if p["act_type"] == "rrelu" else 1,
    output_names=lambda p: ("output", "mask") if p["act_type"] == "rrelu" else ("output",),
    infer_dtype=lambda p, d: [d[0]] * (2 if p["act_type"] == "rrelu" else 1),
    gradient=_leaky_gradient, needs_rng=True,
    doc="Leaky rectifiers and relatives: leaky, prelu, rrelu, elu, selu and (erf) gelu.",
))
BACKWARD_LEAKY_RELU = define(OpDef(
    name="_backward_LeakyReLU", params=_LEAKY_SCHEMA, kernel=_leaky_backward_kernel,
    infer_shape=lambda p, s: [tuple(s[1])] + ([tuple(s[2])] if p["act_type"] == "prelu" else []),
    num_inputs=lambda p: 3 if p["act_type"] in ("prelu", "rrelu") else 2,
    input_names=lambda p: ("out_grad", "data", "gamma" if p["act_type"] == "prelu" else "mask")[
        :3 if p["act_type"] in ("prelu", "rrelu") else 2],
    num_outputs=lambda p: 2 if p["act_type"] == "prelu" else 1,
    output_names=lambda p: ("data", "gamma") if p["act_type"] == "prelu" else ("data",),
    infer_dtype=lambda p, d: [d[1]] * (2 if p["act_type"] == "prelu" else 1),
    doc="Backward of LeakyReLU (and of prelu's slopes).",
))
