"""CuPy kernels that beat the generic ``xp`` ones on GPUs, registered through ``mxkit_kernels``.

The generic kernels already run on CuPy unchanged (cuBLAS serves ``dot`` and the products
inside FullyConnected and Convolution). A kernel here writes straight into its output
with ``out=`` (one pass over memory instead of a temporary and a copy).
"""

from __future__ import annotations

import functools
from typing import Any

from mxkit.ndarray.kernels import get_op


@functools.cache
def _relu_kernel() -> Any:
    import cupy

    # max(x, 0) with NaN kept, as numpy's maximum. An ElementwiseKernel, not cupy.maximum: a
    # ufunc copies an input that shares memory with its output first, and the memory plan
    # often runs relu in place
    return cupy.ElementwiseKernel("T x", "T y", "y = (x > (T)0 || x != x) ? x : (T)0", "mxkit_relu")


def relu(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    if inputs[0].dtype == outputs[0].dtype:
        _relu_kernel()(inputs[0], outputs[0])
    else:
        xp.maximum(inputs[0], 0, out=outputs[0], casting="unsafe")


def activation(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    # relu straight into the output: the generic kernel computes into a temporary and copies it
    if params["act_type"] == "relu" and inputs[0].dtype == outputs[0].dtype:
        _relu_kernel()(inputs[0], outputs[0])
        return
    get_op("Activation").kernel(xp, inputs, outputs, params)


@functools.cache
def _relu_gradient_kernel() -> Any:
    import cupy

    # out_grad * (y > 0) in one pass (the generic kernel takes three: the comparison, the
    # product and a copy into the output); dy * 0 keeps the generic NaN and inf behaviour
    return cupy.ElementwiseKernel("T dy, T y", "T dx", "dx = y > (T)0 ? dy : dy * (T)0", "mxkit_relu_gradient")


def relu_backward(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    out_grad, output = inputs
    if out_grad.dtype == output.dtype == outputs[0].dtype and out_grad.dtype.kind == "f":
        _relu_gradient_kernel()(out_grad, output, outputs[0])
        return
    get_op("_backward_relu").kernel(xp, inputs, outputs, params)


def erf(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    # the generic kernel falls back to math.erf element by element, which cannot run on a GPU
    from cupyx.scipy.special import erf as device_erf

    out = outputs[0]
    if out.dtype.kind == "f":
        device_erf(inputs[0], out=out)
    else:
        out[...] = device_erf(inputs[0].astype(xp.float32))


def _batchnorm(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    from mxkit_cuda.batchnorm import batchnorm

    batchnorm(xp, inputs, outputs, params)


def _batchnorm_backward(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    from mxkit_cuda.batchnorm import batchnorm_backward

    batchnorm_backward(xp, inputs, outputs, params)


def _convolution(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    from mxkit_cuda.convolution import convolution

    convolution(xp, inputs, outputs, params)


def _convolution_backward(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    from mxkit_cuda.convolution import convolution_backward

    convolution_backward(xp, inputs, outputs, params)


def _pooling(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    from mxkit_cuda import cudnn_pooling

    g = cudnn_pooling.geometry(params, inputs[0], outputs[0])
    if g is None or not outputs[0].flags.c_contiguous:
        get_op("Pooling").kernel(xp, inputs, outputs, params)
        return
    cudnn_pooling.forward(xp, g, params, inputs[0], outputs[0])


def _pooling_backward(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    from mxkit_cuda import cudnn_pooling

    out_grad, data, output = inputs
    g = cudnn_pooling.geometry(params, data, out_grad, output, outputs[0])
    if g is None or not outputs[0].flags.c_contiguous:
        get_op("_backward_Pooling").kernel(xp, inputs, outputs, params)
        return
    cudnn_pooling.backward(xp, g, params, out_grad, data, output, outputs[0])


def _fully_connected(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    from mxkit_cuda.convolution import fully_connected

    fully_connected(xp, inputs, outputs, params)


def _fully_connected_backward(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    from mxkit_cuda.convolution import fully_connected_backward

    fully_connected_backward(xp, inputs, outputs, params)


def _fused_elemwise(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    from mxkit_cuda.fused import fused_elemwise

    fused_elemwise(xp, inputs, outputs, params)


#: operator name -> kernel
KERNELS = {
    "_FusedElemwise": _fused_elemwise,
    "Convolution": _convolution,
    "_backward_Convolution": _convolution_backward,
    "relu": relu,
    "Activation": activation,
    "_backward_relu": relu_backward,
    "erf": erf,
    "FullyConnected": _fully_connected,
    "_backward_FullyConnected": _fully_connected_backward,
    "Pooling": _pooling,
    "_backward_Pooling": _pooling_backward,
    "BatchNorm": _batchnorm,
    "_backward_BatchNorm": _batchnorm_backward,
}


def register(registry: Any) -> None:
    """Register every kernel of :data:`KERNELS` for backend ``cupy``."""
    for name, kernel in KERNELS.items():
        registry.register_kernel(name, backend="cupy", kernel=kernel)
