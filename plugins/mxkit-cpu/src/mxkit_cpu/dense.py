"""``dot`` and ``FullyConnected`` (forward and backward) through :func:`mxkit_cpu.blas.product`.

They write each product straight into its output and split big ones across the kernel
threads. Operands the fast path does not cover (mixed dtypes, transposed N-d ``dot``,
outputs that are not C-contiguous) go to the generic kernel, which handles every case.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mxkit.ndarray.kernels import wanted

from mxkit_cpu.blas import product


def _generic(name: str) -> Any:
    from mxkit.ndarray.kernels import get_op

    return get_op(name).kernel


def _writable_as(out: np.ndarray, dtype: np.dtype) -> bool:
    return out.flags.c_contiguous and out.dtype == dtype


def dot(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    a, b = inputs
    out = outputs[0]
    if a.ndim == 2 and b.ndim == 2 and a.dtype == b.dtype and _writable_as(out, a.dtype):
        product(a.T if params["transpose_a"] else a, b.T if params["transpose_b"] else b, out)
        return
    _generic("dot")(xp, inputs, outputs, params)


def fully_connected(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    data, weight = inputs[0], inputs[1]
    out = outputs[0]
    if not (data.dtype == weight.dtype and _writable_as(out, weight.dtype)):
        _generic("FullyConnected")(xp, inputs, outputs, params)
        return
    target = out.reshape(-1, weight.shape[0])  # a view: out is contiguous
    product(data.reshape(-1, weight.shape[1]), weight.T, target)
    if not params["no_bias"]:
        target += inputs[2]


def fully_connected_backward(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    out_grad, data, weight = inputs
    dtype = weight.dtype
    if not (out_grad.dtype == data.dtype == dtype and all(_writable_as(out, dtype) for out in outputs)):
        _generic("_backward_FullyConnected")(xp, inputs, outputs, params)
        return
    features = weight.shape[1]
    grad_rows = out_grad.reshape(-1, weight.shape[0])
    if wanted(params, 0):  # a first layer's data gradient is read by nothing
        product(grad_rows, weight, outputs[0].reshape(-1, features))
    product(grad_rows.T, data.reshape(-1, features), outputs[1])
    if not params["no_bias"]:
        np.sum(grad_rows, axis=0, out=outputs[2])


KERNELS = {
    "dot": dot,
    "FullyConnected": fully_connected,
    "_backward_FullyConnected": fully_connected_backward,
}
