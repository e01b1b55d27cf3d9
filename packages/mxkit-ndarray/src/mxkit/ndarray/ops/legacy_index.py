"""MXNet's older indexing operators and element predicates: ``choose_element_0index``,
``fill_element_0index``, ``onehot_encode``, ``_slice_assign`` (alias ``_crop_assign``),
``_slice_assign_scalar``, ``_linspace`` and ``contrib.isinf``/``isfinite``/``isnan``."""

from __future__ import annotations

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import first_shape, no_gradient, write
from mxkit.ndarray.ops.matrix import _SLICE_SCHEMA, _slice_shape, _slice_tuple
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import ALL_INPUTS, OpDef, define


def _rows_and_picks(name, lhs, index):
    if len(lhs) != 2 or tuple(index) != (lhs[0],):
        raise ShapeError(f"{name}: lhs must be 2-D (N, M) and the index (N,), got {tuple(lhs)} and {tuple(index)}")


def _choose_shape(params, in_shapes):
    _rows_and_picks("choose_element_0index", in_shapes[0], in_shapes[1])
    return [(in_shapes[0][0],)]


def _picks(xp, lhs, index):
    return xp.arange(lhs.shape[0]), xp.clip(index.astype("int64"), 0, lhs.shape[1] - 1)


def _choose_kernel(xp, inputs, outputs, params):
    lhs, index = inputs
    write(xp, outputs[0], lhs[_picks(xp, lhs, index)])


def _choose_backward_kernel(xp, inputs, outputs, params):
    out_grad, lhs, index = inputs
    outputs[0][...] = 0
    outputs[0][_picks(xp, lhs, index)] = out_grad


define(OpDef(
    name="choose_element_0index", infer_shape=_choose_shape, kernel=_choose_kernel, num_inputs=2,
    input_names=("lhs", "rhs"),
    gradient=lambda F, p, i, o, g: [F("_backward_choose_element_0index", g[0], i[0], i[1]), None],
    doc="lhs[i, rhs[i]] for each row i (the older name of pick along axis 1).",
))
define(OpDef(
    name="_backward_choose_element_0index", infer_shape=lambda p, s: [tuple(s[1])],
    kernel=_choose_backward_kernel, num_inputs=3, input_names=("out_grad", "lhs", "rhs"),
    infer_dtype=lambda p, d: [d[1]], reads_shape_only=frozenset({1}), doc="Backward of choose_element_0index.",
))


def _fill_shape(params, in_shapes):
    _rows_and_picks("fill_element_0index", in_shapes[0], in_shapes[2])
    if tuple(in_shapes[1]) != (in_shapes[0][0],):
        raise ShapeError(f"fill_element_0index: mhs must be (N,) = ({in_shapes[0][0]},), got {tuple(in_shapes[1])}")
    return [tuple(in_shapes[0])]


def _fill_kernel(xp, inputs, outputs, params):
    lhs, values, index = inputs
    write(xp, outputs[0], lhs)
    outputs[0][_picks(xp, lhs, index)] = values


def _fill_backward_kernel(xp, inputs, outputs, params):
    out_grad, index = inputs
    picks = _picks(xp, out_grad, index)
    write(xp, outputs[0], out_grad)
    outputs[0][picks] = 0
    write(xp, outputs[1], out_grad[picks])


define(OpDef(
    name="fill_element_0index", infer_shape=_fill_shape, kernel=_fill_kernel, num_inputs=3,
    input_names=("lhs", "mhs", "rhs"), backward_ignores=frozenset({0, 1}),
    gradient=lambda F, p, i, o, g: [*F("_backward_fill_element_0index", g[0], i[2]), None],
    doc="A copy of lhs with lhs[i, rhs[i]] set to mhs[i] for each row i.",
))
define(OpDef(
    name="_backward_fill_element_0index", infer_shape=lambda p, s: [tuple(s[0]), (s[0][0],)],
    kernel=_fill_backward_kernel, num_inputs=2, input_names=("out_grad", "rhs"), num_outputs=2,
    output_names=("lhs_grad", "mhs_grad"), infer_dtype=lambda p, d: [d[0], d[0]],
    doc="Backward of fill_element_0index.",
))


def _onehot_shape(params, in_shapes):
    index, out = tuple(in_shapes[0]), tuple(in_shapes[1])
    if len(index) != 1 or len(out) != 2 or out[0] != index[0]:
        raise ShapeError(f"onehot_encode: the index must be (N,) and the output (N, depth), got {index} and {out}")
    return [out]


def _onehot_kernel(xp, inputs, outputs, params):
    index, like = inputs
    out = outputs[0]
    out[...] = 0
    out[xp.arange(like.shape[0]), xp.clip(index.astype("int64"), 0, like.shape[1] - 1)] = 1


define(OpDef(
    name="_onehot_encode", infer_shape=_onehot_shape, kernel=_onehot_kernel, num_inputs=2,
    input_names=("lhs", "rhs"), reads_shape_only=frozenset({1}), infer_dtype=lambda p, d: [d[1]],
    gradient=no_gradient, backward_ignores=ALL_INPUTS,
    doc="One-hot rows of the indices in lhs; rhs (usually the output array itself) gives (N, depth).",
))


# ---- slice assignment ------------------------------------------------------------------------

def _slice_assign_shape(params, in_shapes):
    lhs, rhs = tuple(in_shapes[0]), tuple(in_shapes[1])
    box = _slice_shape(params, [lhs])[0]
    if rhs != box:
        raise ShapeError(f"_slice_assign: rhs has shape {rhs}; the box begin={params['begin']}, end="
                         f"{params['end']} of lhs {lhs} has shape {box}")
    return [lhs]


def _slice_assign_kernel(xp, inputs, outputs, params):
    write(xp, outputs[0], inputs[0])
    outputs[0][_slice_tuple(params, inputs[0].shape)] = inputs[1]


def _slice_assign_backward_kernel(xp, inputs, outputs, params):
    box = _slice_tuple(params, inputs[0].shape)
    write(xp, outputs[0], inputs[0])
    outputs[0][box] = 0
    write(xp, outputs[1], inputs[0][box])


define(OpDef(
    name="_slice_assign", aliases=("_crop_assign",), infer_shape=_slice_assign_shape, kernel=_slice_assign_kernel,
    params=_SLICE_SCHEMA, num_inputs=2, input_names=("lhs", "rhs"), inplace=((0, 0, False),),
    backward_ignores=ALL_INPUTS, gradient=lambda F, p, i, o, g: list(F("_backward_slice_assign", g[0], **p)),
    doc="A copy of lhs with the box begin:end:step replaced by rhs.",
))
define(OpDef(
    name="_backward_slice_assign", params=_SLICE_SCHEMA, kernel=_slice_assign_backward_kernel,
    infer_shape=lambda p, s: [tuple(s[0]), _slice_shape(p, [tuple(s[0])])[0]], num_outputs=2,
    output_names=("lhs_grad", "rhs_grad"), infer_dtype=lambda p, d: [d[0], d[0]],
    doc="Backward of _slice_assign: the gradient outside the box, and inside it.",
))

_SLICE_SCALAR_SCHEMA = schema([Param("scalar", "float", 0.0), *_SLICE_SCHEMA])


def _slice_assign_scalar_kernel(xp, inputs, outputs, params):
    write(xp, outputs[0], inputs[0])
    outputs[0][_slice_tuple(params, inputs[0].shape)] = params["scalar"]


def _slice_assign_scalar_backward(xp, inputs, outputs, params):
    write(xp, outputs[0], inputs[0])
    outputs[0][_slice_tuple(params, inputs[0].shape)] = 0


define(OpDef(
    name="_slice_assign_scalar", aliases=("_crop_assign_scalar",), infer_shape=first_shape,
    kernel=_slice_assign_scalar_kernel, params=_SLICE_SCALAR_SCHEMA, inplace=((0, 0, False),),
    backward_ignores=ALL_INPUTS, gradient=lambda F, p, i, o, g: [F("_backward_slice_assign_scalar", g[0], **p)],
    doc="A copy of the input with the box begin:end:step set to scalar.",
))
define(OpDef(
    name="_backward_slice_assign_scalar", params=_SLICE_SCALAR_SCHEMA, kernel=_slice_assign_scalar_backward,
    infer_shape=first_shape, doc="Backward of _slice_assign_scalar: the gradient outside the box.",
))


# ---- linspace ----------------------------------------------------------------------------------

def _linspace_shape(params, in_shapes):
    if params["num"] < 0:
        raise ShapeError(f"linspace: num={params['num']} must not be negative")
    return [(params["num"],)]


def _linspace_kernel(xp, inputs, outputs, params):
    values = xp.linspace(params["start"], params["stop"], params["num"], endpoint=params["endpoint"])
    write(xp, outputs[0], values)


define(OpDef(
    name="_linspace", aliases=("linspace",), infer_shape=_linspace_shape, kernel=_linspace_kernel, num_inputs=0,
    input_names=(),
    params=schema([Param("start", "float"), Param("stop", "float"), Param("num", "int"),
                   Param("endpoint", "bool", True), Param("dtype", "dtype", "float32")]),
    infer_dtype=lambda p, d: [p["dtype"]], doc="num evenly spaced values from start to stop (numpy.linspace).",
))


# ---- isinf / isfinite / isnan ------------------------------------------------------------------

for _name, _test in (("isinf", lambda xp, x: xp.isinf(x)), ("isfinite", lambda xp, x: xp.isfinite(x)),
                     ("isnan", lambda xp, x: xp.isnan(x))):
    define(OpDef(
        name=f"_contrib_{_name}", infer_shape=first_shape,
        kernel=(lambda t: lambda xp, i, o, p: write(xp, o[0], t(xp, i[0])))(_test),
        gradient=no_gradient, backward_ignores=ALL_INPUTS,
        doc=f"1 where numpy.{_name} holds, else 0 (in the input's dtype).",
    ))
