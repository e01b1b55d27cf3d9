"""The bfloat16 kernels: oneDNN primitives on bfloat16 activations and weights, accumulating in float32.

Each kernel takes the operator's arrays as they are (bfloat16; BatchNorm's gamma, beta and statistics
float32, as MXNet's AMP keeps them; a convolution's or inner product's bias bfloat16 or float32) and
writes bfloat16 results: oneDNN's bfloat16 primitives multiply bfloat16 operands and accumulate in
float32, rounding once, when the result is written. Programs are cached like the float32 ones
(:data:`mxkit_onednn.program.PROGRAMS`), under keys whose second item is ``"bfloat16"`` and which name each
array's dtype. A shape oneDNN refuses in bfloat16 (or a parameter these kernels do not declare) goes
to the float32 kernel through float32 copies (:func:`mxkit_onednn.bf16.through_float32`), never timed
against the bfloat16 programs: a network is run in bfloat16 for its memory and its speed on CPUs
with bfloat16 arithmetic, and the float32 route is the exception, not a competitor.

The geometry is the float32 kernels' (:class:`mxkit_onednn.conv.ConvGeometry`,
:class:`mxkit_onednn.pool.PoolGeometry`), and so are the declared parameters (``HANDLES``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxkit_onednn import _mxkit
from mxkit_onednn.conv import HANDLES as CONV_HANDLES
from mxkit_onednn.conv import ConvGeometry, Outputs, apart
from mxkit_onednn.dense import HANDLES as DENSE_HANDLES
from mxkit_onednn.eltwise import BACKWARD as ELTWISE_BACKWARD
from mxkit_onednn.eltwise import FORWARD as ELTWISE_FORWARD
from mxkit_onednn.kernels import ANY, Unhandled, handles
from mxkit_onednn.library import load
from mxkit_onednn.norm import HANDLES as NORM_HANDLES
from mxkit_onednn.norm import build_backward_program
from mxkit_onednn.pool import HANDLES as POOL_HANDLES
from mxkit_onednn.pool import PoolGeometry
from mxkit_onednn.program import PROGRAMS, Builder, Program, refuse_over_workspace, within_workspace

BF16 = "bfloat16"
F32 = "float32"


def arrays_of(arrays: list, allowed: tuple[str, ...] = (BF16,)) -> list[np.ndarray]:
    """The arrays as C-contiguous numpy arrays, each of a dtype named in ``allowed``, or :class:`Unhandled`."""
    if any(not isinstance(a, np.ndarray) or a.dtype.name not in allowed or a.size == 0 for a in arrays):
        raise Unhandled
    return [np.ascontiguousarray(a) for a in arrays]


def dtypes(arrays: list) -> tuple[str, ...]:
    return tuple(a.dtype.name for a in arrays)


def md(dnnl: Any, dims: tuple, data_type: str = BF16, layout: str = "plain") -> Any:
    """A memory descriptor of ``dims``: ``layout`` "plain" (numpy's) or "blocked"/"any" (the primitive chooses)."""
    return dnnl.typed_md(tuple(int(d) for d in dims), data_type, "any" if layout == "blocked" else layout)


def _refused(inputs: list, outputs: list) -> None:
    """The fallback of a program whose replaced kernel cannot be called on the program's own arrays (BatchNorm's
    widened statistics): the kernel gives up, and the float32 route serves the call's original arrays."""
    raise Unhandled


# ---- Convolution ----

def _conv_forward_pd(dnnl: Any, g: ConvGeometry, prop_kind: int, layout: str, bias_type: str) -> Any:
    return dnnl.convolution_forward_pd(
        prop_kind, md(dnnl, g.src, BF16, layout), md(dnnl, g.weights, BF16, "any"),
        None if g.bias is None else md(dnnl, g.bias, bias_type), md(dnnl, g.dst, BF16, layout), g.strides,
        g.dilates, g.pad_l, g.pad_r)


def build_conv_forward(g: ConvGeometry, layout: str, bias_type: str) -> Program:
    """Inputs (data, weight[, bias]); output the result."""
    dnnl = load()
    pd = _conv_forward_pd(dnnl, g, dnnl.FORWARD_INFERENCE, layout, bias_type)
    b = Builder(dnnl)
    src_md, weights_md, dst_md = pd.md("src"), pd.md("weights"), pd.md("dst")
    src = b.operand(("in", 0), md(dnnl, g.src), src_md)
    weights = b.operand(("in", 1), md(dnnl, g.weights), weights_md)
    bindings = [(dnnl.ARG_SRC, src_md, src), (dnnl.ARG_WEIGHTS, weights_md, weights)]
    if g.bias is not None:
        bindings.append((dnnl.ARG_BIAS, md(dnnl, g.bias, bias_type), ("in", 2)))
    dst = b.result(("out", 0), md(dnnl, g.dst), dst_md)
    b.step(pd, [*bindings, (dnnl.ARG_DST, dst_md, dst)])
    return b.build()


@handles(**CONV_HANDLES)
def convolution(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """Forward of ``Convolution`` on bfloat16 data and weights (the bias bfloat16 or float32)."""
    data, weight = arrays_of(list(inputs[:2]))
    bias = [] if params["no_bias"] else arrays_of([inputs[2]], (BF16, F32))
    arrays_of([outputs[0]])
    apart(outputs, inputs)
    g = ConvGeometry(params, data.shape, weight.shape, outputs[0].shape)
    bias_type = bias[0].dtype.name if bias else BF16
    out = Outputs([outputs[0]])
    builders = {"blocked": lambda: within_workspace(lambda n: build_conv_forward(g.with_batch(n), "blocked",
                                                                                 bias_type), g.src[0], batched=(0,)),
                "plain": lambda: build_conv_forward(g, "plain", bias_type)}
    PROGRAMS.run(("Convolution", BF16, bias_type, *g.key()), builders, [data, weight, *bias], out.arrays, replaced,
                 fallback_competes=False)
    out.finish()


def build_conv_backward(g: ConvGeometry, want_data: bool, layout: str, types: tuple[str, ...]) -> Program:
    """Inputs (out_grad, data, weight); outputs (data grad, weight grad[, bias grad]) of dtypes ``types``."""
    dnnl = load()
    hint = _conv_forward_pd(dnnl, g, dnnl.FORWARD_TRAINING, layout, types[2] if g.bias is not None else BF16)
    b = Builder(dnnl)
    weight_type = types[1]
    bias_md = None if g.bias is None else md(dnnl, g.bias, types[2])
    weights_pd = dnnl.convolution_backward_weights_pd(
        md(dnnl, g.src, BF16, layout), md(dnnl, g.weights, weight_type, "any"), bias_md,
        md(dnnl, g.dst, BF16, layout), g.strides, g.dilates, g.pad_l, g.pad_r, hint)
    diff_dst_md = weights_pd.md("diff_dst")
    diff_dst = b.operand(("in", 0), md(dnnl, g.dst), diff_dst_md)
    if want_data:
        data_pd = dnnl.convolution_backward_data_pd(
            md(dnnl, g.src, types[0], layout), md(dnnl, g.weights, BF16, "any"), md(dnnl, g.dst, BF16, layout),
            g.strides, g.dilates, g.pad_l, g.pad_r, hint)
        data_diff_dst_md, data_weights_md, diff_src_md = (data_pd.md("diff_dst"), data_pd.md("weights"),
                                                          data_pd.md("diff_src"))
        data_diff_dst = diff_dst if data_diff_dst_md.same_as(diff_dst_md) else \
            b.operand(("in", 0), md(dnnl, g.dst), data_diff_dst_md)
        weights = b.operand(("in", 2), md(dnnl, g.weights), data_weights_md)
        diff_src = b.result(("out", 0), md(dnnl, g.src, types[0]), diff_src_md)
        b.step(data_pd, [(dnnl.ARG_DIFF_DST, data_diff_dst_md, data_diff_dst),
                         (dnnl.ARG_WEIGHTS, data_weights_md, weights), (dnnl.ARG_DIFF_SRC, diff_src_md, diff_src)])
    src_md, diff_weights_md = weights_pd.md("src"), weights_pd.md("diff_weights")
    src = b.operand(("in", 1), md(dnnl, g.src), src_md)
    diff_weights = b.result(("out", 1), md(dnnl, g.weights, weight_type), diff_weights_md)
    bindings = [(dnnl.ARG_SRC, src_md, src), (dnnl.ARG_DIFF_DST, diff_dst_md, diff_dst),
                (dnnl.ARG_DIFF_WEIGHTS, diff_weights_md, diff_weights)]
    if g.bias is not None:
        bindings.append((dnnl.ARG_DIFF_BIAS, bias_md, ("out", 2)))
    b.step(weights_pd, bindings)
    return b.build()


@handles(**CONV_HANDLES)
def convolution_backward(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """``_backward_Convolution`` on bfloat16: the data gradient (unless nothing reads it), the weight and bias
    gradients (each bfloat16 or float32, as the outputs are)."""
    out_grad, data, weight = arrays_of(list(inputs[:3]))
    grads = arrays_of(list(outputs), (BF16, F32))
    g = ConvGeometry(params, data.shape, weight.shape, out_grad.shape)
    want_data = _mxkit.wanted(params, 0)
    # the data gradient's dtype, the weight gradient's, the bias gradient's
    types = (grads[0].dtype.name, grads[1].dtype.name, grads[2].dtype.name if len(grads) > 2 else BF16)
    out = Outputs(list(outputs))
    # a gradient sums over the batch: a program too large for the workspace is refused (the float32 route serves)
    builders = {layout: (lambda layout=layout: refuse_over_workspace(build_conv_backward(g, want_data, layout, types)))
                for layout in ("blocked", "plain")}
    PROGRAMS.run(("_backward_Convolution", BF16, want_data, types, *g.key()), builders, [out_grad, data, weight],
                 out.arrays, replaced, fallback_competes=False)
    out.finish()


# ---- FullyConnected ----

def _ip_forward_pd(dnnl: Any, rows: int, hidden: int, features: int, bias_type: str | None, prop_kind: int) -> Any:
    return dnnl.inner_product_forward_pd(prop_kind, md(dnnl, (rows, features)), md(dnnl, (hidden, features)),
                                         None if bias_type is None else md(dnnl, (hidden,), bias_type),
                                         md(dnnl, (rows, hidden)))


def build_ip_forward(rows: int, hidden: int, features: int, bias_type: str | None) -> Program:
    dnnl = load()
    b = Builder(dnnl)
    bindings = [(dnnl.ARG_SRC, md(dnnl, (rows, features)), ("in", 0)),
                (dnnl.ARG_WEIGHTS, md(dnnl, (hidden, features)), ("in", 1))]
    if bias_type is not None:
        bindings.append((dnnl.ARG_BIAS, md(dnnl, (hidden,), bias_type), ("in", 2)))
    b.step(_ip_forward_pd(dnnl, rows, hidden, features, bias_type, dnnl.FORWARD_INFERENCE),
           [*bindings, (dnnl.ARG_DST, md(dnnl, (rows, hidden)), ("out", 0))])
    return b.build()


@handles(**DENSE_HANDLES)
def fully_connected(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """Forward of ``FullyConnected`` on bfloat16 data and weight (the bias bfloat16 or float32)."""
    data, weight = arrays_of(list(inputs[:2]))
    bias = [] if params["no_bias"] else arrays_of([inputs[2]], (BF16, F32))
    arrays_of([outputs[0]])
    apart(outputs, inputs)
    hidden, features = weight.shape
    rows = data.size // features
    bias_type = bias[0].dtype.name if bias else None
    out = Outputs([outputs[0]])
    PROGRAMS.run(("FullyConnected", BF16, rows, hidden, features, bias_type),
                 {"plain": lambda: build_ip_forward(rows, hidden, features, bias_type)},
                 [data.reshape(rows, features), weight, *bias], [a.reshape(rows, hidden) for a in out.arrays],
                 None if replaced is None else
                 lambda ins, outs: replaced([data, weight, *bias], [outs[0].reshape(outputs[0].shape)]),
                 fallback_competes=False)
    out.finish()


def build_ip_backward(rows: int, hidden: int, features: int, types: tuple, want_data: bool) -> Program:
    """Inputs (out_grad, data, weight); outputs (data grad, weight grad[, bias grad]) of dtypes ``types``."""
    dnnl = load()
    bias_type = types[2] if len(types) > 2 else None
    src, weights, dst = md(dnnl, (rows, features)), md(dnnl, (hidden, features)), md(dnnl, (rows, hidden))
    hint = _ip_forward_pd(dnnl, rows, hidden, features, bias_type, dnnl.FORWARD_TRAINING)
    b = Builder(dnnl)
    if want_data:
        diff_src = md(dnnl, (rows, features), types[0])
        b.step(dnnl.inner_product_backward_data_pd(diff_src, weights, dst, hint),
               [(dnnl.ARG_DIFF_DST, dst, ("in", 0)), (dnnl.ARG_WEIGHTS, weights, ("in", 2)),
                (dnnl.ARG_DIFF_SRC, diff_src, ("out", 0))])
    diff_weights = md(dnnl, (hidden, features), types[1])
    bias_md = None if bias_type is None else md(dnnl, (hidden,), bias_type)
    bindings = [(dnnl.ARG_SRC, src, ("in", 1)), (dnnl.ARG_DIFF_DST, dst, ("in", 0)),
                (dnnl.ARG_DIFF_WEIGHTS, diff_weights, ("out", 1))]
    if bias_md is not None:
        bindings.append((dnnl.ARG_DIFF_BIAS, bias_md, ("out", 2)))
    b.step(dnnl.inner_product_backward_weights_pd(src, diff_weights, bias_md, dst, hint), bindings)
    return b.build()


@handles(**DENSE_HANDLES)
def fully_connected_backward(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """``_backward_FullyConnected`` on bfloat16: the data gradient (unless nothing reads it), the weight and bias
    gradients."""
    out_grad, data, weight = arrays_of(list(inputs[:3]))
    grads = arrays_of(list(outputs), (BF16, F32))
    hidden, features = weight.shape
    rows = data.size // features
    want_data = _mxkit.wanted(params, 0)
    types = dtypes(grads)
    out = Outputs(list(outputs))
    views = [out.arrays[0].reshape(rows, features), *out.arrays[1:]]
    PROGRAMS.run(("_backward_FullyConnected", BF16, rows, hidden, features, types, want_data),
                 {"plain": lambda: build_ip_backward(rows, hidden, features, types, want_data)},
                 [out_grad.reshape(rows, hidden), data.reshape(rows, features), weight], views,
                 None if replaced is None else
                 lambda ins, outs: replaced([out_grad, data, weight], [outs[0].reshape(data.shape), *outs[1:]]),
                 fallback_competes=False)
    out.finish()


# ---- Pooling ----

def _pool_forward_pd(dnnl: Any, g: PoolGeometry, prop_kind: int, layout: str) -> Any:
    return dnnl.pooling_forward_pd(prop_kind, g.alg(dnnl), md(dnnl, g.src, BF16, layout),
                                   md(dnnl, g.dst, BF16, layout), g.strides, g.kernel, g.pad_l, g.pad_r)


def build_pool_forward(g: PoolGeometry, layout: str) -> Program:
    dnnl = load()
    pd = _pool_forward_pd(dnnl, g, dnnl.FORWARD_INFERENCE, layout)
    b = Builder(dnnl)
    src_md, dst_md = pd.md("src"), pd.md("dst")
    src = b.operand(("in", 0), md(dnnl, g.src), src_md)
    dst = b.result(("out", 0), md(dnnl, g.dst), dst_md)
    b.step(pd, [(dnnl.ARG_SRC, src_md, src), (dnnl.ARG_DST, dst_md, dst)])
    return b.build()


@handles(**POOL_HANDLES)
def pooling(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """Forward of ``Pooling`` on bfloat16 (average pooling sums in float32)."""
    data, _ = arrays_of([inputs[0], outputs[0]])
    apart(outputs, inputs)
    g = PoolGeometry(params, data.shape, outputs[0].shape)
    out = Outputs([outputs[0]])
    builders = {"blocked": lambda: within_workspace(lambda n: build_pool_forward(g.with_batch(n), "blocked"),
                                                    g.src[0], batched=(0,)),
                "plain": lambda: build_pool_forward(g, "plain")}
    PROGRAMS.run(("Pooling", BF16, *g.key()), builders, [data], out.arrays, replaced, fallback_competes=False)
    out.finish()


def build_pool_backward(g: PoolGeometry, layout: str) -> Program:
    """Inputs (out_grad, data); output (data grad)."""
    dnnl = load()
    forward = _pool_forward_pd(dnnl, g, dnnl.FORWARD_TRAINING, layout)
    backward = dnnl.pooling_backward_pd(g.alg(dnnl), md(dnnl, g.src, BF16, layout), md(dnnl, g.dst, BF16, layout),
                                        g.strides, g.kernel, g.pad_l, g.pad_r, forward)
    b = Builder(dnnl)
    bindings = []
    if g.algorithm == "max":  # the forward again, for the positions of the maxima
        src_md, dst_md, workspace_md = forward.md("src"), forward.md("dst"), forward.md("workspace")
        src = b.operand(("in", 1), md(dnnl, g.src), src_md)
        workspace = b.scratch(workspace_md)
        b.step(forward, [(dnnl.ARG_SRC, src_md, src), (dnnl.ARG_DST, dst_md, b.scratch(dst_md)),
                         (dnnl.ARG_WORKSPACE, workspace_md, workspace)])
        bindings.append((dnnl.ARG_WORKSPACE, workspace_md, workspace))
    diff_dst_md, diff_src_md = backward.md("diff_dst"), backward.md("diff_src")
    diff_dst = b.operand(("in", 0), md(dnnl, g.dst), diff_dst_md)
    diff_src = b.result(("out", 0), md(dnnl, g.src), diff_src_md)
    b.step(backward, [(dnnl.ARG_DIFF_DST, diff_dst_md, diff_dst), (dnnl.ARG_DIFF_SRC, diff_src_md, diff_src),
                      *bindings])
    return b.build()


@handles(**POOL_HANDLES)
def pooling_backward(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """``_backward_Pooling`` on bfloat16: inputs (out_grad, data, output), output the data gradient."""
    out_grad, data, _ = arrays_of([inputs[0], inputs[1], outputs[0]])
    apart(outputs, inputs)
    g = PoolGeometry(params, data.shape, out_grad.shape)
    out = Outputs([outputs[0]])
    builders = {layout: (lambda layout=layout: refuse_over_workspace(build_pool_backward(g, layout)))
                for layout in ("blocked", "plain")}
    PROGRAMS.run(("_backward_Pooling", BF16, *g.key()), builders, [out_grad, data], out.arrays,
                 None if replaced is None else lambda ins, outs: replaced([*ins, inputs[2]], outs),
                 fallback_competes=False)
    out.finish()


# ---- BatchNorm: bfloat16 data, float32 scale, shift and statistics ----

def _bn_dims(x: np.ndarray, params: dict) -> tuple[int, int, int]:
    axis = _mxkit.normalize_axis(params["axis"], x.ndim, "BatchNorm")
    before = int(np.prod(x.shape[:axis], dtype=np.int64))
    return (before, int(x.shape[axis]), x.size // max(before * int(x.shape[axis]), 1))


def _bn_flags(dnnl: Any, batch_stats: bool) -> int:
    return dnnl.USE_SCALE | dnnl.USE_SHIFT | (0 if batch_stats else dnnl.USE_GLOBAL_STATS)


def build_bn_forward(dims: tuple, eps: float, batch_stats: bool, layout: str = "plain") -> Program:
    """Inputs (x, scale, shift[, mean, var]); outputs (y[, mean, var]); x and y bfloat16, the rest float32.
    ``layout`` "blocked": the data viewed as (before, channels, after, 1), reordered to channels blocked by 16
    and back (oneDNN's plain-layout bfloat16 normalisation is several times slower than its blocked one)."""
    dnnl = load()
    view = dims if layout == "plain" else (*dims, 1)
    plain, channel = md(dnnl, view), md(dnnl, (dims[1],), F32)
    data = plain if layout == "plain" else dnnl.typed_md(view, BF16, "aBcd16b")
    pd = dnnl.batch_norm_forward_pd(dnnl.FORWARD_TRAINING if batch_stats else dnnl.FORWARD_INFERENCE, data, data,
                                    eps, _bn_flags(dnnl, batch_stats))
    b = Builder(dnnl)
    src = b.operand(("in", 0), plain, data)
    dst = b.result(("out", 0), plain, data)
    stats = [("out", 1), ("out", 2)] if batch_stats else [("in", 3), ("in", 4)]
    b.step(pd, [(dnnl.ARG_SRC, data, src), (dnnl.ARG_SCALE, channel, ("in", 1)),
                (dnnl.ARG_SHIFT, channel, ("in", 2)), (dnnl.ARG_MEAN, channel, stats[0]),
                (dnnl.ARG_VARIANCE, channel, stats[1]), (dnnl.ARG_DST, data, dst)])
    return b.build()


def _f32(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array, dtype=np.float32)


@handles(**NORM_HANDLES)
def batchnorm(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """Forward of ``BatchNorm`` on bfloat16 data (gamma, beta and the moving statistics float32, or bfloat16
    widened for the call), with MXNet's rules: batch statistics in training unless ``use_global_stats``, the
    moving statistics updated in place with ``momentum``, ``fix_gamma``, ``output_mean_var``."""
    (x,) = arrays_of([inputs[0]])
    arrays_of([outputs[0]])
    arrays_of(list(inputs[1:5]) + list(outputs[1:]), (BF16, F32))
    apart(outputs, inputs)
    dims = _bn_dims(x, params)
    eps = float(params["eps"])
    batch_stats = bool(params.get("_is_train", False)) and not params["use_global_stats"]
    gamma, beta = _f32(inputs[1]), _f32(inputs[2])
    scale = np.ones_like(gamma) if params["fix_gamma"] else gamma
    out = Outputs([outputs[0]])
    key = ("BatchNorm", BF16, dims, eps, batch_stats)
    builders = {"plain": lambda: build_bn_forward(dims, eps, batch_stats)}
    if not batch_stats:  # the blocked copies go in chunks of the batch that fit the workspace
        builders["blocked"] = lambda: within_workspace(
            lambda n: build_bn_forward((n, *dims[1:]), eps, batch_stats, "blocked"), dims[0], batched=(0,))
    else:  # batch statistics are sums over the whole batch: no chunks, refused past the workspace
        builders["blocked"] = lambda: refuse_over_workspace(build_bn_forward(dims, eps, batch_stats, "blocked"))
    if batch_stats:
        mean, var = np.empty(dims[1], np.float32), np.empty(dims[1], np.float32)
        PROGRAMS.run(key, builders, [x, scale, beta], [out.arrays[0], mean, var], _refused,
                     fallback_competes=False)
        momentum = params["momentum"]
        # moving_mean and moving_var are the caller's own arrays (auxiliary states), updated in place
        np.copyto(inputs[3], inputs[3].astype(np.float32) * momentum + mean * (1 - momentum), casting="unsafe")
        np.copyto(inputs[4], inputs[4].astype(np.float32) * momentum + var * (1 - momentum), casting="unsafe")
    else:
        mean, var = _f32(inputs[3]), _f32(inputs[4])
        PROGRAMS.run(key, builders, [x, scale, beta, mean, var], out.arrays, _refused, fallback_competes=False)
    out.finish()
    if params["output_mean_var"]:
        np.copyto(outputs[1], mean, casting="unsafe")
        np.copyto(outputs[2], 1 / np.sqrt(var.astype(np.float64) + eps), casting="unsafe")


def build_bn_backward(dims: tuple, eps: float, batch_stats: bool) -> Program:
    """Inputs (out_grad, x, scale[, mean, var]); outputs (dx, dgamma, dbeta): dx bfloat16, the others float32.
    With batch statistics the forward runs again for them, its normalised output into the data gradient's
    buffer (the backward then overwrites it): float32's builder on bfloat16 data."""
    dnnl = load()
    return build_backward_program(md(dnnl, dims), md(dnnl, (dims[1],), F32), eps, batch_stats,
                                  dst_in_diff_src=True)


@handles(**NORM_HANDLES)
def batchnorm_backward(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """``_backward_BatchNorm`` on bfloat16 data: inputs (out_grad, data, gamma, moving_mean, moving_var); outputs
    the gradients of data (bfloat16), gamma (zero with ``fix_gamma``) and beta."""
    out_grad, x = arrays_of(list(inputs[:2]))
    arrays_of(list(inputs[2:5]) + list(outputs[1:]), (BF16, F32))
    dims = _bn_dims(x, params)
    eps = float(params["eps"])
    batch_stats = not params["use_global_stats"]
    gamma = _f32(inputs[2])
    scale = np.ones_like(gamma) if params["fix_gamma"] else gamma
    data_grad = outputs[0] if _mxkit.wanted(params, 0) else np.empty(x.shape, x.dtype)
    arrays_of([data_grad])
    # dgamma and dbeta in float32 (copied into the outputs' dtype after)
    dgamma, dbeta = np.empty(dims[1], np.float32), np.empty(dims[1], np.float32)
    out = Outputs([data_grad])
    if any(np.may_share_memory(out.arrays[0], array) for array in (out_grad, x)):
        raise Unhandled  # the recomputed forward would overwrite an input: the float32 route copies
    ins = [out_grad, x, scale] if batch_stats else [out_grad, x, scale, _f32(inputs[3]), _f32(inputs[4])]
    PROGRAMS.run(("_backward_BatchNorm", BF16, dims, eps, batch_stats),
                 {"plain": lambda: build_bn_backward(dims, eps, batch_stats)}, ins, [out.arrays[0], dgamma, dbeta],
                 _refused, fallback_competes=False)
    out.finish()
    np.copyto(outputs[1], 0 if params["fix_gamma"] else dgamma, casting="unsafe")
    np.copyto(outputs[2], dbeta, casting="unsafe")


# ---- Activation and its gradients ----

def _eltwise_forward_pd(dnnl: Any, act_type: str, size: int, prop_kind: int) -> Any:
    algorithm, alpha = ELTWISE_FORWARD[act_type]
    flat = md(dnnl, (size,))
    return dnnl.eltwise_forward_pd(prop_kind, getattr(dnnl, algorithm), flat, flat, alpha, 0.0)


def build_eltwise_forward(act_type: str, size: int) -> Program:
    dnnl = load()
    flat = md(dnnl, (size,))
    b = Builder(dnnl)
    b.step(_eltwise_forward_pd(dnnl, act_type, size, dnnl.FORWARD_INFERENCE),
           [(dnnl.ARG_SRC, flat, ("in", 0)), (dnnl.ARG_DST, flat, ("out", 0))])
    return b.build()


@handles(act_type=tuple(ELTWISE_FORWARD))
def activation(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """Forward of ``Activation`` (relu, sigmoid, tanh) on bfloat16 (computed in float32, rounded once)."""
    act_type = params["act_type"]
    x, _ = arrays_of([inputs[0], outputs[0]])
    out = Outputs([outputs[0]])
    PROGRAMS.run(("Activation", BF16, act_type, x.size), {"plain": lambda: build_eltwise_forward(act_type, x.size)},
                 [x.reshape(-1)], [a.reshape(-1) for a in out.arrays],
                 None if replaced is None else
                 lambda ins, outs: replaced([inputs[0]], [outs[0].reshape(outputs[0].shape)]),
                 fallback_competes=False)
    out.finish()


def build_eltwise_backward(act_type: str, size: int) -> Program:
    """Inputs (out_grad, output); output the input's gradient."""
    dnnl = load()
    flat = md(dnnl, (size,))
    algorithm, alpha = ELTWISE_FORWARD[act_type]
    hint = _eltwise_forward_pd(dnnl, act_type, size, dnnl.FORWARD_TRAINING)
    pd = dnnl.eltwise_backward_pd(getattr(dnnl, algorithm), flat, flat, flat, alpha, 0.0, hint)
    b = Builder(dnnl)
    b.step(pd, [(dnnl.ARG_DIFF_DST, flat, ("in", 0)), (dnnl.ARG_DST, flat, ("in", 1)),
                (dnnl.ARG_DIFF_SRC, flat, ("out", 0))])
    return b.build()


def _eltwise_backward(name: str) -> Any:
    act_type = ELTWISE_BACKWARD[name]

    def kernel(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
        out_grad, y, _ = arrays_of([inputs[0], inputs[1], outputs[0]])
        if out_grad.shape != y.shape or y.shape != outputs[0].shape:
            raise Unhandled  # broadcasting is the generic kernel's business
        out = Outputs([outputs[0]])
        PROGRAMS.run((name, BF16, y.size), {"plain": lambda: build_eltwise_backward(act_type, y.size)},
                     [out_grad.reshape(-1), y.reshape(-1)], [a.reshape(-1) for a in out.arrays],
                     None if replaced is None else
                     lambda ins, outs: replaced([inputs[0], inputs[1]], [outs[0].reshape(outputs[0].shape)]),
                     fallback_competes=False)
        out.finish()

    kernel.__name__ = name.lstrip("_")
    kernel.__doc__ = f"``{name}`` on bfloat16, from the activation's output."
    return handles()(kernel)


relu_backward = _eltwise_backward("_backward_relu")
sigmoid_backward = _eltwise_backward("_backward_sigmoid")
tanh_backward = _eltwise_backward("_backward_tanh")


# ---- add_n and elemwise_add: oneDNN's sum (each term widened to float32, the sum rounded once) ----

def build_sum(size: int, count: int) -> Program:
    dnnl = load()
    flat = md(dnnl, (size,))
    b = Builder(dnnl)
    b.step(dnnl.sum_pd(flat, [flat] * count), [*((dnnl.ARG_MULTIPLE_SRC + i, flat, ("in", i)) for i in range(count)),
                                               (dnnl.ARG_DST, flat, ("out", 0))])
    return b.build()


def _sum(name: str, inputs: list, outputs: list, replaced: Any) -> None:
    arrays = arrays_of([*inputs, outputs[0]])
    if any(a.shape != arrays[-1].shape for a in arrays):
        raise Unhandled  # broadcasting is the generic kernel's business
    # oneDNN's sum writes the first input's terms into the output before it reads the others: the output may be
    # the first input itself, never overlap another one
    first, output = arrays[0], arrays[-1]
    if any(np.may_share_memory(output, other) for other in arrays[1:-1]) or (
            np.may_share_memory(output, first) and not (output.ctypes.data == first.ctypes.data
                                                        and output.strides == first.strides)):
        raise Unhandled
    size, count = output.size, len(inputs)
    out = Outputs([outputs[0]])
    PROGRAMS.run((name, BF16, size, count), {"plain": lambda: build_sum(size, count)},
                 [a.reshape(-1) for a in arrays[:-1]], [a.reshape(-1) for a in out.arrays],
                 None if replaced is None else
                 lambda ins, outs: replaced(list(inputs), [outs[0].reshape(outputs[0].shape)]),
                 fallback_competes=False)
    out.finish()


@handles(num_args=ANY)
def add_n(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """Forward of ``add_n`` on bfloat16."""
    _sum("add_n", inputs, outputs, replaced)


@handles()
def elemwise_add(inputs: list, outputs: list, params: dict, replaced: Any = None) -> None:
    """Forward of ``elemwise_add`` on bfloat16 (a ResNet block's residual addition)."""
    _sum("elemwise_add", inputs, outputs, replaced)


__all__ = ["activation", "add_n", "arrays_of", "batchnorm", "batchnorm_backward", "build_conv_backward",
           "build_conv_forward", "convolution", "convolution_backward", "elemwise_add", "fully_connected",
           "fully_connected_backward", "pooling", "pooling_backward", "relu_backward", "sigmoid_backward",
           "tanh_backward"]
