"""``BatchNorm`` and its gradient (float32, float64, any channel axis) on the Cython loops of ``_norm``.

The generic kernel (``mxkit.ndarray.ops.nn_norm``) is a chain of numpy expressions, each a pass
over the data with a temporary of its size: about ten passes forward and backward. These
kernels take one channel at a time through its statistics and its normalisation while it is
in cache, channels split across threads, with sums in double. The semantics are the generic
kernel's: the biased batch variance, the moving statistics updated in the forward pass of
training, ``fix_gamma``, ``use_global_stats`` and ``output_mean_var`` (the mean and the inverse
standard deviation). Other dtypes, mixed dtypes and empty arrays go to the generic kernel.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxkit_cpu import _norm
from mxkit_cpu.conv import generic_kernel
from mxkit_cpu.parallel import plan_blocks, run_blocks

_REAL = (np.dtype(np.float32), np.dtype(np.float64))


def _channel_view(x: np.ndarray, axis: int) -> np.ndarray:
    """``x`` as a C-contiguous (before, channels, after) array."""
    x = np.ascontiguousarray(x)
    before = int(np.prod(x.shape[:axis], dtype=np.int64))
    return x.reshape(before, x.shape[axis], -1)


def _handled(arrays: list) -> bool:
    dtype = arrays[0].dtype
    return dtype in _REAL and arrays[0].size > 0 and all(
        isinstance(a, np.ndarray) and a.dtype == dtype for a in arrays)


def _axis(params: dict, ndim: int) -> int:
    from mxkit.ndarray.kernels import normalize_axis  # inside: see mxkit_cpu.conv

    return normalize_axis(params["axis"], ndim, "BatchNorm")


def _scale(params: dict, gamma: np.ndarray) -> np.ndarray:
    return np.ones_like(gamma) if params["fix_gamma"] else np.ascontiguousarray(gamma)


def _given_statistics(mean: np.ndarray, var: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    mean = np.asarray(mean, dtype=np.float64).copy()
    return mean, 1 / np.sqrt(np.asarray(var, dtype=np.float64) + eps)


def batchnorm(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    """Forward of ``BatchNorm`` (updating the moving statistics in training mode)."""
    x, gamma, beta, moving_mean, moving_var = inputs[:5]
    if not _handled([x, gamma, beta, moving_mean, moving_var, *outputs]):
        generic_kernel("BatchNorm", xp, inputs, outputs, params)
        return
    axis = _axis(params, x.ndim)
    data = _channel_view(x, axis)
    out = outputs[0]
    result = out.reshape(data.shape) if out.flags.c_contiguous else np.empty(data.shape, dtype=out.dtype)
    channels = data.shape[1]
    batch_stats = bool(params.get("_is_train", False)) and not params["use_global_stats"]
    eps = float(params["eps"])
    if batch_stats:
        mean, var, inv_std = np.empty(channels), np.empty(channels), np.empty(channels)
    else:
        mean, inv_std = _given_statistics(moving_mean, moving_var, eps)
        var = np.empty(channels)
    scale, shift = _scale(params, gamma), np.ascontiguousarray(beta)

    def block(index: int, c0: int, c1: int) -> None:
        _norm.batchnorm_forward(data, result, scale, shift, mean, var, inv_std, c0, c1, batch_stats, eps)

    run_blocks(block, plan_blocks(channels, x.size * 4))
    if not out.flags.c_contiguous:
        np.copyto(out, result.reshape(out.shape))
    if batch_stats:
        momentum = params["momentum"]
        np.copyto(moving_mean, moving_mean * momentum + mean * (1 - momentum), casting="unsafe")
        np.copyto(moving_var, moving_var * momentum + var * (1 - momentum), casting="unsafe")
    if params["output_mean_var"]:
        np.copyto(outputs[1], mean, casting="unsafe")
        np.copyto(outputs[2], inv_std, casting="unsafe")


def batchnorm_backward(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    """``_backward_BatchNorm``: gradients of data, gamma (0 with ``fix_gamma``) and beta."""
    out_grad, x, gamma = inputs[:3]
    if len(inputs) < 5 or not _handled([out_grad, x, gamma, *outputs]):
        generic_kernel("_backward_BatchNorm", xp, inputs, outputs, params)
        return
    from mxkit.ndarray.kernels import wanted

    axis = _axis(params, x.ndim)
    data, grads = _channel_view(x, axis), _channel_view(out_grad, axis)
    channels = data.shape[1]
    eps = float(params["eps"])
    batch_stats = not params["use_global_stats"]
    if batch_stats:
        mean, inv_std = np.empty(channels), np.empty(channels)
    else:
        mean, inv_std = _given_statistics(inputs[3], inputs[4], eps)
    scale = _scale(params, gamma)
    target = None
    if wanted(params, 0):
        out = outputs[0]
        target = out.reshape(data.shape) if out.flags.c_contiguous else np.empty(data.shape, dtype=out.dtype)
    scale_grad, shift_grad = np.empty(channels), np.empty(channels)

    def block(index: int, c0: int, c1: int) -> None:
        _norm.batchnorm_backward(grads, data, target, scale, mean, inv_std, scale_grad, shift_grad, c0, c1,
                                 batch_stats, eps)

    run_blocks(block, plan_blocks(channels, x.size * 6))
    if target is not None and not outputs[0].flags.c_contiguous:
        np.copyto(outputs[0], target.reshape(outputs[0].shape))
    if params["fix_gamma"]:
        outputs[1][...] = 0
    else:
        np.copyto(outputs[1], scale_grad, casting="unsafe")
    np.copyto(outputs[2], shift_grad, casting="unsafe")


#: operator name -> kernel
KERNELS = {"BatchNorm": batchnorm, "_backward_BatchNorm": batchnorm_backward}

__all__ = ["KERNELS", "batchnorm", "batchnorm_backward"]
