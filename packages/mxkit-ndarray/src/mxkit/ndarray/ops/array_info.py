"""Operators that describe or test an array rather than transform it: ``shape_array``,
``size_array``, ``all_finite``/``multi_all_finite``, ``allclose``, ``histogram``,
``index_array`` and ``moments`` (mean and variance over axes, differentiable)."""

from __future__ import annotations

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import ALL_INPUTS, OpDef, define
from mxkit.ndarray.shapes import normalize_axis

_ZERO_GRADIENT = dict(gradient=lambda F, p, i, o, g: [None] * len(i), backward_ignores=ALL_INPUTS)

define(OpDef(
    name="shape_array", infer_shape=lambda p, s: [(len(s[0]),)], infer_dtype=lambda p, d: ["int64"],
    kernel=lambda xp, i, o, p: write(xp, o[0], xp.asarray(i[0].shape, dtype="int64")),
    reads_shape_only=frozenset({0}), **_ZERO_GRADIENT, doc="The shape of the input as a 1-D int64 array.",
))
define(OpDef(
    name="size_array", infer_shape=lambda p, s: [(1,)], infer_dtype=lambda p, d: ["int64"],
    kernel=lambda xp, i, o, p: write(xp, o[0], xp.asarray([i[0].size], dtype="int64")),
    reads_shape_only=frozenset({0}), **_ZERO_GRADIENT, doc="The number of elements of the input, as (1,) int64.",
))


def _all_finite_kernel(xp, inputs, outputs, params):
    finite = all(bool(xp.isfinite(a).all()) for a in inputs)
    write(xp, outputs[0], xp.asarray([1.0 if finite else 0.0]))


_FINITE_PARAMS = [Param("init_output", "bool", True, doc="Kept for MXNet compatibility: the output is always set.")]
define(OpDef(
    name="all_finite", infer_shape=lambda p, s: [(1,)], infer_dtype=lambda p, d: ["float32"],
    kernel=_all_finite_kernel, params=schema(_FINITE_PARAMS), **_ZERO_GRADIENT,
    doc="[1.] if every element is finite (no inf or NaN), else [0.].",
))
define(OpDef(
    name="multi_all_finite", infer_shape=lambda p, s: [(1,)], infer_dtype=lambda p, d: ["float32"],
    kernel=_all_finite_kernel, params=schema([Param("num_arrays", "int", 1), *_FINITE_PARAMS]),
    num_inputs=lambda p: p["num_arrays"], input_names=lambda p: tuple(f"data{i}" for i in range(p["num_arrays"])),
    **_ZERO_GRADIENT, doc="[1.] if every element of every input is finite, else [0.].",
))


def _allclose_shape(params, in_shapes):
    if tuple(in_shapes[0]) != tuple(in_shapes[1]):
        raise ShapeError(f"allclose: a has shape {tuple(in_shapes[0])} and b {tuple(in_shapes[1])}; they must match")
    return [(1,)]


def _allclose_kernel(xp, inputs, outputs, params):
    a, b = inputs
    close = xp.abs(a - b) <= params["atol"] + params["rtol"] * xp.abs(b)
    if params["equal_nan"]:
        close = close | (xp.isnan(a) & xp.isnan(b))
    write(xp, outputs[0], xp.asarray([1 if bool(close.all()) else 0]))


define(OpDef(
    name="_contrib_allclose", infer_shape=_allclose_shape, kernel=_allclose_kernel, num_inputs=2,
    input_names=("a", "b"), infer_dtype=lambda p, d: ["int32"], **_ZERO_GRADIENT,
    params=schema([Param("rtol", "float", 1e-5), Param("atol", "float", 1e-8), Param("equal_nan", "bool", True)]),
    doc="[1] if |a - b| <= atol + rtol * |b| everywhere (numpy.allclose), else [0].",
))


# ---- histogram ----------------------------------------------------------------------------

def _histogram_shape(params, in_shapes):
    if params["bin_cnt"] is None:
        if len(in_shapes) != 2 or len(in_shapes[1]) != 1 or in_shapes[1][0] < 2:
            raise ShapeError("histogram: without bin_cnt, bins must be given as a 1-D array of at least 2 edges")
        edges = in_shapes[1][0]
        return [(edges - 1,), (edges,)]
    if params["bin_cnt"] < 1:
        raise ShapeError(f"histogram: bin_cnt={params['bin_cnt']} must be at least 1")
    if params["range"] is None or len(params["range"]) != 2 or params["range"][0] >= params["range"][1]:
        raise ShapeError(f"histogram: with bin_cnt, range must be (low, high) with low < high, got {params['range']}")
    return [(params["bin_cnt"],), (params["bin_cnt"] + 1,)]


def _histogram_kernel(xp, inputs, outputs, params):
    if params["bin_cnt"] is None:
        edges = inputs[1]
    else:
        low, high = params["range"]
        edges = xp.linspace(low, high, params["bin_cnt"] + 1)
    counts, _ = xp.histogram(inputs[0].reshape(-1), bins=edges)
    write(xp, outputs[0], counts)
    write(xp, outputs[1], edges)


define(OpDef(
    name="_histogram", infer_shape=_histogram_shape, kernel=_histogram_kernel,
    params=schema([Param("bin_cnt", "int", None, optional=True, doc="Number of equal bins over range."),
                   Param("range", "floats", None, optional=True, doc="(low, high) of the equal bins.")]),
    num_inputs=lambda p: 1 if p["bin_cnt"] is not None else 2,
    input_names=lambda p: ("data",) if p["bin_cnt"] is not None else ("data", "bins"),
    num_outputs=2, output_names=("histogram", "bin_edges"),
    infer_dtype=lambda p, d: ["int64", d[1] if len(d) > 1 else "float32"], **_ZERO_GRADIENT,
    doc="Counts of the input in bins (numpy.histogram): bin_cnt equal bins over range, or the given edges.",
))


# ---- index_array --------------------------------------------------------------------------

def _index_axes(params, ndim):
    axes = params["axes"]
    if axes is None:
        return tuple(range(ndim))
    return tuple(normalize_axis(a, ndim, "index_array") for a in axes)


def _index_array_shape(params, in_shapes):
    data = tuple(in_shapes[0])
    return [(*data, len(_index_axes(params, len(data))))]


def _index_array_kernel(xp, inputs, outputs, params):
    data = inputs[0]
    axes = _index_axes(params, data.ndim)
    grids = xp.indices(data.shape, dtype="int64") if data.ndim else xp.zeros((0,), dtype="int64")
    write(xp, outputs[0], xp.stack([grids[a] for a in axes], axis=-1) if axes else outputs[0])


define(OpDef(
    name="_contrib_index_array", infer_shape=_index_array_shape, kernel=_index_array_kernel,
    params=schema([Param("axes", "shape", None, optional=True, doc="The axes whose indices to give (all if None).")]),
    infer_dtype=lambda p, d: ["int64"], reads_shape_only=frozenset({0}), **_ZERO_GRADIENT,
    doc="For every element of the input, its index along each of axes (in the last axis of the output).",
))


# ---- moments ------------------------------------------------------------------------------

_MOMENTS_SCHEMA = schema([Param("axes", "shape", None, optional=True, doc="Axes to reduce (all if None)."),
                          Param("keepdims", "bool", False)])


def _moment_axes(params, ndim):
    axes = params["axes"]
    return tuple(range(ndim)) if axes is None else tuple(sorted(normalize_axis(a, ndim, "moments") for a in axes))


def _moments_shape(params, in_shapes):
    data = tuple(in_shapes[0])
    axes = _moment_axes(params, len(data))
    if params["keepdims"]:
        out = tuple(1 if i in axes else d for i, d in enumerate(data))
    else:
        out = tuple(d for i, d in enumerate(data) if i not in axes) or (1,)
    return [out, out]


def _moments_kernel(xp, inputs, outputs, params):
    x = inputs[0]
    axes = _moment_axes(params, x.ndim)
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    write(xp, outputs[0], mean.reshape(outputs[0].shape))
    write(xp, outputs[1], var.reshape(outputs[1].shape))


def _moments_backward_kernel(xp, inputs, outputs, params):
    mean_grad, var_grad, x, mean = inputs
    axes = _moment_axes(params, x.ndim)
    kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    count = 1
    for a in axes:
        count *= x.shape[a]
    # d mean / dx = 1 / n; d var / dx = 2 (x - mean) / n (the mean's own dependence on x cancels)
    grad = (mean_grad.reshape(kept) + 2 * var_grad.reshape(kept) * (x - mean.reshape(kept))) / count
    write(xp, outputs[0], grad)


def _moments_gradient(F, params, inputs, outputs, out_grads):
    mean_grad = out_grads[0] if out_grads[0] is not None else F("zeros_like", outputs[0])
    var_grad = out_grads[1] if out_grads[1] is not None else F("zeros_like", outputs[1])
    return [F("_backward_moments", mean_grad, var_grad, inputs[0], outputs[0], **params)]


define(OpDef(
    name="moments", infer_shape=_moments_shape, kernel=_moments_kernel, params=_MOMENTS_SCHEMA, num_outputs=2,
    output_names=("mean", "var"), infer_dtype=lambda p, d: [d[0], d[0]], gradient=_moments_gradient,
    doc="Mean and (population) variance over axes.",
))
define(OpDef(
    name="_backward_moments", infer_shape=lambda p, s: [tuple(s[2])], kernel=_moments_backward_kernel,
    params=_MOMENTS_SCHEMA, num_inputs=4, input_names=("mean_grad", "var_grad", "data", "mean"),
    infer_dtype=lambda p, d: [d[2]], doc="Backward of moments.",
))
