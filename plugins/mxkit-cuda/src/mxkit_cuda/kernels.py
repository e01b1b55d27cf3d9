"""CuPy kernels that beat the generic ``xp`` ones on GPUs, registered through ``mxkit_kernels``.

The generic kernels already run on CuPy unchanged (cuBLAS serves ``dot`` and the products
inside FullyConnected and Convolution). A kernel here writes straight into its output
with ``out=`` (one pass over memory instead of a temporary and a copy).
"""

from __future__ import annotations

from typing import Any


def relu(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    xp.maximum(inputs[0], 0, out=outputs[0], casting="unsafe")


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


def _fused_elemwise(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    from mxkit_cuda.fused import fused_elemwise

    fused_elemwise(xp, inputs, outputs, params)


#: operator name -> kernel
KERNELS = {
    "_FusedElemwise": _fused_elemwise,
    "Convolution": _convolution,
    "_backward_Convolution": _convolution_backward,
    "relu": relu,
    "erf": erf,
    "BatchNorm": _batchnorm,
    "_backward_BatchNorm": _batchnorm_backward,
}


def register(registry: Any) -> None:
    """Register every kernel of :data:`KERNELS` for backend ``cupy``."""
    for name, kernel in KERNELS.items():
        registry.register_kernel(name, backend="cupy", kernel=kernel)
