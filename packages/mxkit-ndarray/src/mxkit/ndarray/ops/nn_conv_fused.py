"""``_FusedConvolution``: a convolution with the elementwise operations that follow it in a network.

The graph pass ``fuse_conv`` (in mxkit-symbol) replaces ``Convolution -> Activation(relu)`` and
``Convolution -> elemwise_add(., residual) [-> Activation(relu)]`` (a ResNet block's end, after
BatchNorm folded into the convolution) by one such node in prediction binds, so that a kernel
plugin can compute it in one pass over the output (oneDNN's post-ops). The node computes::

    y = act(conv(data, weight, bias) + addend)     # "+ addend" with with_sum, act with act_type

with the parameters of ``Convolution`` and two more: ``act_type`` (``None`` or ``"relu"``) and
``with_sum`` (the last input, ``addend``, of the output's shape, is added; the output may share
its storage, as the addition's output could). Its generic kernel
runs the backend's own ``Convolution`` kernel into the output, then the addition and the
activation in place: the same operations, in the same order and precision, as the unfused
graph, so without a plugin's kernel the result is the unfused one's bit for bit.
"""

from __future__ import annotations

from mxkit.ndarray.ops.nn_common import expect_shape, fmt
from mxkit.ndarray.ops.nn_conv import _CONV_SCHEMA, _conv_shape
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define, get_registry

FUSED_CONVOLUTION = "_FusedConvolution"

#: the activations the fused node applies
ACT_TYPES = ("relu",)

_FUSED_SCHEMA = schema([
    *_CONV_SCHEMA,
    Param("act_type", "str", None, optional=True, choices=ACT_TYPES,
          doc="Activation applied last (after the addition); None for none."),
    Param("with_sum", "bool", False, doc="Add the last input (addend, of the output's shape) to the convolution."),
])


def fused_input_names(params: dict) -> tuple[str, ...]:
    """``data, weight[, bias][, addend]``."""
    names = ("data", "weight") if params["no_bias"] else ("data", "weight", "bias")
    return names + (("addend",) if params["with_sum"] else ())


def _convolution_params(params: dict) -> dict:
    return {name: value for name, value in params.items() if name not in ("act_type", "with_sum")}


def _fused_shape(params: dict, in_shapes: list) -> list:
    conv_inputs = 2 if params["no_bias"] else 3
    (out,) = _conv_shape(_convolution_params(params), in_shapes[:conv_inputs])
    if params["with_sum"]:
        expect_shape(FUSED_CONVOLUTION, "addend", in_shapes[conv_inputs], out,
                     f"the convolution's output shape {fmt(out)}")
    return [out]


def _fused_kernel(xp, inputs, outputs, params):
    # the backend's own Convolution kernel (a module name is its backend's name: numpy, cupy), else the generic one
    convolution = get_registry().get("Convolution")
    kernel = convolution.kernels.get(getattr(xp, "__name__", ""), convolution.kernel)
    conv_inputs = 2 if params["no_bias"] else 3
    out = outputs[0]
    # the planner may give the output the addend's storage (``inplace``): then the convolution goes to a
    # temporary first, since writing it into the output would overwrite the addend before it is read
    addend = inputs[conv_inputs] if params["with_sum"] else None
    shared = addend is not None and xp.may_share_memory(out, addend)
    result = xp.empty_like(out) if shared else out
    kernel(xp, list(inputs[:conv_inputs]), [result], _convolution_params(params))
    if addend is not None:
        xp.add(result, addend, out=out)
    if params["act_type"] == "relu":
        xp.maximum(out, 0, out=out)


define(OpDef(
    name=FUSED_CONVOLUTION, infer_shape=_fused_shape, kernel=_fused_kernel, params=_FUSED_SCHEMA,
    num_inputs=lambda p: (2 if p["no_bias"] else 3) + bool(p["with_sum"]), input_names=fused_input_names,
    # the output may take the addend's storage, as the addition it replaces could (a ResNet block's end)
    inplace=lambda p: ((2 if p["no_bias"] else 3, 0, False),) if p["with_sum"] else (),
    doc="Convolution followed by an optional addition of a same-shaped array and an optional relu, in one node "
        "(made by the graph pass fuse_conv for prediction; no gradient).",
))

__all__ = ["ACT_TYPES", "FUSED_CONVOLUTION", "fused_input_names"]
