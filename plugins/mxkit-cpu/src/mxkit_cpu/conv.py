"""Convolution and Deconvolution (1-D and 2-D, float32 and float64) on the Cython im2col/col2im.

The algorithm is the generic kernel's (``mxkit.ndarray.ops.nn_conv``): columns, one BLAS
product per group, the batch folded into the columns. What changes is how the memory is
moved: im2col, col2im and the layout copies between the group-major products and the
batch-major arrays are Cython loops without the GIL (the bias add and the bias gradient ride
along in those copies), column buffers are reused across calls, and the batch is split into
one block of samples per thread (:mod:`mxkit_cpu.parallel`), each block running the whole
pipeline. 3-D kernels, other dtypes and mixed dtypes go to the generic kernel, which stays
the reference.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxkit_cpu import _conv
from mxkit_cpu.parallel import chunks, plan_blocks, run_blocks, scratch

_REAL = (np.dtype(np.float32), np.dtype(np.float64))


# mxkit.ndarray is imported inside the kernels: importing it builds the operator registry, which
# calls this plugin's kernel hook, which imports this module (a cycle when this module comes first)

def generic_kernel(name: str, xp: Any, inputs: list, outputs: list, params: dict) -> None:
    """Run operator ``name``'s generic ``xp`` kernel (the reference, and the fallback of every kernel here)."""
    from mxkit.ndarray.kernels import get_op

    get_op(name).kernel(xp, inputs, outputs, params)


def _geometry(params: dict, shape) -> Any:
    from mxkit.ndarray.kernels import ConvGeometry

    return ConvGeometry("Convolution", params, shape)


def _deconv(params: dict, shape) -> Any:
    from mxkit.ndarray.kernels import deconv_geometry

    return deconv_geometry(params, shape)[0]


def _wanted(params: dict, output: int) -> bool:
    from mxkit.ndarray.kernels import wanted

    return wanted(params, output)


def handled(arrays: list, kernel: tuple[int, ...]) -> bool:
    """Whether the Cython path covers these arrays: 1-D or 2-D, one float32/float64 dtype, no empty array."""
    if not 1 <= len(kernel) <= 2:
        return False
    dtype = arrays[0].dtype
    return dtype in _REAL and all(isinstance(a, np.ndarray) and a.dtype == dtype and a.size for a in arrays)


def as_4d(array: np.ndarray) -> np.ndarray:
    """A C-contiguous (N, C, H, W) view (or copy) of an (N, C, W) or (N, C, H, W) array."""
    array = np.ascontiguousarray(array)
    return array.reshape(array.shape[0], array.shape[1], 1, array.shape[2]) if array.ndim == 3 else array


def window_args(kernel, stride, pad, dilate) -> tuple[int, ...]:
    """``(kh, kw, stride_h, stride_w, pad_h, pad_w, dilate_h, dilate_w)``; a 1-D window is 1 high."""
    if len(kernel) == 1:
        return (1, kernel[0], 1, stride[0], 0, pad[0], 1, dilate[0])
    return (kernel[0], kernel[1], stride[0], stride[1], pad[0], pad[1], dilate[0], dilate[1])


class OutputGrid:
    """A (N, C, H, W) view of a kernel output to write into, through a temporary when it is not contiguous."""

    def __init__(self, out: np.ndarray) -> None:
        self.out = out
        self.direct = out.flags.c_contiguous
        self.array = as_4d(out) if self.direct else np.empty(_shape_4d(out.shape), dtype=out.dtype)

    def finish(self) -> None:
        if not self.direct:
            np.copyto(self.out, self.array.reshape(self.out.shape))


def _shape_4d(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (shape[0], shape[1], 1, shape[2]) if len(shape) == 3 else tuple(shape)


def pointwise(window: tuple[int, ...], groups: int) -> bool:
    """Whether a window (:func:`window_args`) is one pixel of stride 1 without padding, in one group: the
    columns are the data itself, and the product needs no im2col."""
    return window == (1, 1, 1, 1, 0, 0, 1, 1) and groups == 1


def _filters(weight: np.ndarray, groups: int) -> np.ndarray:
    """``weight`` as (G, rows/G, rest): the stacked matrices of the per-group products."""
    weight = np.ascontiguousarray(weight)
    return weight.reshape(groups, weight.shape[0] // groups, -1)


# ---- Convolution -----------------------------------------------------------------------------

def convolution(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    """Forward of ``Convolution``: im2col, one product per group, and the bias added while reordering."""
    data, weight = inputs[0], inputs[1]
    bias = None if params["no_bias"] else inputs[2]
    g = _geometry(params, data.shape)
    if not handled([data, weight, outputs[0], *([] if bias is None else [bias])], g.kernel):
        generic_kernel("Convolution", xp, inputs, outputs, params)
        return
    window = window_args(g.kernel, g.stride, g.pad, g.dilate)
    data4 = as_4d(data)
    result = OutputGrid(outputs[0])
    n, filters_count = data.shape[0], g.num_filter
    oh, ow = result.array.shape[2:]
    rows = data4.shape[1] * window[0] * window[1]
    filters = _filters(weight, g.groups)
    filters_t = filters.transpose(0, 2, 1)
    shift = None if bias is None else np.ascontiguousarray(bias)
    out3 = result.array.reshape(n, filters_count, oh * ow)
    dtype = data.dtype
    if pointwise(window, g.groups):
        data3 = data4.reshape(n, rows, oh * ow)

        def block(index: int, n0: int, n1: int) -> None:
            # a 1x1 window of stride 1 reads the data as it lies: (F, C) @ (C, L) per sample, no columns
            np.matmul(filters[0], data3[n0:n1], out=out3[n0:n1])
            if shift is not None:
                out3[n0:n1] += shift.reshape(-1, 1)
    else:
        per_sample = max(rows, filters_count) * oh * ow * dtype.itemsize

        def block(index: int, n0: int, n1: int) -> None:
            for c0, c1 in chunks(n0, n1, per_sample):
                width = (c1 - c0) * oh * ow
                columns = scratch("columns", (rows, width), dtype)
                _conv.im2col(data4, columns, c0, c1, *window, oh, ow)
                # positions as rows, (M * L, C/G * K) @ (C/G * K, F/G): BLAS runs this orientation fastest
                # (a LeNet layer: 20% less time than filters @ columns)
                products = scratch("products", (g.groups, width, filters_count // g.groups), dtype)
                np.matmul(columns.reshape(g.groups, rows // g.groups, width).transpose(0, 2, 1), filters_t,
                          out=products)
                _conv.rows_to_batch_major(products, out3, c0, shift)

    run_blocks(block, plan_blocks(n, filters.size * oh * ow * n, uses_blas=True))
    result.finish()


def convolution_backward(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    """``_backward_Convolution``: the weight gradient summed over per-block products, col2im for the data."""
    out_grad, data, weight = inputs
    g = _geometry(params, data.shape)
    with_bias = not params["no_bias"]
    if not handled([out_grad, data, weight, *outputs], g.kernel):
        generic_kernel("_backward_Convolution", xp, inputs, outputs, params)
        return
    window = window_args(g.kernel, g.stride, g.pad, g.dilate)
    data4, grad4 = as_4d(data), as_4d(out_grad)
    n, filters_count, groups = data.shape[0], g.num_filter, g.groups
    oh, ow = grad4.shape[2:]
    grad3 = grad4.reshape(n, filters_count, oh * ow)
    rows = data4.shape[1] * window[0] * window[1]
    filters = _filters(weight, groups)
    filters_t = filters.transpose(0, 2, 1)
    want_data = _wanted(params, 0)
    data_grad = OutputGrid(outputs[0]) if want_data else None
    blocks = plan_blocks(n, filters.size * oh * ow * n * (3 if want_data else 2), uses_blas=True)
    # the per-block weight gradients and their sum are scratch of the calling thread (kept between calls,
    # counted with the kernels' workspace), not per-call arrays: at ResNet-50's last stage (batch 16) they
    # and the copies of the old ``sum().transpose().reshape()`` were 24 MB allocated and freed by every step
    weight_parts = scratch("weight_parts", (len(blocks), groups, rows // groups, filters_count // groups), data.dtype)
    bias_parts = np.zeros((len(blocks), filters_count), dtype=np.float64) if with_bias else None
    dtype = data.dtype

    per_sample = max(rows, filters_count) * oh * ow * dtype.itemsize

    def block(index: int, n0: int, n1: int) -> None:
        for c0, c1 in chunks(n0, n1, per_sample):
            width = (c1 - c0) * oh * ow
            grad_columns = scratch("out_grad", (filters_count, width), dtype)
            _conv.to_channel_major(grad3, grad_columns, c0, c1, None if bias_parts is None else bias_parts[index])
            grouped_grad = grad_columns.reshape(groups, filters_count // groups, width)
            columns = scratch("columns", (rows, width), dtype)
            _conv.im2col(data4, columns, c0, c1, *window, oh, ow)
            # the transposed weight gradient, (C/G * K, M * L) @ (M * L, F/G): the faster orientation again;
            # later chunks of the block add theirs
            target = weight_parts[index] if c0 == n0 else scratch("weight_part", weight_parts.shape[1:], dtype)
            np.matmul(columns.reshape(groups, rows // groups, width), grouped_grad.transpose(0, 2, 1), out=target)
            if c0 != n0:
                weight_parts[index] += target
            if data_grad is not None:
                # the weight product above has read the columns: their buffer takes the column gradient
                # (a second buffer of that size per thread was the largest scratch a ResNet kept)
                column_grad = columns
                np.matmul(filters_t, grouped_grad, out=column_grad.reshape(groups, rows // groups, width))
                _conv.col2im(column_grad, data_grad.array, c0, c1, *window, oh, ow)

    run_blocks(block, blocks)
    if data_grad is not None:
        data_grad.finish()
    weight_sum = weight_parts[0] if len(blocks) == 1 else \
        np.sum(weight_parts, axis=0, out=scratch("weight_sum", weight_parts.shape[1:], dtype))
    grouped = weight_sum.transpose(0, 2, 1)  # (groups, filters / groups, rows / groups): the weight's layout
    if outputs[1].flags.c_contiguous:
        np.copyto(outputs[1].reshape(grouped.shape), grouped)
    else:
        np.copyto(outputs[1], grouped.reshape(outputs[1].shape))
    if with_bias:
        np.copyto(outputs[2], bias_parts.sum(axis=0), casting="unsafe")


# ---- Deconvolution ---------------------------------------------------------------------------

def deconvolution(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    """Forward of ``Deconvolution``: the adjoint product per group, then col2im onto the output grid."""
    data, weight = inputs[0], inputs[1]
    bias = None if params["no_bias"] else inputs[2]
    g = _deconv(params, data.shape)
    if not handled([data, weight, outputs[0], *([] if bias is None else [bias])], g.kernel):
        generic_kernel("Deconvolution", xp, inputs, outputs, params)
        return
    window = window_args(g.kernel, g.stride, g.pad, g.dilate)
    data4 = as_4d(data)
    n, channels, height, width = data4.shape
    data3 = data4.reshape(n, channels, height * width)
    result = OutputGrid(outputs[0])
    rows = result.array.shape[1] * window[0] * window[1]
    filters_t = _filters(weight, g.groups).transpose(0, 2, 1)  # (G, F/G * K, C/G)
    shift = None if bias is None else np.ascontiguousarray(bias).reshape(-1, 1, 1)
    dtype = data.dtype

    per_sample = max(rows, channels) * height * width * dtype.itemsize

    def block(index: int, n0: int, n1: int) -> None:
        for c0, c1 in chunks(n0, n1, per_sample):
            span = (c1 - c0) * height * width
            data_columns = scratch("data", (channels, span), dtype)
            _conv.to_channel_major(data3, data_columns, c0, c1)
            columns = scratch("columns", (rows, span), dtype)
            np.matmul(filters_t, data_columns.reshape(g.groups, channels // g.groups, span),
                      out=columns.reshape(g.groups, rows // g.groups, span))
            _conv.col2im(columns, result.array, c0, c1, *window, height, width)
            if shift is not None:
                result.array[c0:c1] += shift

    run_blocks(block, plan_blocks(n, weight.size * height * width * n, uses_blas=True))
    result.finish()


def deconvolution_backward(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    """``_backward_Deconvolution``: im2col of the output gradient, then the two products per block."""
    out_grad, data, weight = inputs
    g = _deconv(params, data.shape)
    if not handled([out_grad, data, weight, *outputs], g.kernel):
        generic_kernel("_backward_Deconvolution", xp, inputs, outputs, params)
        return
    window = window_args(g.kernel, g.stride, g.pad, g.dilate)
    data4, grad4 = as_4d(data), as_4d(out_grad)
    n, channels, height, width = data4.shape
    data3 = data4.reshape(n, channels, height * width)
    rows = grad4.shape[1] * window[0] * window[1]
    filters = _filters(weight, g.groups)  # (G, C/G, F/G * K)
    want_data = _wanted(params, 0)
    data_grad = OutputGrid(outputs[0]) if want_data else None
    blocks = plan_blocks(n, weight.size * height * width * n * (2 if want_data else 1), uses_blas=True)
    weight_parts = np.empty((len(blocks), *filters.shape), dtype=data.dtype)
    dtype = data.dtype

    per_sample = max(rows, channels) * height * width * dtype.itemsize

    def block(index: int, n0: int, n1: int) -> None:
        for c0, c1 in chunks(n0, n1, per_sample):
            span = (c1 - c0) * height * width
            columns = scratch("columns", (rows, span), dtype)
            _conv.im2col(grad4, columns, c0, c1, *window, height, width)
            grouped = columns.reshape(g.groups, rows // g.groups, span)
            if data_grad is not None:
                products = scratch("products", (g.groups, channels // g.groups, span), dtype)
                np.matmul(filters, grouped, out=products)
                _conv.to_batch_major(products.reshape(channels, span), data_grad.array.reshape(n, channels, -1), c0)
            data_columns = scratch("data", (channels, span), dtype)
            _conv.to_channel_major(data3, data_columns, c0, c1)
            # later chunks of the block add their part of the weight gradient
            target = weight_parts[index] if c0 == n0 else scratch("weight_part", weight_parts.shape[1:], dtype)
            np.matmul(data_columns.reshape(g.groups, channels // g.groups, span), grouped.transpose(0, 2, 1),
                      out=target)
            if c0 != n0:
                weight_parts[index] += target

    run_blocks(block, blocks)
    if data_grad is not None:
        data_grad.finish()
    np.copyto(outputs[1], weight_parts.sum(axis=0).reshape(outputs[1].shape))
    if not params["no_bias"]:
        np.copyto(outputs[2], out_grad.sum(axis=(0, *range(2, out_grad.ndim))), casting="unsafe")


#: operator name -> kernel
KERNELS = {
    "Convolution": convolution,
    "_backward_Convolution": convolution_backward,
    "Deconvolution": deconvolution,
    "_backward_Deconvolution": deconvolution_backward,
}

__all__ = ["KERNELS", "OutputGrid", "as_4d", "convolution", "convolution_backward", "deconvolution",
           "deconvolution_backward", "generic_kernel", "handled", "pointwise", "window_args"]
