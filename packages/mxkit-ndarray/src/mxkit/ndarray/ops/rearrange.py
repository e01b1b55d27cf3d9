"""Operators that move or pick elements: ``depth_to_space``/``space_to_depth``, ``diag``,
``slice_like``, ``_split_v2``, ``batch_take``, ``index_copy``, ``ravel_multi_index`` and
``unravel_index``, each with its backward where MXNet differentiates it."""

from __future__ import annotations

import itertools

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.ops.nn_common import as_list
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import ALL_INPUTS, OpDef, define
from mxkit.ndarray.shapes import normalize_axis

_ZERO_GRADIENT = dict(gradient=lambda F, p, i, o, g: [None] * len(i), backward_ignores=ALL_INPUTS)


def _grad_via(backward, extra_inputs=()):
    """A gradient that runs ``backward(out_grad, *inputs[extra_inputs])`` for input 0 and none for the rest."""
    def gradient(F, params, inputs, outputs, out_grads):
        grad = F(backward, out_grads[0], *(inputs[i] for i in extra_inputs), **params)
        return [grad] + [None] * (len(inputs) - 1)

    return gradient


# ---- depth_to_space / space_to_depth (NCHW, MXNet's DCR order) ----------------------------

_BLOCK = schema([Param("block_size", "int", doc="The side of the square block moved between depth and space.")])


def _d2s_shape(params, in_shapes):
    n, c, h, w = _nchw(in_shapes[0], "depth_to_space")
    b = _block(params, "depth_to_space")
    if c % (b * b):
        raise ShapeError(f"depth_to_space: {c} channels are not divisible by block_size^2 = {b * b}")
    return [(n, c // (b * b), h * b, w * b)]


def _s2d_shape(params, in_shapes):
    n, c, h, w = _nchw(in_shapes[0], "space_to_depth")
    b = _block(params, "space_to_depth")
    if h % b or w % b:
        raise ShapeError(f"space_to_depth: height {h} and width {w} must be divisible by block_size {b}")
    return [(n, c * b * b, h // b, w // b)]


def _nchw(shape, name):
    if len(shape) != 4:
        raise ShapeError(f"{name}: data must be 4-D (N, C, H, W), got shape {tuple(shape)}")
    if any(d <= 0 for d in shape):
        raise ShapeError(f"{name}: every dimension of data must be positive, got shape {tuple(shape)}")
    return tuple(shape)


def _block(params, name):
    if params["block_size"] < 1:
        raise ShapeError(f"{name}: block_size={params['block_size']} must be positive")
    return params["block_size"]


def depth_to_space(x, b):
    n, c, h, w = x.shape
    return x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2).reshape(n, c // (b * b), h * b, w * b)


def space_to_depth(x, b):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4).reshape(n, c * b * b, h // b, w // b)


define(OpDef(
    name="depth_to_space", infer_shape=_d2s_shape, params=_BLOCK,
    kernel=lambda xp, i, o, p: write(xp, o[0], depth_to_space(i[0], p["block_size"])),
    gradient=lambda F, p, i, o, g: [F("space_to_depth", g[0], **p)], backward_ignores=ALL_INPUTS,
    doc="Moves blocks of channels into block_size x block_size patches of space (N, C, H, W).",
))
define(OpDef(
    name="space_to_depth", infer_shape=_s2d_shape, params=_BLOCK,
    kernel=lambda xp, i, o, p: write(xp, o[0], space_to_depth(i[0], p["block_size"])),
    gradient=lambda F, p, i, o, g: [F("depth_to_space", g[0], **p)], backward_ignores=ALL_INPUTS,
    doc="Moves block_size x block_size patches of space into channels (the inverse of depth_to_space).",
))


# ---- diag -----------------------------------------------------------------------------------

_DIAG = schema([Param("k", "int", 0, doc="Diagonal offset: > 0 above, < 0 below the main one."),
                Param("axis1", "int", 0), Param("axis2", "int", 1)])


def _diag_axes(params, ndim):
    a1, a2 = normalize_axis(params["axis1"], ndim, "diag"), normalize_axis(params["axis2"], ndim, "diag")
    if a1 == a2:
        raise ShapeError(f"diag: axis1={params['axis1']} and axis2={params['axis2']} name the same axis")
    return a1, a2


def _diag_shape(params, in_shapes):
    data, k = tuple(in_shapes[0]), params["k"]
    if len(data) == 0:
        raise ShapeError("diag: the input must have at least one axis")
    if len(data) == 1:
        return [(data[0] + abs(k),) * 2]
    a1, a2 = _diag_axes(params, len(data))
    length = min(data[a1] + min(k, 0), data[a2] - max(k, 0))
    if length <= 0:
        raise ShapeError(f"diag: offset k={k} is outside the {data[a1]} x {data[a2]} matrix of shape {data}")
    rest = tuple(d for i, d in enumerate(data) if i not in (a1, a2))
    return [(*rest, length)]


def _diag_kernel(xp, inputs, outputs, params):
    x, k = inputs[0], params["k"]
    if x.ndim == 1:
        write(xp, outputs[0], xp.diag(x, k))
    else:
        a1, a2 = _diag_axes(params, x.ndim)
        write(xp, outputs[0], xp.diagonal(x, k, a1, a2))


def _diag_backward_kernel(xp, inputs, outputs, params):
    out_grad, grad, k = inputs[0], outputs[0], params["k"]
    if grad.ndim == 1:
        write(xp, grad, xp.diagonal(out_grad, k))
        return
    a1, a2 = _diag_axes(params, grad.ndim)
    grad[...] = 0
    view = xp.diagonal(grad, k, a1, a2)  # read-only in numpy: write through the index arrays instead
    rows = xp.arange(view.shape[-1]) + max(-k, 0)
    cols = xp.arange(view.shape[-1]) + max(k, 0)
    moved = xp.moveaxis(grad, (a1, a2), (-2, -1))
    moved[..., rows, cols] = out_grad


define(OpDef(
    name="diag", infer_shape=_diag_shape, kernel=_diag_kernel, params=_DIAG,
    gradient=_grad_via("_backward_diag", (0,)), backward_ignores=frozenset(),
    doc="A 1-D input on the k-th diagonal of a square matrix, or the k-th diagonal of an N-D input "
        "(over axis1, axis2; it becomes the last axis).",
))
define(OpDef(
    name="_backward_diag", infer_shape=lambda p, s: [tuple(s[1])], kernel=_diag_backward_kernel, params=_DIAG,
    num_inputs=2, input_names=("out_grad", "data"), reads_shape_only=frozenset({1}), doc="Backward of diag.",
))


# ---- slice_like ------------------------------------------------------------------------------

_SLICE_LIKE = schema([Param("axes", "shape", (), doc="Axes to slice (all the shared ones when empty).")])


def _slice_like_bounds(params, data, like):
    axes = params["axes"]
    if not axes:
        if len(like) != len(data):
            raise ShapeError(f"slice_like: without axes, data {data} and shape_like {like} must have one ndim")
        chosen = range(len(data))
    else:
        chosen = [normalize_axis(a, min(len(data), len(like)), "slice_like") for a in axes]
    ends = list(data)
    for a in chosen:
        if like[a] > data[a]:
            raise ShapeError(f"slice_like: axis {a} of shape_like {like} ({like[a]}) is longer than data's "
                             f"({data[a]}) in {data}")
        ends[a] = like[a]
    return tuple(ends)


def _slice_like_shape(params, in_shapes):
    return [_slice_like_bounds(params, tuple(in_shapes[0]), tuple(in_shapes[1]))]


def _slice_like_kernel(xp, inputs, outputs, params):
    ends = outputs[0].shape
    write(xp, outputs[0], inputs[0][tuple(slice(0, e) for e in ends)])


def _slice_like_backward_kernel(xp, inputs, outputs, params):
    out_grad, grad = inputs[0], outputs[0]
    grad[...] = 0
    grad[tuple(slice(0, e) for e in out_grad.shape)] = out_grad


define(OpDef(
    name="slice_like", infer_shape=_slice_like_shape, kernel=_slice_like_kernel, params=_SLICE_LIKE,
    num_inputs=2, input_names=("data", "shape_like"), reads_shape_only=frozenset({1}),
    gradient=_grad_via("_backward_slice_like", (0,)), backward_ignores=ALL_INPUTS,
    doc="The leading part of data that has shape_like's size along axes (all axes when empty).",
))
define(OpDef(
    name="_backward_slice_like", infer_shape=lambda p, s: [tuple(s[1])], kernel=_slice_like_backward_kernel,
    params=_SLICE_LIKE, num_inputs=2, input_names=("out_grad", "data"), reads_shape_only=frozenset({1}),
    doc="Backward of slice_like: the gradient in the sliced corner, zeros elsewhere.",
))


# ---- _split_v2 -------------------------------------------------------------------------------

_SPLIT_V2 = schema([
    Param("indices", "shape", (), doc="Split points along axis, starting with 0 (when sections is 0)."),
    Param("axis", "int", 1), Param("squeeze_axis", "bool", False),
    Param("sections", "int", 0, doc="Split into this many equal parts (instead of at indices)."),
])


def _split_points(params, size):
    if params["sections"] > 0:
        if size % params["sections"]:
            raise ShapeError(f"split_v2: axis of size {size} does not split into {params['sections']} equal parts")
        step = size // params["sections"]
        return [i * step for i in range(params["sections"])] + [size]
    points = list(params["indices"]) or [0]
    if points[0] != 0 or any(b < a for a, b in itertools.pairwise(points)) or points[-1] > size:
        raise ShapeError(f"split_v2: indices {params['indices']} must start at 0 and ascend within the axis "
                         f"of size {size}")
    return [*points, size]


def _split_count(params):
    return params["sections"] if params["sections"] > 0 else max(len(params["indices"]), 1)


def _split_shape(params, in_shapes):
    data = tuple(in_shapes[0])
    axis = normalize_axis(params["axis"], len(data), "split_v2")
    points = _split_points(params, data[axis])
    shapes = []
    for begin, end in itertools.pairwise(points):
        part = (*data[:axis], end - begin, *data[axis + 1:])
        if params["squeeze_axis"]:
            if end - begin != 1:
                raise ShapeError(f"split_v2: squeeze_axis needs parts of size 1 along the axis, got {end - begin}")
            part = data[:axis] + data[axis + 1:]
        shapes.append(part)
    return shapes


def _split_kernel(xp, inputs, outputs, params):
    x = inputs[0]
    axis = normalize_axis(params["axis"], x.ndim, "split_v2")
    points = _split_points(params, x.shape[axis])
    for out, begin, end in zip(outputs, points, points[1:]):
        index = (slice(None),) * axis + (slice(begin, end),)
        write(xp, out, x[index].reshape(out.shape))


def _split_backward_kernel(xp, inputs, outputs, params):
    grad = outputs[0]
    axis = normalize_axis(params["axis"], grad.ndim, "split_v2")
    points = _split_points(params, grad.shape[axis])
    for part, begin, end in zip(inputs, points, points[1:]):
        index = (slice(None),) * axis + (slice(begin, end),)
        grad[index] = part.reshape(grad[index].shape)


def _split_gradient(F, params, inputs, outputs, out_grads):
    grads = [g if g is not None else F("zeros_like", o) for g, o in zip(out_grads, as_list(outputs))]
    return [F("_split_v2_backward", *grads, **params)]


define(OpDef(
    name="_split_v2", infer_shape=_split_shape, kernel=_split_kernel, params=_SPLIT_V2,
    num_outputs=_split_count, infer_dtype=lambda p, d: [d[0]] * _split_count(p), gradient=_split_gradient,
    backward_ignores=ALL_INPUTS,
    doc="Splits data along axis at indices (or into sections equal parts), as numpy.split.",
))


def _split_backward_shape(params, in_shapes):
    axis_sizes = [tuple(s) for s in in_shapes]
    first = axis_sizes[0]
    ndim = len(first) + (1 if params["squeeze_axis"] else 0)
    axis = normalize_axis(params["axis"], ndim, "split_v2")
    if params["squeeze_axis"]:
        return [(*first[:axis], len(axis_sizes), *first[axis:])]
    return [(*first[:axis], sum(s[axis] for s in axis_sizes), *first[axis + 1:])]


define(OpDef(
    name="_split_v2_backward", infer_shape=_split_backward_shape, kernel=_split_backward_kernel, params=_SPLIT_V2,
    num_inputs=_split_count, input_names=lambda p: tuple(f"out_grad{i}" for i in range(_split_count(p))),
    doc="Backward of _split_v2: the parts' gradients joined along the axis.",
))


# ---- batch_take ------------------------------------------------------------------------------

def _batch_take_shape(params, in_shapes):
    a, indices = tuple(in_shapes[0]), tuple(in_shapes[1])
    if len(a) != 2 or len(indices) != 1 or indices[0] != a[0]:
        raise ShapeError(f"batch_take: a must be 2-D (N, M) and indices (N,), got {a} and {indices}")
    return [indices]


def _batch_picks(xp, a, indices):
    return xp.clip(indices.astype("int64"), 0, a.shape[1] - 1)


def _batch_take_kernel(xp, inputs, outputs, params):
    a, indices = inputs
    write(xp, outputs[0], a[xp.arange(a.shape[0]), _batch_picks(xp, a, indices)])


def _batch_take_backward_kernel(xp, inputs, outputs, params):
    out_grad, a, indices = inputs
    grad = outputs[0]
    grad[...] = 0
    grad[xp.arange(a.shape[0]), _batch_picks(xp, a, indices)] = out_grad


define(OpDef(
    name="batch_take", infer_shape=_batch_take_shape, kernel=_batch_take_kernel, num_inputs=2,
    input_names=("a", "indices"), backward_ignores=frozenset(),
    gradient=lambda F, p, i, o, g: [F("_backward_batch_take", g[0], i[0], i[1]), None],
    doc="a[i, indices[i]] for each row i of a 2-D array (indices clipped to the row).",
))
define(OpDef(
    name="_backward_batch_take", infer_shape=lambda p, s: [tuple(s[1])], kernel=_batch_take_backward_kernel,
    num_inputs=3, input_names=("out_grad", "a", "indices"), infer_dtype=lambda p, d: [d[1]],
    reads_shape_only=frozenset({1}), doc="Backward of batch_take.",
))


# ---- index_copy ------------------------------------------------------------------------------

def _index_copy_shape(params, in_shapes):
    old, index, new = (tuple(s) for s in in_shapes)
    if len(index) != 1 or new != (index[0], *old[1:]):
        raise ShapeError(f"index_copy: index must be 1-D (k,) and new_tensor (k, *old.shape[1:]); got old {old}, "
                         f"index {index}, new {new}")
    return [old]


def _index_rows(xp, index, size):
    rows = index.astype("int64")
    if rows.size and (int(rows.min()) < 0 or int(rows.max()) >= size):
        raise ShapeError(f"index_copy: index values must lie in [0, {size}), got {rows.tolist()}")
    return rows


def _index_copy_kernel(xp, inputs, outputs, params):
    old, index, new = inputs
    out = outputs[0]
    write(xp, out, old)
    out[_index_rows(xp, index, old.shape[0])] = new


def _index_copy_backward_kernel(xp, inputs, outputs, params):
    out_grad, index = inputs
    rows = _index_rows(xp, index, out_grad.shape[0])
    write(xp, outputs[0], out_grad)
    outputs[0][rows] = 0
    write(xp, outputs[1], out_grad[rows])


define(OpDef(
    name="_contrib_index_copy", infer_shape=_index_copy_shape, kernel=_index_copy_kernel, num_inputs=3,
    input_names=("old_tensor", "index_vector", "new_tensor"), backward_ignores=frozenset({0, 2}),
    gradient=lambda F, p, i, o, g: (lambda r: [r[0], None, r[1]])(as_list(
        F("_contrib_backward_index_copy", g[0], i[1]))),
    doc="A copy of old_tensor whose rows index_vector are replaced by the rows of new_tensor.",
))
define(OpDef(
    name="_contrib_backward_index_copy",
    infer_shape=lambda p, s: [tuple(s[0]), (s[1][0], *tuple(s[0][1:]))], kernel=_index_copy_backward_kernel,
    num_inputs=2, num_outputs=2, input_names=("out_grad", "index_vector"),
    output_names=("old_grad", "new_grad"), infer_dtype=lambda p, d: [d[0], d[0]],
    doc="Backward of index_copy: the gradient outside the copied rows, and the copied rows' gradient.",
))


# ---- ravel_multi_index / unravel_index -------------------------------------------------------

_RAVEL = schema([Param("shape", "shape", doc="The shape indexed into (the first dimension may be -1).")])


def _strides(shape):
    strides, step = [], 1
    for dim in reversed(shape[1:]):
        strides.append(step)
        step *= dim
    strides.append(step)
    return list(reversed(strides))


def _ravel_shape(params, in_shapes):
    data = tuple(in_shapes[0])
    if len(data) < 1 or data[0] != len(params["shape"]):
        raise ShapeError(f"ravel_multi_index: data must be ({len(params['shape'])}, ...) for shape "
                         f"{params['shape']}, got {data}")
    return [data[1:]]


def _ravel_kernel(xp, inputs, outputs, params):
    data = inputs[0].astype("int64")
    strides = xp.asarray(_strides(params["shape"]), dtype="int64").reshape((-1,) + (1,) * (data.ndim - 1))
    write(xp, outputs[0], (data * strides).sum(axis=0))


def _unravel_kernel(xp, inputs, outputs, params):
    flat = inputs[0].astype("int64")
    shape = params["shape"]
    parts = []
    for i, stride in enumerate(_strides(shape)):
        coordinate = flat // stride
        parts.append(coordinate if i == 0 else coordinate % shape[i])
    write(xp, outputs[0], xp.stack(parts))


define(OpDef(
    name="_ravel_multi_index", aliases=("ravel_multi_index",), infer_shape=_ravel_shape, kernel=_ravel_kernel,
    params=_RAVEL, **_ZERO_GRADIENT, doc="Flat indices into shape of the index tuples in data's columns.",
))
define(OpDef(
    name="_unravel_index", aliases=("unravel_index",), kernel=_unravel_kernel, params=_RAVEL, **_ZERO_GRADIENT,
    infer_shape=lambda p, s: [(len(p["shape"]), *tuple(s[0]))],
    doc="The index tuples (one per row of the output) of flat indices into shape.",
))
