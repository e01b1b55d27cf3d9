"""Convolution and its backward through cuDNN, when cuDNN 9 is installed (else the generic
im2col + cuBLAS kernels, which give the same results); FullyConnected too, as a 1x1
convolution.

FullyConnected goes to cuDNN rather than cuBLAS because CuPy refuses cuBLAS calls while a
stream captures a CUDA graph (:mod:`mxkit_cuda.graphs`): through cuDNN, a network's dense
layers are recorded with the rest of it. Its float32 math stays full precision (no TF32, as
CuPy's products), whatever config ``cuda_tf32`` says for convolutions.
"""

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


def _dense_usable(*arrays: Any) -> bool:
    if cudnn.library() is None:
        return False
    dtype = arrays[0].dtype
    return dtype.name in _FLOATS and all(a.dtype == dtype for a in arrays) and arrays[-1].flags.c_contiguous


def _dense_plan(rows: Any, weight4: Any) -> cudnn.ConvPlan:
    # rows (M, F, 1, 1) and weight (H, F, 1, 1): the product rows @ weight.T as a 1x1 convolution
    return cudnn.conv_plan(rows, weight4, (rows.shape[0], weight4.shape[0], 1, 1), (0, 0), (1, 1), (1, 1), 1,
                           tf32=False)


def fully_connected(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    data, weight = inputs[0], inputs[1]
    out = outputs[0]
    if not _dense_usable(data, weight, out):
        get_op("FullyConnected").kernel(xp, inputs, outputs, params)
        return
    hidden, features = weight.shape
    rows = xp.ascontiguousarray(data).reshape(-1, features, 1, 1)
    weight4 = xp.ascontiguousarray(weight).reshape(hidden, features, 1, 1)
    cudnn.forward(_dense_plan(rows, weight4), rows, weight4, out.reshape(rows.shape[0], hidden, 1, 1))
    if not params["no_bias"]:
        out += inputs[2]


def fully_connected_backward(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    out_grad, data, weight = inputs
    if not all(o.flags.c_contiguous for o in outputs) or not _dense_usable(out_grad, data, weight, *outputs):
        get_op("_backward_FullyConnected").kernel(xp, inputs, outputs, params)
        return
    hidden, features = weight.shape
    grad_rows = xp.ascontiguousarray(out_grad).reshape(-1, hidden, 1, 1)
    rows = xp.ascontiguousarray(data).reshape(-1, features, 1, 1)
    weight4 = xp.ascontiguousarray(weight).reshape(hidden, features, 1, 1)
    plan = _dense_plan(rows, weight4)
    if wanted(params, 0):  # a first layer's data gradient is read by nothing
        cudnn.backward_data(plan, weight4, grad_rows, outputs[0].reshape(rows.shape))
    cudnn.backward_filter(plan, rows, grad_rows, outputs[1].reshape(weight4.shape))
    if not params["no_bias"]:
        grad_rows.reshape(-1, hidden).sum(axis=0, out=outputs[2])
