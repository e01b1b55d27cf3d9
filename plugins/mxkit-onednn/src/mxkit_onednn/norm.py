"""``BatchNorm`` (training and inference forward) and ``_backward_BatchNorm`` on oneDNN's batch
normalization, with MXNet's semantics around it.

MXNet's BatchNorm normalises over every axis but ``axis``; the data is viewed as
(before, channels, after), which is oneDNN's channel-second layout. The rules kept here, as
in mxkit's operator definition: batch statistics only in training without
``use_global_stats`` (the moving ones otherwise); the moving statistics updated in place
with ``momentum`` from the batch mean and the biased batch variance; ``fix_gamma`` scales by
one and gives gamma a zero gradient; the optional outputs are the mean and the inverse
standard deviation ``1/sqrt(var + eps)``. The gradient with batch statistics recomputes them,
as the generic kernel does: a oneDNN forward whose normalised output lands in the data gradient's
buffer, which the backward then overwrites (ResNet-50's early layers at batch 16 hold 51 MB of
activations, more than a workspace may hold, and were left to mxkit-cpu's kernel).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxkit_onednn import _mxkit
from mxkit_onednn.conv import Outputs, float32_arrays
from mxkit_onednn.kernels import ANY, handles
from mxkit_onednn.library import load
from mxkit_onednn.program import PROGRAMS, Builder, Program, refuse_over_workspace

#: batch normalization runs in numpy's layout (a reorder would cost as much as the normalisation)
LAYOUT = "plain"


#: the parameters of ``BatchNorm`` the kernels implement (all of them: ``cudnn_off`` is a hint to MXNet's GPU
#: kernels, and the operator itself ignores the quantisation calibration ranges)
HANDLES = dict(eps=ANY, momentum=ANY, fix_gamma=ANY, use_global_stats=ANY, output_mean_var=ANY, axis=ANY,
               cudnn_off=ANY, min_calib_range=ANY, max_calib_range=ANY)


def _dims(x: np.ndarray, params: dict) -> tuple[int, int, int]:
    axis = _mxkit.normalize_axis(params["axis"], x.ndim, "BatchNorm")
    before = int(np.prod(x.shape[:axis], dtype=np.int64))
    return (before, int(x.shape[axis]), x.size // max(before * int(x.shape[axis]), 1))


def _build_forward(dims: tuple, eps: float, batch_stats: bool) -> Program:
    """Inputs (x, scale, shift[, mean, var]); outputs (y[, mean, var])."""
    dnnl = load()
    flags = dnnl.USE_SCALE | dnnl.USE_SHIFT | (0 if batch_stats else dnnl.USE_GLOBAL_STATS)
    data, channel = dnnl.plain_md(dims), dnnl.plain_md((dims[1],))
    pd = dnnl.batch_norm_forward_pd(dnnl.FORWARD_TRAINING if batch_stats else dnnl.FORWARD_INFERENCE, data, data,
                                    eps, flags)
    b = Builder(dnnl)
    stats = [("out", 1), ("out", 2)] if batch_stats else [("in", 3), ("in", 4)]
    b.step(pd, [(dnnl.ARG_SRC, data, ("in", 0)), (dnnl.ARG_SCALE, channel, ("in", 1)),
                (dnnl.ARG_SHIFT, channel, ("in", 2)), (dnnl.ARG_MEAN, channel, stats[0]),
                (dnnl.ARG_VARIANCE, channel, stats[1]), (dnnl.ARG_DST, data, ("out", 0))])
    return b.build()


def _scale(params: dict, gamma: np.ndarray) -> np.ndarray:
    return np.ones_like(gamma) if params["fix_gamma"] else gamma


@handles(**HANDLES)
def batchnorm(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """Forward of ``BatchNorm`` (inputs data, gamma, beta, moving_mean, moving_var)."""
    x, gamma, beta, moving_mean, moving_var = float32_arrays(list(inputs[:5]))
    float32_arrays(list(outputs))
    dims = _dims(x, params)
    eps = float(params["eps"])
    batch_stats = bool(params.get("_is_train", False)) and not params["use_global_stats"]
    scale = _scale(params, gamma)
    out = Outputs([outputs[0]])
    key = ("BatchNorm", dims, eps, batch_stats)
    builders = {LAYOUT: lambda: _build_forward(dims, eps, batch_stats)}
    if batch_stats:
        mean, var = np.empty(dims[1], np.float32), np.empty(dims[1], np.float32)
        PROGRAMS.run(key, builders, [x, scale, beta], [out.arrays[0], mean, var],
                     None if replaced is None else lambda ins, outs: _replaced_forward(replaced, inputs, outs, eps))
        momentum = params["momentum"]
        # moving_mean and moving_var are the caller's own arrays (auxiliary states), updated in place
        np.copyto(inputs[3], inputs[3] * momentum + mean * (1 - momentum), casting="unsafe")
        np.copyto(inputs[4], inputs[4] * momentum + var * (1 - momentum), casting="unsafe")
    else:
        mean, var = moving_mean, moving_var
        PROGRAMS.run(key, builders, [x, scale, beta, mean, var], out.arrays,
                     None if replaced is None else lambda ins, outs: replaced(list(inputs), [*outs, *outputs[1:]]))
    out.finish()
    if params["output_mean_var"]:
        np.copyto(outputs[1], mean, casting="unsafe")
        np.copyto(outputs[2], 1 / np.sqrt(var.astype(np.float64) + eps), casting="unsafe")


def _replaced_forward(replaced: Any, inputs: list, outs: list, eps: float) -> None:
    """The replaced kernel in training mode into ``outs`` (y, mean, var), made to leave the moving statistics
    as they were (the caller updates them) and to give the batch variance (it gives 1/sqrt(var + eps))."""
    saved = [np.array(inputs[3], copy=True), np.array(inputs[4], copy=True)]
    replaced(list(inputs), outs, output_mean_var=True)
    np.copyto(inputs[3], saved[0])
    np.copyto(inputs[4], saved[1])
    np.copyto(outs[2], 1 / np.square(outs[2].astype(np.float64)) - eps, casting="unsafe")


def _build_backward(dims: tuple, eps: float, batch_stats: bool, dst_in_diff_src: bool) -> Program:
    """Inputs (out_grad, x, scale[, mean, var]); outputs (dx, dgamma, dbeta), all float32 (see
    :func:`build_backward_program`)."""
    dnnl = load()
    return build_backward_program(dnnl.plain_md(dims), dnnl.plain_md((dims[1],)), eps, batch_stats,
                                  dst_in_diff_src)


def build_backward_program(data: Any, channel: Any, eps: float, batch_stats: bool, dst_in_diff_src: bool) -> Program:
    """BatchNorm's backward on data of layout ``data`` with per-channel values of layout ``channel`` (float32
    data here, bfloat16 data with float32 statistics in :mod:`mxkit_onednn.bf16_ops`). Inputs (out_grad, x,
    scale[, mean, var]); outputs (dx, dgamma, dbeta).

    With batch statistics the forward runs again for them; its normalised output, which nothing reads,
    goes into the data gradient's buffer when ``dst_in_diff_src`` (the backward overwrites it
    afterwards), else into a workspace slot the size of the data."""
    dnnl = load()
    flags = dnnl.USE_SCALE | dnnl.USE_SHIFT | (0 if batch_stats else dnnl.USE_GLOBAL_STATS)
    forward = dnnl.batch_norm_forward_pd(dnnl.FORWARD_TRAINING, data, data, eps, flags)
    backward = dnnl.batch_norm_backward_pd(dnnl.BACKWARD, data, data, data, eps, flags, forward)
    b = Builder(dnnl)
    if batch_stats:  # the batch statistics again (the normalised output is not needed)
        mean, var = b.scratch(channel), b.scratch(channel)
        b.step(forward, [(dnnl.ARG_SRC, data, ("in", 1)), (dnnl.ARG_SCALE, channel, ("in", 2)),
                         (dnnl.ARG_SHIFT, channel, ("in", 2)), (dnnl.ARG_MEAN, channel, mean),
                         (dnnl.ARG_VARIANCE, channel, var),
                         (dnnl.ARG_DST, data, ("out", 0) if dst_in_diff_src else b.scratch(data))])
    else:
        mean, var = ("in", 3), ("in", 4)
    b.step(backward, [(dnnl.ARG_SRC, data, ("in", 1)), (dnnl.ARG_MEAN, channel, mean),
                      (dnnl.ARG_VARIANCE, channel, var), (dnnl.ARG_DIFF_DST, data, ("in", 0)),
                      (dnnl.ARG_SCALE, channel, ("in", 2)), (dnnl.ARG_DIFF_SRC, data, ("out", 0)),
                      (dnnl.ARG_DIFF_SCALE, channel, ("out", 1)), (dnnl.ARG_DIFF_SHIFT, channel, ("out", 2))])
    return b.build()


@handles(**HANDLES)
def batchnorm_backward(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """``_backward_BatchNorm``: inputs (out_grad, data, gamma, moving_mean, moving_var); outputs the gradients
    of data, gamma (zero with ``fix_gamma``) and beta."""
    arrays = float32_arrays(list(inputs[:5]) + list(outputs))
    out_grad, x, gamma = arrays[:3]
    dims = _dims(x, params)
    eps = float(params["eps"])
    batch_stats = not params["use_global_stats"]
    scale = _scale(params, gamma)
    data_grad = outputs[0] if _mxkit.wanted(params, 0) else np.empty(x.shape, np.float32)
    out = Outputs([data_grad, outputs[1], outputs[2]])
    ins = [out_grad, x, scale] if batch_stats else [out_grad, x, scale, arrays[3], arrays[4]]
    # with batch statistics the program recomputes the forward, whose normalised output goes into the data
    # gradient's buffer unless that buffer is also an input (the planner may let the gradient overwrite
    # out_grad): then into a workspace the size of the data, refused past the workspace bound (the replaced
    # kernel, with no such temporary, serves)
    in_place = any(np.may_share_memory(out.arrays[0], array) for array in (out_grad, x, scale))
    PROGRAMS.run(("_backward_BatchNorm", dims, eps, batch_stats, in_place),
                 {LAYOUT: lambda: refuse_over_workspace(_build_backward(dims, eps, batch_stats, not in_place))},
                 ins, out.arrays, None if replaced is None else lambda i, o: replaced(list(inputs), o))
    out.finish()
    if params["fix_gamma"]:
        outputs[1][...] = 0


__all__ = ["HANDLES", "batchnorm", "batchnorm_backward"]
