"""numpy kernels that beat the generic ``xp`` ones on CPU, registered through ``mxkit_kernels``.

The generic kernels compute a result and copy it into the preallocated output; these
write straight into the output with ufunc ``out=`` arguments and reuse it as scratch
space, which saves one temporary and one pass over memory per operator.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def relu(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    np.maximum(inputs[0], 0, out=outputs[0], casting="unsafe")


def sigmoid(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    out = outputs[0]
    if out.dtype.kind != "f":
        out[...] = 1 / (1 + np.exp(-inputs[0]))
        return
    np.negative(inputs[0], out=out, casting="unsafe")
    np.exp(out, out=out)
    out += 1
    np.reciprocal(out, out=out)


def _unary_ufunc(ufunc: Any):
    def kernel(xp: Any, inputs: list, outputs: list, params: dict) -> None:
        out = outputs[0]
        if out.dtype.kind == "f":
            ufunc(inputs[0], out=out, casting="unsafe")
        else:
            out[...] = ufunc(inputs[0])

    kernel.__name__ = ufunc.__name__
    return kernel


def softmax(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    x, out = inputs[0], outputs[0]
    temperature = params.get("temperature")
    axis = params["axis"]
    if out.dtype.kind != "f":
        raise TypeError(f"softmax needs a floating-point dtype, got {out.dtype}")
    np.subtract(x, x.max(axis=axis, keepdims=True), out=out, casting="unsafe")
    if temperature is not None and temperature != 1.0:
        out /= temperature
    np.exp(out, out=out)
    out /= out.sum(axis=axis, keepdims=True)


def _binary_ufunc(ufunc_name: str):
    ufunc = getattr(np, ufunc_name)

    def kernel(xp: Any, inputs: list, outputs: list, params: dict) -> None:
        ufunc(inputs[0], inputs[1], out=outputs[0], casting="unsafe")

    kernel.__name__ = ufunc_name
    return kernel


#: operator name -> kernel
KERNELS = {
    "relu": relu,
    "sigmoid": sigmoid,
    "tanh": _unary_ufunc(np.tanh),
    "exp": _unary_ufunc(np.exp),
    "log": _unary_ufunc(np.log),
    "sqrt": _unary_ufunc(np.sqrt),
    "abs": _unary_ufunc(np.abs),
    "negative": _unary_ufunc(np.negative),
    "softmax": softmax,
    "broadcast_div": _binary_ufunc("true_divide"),
    "broadcast_maximum": _binary_ufunc("maximum"),
    "broadcast_minimum": _binary_ufunc("minimum"),
}


def register(registry: Any) -> None:
    """Register every kernel of :data:`KERNELS` for backend ``numpy``."""
    for name, kernel in KERNELS.items():
        registry.register_kernel(name, backend="numpy", kernel=kernel)
