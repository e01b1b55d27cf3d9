"""Convolution and its backward through cuDNN, when cuDNN 9 is installed (else the generic
im2col + cuBLAS kernels, which give the same results)."""

from __future__ import annotations

from typing import Any

from mxkit.ndarray.kernels import conv_geometry, get_op, wanted

from mxkit_cuda import cudnn

_FLOATS = ("float16", "float32", "float64")


def _usable(params: dict, *arrays: Any) -> bool:
    if params["cudnn_off"] or cudnn.library() is None:
        return False
    if all(k == 1 for k in params["kernel"]) and not cudnn.autotune():
        # a 1x1 convolution is one matrix product: cuBLAS beat the algorithms cuDNN's
        # heuristics pick for it (ResNet-50 on an H100: 15 ms against 25 ms forward per step);
        # measured algorithms beat cuBLAS, which also needs layout copies around the product
        return False
    dtype = arrays[0].dtype
    return dtype.name in _FLOATS and all(a.dtype == dtype for a in arrays)


def _plan(data: Any, weight: Any, out_shape: Any, params: dict) -> cudnn.ConvPlan:
    g = conv_geometry(params, data)
    return cudnn.conv_plan(data, weight, tuple(out_shape), g.pad, g.stride, g.dilate, g.groups)


def _bias_view(bias: Any, ndim: int) -> Any:
    return bias.reshape((1, -1) + (1,) * (ndim - 2))


def convolution(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    data, weight = inputs[0], inputs[1]
    out = outputs[0]
    if not _usable(params, data, weight, out) or not out.flags.c_contiguous:
        get_op("Convolution").kernel(xp, inputs, outputs, params)
        return
    data, weight = xp.ascontiguousarray(data), xp.ascontiguousarray(weight)
    cudnn.forward(_plan(data, weight, out.shape, params), data, weight, out)
    if not params["no_bias"]:
        out += _bias_view(inputs[2], out.ndim)


def convolution_backward(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    out_grad, data, weight = inputs
    if not _usable(params, out_grad, data, weight, *outputs) or not all(o.flags.c_contiguous for o in outputs):
        get_op("_backward_Convolution").kernel(xp, inputs, outputs, params)
        return
    out_grad, data, weight = (xp.ascontiguousarray(a) for a in (out_grad, data, weight))
    plan = _plan(data, weight, out_grad.shape, params)
    if wanted(params, 0):  # a first layer's data gradient is read by nothing
        cudnn.backward_data(plan, weight, out_grad, outputs[0])
    cudnn.backward_filter(plan, data, out_grad, outputs[1])
    if not params["no_bias"]:
        axes = (0, *range(2, out_grad.ndim))
        outputs[2][...] = out_grad.sum(axis=axes)
