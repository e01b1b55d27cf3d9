"""Selection and ordering: ``where``, ``clip``, ``one_hot``, ``pick``, ``take``, ``topk``, ``sort``, ``argsort``."""

from __future__ import annotations

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import first_shape, no_gradient, write
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define
from mxkit.ndarray.shapes import normalize_axis, same_shape


def _where_shape(params, in_shapes):
    cond, x, y = (tuple(s) for s in in_shapes)
    out = same_shape([x, y], "where")
    if cond != out and not (len(cond) == 1 and cond[0] == out[0]):
        raise ShapeError(f"where: condition {cond} must have the shape of x and y {out}, or be 1-D of "
                         f"length {out[0]}")
    return [out]


def _where_kernel(xp, inputs, outputs, params):
    cond, x, y = inputs
    if cond.shape != x.shape:  # a 1-D condition selects whole rows
        cond = cond.reshape(cond.shape + (1,) * (x.ndim - 1))
    write(xp, outputs[0], xp.where(cond != 0, x, y))


define(OpDef(
    name="where", infer_shape=_where_shape, kernel=_where_kernel, num_inputs=3,
    input_names=("condition", "x", "y"), infer_dtype=lambda p, d: [d[1]],
    gradient=lambda F, p, i, o, g: [None, F("where", i[0], g[0], F("zeros_like", g[0])),
                                    F("where", i[0], F("zeros_like", g[0]), g[0])],
    backward_ignores=frozenset({1, 2}), doc="Elements of x where condition is nonzero, else of y.",
))


_CLIP_SCHEMA = schema([Param("a_min", "float"), Param("a_max", "float")])


def _clip_backward_kernel(xp, inputs, outputs, params):
    out_grad, x = inputs
    write(xp, outputs[0], out_grad * ((x >= params["a_min"]) & (x <= params["a_max"])))


define(OpDef(
    name="clip", infer_shape=first_shape, params=_CLIP_SCHEMA, inplace=((0, 0, False),),
    kernel=lambda xp, i, o, p: write(xp, o[0], xp.clip(i[0], p["a_min"], p["a_max"])),
    gradient=lambda F, p, i, o, g: [F("_backward_clip", g[0], i[0], a_min=p["a_min"], a_max=p["a_max"])],
    doc="Limits the values to [a_min, a_max].",
))
define(OpDef(name="_backward_clip", infer_shape=first_shape, params=_CLIP_SCHEMA, kernel=_clip_backward_kernel,
             num_inputs=2, input_names=("out_grad", "data"), doc="Backward of clip."))


def _one_hot_kernel(xp, inputs, outputs, params):
    indices = inputs[0].astype("int64")
    depth = params["depth"]
    valid = (indices >= 0) & (indices < depth)
    hot = (indices[..., None] == xp.arange(depth)) & valid[..., None]
    # a where() result, not in-place writes through a reshape: ``out`` may be a strided view
    write(xp, outputs[0], xp.where(hot, params["on_value"], params["off_value"]))


define(OpDef(
    name="one_hot", infer_shape=lambda p, s: [(*tuple(s[0]), p["depth"])], kernel=_one_hot_kernel,
    input_names=("indices",),
    params=schema([Param("depth", "int"), Param("on_value", "float", 1.0), Param("off_value", "float", 0.0),
                   Param("dtype", "dtype", "float32")]),
    infer_dtype=lambda p, d: [p["dtype"]], gradient=no_gradient,
    doc="One-hot encoding: out[..., i] = on_value where i == indices[...], else off_value.",
))


# ---- pick and take -----------------------------------------------------------------------

_PICK_SCHEMA = schema([Param("axis", "int", -1, optional=True), Param("keepdims", "bool", False),
                       Param("mode", "str", "clip", choices=("clip", "wrap"))])


def _pick_shape(params, in_shapes):
    data, index = tuple(in_shapes[0]), tuple(in_shapes[1])
    axis = normalize_axis(params["axis"], len(data), "pick")
    expected = data[:axis] + data[axis + 1:]
    keep = (*data[:axis], 1, *data[axis + 1:])
    if index != expected and index != keep:
        raise ShapeError(f"pick: index shape {index} must be the data shape {data} without axis {axis}: "
                         f"{expected}")
    return [keep if params["keepdims"] else expected]


def _pick_indices(xp, data, index, params):
    axis = normalize_axis(params["axis"], data.ndim, "pick")
    size = data.shape[axis]
    idx = index.astype("int64").reshape((*data.shape[:axis], 1, *data.shape[axis + 1:]))
    idx = xp.mod(idx, size) if params["mode"] == "wrap" else xp.clip(idx, 0, size - 1)
    return axis, idx


def _pick_kernel(xp, inputs, outputs, params):
    data, index = inputs
    axis, idx = _pick_indices(xp, data, index, params)
    write(xp, outputs[0], xp.take_along_axis(data, idx, axis=axis).reshape(outputs[0].shape))


def _pick_backward_kernel(xp, inputs, outputs, params):
    out_grad, data, index = inputs
    axis, idx = _pick_indices(xp, data, index, params)
    grad = outputs[0]
    grad[...] = 0
    xp.put_along_axis(grad, idx, out_grad.reshape(idx.shape), axis=axis)


define(OpDef(
    name="pick", infer_shape=_pick_shape, kernel=_pick_kernel, params=_PICK_SCHEMA, num_inputs=2,
    input_names=("data", "index"), infer_dtype=lambda p, d: [d[0]],
    gradient=lambda F, p, i, o, g: [F("_backward_pick", g[0], i[0], i[1], **p), None],
    backward_ignores=frozenset({0}), doc="Picks one element per position along an axis, by index.",
))
define(OpDef(name="_backward_pick", infer_shape=lambda p, s: [tuple(s[1])], params=_PICK_SCHEMA,
             kernel=_pick_backward_kernel, num_inputs=3, input_names=("out_grad", "data", "index"),
             infer_dtype=lambda p, d: [d[0]], doc="Backward of pick (data gives the shape)."))

_TAKE_SCHEMA = schema([Param("axis", "int", 0), Param("mode", "str", "clip", choices=("clip", "wrap", "raise"))])


def _take_indices(xp, a, indices, params):
    axis = normalize_axis(params["axis"], a.ndim, "take")
    size = a.shape[axis]
    idx = indices.astype("int64")
    if params["mode"] == "wrap":
        idx = xp.mod(idx, size)
    elif params["mode"] == "clip":
        idx = xp.clip(idx, 0, size - 1)
    elif idx.size and (int(idx.min()) < 0 or int(idx.max()) >= size):
        # MXNet's bound is [0, size): a negative index is out of range too, not counted from the end
        raise IndexError(f"take: an index is out of range: indices must lie in [0, {size}) for axis {axis} with "
                         f"mode='raise'; got {int(idx.min())}..{int(idx.max())} (mode='wrap' wraps them, "
                         f"'clip' clips them)")
    return axis, idx


def _take_shape(params, in_shapes):
    a, indices = tuple(in_shapes[0]), tuple(in_shapes[1])
    axis = normalize_axis(params["axis"], len(a), "take")
    return [a[:axis] + indices + a[axis + 1:]]


def _take_backward_kernel(xp, inputs, outputs, params):
    out_grad, a, indices = inputs
    axis, idx = _take_indices(xp, a, indices, params)
    grad = outputs[0]
    grad[...] = 0
    moved = xp.moveaxis(grad, axis, 0)
    g = out_grad.reshape((*a.shape[:axis], idx.size, *a.shape[axis + 1:]))
    xp.add.at(moved, idx.reshape(-1), xp.moveaxis(g, axis, 0))


define(OpDef(
    name="take", infer_shape=_take_shape, params=_TAKE_SCHEMA, num_inputs=2, input_names=("a", "indices"),
    kernel=lambda xp, i, o, p: write(xp, o[0], xp.take(i[0], _take_indices(xp, i[0], i[1], p)[1],
                                                       axis=normalize_axis(p["axis"], i[0].ndim, "take"))),
    infer_dtype=lambda p, d: [d[0]],
    gradient=lambda F, p, i, o, g: [F("_backward_take", g[0], i[0], i[1], **p), None],
    backward_ignores=frozenset({0}), doc="Takes elements (whole slices) along an axis by index.",
))
define(OpDef(name="_backward_take", infer_shape=lambda p, s: [tuple(s[1])], params=_TAKE_SCHEMA,
             kernel=_take_backward_kernel, num_inputs=3, input_names=("out_grad", "a", "indices"),
             infer_dtype=lambda p, d: [d[0]], doc="Backward of take: gradients summed per taken index."))


# ---- ordering ----------------------------------------------------------------------------

def _order(xp, data, axis, ascend):
    order = xp.argsort(data, axis=axis, kind="stable")
    return order if ascend else xp.flip(order, axis=axis)


_TOPK_SCHEMA = schema([
    Param("axis", "int", -1, optional=True), Param("k", "int", 1),
    Param("ret_typ", "str", "indices", choices=("value", "indices", "mask", "both")),
    Param("is_ascend", "bool", False), Param("dtype", "dtype", "float32"),
])


def _topk_axis(params, ndim):
    return None if params["axis"] is None else normalize_axis(params["axis"], ndim, "topk")


def _topk_shape(params, in_shapes):
    shape = tuple(in_shapes[0])
    axis = _topk_axis(params, len(shape))
    if axis is None:
        shape, axis = (int(__import__("math").prod(shape)),), 0
    k = params["k"]
    if not 0 < k <= shape[axis]:
        raise ShapeError(f"topk: k={k} must be in [1, {shape[axis]}] for axis of size {shape[axis]}")
    if params["ret_typ"] == "mask":
        return [tuple(in_shapes[0])]
    out = (*shape[:axis], k, *shape[axis + 1:])
    return [out, out] if params["ret_typ"] == "both" else [out]


def _topk_kernel(xp, inputs, outputs, params):
    data = inputs[0]
    axis = _topk_axis(params, data.ndim)
    if axis is None:
        data, axis = data.reshape(-1), 0
    order = _order(xp, data, axis, params["is_ascend"])
    index = [slice(None)] * data.ndim
    index[axis] = slice(0, params["k"])
    top = order[tuple(index)]
    kind = params["ret_typ"]
    if kind == "mask":
        mask = xp.zeros(data.shape, dtype=outputs[0].dtype)
        xp.put_along_axis(mask, top, 1, axis=axis)
        write(xp, outputs[0], mask.reshape(outputs[0].shape))
    elif kind == "indices":
        write(xp, outputs[0], top)
    elif kind == "value":
        write(xp, outputs[0], xp.take_along_axis(data, top, axis=axis))
    else:
        write(xp, outputs[0], xp.take_along_axis(data, top, axis=axis))
        write(xp, outputs[1], top)


def _topk_dtype(params, dtypes):
    kind = params["ret_typ"]
    if kind == "indices":
        return [params["dtype"]]
    if kind == "both":
        return [dtypes[0], params["dtype"]]
    return [dtypes[0]]


def _topk_backward_kernel(xp, inputs, outputs, params):
    # the order is recomputed from the data (stable, so it is the forward's order)
    out_grad, data = inputs
    grad = outputs[0]
    axis = _topk_axis(params, data.ndim)
    flat = axis is None
    if flat:
        data, axis = data.reshape(-1), 0
    order = _order(xp, data, axis, params["is_ascend"])
    index = [slice(None)] * data.ndim
    index[axis] = slice(0, params["k"])
    top = order[tuple(index)]
    scattered = xp.zeros(data.shape, dtype=grad.dtype)
    xp.put_along_axis(scattered, top, out_grad.reshape(top.shape), axis=axis)
    write(xp, grad, scattered.reshape(grad.shape))


def _topk_gradient(F, params, inputs, outputs, out_grads):
    if params["ret_typ"] not in ("value", "both"):
        return [None]
    return [F("_backward_topk", out_grads[0], inputs[0], **params)]


define(OpDef(
    name="topk", infer_shape=_topk_shape, kernel=_topk_kernel, params=_TOPK_SCHEMA,
    num_outputs=lambda p: 2 if p["ret_typ"] == "both" else 1,
    output_names=lambda p: ("value", "indices") if p["ret_typ"] == "both" else ("output",),
    infer_dtype=_topk_dtype, gradient=_topk_gradient,
    doc="The k largest (or smallest) elements along an axis: indices, values, both, or a mask.",
))
define(OpDef(
    name="_backward_topk", infer_shape=lambda p, s: [tuple(s[1])], kernel=_topk_backward_kernel,
    params=_TOPK_SCHEMA, num_inputs=2, input_names=("out_grad", "data"), infer_dtype=lambda p, d: [d[1]],
    doc="Backward of topk's values: each gradient goes back to the element it came from.",
))

_SORT_SCHEMA = schema([Param("axis", "int", -1, optional=True), Param("is_ascend", "bool", True)])


def _sort_prepare(xp, data, params):
    if params["axis"] is None:
        return data.reshape(-1), 0
    return data, normalize_axis(params["axis"], data.ndim, "sort")


def _sort_shape(params, in_shapes):
    shape = tuple(in_shapes[0])
    if params["axis"] is None:
        return [(int(__import__("math").prod(shape)),)]
    normalize_axis(params["axis"], len(shape), "sort")
    return [shape]


def _sort_kernel(xp, inputs, outputs, params):
    data, axis = _sort_prepare(xp, inputs[0], params)
    order = _order(xp, data, axis, params["is_ascend"])
    write(xp, outputs[0], xp.take_along_axis(data, order, axis=axis))


def _argsort_kernel(xp, inputs, outputs, params):
    data, axis = _sort_prepare(xp, inputs[0], params)
    write(xp, outputs[0], _order(xp, data, axis, params["is_ascend"]))


def _sort_backward_kernel(xp, inputs, outputs, params):
    out_grad, data = inputs
    flat_data, axis = _sort_prepare(xp, data, params)
    order = _order(xp, flat_data, axis, params["is_ascend"])
    scattered = xp.zeros(flat_data.shape, dtype=outputs[0].dtype)
    xp.put_along_axis(scattered, order, out_grad.reshape(order.shape), axis=axis)
    write(xp, outputs[0], scattered.reshape(outputs[0].shape))


define(OpDef(name="sort", infer_shape=_sort_shape, kernel=_sort_kernel, params=_SORT_SCHEMA,
             gradient=lambda F, p, i, o, g: [F("_backward_sort", g[0], i[0], **p)],
             doc="Sorts along an axis (None: the flattened array)."))
define(OpDef(name="_backward_sort", infer_shape=lambda p, s: [tuple(s[1])], kernel=_sort_backward_kernel,
             params=_SORT_SCHEMA, num_inputs=2, input_names=("out_grad", "data"), infer_dtype=lambda p, d: [d[1]],
             doc="Backward of sort: each gradient goes back to the element it came from."))
define(OpDef(
    name="argsort", infer_shape=_sort_shape, kernel=_argsort_kernel,
    params=schema([*_SORT_SCHEMA, Param("dtype", "dtype", "float32")]),
    infer_dtype=lambda p, d: [p["dtype"]], gradient=no_gradient,
    doc="Indices that sort the array along an axis.",
))


# ---- gather_nd / scatter_nd ---------------------------------------------------------------

def _gather_shape(params, in_shapes):
    data, indices = tuple(in_shapes[0]), tuple(in_shapes[1])
    if not indices or indices[0] > len(data):
        raise ShapeError(f"gather_nd: indices of shape {indices} must have a first axis of at most "
                         f"data.ndim={len(data)} (one row per indexed axis)")
    return [indices[1:] + data[indices[0]:]]


def _gather_index(xp, data_ndim, indices):
    idx = indices.astype("int64")
    return tuple(idx[i] for i in range(idx.shape[0]))


def _gather_kernel(xp, inputs, outputs, params):
    data, indices = inputs
    write(xp, outputs[0], data[_gather_index(xp, data.ndim, indices)])


def _gather_backward_kernel(xp, inputs, outputs, params):
    out_grad, data, indices = inputs
    grad = outputs[0]
    grad[...] = 0
    xp.add.at(grad, _gather_index(xp, data.ndim, indices), out_grad)


define(OpDef(
    name="gather_nd", infer_shape=_gather_shape, kernel=_gather_kernel, num_inputs=2,
    input_names=("data", "indices"), infer_dtype=lambda p, d: [d[0]],
    gradient=lambda F, p, i, o, g: [F("_backward_gather_nd", g[0], i[0], i[1]), None],
    backward_ignores=frozenset({0}),
    doc="Gathers elements or slices: out[y...] = data[indices[0, y...], indices[1, y...], ...].",
))
define(OpDef(name="_backward_gather_nd", infer_shape=lambda p, s: [tuple(s[1])], kernel=_gather_backward_kernel,
             num_inputs=3, input_names=("out_grad", "data", "indices"), infer_dtype=lambda p, d: [d[0]],
             doc="Backward of gather_nd: gradients added at the gathered positions (data gives the shape)."))
