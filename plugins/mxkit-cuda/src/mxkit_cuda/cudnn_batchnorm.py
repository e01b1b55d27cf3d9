"""BatchNorm forward and backward through cuDNN's spatial batch normalisation (config
``cuda_batchnorm``, "cudnn" by default when cuDNN is there).

cuDNN takes the statistics and normalises in about two passes over the activations forward
and three backward, against four and eight for the fused CuPy kernels (:mod:`mxkit_cuda.batchnorm`),
whose per-channel reductions also leave most of the GPU idle on the small spatial sizes of a
network's last stages.

Any channel axis works: the data is described to cuDNN as ``(outer, channels, inner, 1)``, which
is the same memory as a C-contiguous array whose channel axis sits between ``outer`` and
``inner``.

MXNet's semantics are kept where cuDNN's differ:

- cuDNN would update the running variance with the unbiased batch variance; MXNet (and the CPU
  kernel) use the biased one. So cuDNN is given no running statistics to update, and one small
  kernel updates the moving mean and variance from the batch mean and inverse standard
  deviation cuDNN saves: ``var = 1 / inv_std**2 - eps``.
- ``fix_gamma`` normalises with a scale of ones and gives gamma a zero gradient.
- ``output_mean_var`` outputs the batch mean and the inverse standard deviation (MXNet's "var"
  output), which are exactly what cuDNN saves.

Backward with ``use_global_stats`` (the moving statistics, not the batch's) is not what cuDNN's
backward computes: it stays with the fused kernels, as do dtypes other than float32 and float64
and an ``eps`` under cuDNN's minimum.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

from mxkit.core import config

from mxkit_cuda import cudnn

_SPATIAL = 1  # CUDNN_BATCHNORM_SPATIAL: one mean and variance per channel
_MIN_EPSILON = 1e-5  # CUDNN_BN_MIN_EPSILON of cuDNN 7; later versions accept less, this is safe for all


def usable(params: dict, *arrays: Any) -> bool:
    """Whether this call can go to cuDNN (config, library, dtypes, eps, contiguous outputs)."""
    if params.get("cudnn_off") or config.get("cuda_batchnorm") != "cudnn" or cudnn.library() is None:
        return False
    if params["eps"] < _MIN_EPSILON:
        return False
    dtype = arrays[0].dtype
    return dtype.name in ("float32", "float64") and all(a.dtype == dtype for a in arrays)


class _Descriptors:
    """The data descriptor ``(outer, channels, inner, 1)`` and the per-channel one cuDNN derives from it."""

    def __init__(self, shape: tuple[int, int, int], dtype: str) -> None:
        lib = cudnn.library()
        self.data = cudnn.tensor_descriptor((*shape, 1), cudnn.DATA_TYPES[dtype])
        self.channel = ctypes.c_void_p()
        cudnn.check(lib.cudnnCreateTensorDescriptor(ctypes.byref(self.channel)), "cudnnCreateTensorDescriptor")
        cudnn.check(lib.cudnnDeriveBNTensorDescriptor(self.channel, self.data, _SPATIAL),
                    "cudnnDeriveBNTensorDescriptor")


_descriptors: dict[tuple, _Descriptors] = {}


def _describe(shape: tuple[int, int, int], dtype: str) -> _Descriptors:
    return cudnn.cached(_descriptors, (shape, dtype), lambda: _Descriptors(shape, dtype))


def _three_axes(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    outer = 1
    for d in shape[:axis]:
        outer *= d
    inner = 1
    for d in shape[axis + 1:]:
        inner *= d
    return outer, shape[axis], inner


@functools.cache
def _moving_update() -> Any:
    import cupy

    # MXNet's moving statistics: old * momentum + batch * (1 - momentum), with the biased variance
    return cupy.ElementwiseKernel(
        "T mean, T inv_std, T momentum, T eps", "T moving_mean, T moving_var",
        "moving_mean = moving_mean * momentum + mean * (1 - momentum); "
        "moving_var = moving_var * momentum + (1 / (inv_std * inv_std) - eps) * (1 - momentum)",
        "bn_moving_update")


def _scale(xp: Any, gamma: Any, fix_gamma: bool) -> Any:
    # a fresh array every call, never a cached one: the call may be recorded into a CUDA graph,
    # whose fill kernel runs only at replays (see mxkit_cuda.graphs)
    return xp.ones_like(gamma) if fix_gamma else xp.ascontiguousarray(gamma)


def _saved(xp: Any, outputs: list, index: int, like: Any) -> Any:
    if len(outputs) > index and outputs[index].flags.c_contiguous and outputs[index].dtype == like.dtype:
        return outputs[index]
    return xp.empty_like(like)


def forward(xp: Any, inputs: list, outputs: list, params: dict, axis: int, train: bool) -> None:
    """BatchNorm's forward: batch statistics (moving ones updated) in training, moving ones otherwise."""
    x, gamma, beta, moving_mean, moving_var = inputs[:5]
    x = xp.ascontiguousarray(x)
    y = outputs[0]
    desc = _describe(_three_axes(x.shape, axis), x.dtype.name)
    one, zero = cudnn.scalars(x.dtype)
    scale = _scale(xp, gamma, params["fix_gamma"])
    beta = xp.ascontiguousarray(beta)
    eps = ctypes.c_double(params["eps"])
    lib = cudnn.library()
    handle = cudnn.current_handle()
    if train:
        mean = _saved(xp, outputs, 1, gamma)
        inv_std = _saved(xp, outputs, 2, gamma)
        with handle.lock:
            handle.follow_current_stream()
            cudnn.check(lib.cudnnBatchNormalizationForwardTraining(
                handle.ptr, _SPATIAL, one, zero, desc.data, cudnn.pointer(x), desc.data, cudnn.pointer(y),
                desc.channel, cudnn.pointer(scale), cudnn.pointer(beta), ctypes.c_double(0.0), None, None, eps,
                cudnn.pointer(mean), cudnn.pointer(inv_std)), "cudnnBatchNormalizationForwardTraining")
        momentum = params["momentum"]
        _moving_update()(mean, inv_std, momentum, params["eps"], moving_mean, moving_var)
        return
    with handle.lock:
        handle.follow_current_stream()
        cudnn.check(lib.cudnnBatchNormalizationForwardInference(
            handle.ptr, _SPATIAL, one, zero, desc.data, cudnn.pointer(x), desc.data, cudnn.pointer(y),
            desc.channel, cudnn.pointer(scale), cudnn.pointer(beta), cudnn.pointer(xp.ascontiguousarray(moving_mean)),
            cudnn.pointer(xp.ascontiguousarray(moving_var)), eps), "cudnnBatchNormalizationForwardInference")
    if params["output_mean_var"]:
        outputs[1][...] = moving_mean
        outputs[2][...] = 1 / xp.sqrt(moving_var + params["eps"])


def backward(xp: Any, inputs: list, outputs: list, params: dict, axis: int) -> None:
    """BatchNorm's backward with batch statistics (cuDNN recomputes them from the data)."""
    out_grad, x, gamma = inputs[:3]
    data_grad, gamma_grad, beta_grad = outputs
    x, out_grad = xp.ascontiguousarray(x), xp.ascontiguousarray(out_grad)
    desc = _describe(_three_axes(x.shape, axis), x.dtype.name)
    one, zero = cudnn.scalars(x.dtype)
    scale = _scale(xp, gamma, params["fix_gamma"])
    scale_grad = xp.empty_like(gamma) if params["fix_gamma"] or not gamma_grad.flags.c_contiguous else gamma_grad
    bias_grad = beta_grad if beta_grad.flags.c_contiguous else xp.empty_like(gamma)
    lib = cudnn.library()
    handle = cudnn.current_handle()
    with handle.lock:
        handle.follow_current_stream()
        cudnn.check(lib.cudnnBatchNormalizationBackward(
            handle.ptr, _SPATIAL, one, zero, one, zero, desc.data, cudnn.pointer(x), desc.data, cudnn.pointer(out_grad),
            desc.data, cudnn.pointer(data_grad), desc.channel, cudnn.pointer(scale), cudnn.pointer(scale_grad),
            cudnn.pointer(bias_grad), ctypes.c_double(params["eps"]), None, None),
            "cudnnBatchNormalizationBackward")
    if params["fix_gamma"]:
        gamma_grad[...] = 0
    elif scale_grad is not gamma_grad:
        gamma_grad[...] = scale_grad
    if bias_grad is not beta_grad:
        beta_grad[...] = bias_grad
