"""``Activation`` (relu, sigmoid, tanh) and the gradients of relu, sigmoid and tanh on
oneDNN's elementwise primitive, in numpy's layout (the array as one flat row: an elementwise
function does not care about the shape).

The gradients follow mxkit's operators, which take the activation's output: oneDNN's
``*_use_dst_for_bwd`` algorithms compute them from it (relu: ``out_grad`` where the output is
positive, else 0; sigmoid: ``out_grad * y * (1 - y)``; tanh: ``out_grad * (1 - y * y)``). One
difference from the product mxkit-cpu computes: oneDNN's relu gradient is 0, not NaN, for a NaN
``out_grad`` where the output is not positive (MXNet 1.9.1's MKLDNN backend behaves the same).
softrelu and softsign stay with mxkit-cpu: oneDNN's soft_relu computes ``log(1 + exp(x))`` to about one
unit of 1, not of the result (1.7e-4 relative error at x = -7), and its gradient needs the input, which
mxkit's operator does not keep.
"""

from __future__ import annotations

from typing import Any

from mxkit_onednn.conv import Outputs, float32_arrays
from mxkit_onednn.kernels import Unhandled, handles
from mxkit_onednn.library import load
from mxkit_onednn.program import PROGRAMS, BoundCall, Builder, Program

#: act_type -> the name of its oneDNN algorithm (an attribute of the extension) and its alpha
FORWARD = {
    "relu": ("ELTWISE_RELU_USE_DST", 0.0),
    "sigmoid": ("ELTWISE_LOGISTIC_USE_DST", 0.0),
    "tanh": ("ELTWISE_TANH_USE_DST", 0.0),
}

#: gradient operator -> the activation it belongs to
BACKWARD = {"_backward_relu": "relu", "_backward_sigmoid": "sigmoid", "_backward_tanh": "tanh"}


def _forward_pd(dnnl: Any, act_type: str, size: int, prop_kind: int) -> Any:
    algorithm, alpha = FORWARD[act_type]
    flat = dnnl.plain_md((size,))
    return dnnl.eltwise_forward_pd(prop_kind, getattr(dnnl, algorithm), flat, flat, alpha, 0.0)


def _build_forward(act_type: str, size: int) -> Program:
    dnnl = load()
    flat = dnnl.plain_md((size,))
    b = Builder(dnnl)
    b.step(_forward_pd(dnnl, act_type, size, dnnl.FORWARD_INFERENCE),
           [(dnnl.ARG_SRC, flat, ("in", 0)), (dnnl.ARG_DST, flat, ("out", 0))])
    return b.build()


def _prepare_forward(inputs: list, outputs: list, params: dict, replaced: Any = None) -> BoundCall:
    act_type = params["act_type"]
    x, _ = float32_arrays([inputs[0], outputs[0]])
    out = Outputs([outputs[0]])
    return BoundCall(PROGRAMS, ("Activation", act_type, x.size), {"plain": lambda: _build_forward(act_type, x.size)},
                     [x.reshape(-1)], [a.reshape(-1) for a in out.arrays], replaced, out.finish_if_needed())


@handles(act_type=tuple(FORWARD))
def activation(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """Forward of ``Activation``."""
    _prepare_forward(inputs, outputs, params, replaced).once()


activation.prepare = _prepare_forward  # type: ignore[attr-defined]


def _build_backward(act_type: str, size: int) -> Program:
    """Inputs (out_grad, output); output the input's gradient."""
    dnnl = load()
    flat = dnnl.plain_md((size,))
    algorithm, alpha = FORWARD[act_type]
    hint = _forward_pd(dnnl, act_type, size, dnnl.FORWARD_TRAINING)
    pd = dnnl.eltwise_backward_pd(getattr(dnnl, algorithm), flat, flat, flat, alpha, 0.0, hint)
    b = Builder(dnnl)
    b.step(pd, [(dnnl.ARG_DIFF_DST, flat, ("in", 0)), (dnnl.ARG_DST, flat, ("in", 1)),
                (dnnl.ARG_DIFF_SRC, flat, ("out", 0))])
    return b.build()


def _backward(name: str):
    act_type = BACKWARD[name]

    def prepare(inputs: list, outputs: list, params: dict, replaced: Any = None) -> BoundCall:
        out_grad, y, _ = float32_arrays([inputs[0], inputs[1], outputs[0]])
        if out_grad.shape != y.shape or y.shape != outputs[0].shape:
            raise Unhandled  # broadcasting is the generic kernel's business
        out = Outputs([outputs[0]])
        return BoundCall(PROGRAMS, (name, y.size), {"plain": lambda: _build_backward(act_type, y.size)},
                         [out_grad.reshape(-1), y.reshape(-1)], [a.reshape(-1) for a in out.arrays], replaced,
                         out.finish_if_needed())

    def kernel(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
        prepare(inputs, outputs, params, replaced).once()

    kernel.prepare = prepare  # type: ignore[attr-defined]
    kernel.__name__ = name.lstrip("_")
    kernel.__doc__ = f"``{name}`` from the activation's output."
    return handles()(kernel)  # the gradient operators have no parameters


relu_backward = _backward("_backward_relu")
sigmoid_backward = _backward("_backward_sigmoid")
tanh_backward = _backward("_backward_tanh")

__all__ = ["BACKWARD", "FORWARD", "activation", "relu_backward", "sigmoid_backward", "tanh_backward"]
