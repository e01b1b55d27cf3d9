"""Normalisation layers: ``BatchNorm`` (with its moving statistics) and ``LRN``.

BatchNorm's moving mean and variance are auxiliary states: they follow ``data, gamma,
beta`` among the kernel's inputs and, in training mode, the forward kernel updates them in
place (``moving = moving * momentum + batch_stat * (1 - momentum)``, with the biased batch
variance). MXNet 1.9.1 applies the same update during the backward pass; after one
forward-backward training step both hold the same values.
"""

from __future__ import annotations

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.ops.nn_common import as_list, expect_shape, fmt, is_train, public
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define
from mxkit.ndarray.shapes import normalize_axis

# ---- BatchNorm -------------------------------------------------------------------------------

_BATCHNORM_SCHEMA = schema([
    Param("eps", "float", 1e-3, doc="Added to the variance before the square root."),
    Param("momentum", "float", 0.9, doc="Weight of the old value in the moving statistics."),
    Param("fix_gamma", "bool", True, doc="Use gamma = 1 (and give gamma no gradient)."),
    Param("use_global_stats", "bool", False, doc="Normalise with the moving statistics even in training."),
    Param("output_mean_var", "bool", False,
          doc="Also output the mean and the inverse standard deviation used (MXNet's 'var' output)."),
    Param("axis", "int", 1, doc="The channel axis: statistics are taken over every other axis."),
    Param("cudnn_off", "bool", False, doc="Ignored on CPU."),
    Param("min_calib_range", "float", None, optional=True, doc="Ignored (quantisation calibration)."),
    Param("max_calib_range", "float", None, optional=True, doc="Ignored (quantisation calibration)."),
])


def _batchnorm_outputs(params: dict) -> int:
    return 3 if params["output_mean_var"] else 1


def _batchnorm_shape(params: dict, in_shapes: list) -> list:
    data = in_shapes[0]
    if data is None or len(data) == 0:
        raise ShapeError(f"BatchNorm: data shape {fmt(data)} must have at least one axis")
    axis = normalize_axis(params["axis"], len(data), "BatchNorm")
    channels = int(data[axis])
    for name, shape in zip(("gamma", "beta", "moving_mean", "moving_var"), in_shapes[1:]):
        expect_shape("BatchNorm", name, shape, (channels,), f"one value per channel along axis {axis} of data "
                     f"{fmt(data)}")
    data = tuple(int(d) for d in data)
    return [data, (channels,), (channels,)][:_batchnorm_outputs(params)]


def _broadcast(array, axis: int, ndim: int):
    return array.reshape((1,) * axis + (-1,) + (1,) * (ndim - axis - 1))


def _reduce_axes(axis: int, ndim: int) -> tuple[int, ...]:
    return tuple(i for i in range(ndim) if i != axis)


def _batch_statistics(xp, x, axis: int):
    axes = _reduce_axes(axis, x.ndim)
    mean = x.mean(axis=axes)
    centred = x - _broadcast(mean, axis, x.ndim)
    var = (centred * centred).mean(axis=axes)
    return mean, var, centred


def _uses_batch_stats(params: dict) -> bool:
    return is_train(params) and not params["use_global_stats"]


def _batchnorm_kernel(xp, inputs, outputs, params):
    x, gamma, beta = inputs[0], inputs[1], inputs[2]
    moving_mean, moving_var = inputs[3], inputs[4]
    axis = normalize_axis(params["axis"], x.ndim, "BatchNorm")
    scale = xp.ones_like(gamma) if params["fix_gamma"] else gamma
    if _uses_batch_stats(params):
        mean, var, centred = _batch_statistics(xp, x, axis)
        momentum = params["momentum"]
        write(xp, moving_mean, moving_mean * momentum + mean * (1 - momentum))
        write(xp, moving_var, moving_var * momentum + var * (1 - momentum))
    else:
        mean, var = moving_mean, moving_var
        centred = x - _broadcast(mean, axis, x.ndim)
    inv_std = 1 / xp.sqrt(var + params["eps"])
    write(xp, outputs[0], centred * _broadcast(inv_std * scale, axis, x.ndim) + _broadcast(beta, axis, x.ndim))
    if params["output_mean_var"]:
        write(xp, outputs[1], mean)
        write(xp, outputs[2], inv_std)


def _batchnorm_backward_kernel(xp, inputs, outputs, params):
    out_grad, x, gamma = inputs[0], inputs[1], inputs[2]
    axis = normalize_axis(params["axis"], x.ndim, "BatchNorm")
    axes = _reduce_axes(axis, x.ndim)
    scale = xp.ones_like(gamma) if params["fix_gamma"] else gamma
    if params["use_global_stats"]:
        mean, var = inputs[3], inputs[4]
        centred = x - _broadcast(mean, axis, x.ndim)
    else:
        mean, var, centred = _batch_statistics(xp, x, axis)
    inv_std = 1 / xp.sqrt(var + params["eps"])
    normalised = centred * _broadcast(inv_std, axis, x.ndim)
    beta_grad = out_grad.sum(axis=axes)
    gamma_grad = (out_grad * normalised).sum(axis=axes)
    if params["use_global_stats"]:
        data_grad = out_grad * _broadcast(scale * inv_std, axis, x.ndim)
    else:
        count = x.size // x.shape[axis]
        data_grad = _broadcast(scale * inv_std, axis, x.ndim) * (
            out_grad - _broadcast(beta_grad / count, axis, x.ndim)
            - normalised * _broadcast(gamma_grad / count, axis, x.ndim))
    write(xp, outputs[0], data_grad)
    if params["fix_gamma"]:
        outputs[1][...] = 0
    else:
        write(xp, outputs[1], gamma_grad)
    write(xp, outputs[2], beta_grad)


def _batchnorm_gradient(F, params, inputs, outputs, out_grads):
    # the backward normalises with the statistics the forward used: the moving ones outside training
    use_global = params["use_global_stats"] or not params.get("_is_train", True)
    if use_global and len(inputs) < 5:
        raise ShapeError("BatchNorm: the gradient with global statistics needs moving_mean and moving_var "
                         "among the inputs")
    extra = list(inputs[3:5]) if len(inputs) >= 5 else [inputs[1], inputs[1]]
    call = dict(public(params), use_global_stats=use_global)
    grads = as_list(F("_backward_BatchNorm", out_grads[0], inputs[0], inputs[1], *extra, **call))
    return grads + [None] * (len(inputs) - len(grads))


define(OpDef(
    name="BatchNorm", aliases=("BatchNorm_v1",), infer_shape=_batchnorm_shape, kernel=_batchnorm_kernel,
    params=_BATCHNORM_SCHEMA,
    num_inputs=3, input_names=("data", "gamma", "beta"), aux_names=("moving_mean", "moving_var"),
    num_outputs=_batchnorm_outputs,
    output_names=lambda p: ("output", "mean", "var")[:_batchnorm_outputs(p)],
    infer_dtype=lambda p, d: [d[0]] + [d[1] if len(d) > 1 else d[0]] * (_batchnorm_outputs(p) - 1),
    gradient=_batchnorm_gradient, backward_ignores=frozenset({2}),
    doc="Batch normalisation over every axis but ``axis``, with moving mean and variance as auxiliary states.",
))
define(OpDef(
    name="_backward_BatchNorm", params=_BATCHNORM_SCHEMA, kernel=_batchnorm_backward_kernel,
    infer_shape=lambda p, s: [tuple(s[1]), tuple(s[2]), tuple(s[2])], num_inputs=5,
    input_names=("head_grad", "data", "gamma", "moving_mean", "moving_var"), num_outputs=3,
    output_names=("data", "gamma", "beta"), infer_dtype=lambda p, d: [d[1], d[2], d[2]],
    doc="Backward of BatchNorm (the moving statistics are read only with use_global_stats).",
))

# ---- LRN -------------------------------------------------------------------------------------

_LRN_SCHEMA = schema([
    Param("alpha", "float", 1e-4, doc="Scale of the squared sum (divided by nsize)."),
    Param("beta", "float", 0.75, doc="Exponent of the normaliser."),
    Param("knorm", "float", 2.0, doc="Additive constant k."),
    Param("nsize", "int", doc="Number of neighbouring channels summed over (odd)."),
])


def _lrn_shape(params: dict, in_shapes: list) -> list:
    data = in_shapes[0]
    if data is None or len(data) < 2:
        raise ShapeError(f"LRN: data shape {fmt(data)} needs a channel axis (axis 1)")
    if params["nsize"] <= 0 or params["nsize"] % 2 == 0:
        raise ShapeError(f"LRN: nsize={params['nsize']} must be a positive odd number")
    return [tuple(data)]


def _channel_window_sum(xp, values, nsize: int):
    """Sum over channels c - nsize // 2 .. c + nsize // 2 (clipped at the ends) via a cumulative sum."""
    half = nsize // 2
    channels = values.shape[1]
    cumulative = xp.cumsum(values, axis=1)
    zero = xp.zeros_like(cumulative[:, :1])
    cumulative = xp.concatenate([zero, cumulative], axis=1)
    upper = xp.minimum(xp.arange(channels) + half + 1, channels)
    lower = xp.maximum(xp.arange(channels) - half, 0)
    return xp.take(cumulative, upper, axis=1) - xp.take(cumulative, lower, axis=1)


def _lrn_normaliser(xp, x, params):
    return params["knorm"] + (params["alpha"] / params["nsize"]) * _channel_window_sum(xp, x * x, params["nsize"])


def _lrn_kernel(xp, inputs, outputs, params):
    x = inputs[0]
    write(xp, outputs[0], x * _lrn_normaliser(xp, x, params) ** -params["beta"])


def _lrn_backward_kernel(xp, inputs, outputs, params):
    out_grad, x = inputs
    beta = params["beta"]
    norm = _lrn_normaliser(xp, x, params)
    # the window is symmetric, so channel c is in c' window exactly when c' is in c's window
    spread = _channel_window_sum(xp, out_grad * x * norm ** (-beta - 1), params["nsize"])
    write(xp, outputs[0], out_grad * norm ** -beta - (2 * beta * params["alpha"] / params["nsize"]) * x * spread)


define(OpDef(
    name="LRN", infer_shape=_lrn_shape, kernel=_lrn_kernel, params=_LRN_SCHEMA,
    gradient=lambda F, p, i, o, g: [F("_backward_LRN", g[0], i[0], **public(p))],
    doc="Local response normalisation across channels: x / (knorm + alpha / nsize * sum x**2) ** beta.",
))
define(OpDef(
    name="_backward_LRN", params=_LRN_SCHEMA, kernel=_lrn_backward_kernel,
    infer_shape=lambda p, s: [tuple(s[1])], num_inputs=2, input_names=("head_grad", "data"),
    doc="Backward of LRN.",
))


# ---- SyncBatchNorm ---------------------------------------------------------------------------
# MXNet's contrib.SyncBatchNorm reduces the batch statistics across ndev devices of one process;
# with one device (the only case an operator on one context sees) it is BatchNorm exactly.

_SYNC_ONLY = ("ndev", "key")
_SYNC_SCHEMA = schema([*_BATCHNORM_SCHEMA,
                       Param("ndev", "int", 1, doc="Devices that share statistics (1: plain BatchNorm)."),
                       Param("key", "str", "", doc="Names the statistics shared across devices.")])


def _without_sync(params: dict) -> dict:
    if params.get("ndev", 1) != 1:
        raise ShapeError(f"SyncBatchNorm: ndev={params['ndev']} needs statistics from other devices; "
                         f"only ndev=1 (single-device BatchNorm) is supported")
    return {k: v for k, v in params.items() if k not in _SYNC_ONLY}


def _sync_batchnorm_kernel(xp, inputs, outputs, params):
    params = _without_sync(params)
    if params["output_mean_var"] and _uses_batch_stats(params):
        # its third output is the batch variance (BatchNorm's is 1 / sqrt(var + eps)), as in MXNet
        axis = normalize_axis(params["axis"], inputs[0].ndim, "SyncBatchNorm")
        var = _batch_statistics(xp, inputs[0], axis)[1]
        _batchnorm_kernel(xp, inputs, outputs, params)
        write(xp, outputs[2], var)
        return
    _batchnorm_kernel(xp, inputs, outputs, params)
    if params["output_mean_var"]:
        write(xp, outputs[2], inputs[4])  # the variance it normalised with: the moving one


define(OpDef(
    name="_contrib_SyncBatchNorm", infer_shape=lambda p, s: _batchnorm_shape(_without_sync(p), s),
    kernel=_sync_batchnorm_kernel, params=_SYNC_SCHEMA,
    num_inputs=3, input_names=("data", "gamma", "beta"), aux_names=("moving_mean", "moving_var"),
    num_outputs=_batchnorm_outputs, output_names=lambda p: ("output", "mean", "var")[:_batchnorm_outputs(p)],
    infer_dtype=lambda p, d: [d[0]] + [d[1] if len(d) > 1 else d[0]] * (_batchnorm_outputs(p) - 1),
    gradient=lambda F, p, i, o, g: _batchnorm_gradient(F, _without_sync(p), i, o, g),
    backward_ignores=frozenset({2}),
    doc="Batch normalisation with statistics synchronised across ndev devices (single device: BatchNorm; "
        "with output_mean_var its third output is the variance, not BatchNorm's inverse deviation).",
))
