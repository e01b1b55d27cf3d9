"""numpy kernels that beat the generic ``xp`` ones on CPU, registered through ``mxkit_kernels``.

The generic kernels compute a result and copy it into the preallocated output; these
write straight into the output with ufunc ``out=`` arguments and reuse it as scratch
space, which saves one temporary and one pass over memory per operator.
"""

from __future__ import annotations

from typing import Any

import numpy as np

REAL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def flat_real_views(arrays: list) -> list | None:
    """The arrays as 1-D views when they are C-contiguous numpy arrays of one float32 or float64
    dtype (what the one-pass Cython loops take), else None (the generic kernel's case)."""
    dtype = arrays[0].dtype
    if dtype not in REAL_DTYPES or any(not isinstance(a, np.ndarray) or a.dtype != dtype or not a.flags.c_contiguous
                                       for a in arrays):
        return None
    return [a.reshape(-1) for a in arrays]


try:
    from mxkit_cpu._elementwise import relu as _compiled_relu
except ImportError:  # built without the extensions: numpy's maximum serves
    _compiled_relu = None


def relu(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    flat = flat_real_views([inputs[0], outputs[0]]) if _compiled_relu is not None else None
    if flat is not None and flat[0].size == flat[1].size:
        _compiled_relu(*flat)  # (the same values as the maximum below, a few times faster)
        return
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
    if params.get("use_length") or x.dtype != out.dtype or out.dtype not in REAL_DTYPES:
        from mxkit.ndarray.kernels import get_op

        get_op("softmax").kernel(xp, inputs, outputs, params)  # masks, casts and float16: the generic one
        return
    temperature = params.get("temperature")
    axis = params["axis"]
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


def backward_take(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    """Gradient of ``take`` along axis 0 with the Cython row scatter-add (else the generic kernel)."""
    from mxkit.ndarray.kernels import get_op

    out_grad, data, indices = inputs
    grad = outputs[0]
    try:
        from mxkit_cpu._scatter import scatter_add_rows
    except ImportError:  # built without the extension: numpy.add.at does it, slowly
        scatter_add_rows = None
    axis = params["axis"] % max(data.ndim, 1)
    if scatter_add_rows is None or axis != 0 or grad.dtype not in (np.float32, np.float64) \
            or out_grad.dtype != grad.dtype or not grad.flags.c_contiguous:
        get_op("_backward_take").kernel(xp, inputs, outputs, params)
        return
    rows = indices.astype(np.int64).reshape(-1)
    size = data.shape[0]
    if params["mode"] == "wrap":
        rows = np.mod(rows, size)
    else:
        rows = np.clip(rows, -size if params["mode"] == "raise" else 0, size - 1)
        if params["mode"] == "raise" and rows.size and (rows.min() < -size or rows.max() >= size):
            raise IndexError(f"take: an index is out of range for axis 0 of size {size}")
        rows = np.where(rows < 0, rows + size, rows)
    grad[...] = 0
    width = grad.size // size if size else 0
    values = np.ascontiguousarray(out_grad).reshape(rows.size, width)
    scatter_add_rows(grad.reshape(size, width), np.ascontiguousarray(rows), values)


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
    "_backward_take": backward_take,
}


def _compiled_kernels() -> dict:
    """The Cython kernels: convolution, pooling, activations, BatchNorm, LSTM steps, softmax (none when the
    extensions were not built)."""
    try:
        from mxkit_cpu import activation, conv, norm, pool, rnn, softmax
    except ImportError:  # built without the extensions: the generic kernels serve
        return {}
    return {**conv.KERNELS, **pool.KERNELS, **activation.KERNELS, **norm.KERNELS, **rnn.KERNELS, **softmax.KERNELS}


def register(registry: Any) -> None:
    """Register every kernel of :data:`KERNELS` (and the Cython ones) for backend ``numpy``."""
    from mxkit_cpu import dense

    for name, kernel in {**KERNELS, **dense.KERNELS, **_compiled_kernels()}.items():
        registry.register_kernel(name, backend="numpy", kernel=kernel)
    try:
        from mxkit_cpu import update
    except ImportError:  # built without the extensions
        return
    for name, kernel in update.KERNELS.items():  # the optimizer updates of mxkit.ndarray.ops.optimizer_update
        registry.register_kernel(name, backend="numpy", kernel=kernel)
