"""Per-sample normalisation layers: ``LayerNorm``, ``InstanceNorm`` and ``GroupNorm``.

Unlike BatchNorm these take their statistics within each sample, so they have no moving
statistics and behave the same in training and prediction. The three differ only in which
elements share a mean and variance and in how gamma and beta broadcast, so each is written
as a *view* of the data (a reshape), the view's axes that are normalised over, and the
view-shape that gamma and beta take:

- ``LayerNorm(axis)``: the data itself; normalised over ``axis``; gamma along ``axis``;
- ``InstanceNorm``: data ``(N, C, ...)``; normalised over the spatial axes; gamma along C;
- ``GroupNorm(num_groups)``: data ``(N, C, ...)`` viewed as ``(N, G, C/G * spatial)``;
  normalised over the last axis; gamma and beta have one value per *group*, shape ``(G,)``,
  as in MXNet 1.9.1 (whose Gluon ``GroupNorm`` also creates them with ``(num_groups,)``).

``output_mean_var`` (LayerNorm, GroupNorm) adds the mean and the standard deviation
``sqrt(var + eps)`` (MXNet's ``std`` output, not its inverse as BatchNorm's ``var``); as in
MXNet, no gradient flows back from these two outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.ops.nn_common import as_list, expect_shape, fmt, public
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define
from mxkit.ndarray.shapes import normalize_axis

Shape = tuple[int, ...]


@dataclass(frozen=True)
class _Layout:
    """How one normalisation sees its data: see the module docstring."""

    view: Shape  # the data reshaped
    reduced: tuple[int, ...]  # axes of ``view`` that share a mean and variance
    affine: Shape  # the view-shape gamma and beta broadcast as
    stats: Shape  # the shape of the mean and std outputs
    channels: int  # gamma's and beta's length


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= int(v)
    return out


def _layer_norm_layout(params: dict, shape: Shape) -> _Layout:
    axis = normalize_axis(params["axis"], len(shape), "LayerNorm")
    affine = tuple(d if i == axis else 1 for i, d in enumerate(shape))
    stats = tuple(1 if i == axis else d for i, d in enumerate(shape))
    return _Layout(shape, (axis,), affine, stats, shape[axis])


def _instance_norm_layout(params: dict, shape: Shape) -> _Layout:
    if len(shape) < 3:
        raise ShapeError(f"InstanceNorm: data shape {shape} needs at least 3 dimensions (batch, channel, "
                         "spatial...)")
    affine = (1, shape[1]) + (1,) * (len(shape) - 2)
    return _Layout(shape, tuple(range(2, len(shape))), affine, shape[:2] + (1,) * (len(shape) - 2), shape[1])


def _group_norm_layout(params: dict, shape: Shape) -> _Layout:
    groups = params["num_groups"]
    if len(shape) < 2:
        raise ShapeError(f"GroupNorm: data shape {shape} needs at least 2 dimensions (batch, channel, ...)")
    if groups < 1 or shape[1] % groups:
        raise ShapeError(f"GroupNorm: num_groups={groups} must be a positive divisor of the channel count "
                         f"{shape[1]} of data {shape}")
    view = (shape[0], groups, _prod(shape[1:]) // groups)
    return _Layout(view, (2,), (1, groups, 1), (shape[0], groups), groups)


_LAYOUTS = {"LayerNorm": _layer_norm_layout, "InstanceNorm": _instance_norm_layout,
            "GroupNorm": _group_norm_layout}


def _layout(op: str, params: dict, shape) -> _Layout:
    return _LAYOUTS[op](params, tuple(int(d) for d in shape))


def _accumulator(xp, dtype):
    """The dtype sums accumulate in: float16 in float32, float32 in float64 (MXNet's safe
    accumulation). A float32 sum over thousands of rows, done along a strided axis where numpy
    adds one row after another, otherwise drifts by 1e-4 of its size."""
    return xp.float32 if dtype == xp.float16 else xp.float64 if dtype == xp.float32 else dtype


def _statistics(xp, x, layout: _Layout, eps: float):
    acc = _accumulator(xp, x.dtype)
    mean = x.mean(axis=layout.reduced, keepdims=True, dtype=acc).astype(x.dtype)
    centred = x - mean
    var = (centred * centred).mean(axis=layout.reduced, keepdims=True, dtype=acc).astype(x.dtype)
    return mean, centred, xp.sqrt(var + eps)


def _num_outputs(params: dict) -> int:
    return 3 if params.get("output_mean_var") else 1


def _shape_fn(op: str):
    def infer(params: dict, in_shapes: list) -> list:
        data = in_shapes[0]
        if data is None or len(data) == 0:
            raise ShapeError(f"{op}: data shape {fmt(data)} must have at least one axis")
        layout = _layout(op, params, data)
        for name, shape in zip(("gamma", "beta"), in_shapes[1:]):
            expect_shape(op, name, shape, (layout.channels,), f"one value per normalised channel of data "
                         f"{fmt(data)}")
        data = tuple(int(d) for d in data)
        return [data, layout.stats, layout.stats][:_num_outputs(params)]

    return infer


def _forward_kernel(op: str):
    def kernel(xp, inputs, outputs, params):
        x, gamma, beta = inputs
        layout = _layout(op, params, x.shape)
        view = x.reshape(layout.view)
        mean, centred, std = _statistics(xp, view, layout, params["eps"])
        out = centred / std * gamma.reshape(layout.affine) + beta.reshape(layout.affine)
        write(xp, outputs[0], out.reshape(x.shape))
        if len(outputs) == 3:
            write(xp, outputs[1], mean.reshape(layout.stats))
            write(xp, outputs[2], std.reshape(layout.stats))

    return kernel


def _backward_kernel(op: str):
    def kernel(xp, inputs, outputs, params):
        out_grad, x, gamma = inputs
        layout = _layout(op, params, x.shape)
        view, head = x.reshape(layout.view), out_grad.reshape(layout.view)
        _, centred, std = _statistics(xp, view, layout, params["eps"])
        normalised = centred / std
        # gamma and beta are shared by every axis where their view-shape is 1
        shared = tuple(i for i, d in enumerate(layout.affine) if d == 1)
        acc = _accumulator(xp, x.dtype)
        write(xp, outputs[1], (head * normalised).sum(axis=shared, dtype=acc).reshape(gamma.shape))
        write(xp, outputs[2], head.sum(axis=shared, dtype=acc).reshape(gamma.shape))
        scaled = head * gamma.reshape(layout.affine)
        mean_scaled = scaled.mean(axis=layout.reduced, keepdims=True, dtype=acc).astype(x.dtype)
        mean_projection = (scaled * normalised).mean(axis=layout.reduced, keepdims=True, dtype=acc).astype(x.dtype)
        write(xp, outputs[0], ((scaled - mean_scaled - normalised * mean_projection) / std).reshape(x.shape))

    return kernel


def _gradient(op: str):
    def gradient(F, params, inputs, outputs, out_grads):
        # only the normalised output carries a gradient back, as in MXNet
        return as_list(F(f"_backward_{op}", out_grads[0], inputs[0], inputs[1], **public(params)))

    return gradient


_EPS = Param("eps", "float", 1e-5, doc="Added to the variance before the square root.")
_OUTPUT_MEAN_VAR = Param("output_mean_var", "bool", False,
                         doc="Also output the mean and the standard deviation sqrt(var + eps).")
_SCHEMAS = {
    "LayerNorm": schema([Param("axis", "int", -1, doc="The axis normalised over (and that gamma, beta follow)."),
                         _EPS, _OUTPUT_MEAN_VAR]),
    "InstanceNorm": schema([Param("eps", "float", 1e-3, doc="Added to the variance before the square root.")]),
    "GroupNorm": schema([Param("num_groups", "int", 1, doc="Channel groups, each normalised on its own."),
                         _EPS, _OUTPUT_MEAN_VAR]),
}
_DOCS = {
    "LayerNorm": "Layer normalisation: each sample normalised over ``axis``, then scaled and shifted along it.",
    "InstanceNorm": "Instance normalisation: each sample and channel normalised over the spatial axes.",
    "GroupNorm": "Group normalisation: each sample's channel groups normalised; gamma, beta per group.",
}

for _op in ("LayerNorm", "InstanceNorm", "GroupNorm"):
    define(OpDef(
        name=_op, infer_shape=_shape_fn(_op), kernel=_forward_kernel(_op), params=_SCHEMAS[_op],
        num_inputs=3, input_names=("data", "gamma", "beta"), num_outputs=_num_outputs,
        output_names=lambda p: ("output", "mean", "std")[:_num_outputs(p)],
        infer_dtype=lambda p, d: [d[0]] * _num_outputs(p), gradient=_gradient(_op),
        backward_ignores=frozenset({2}), doc=_DOCS[_op],
    ))
    define(OpDef(
        name=f"_backward_{_op}", params=_SCHEMAS[_op], kernel=_backward_kernel(_op),
        infer_shape=lambda p, s: [tuple(s[1]), tuple(s[2]), tuple(s[2])], num_inputs=3,
        input_names=("head_grad", "data", "gamma"), num_outputs=3, output_names=("data", "gamma", "beta"),
        infer_dtype=lambda p, d: [d[1], d[2], d[2]], doc=f"Backward of {_op}.",
    ))
