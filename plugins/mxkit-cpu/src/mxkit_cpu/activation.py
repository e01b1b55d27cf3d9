"""``Activation`` (relu, sigmoid, tanh), the ``tanh`` and ``sigmoid`` operators, and the
gradients of relu, sigmoid and tanh, split across threads.

Forward: float32 tanh and sigmoid in one vectorized C pass (:mod:`mxkit_cpu._fastmath`, 2-3x
numpy's ufuncs); relu and float64 through numpy's ufuncs writing straight into the output
(:mod:`mxkit_cpu.kernels`); one slice of the flattened array per thread (both release the
GIL). Backward: one Cython pass per slice (:mod:`mxkit_cpu._elementwise`). Other activations,
dtypes and non-contiguous arrays go to the generic kernels.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxkit_cpu import _elementwise, _fastmath
from mxkit_cpu.conv import generic_kernel
from mxkit_cpu.kernels import flat_real_views, relu, sigmoid
from mxkit_cpu.parallel import run_split

#: the work of one element visit, in multiply-adds: slices start at 2**17 elements (a slice costs
#: ~20 us to hand over)
ELEMENT_WORK = 16


def _split_elementwise(task, size: int) -> None:
    run_split(task, size, size * ELEMENT_WORK)


def _tanh(x: np.ndarray, out: np.ndarray) -> None:
    if x.dtype == np.float32:
        _fastmath.tanh(x, out)
    else:
        np.tanh(x, out=out)


def _sigmoid(x: np.ndarray, out: np.ndarray) -> None:
    if x.dtype == np.float32:
        _fastmath.sigmoid(x, out)
    else:
        sigmoid(np, [x], [out], {})


_FORWARD = {
    "relu": lambda x, out: relu(np, [x], [out], {}),
    "sigmoid": _sigmoid,
    "tanh": _tanh,
}


def _forward(name: str, forward: Any) -> Any:
    def kernel(xp: Any, inputs: list, outputs: list, params: dict) -> None:
        flat = flat_real_views([inputs[0], outputs[0]])
        if flat is None:
            generic_kernel(name, xp, inputs, outputs, params)
            return
        x, out = flat
        _split_elementwise(lambda index, start, stop: forward(x[start:stop], out[start:stop]), out.size)

    kernel.__name__ = name
    kernel.__doc__ = f"``{name}`` on CPU threads (float32 in one vectorized pass)."
    return kernel


def activation(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    """Forward of ``Activation`` for relu, sigmoid and tanh."""
    kernel = _ACTIVATIONS.get(params["act_type"])
    if kernel is None:
        generic_kernel("Activation", xp, inputs, outputs, params)
        return
    kernel(xp, inputs, outputs, params)


def _backward(name: str, one_pass):
    def kernel(xp: Any, inputs: list, outputs: list, params: dict) -> None:
        flat = flat_real_views([inputs[0], inputs[1], outputs[0]])
        if flat is None:
            generic_kernel(name, xp, inputs, outputs, params)
            return
        out_grad, y, out = flat
        _split_elementwise(lambda index, start, stop: one_pass(out_grad[start:stop], y[start:stop],
                                                               out[start:stop]), out.size)

    kernel.__name__ = name.lstrip("_")
    kernel.__doc__ = f"``{name}`` in one pass over the data."
    return kernel


_ACTIVATIONS = {act_type: _forward("Activation", forward) for act_type, forward in _FORWARD.items()}

#: operator name -> kernel
KERNELS = {
    "Activation": activation,
    "tanh": _forward("tanh", _tanh),
    "sigmoid": _forward("sigmoid", _sigmoid),
    "_backward_relu": _backward("_backward_relu", _elementwise.relu_backward),
    "_backward_tanh": _backward("_backward_tanh", _elementwise.tanh_backward),
    "_backward_sigmoid": _backward("_backward_sigmoid", _elementwise.sigmoid_backward),
}

__all__ = ["ELEMENT_WORK", "KERNELS", "activation"]
