"""Shape manipulation: reshape family, transpose, concat/stack/split, tile, repeat, flip, slice."""

from __future__ import annotations

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import elementwise_shape, write
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import ALL_INPUTS, OpDef, define
from mxkit.ndarray.shapes import infer_reshape, normalize_axis, size_of


def _copy_reshaped(xp, inputs, outputs, params):
    write(xp, outputs[0], inputs[0].reshape(outputs[0].shape))


def _reshape_like_gradient(F, params, inputs, outputs, out_grads):
    return [F("reshape_like", out_grads[0], inputs[0])] + [None] * (len(inputs) - 1)


_RESHAPE_KW = dict(kernel=_copy_reshaped, inplace=((0, 0, True),), gradient=_reshape_like_gradient,
                   backward_ignores=frozenset({0}))

def legacy_target_shape(src: tuple, target: tuple, keep_highest: bool) -> tuple:
    """MXNet's deprecated ``Reshape(target_shape=...)``: one 0 is inferred from the size, and
    ``keep_highest`` keeps the input's first axis in place of the target's."""
    out = list(target)
    if keep_highest and out:
        out[0] = src[0]
    start = 1 if keep_highest else 0
    unknown = [i for i in range(start, len(out)) if out[i] == 0]
    if len(unknown) == 1:
        rest = size_of(tuple(out[:unknown[0]] + out[unknown[0] + 1:]))
        out[unknown[0]] = size_of(src) // rest if rest else 0
    if size_of(tuple(out)) != size_of(src) or len(unknown) > 1:
        raise ShapeError(f"Reshape: target_shape={target} (keep_highest={keep_highest}) does not fit input "
                         f"shape {src} of size {size_of(src)}; one 0 at most is inferred, and the sizes must agree "
                         f"(or use shape= with MXNet's codes)")
    return tuple(out)


def _reshape_shape(params: dict, in_shapes: list) -> list:
    src = tuple(in_shapes[0])
    if not params["shape"] and params["target_shape"]:
        return [legacy_target_shape(src, tuple(params["target_shape"]), params["keep_highest"])]
    return [infer_reshape(src, params["shape"], params["reverse"], "Reshape")]


define(OpDef(
    name="Reshape", aliases=("reshape",),
    infer_shape=_reshape_shape,
    params=schema([Param("shape", "shape", (), doc="Target shape with MXNet's codes 0, -1, -2, -3, -4."),
                   Param("reverse", "bool", False, doc="Match the special codes from the right."),
                   Param("target_shape", "shape", (),
                         doc="(Deprecated in MXNet: use shape.) Target shape; one 0 is inferred from the size."),
                   Param("keep_highest", "bool", False,
                         doc="(Deprecated in MXNet.) With target_shape: keep the input's first axis.")]),
    doc="Reshapes the input (MXNet's special codes: 0 copy, -1 infer, -2 rest, -3 merge two, -4 split).",
    **_RESHAPE_KW,
))


def _axis_range(begin, end, ndim, which):
    """MXNet's [begin, end) of reshape_like (None: the whole range; negative: from the end)."""
    b = 0 if begin is None else (begin + ndim if begin < 0 else begin)
    e = ndim if end is None else (end + ndim if end < 0 else end)
    if not 0 <= b <= e <= ndim:
        raise ShapeError(f"reshape_like: {which}_begin={begin}, {which}_end={end} is not a range of {ndim} axes")
    return b, e


def _reshape_like_shape(params, in_shapes):
    src, like = tuple(in_shapes[0]), tuple(in_shapes[1])
    lb, le = _axis_range(params.get("lhs_begin"), params.get("lhs_end"), len(src), "lhs")
    rb, re_ = _axis_range(params.get("rhs_begin"), params.get("rhs_end"), len(like), "rhs")
    out = src[:lb] + like[rb:re_] + src[le:]
    if size_of(src) != size_of(out):
        raise ShapeError(f"reshape_like: axes [{lb}, {le}) of {src} cannot take the shape {like[rb:re_]} of axes "
                         f"[{rb}, {re_}) of {like}: {size_of(src)} elements vs {size_of(out)}")
    return [out]


_RESHAPE_LIKE_SCHEMA = schema([Param(n, "int", None, optional=True, doc=d) for n, d in (
    ("lhs_begin", "First axis of lhs to replace (0 when None)."),
    ("lhs_end", "End of the lhs axes to replace (lhs.ndim when None)."),
    ("rhs_begin", "First axis of rhs whose sizes are used (0 when None)."),
    ("rhs_end", "End of the rhs axes used (rhs.ndim when None)."))])


define(OpDef(
    name="reshape_like", infer_shape=_reshape_like_shape, num_inputs=2, input_names=("lhs", "rhs"),
    params=_RESHAPE_LIKE_SCHEMA,
    infer_dtype=lambda p, d: [d[0]], kernel=_copy_reshaped, inplace=((0, 0, True),),
    gradient=lambda F, p, i, o, g: [F("reshape_like", g[0], i[0]), None], backward_ignores=frozenset({0, 1}),
    reads_shape_only=frozenset({1}),
    doc="Reshapes ``lhs`` to the shape of ``rhs``, or axes [lhs_begin, lhs_end) of lhs to the sizes of axes "
        "[rhs_begin, rhs_end) of rhs (same number of elements).",
))

define(OpDef(
    name="Flatten", aliases=("flatten",),
    infer_shape=lambda p, s: [(s[0][0], size_of(s[0][1:])) if len(s[0]) else (1, 1)],
    doc="Collapses every axis but the first: (N, a, b, ...) -> (N, a*b*...).", **_RESHAPE_KW,
))


def _expand_dims_shape(params, in_shapes):
    shape = tuple(in_shapes[0])
    axis = normalize_axis(params["axis"], len(shape) + 1, "expand_dims")
    return [(*shape[:axis], 1, *shape[axis:])]


define(OpDef(
    name="expand_dims", infer_shape=_expand_dims_shape,
    params=schema([Param("axis", "int", doc="Where the new axis goes (may be negative).")]),
    doc="Inserts an axis of size 1.", **_RESHAPE_KW,
))


def _squeeze_shape(params, in_shapes):
    shape = tuple(in_shapes[0])
    axis = params["axis"]
    if axis is None:
        out = tuple(d for d in shape if d != 1)
    else:
        axes = {normalize_axis(a, len(shape), "squeeze") for a in axis}
        for a in axes:
            if shape[a] != 1:
                raise ShapeError(f"squeeze: axis {a} of {shape} has size {shape[a]}; only size-1 axes can be removed")
        out = tuple(d for i, d in enumerate(shape) if i not in axes)
    return [out if out or not shape else (1,)]


define(OpDef(
    name="squeeze", infer_shape=_squeeze_shape,
    params=schema([Param("axis", "shape", None, optional=True, doc="Axes to remove; None: all of size 1.")]),
    doc="Removes axes of size 1.", **_RESHAPE_KW,
))


def _transpose_axes(params, ndim):
    axes = params["axes"]
    if not axes:
        return tuple(reversed(range(ndim)))
    if sorted(normalize_axis(a, ndim, "transpose") for a in axes) != list(range(ndim)):
        raise ShapeError(f"transpose: axes {axes} is not a permutation of the {ndim} axes")
    return tuple(normalize_axis(a, ndim, "transpose") for a in axes)


def _transpose_gradient(F, params, inputs, outputs, out_grads):
    axes = _transpose_axes(params, len(inputs[0].shape))
    inverse = [0] * len(axes)
    for i, a in enumerate(axes):
        inverse[a] = i
    return [F("transpose", out_grads[0], axes=tuple(inverse))]


define(OpDef(
    name="transpose",
    infer_shape=lambda p, s: [tuple(s[0][a] for a in _transpose_axes(p, len(s[0])))],
    kernel=lambda xp, i, o, p: write(xp, o[0], xp.transpose(i[0], _transpose_axes(p, i[0].ndim))),
    params=schema([Param("axes", "shape", (), doc="The permutation; () reverses the axes.")]),
    gradient=_transpose_gradient, backward_ignores=frozenset({0}), doc="Permutes the axes.",
))


def _swap_shape(params, in_shapes):
    shape = list(in_shapes[0])
    a = normalize_axis(params["dim1"], len(shape), "SwapAxis")
    b = normalize_axis(params["dim2"], len(shape), "SwapAxis")
    shape[a], shape[b] = shape[b], shape[a]
    return [tuple(shape)]


define(OpDef(
    name="SwapAxis", aliases=("swapaxes",), infer_shape=_swap_shape,
    kernel=lambda xp, i, o, p: write(xp, o[0], xp.swapaxes(i[0], p["dim1"], p["dim2"])),
    params=schema([Param("dim1", "int", 0), Param("dim2", "int", 0)]),
    gradient=lambda F, p, i, o, g: [F("SwapAxis", g[0], dim1=p["dim1"], dim2=p["dim2"])],
    backward_ignores=frozenset({0}), doc="Swaps two axes.",
))


# ---- joining and splitting -------------------------------------------------------------

def _concat_shape(params, in_shapes):
    first = tuple(in_shapes[0])
    axis = normalize_axis(params["dim"], len(first), "Concat")
    total = 0
    for shape in in_shapes:
        shape = tuple(shape)
        if len(shape) != len(first) or any(a != b for i, (a, b) in enumerate(zip(shape, first)) if i != axis):
            raise ShapeError(f"Concat: inputs must agree on every axis but dim={params['dim']}, got "
                             f"{', '.join(str(tuple(s)) for s in in_shapes)}")
        total += shape[axis]
    return [(*first[:axis], total, *first[axis + 1:])]


def _concat_backward_kernel(xp, inputs, outputs, params):
    out_grad = inputs[0]
    axis = normalize_axis(params["dim"], out_grad.ndim, "Concat")
    start = 0
    for out in outputs:
        size = out.shape[axis]
        index = [slice(None)] * out_grad.ndim
        index[axis] = slice(start, start + size)
        write(xp, out, out_grad[tuple(index)])
        start += size


def _add_n_kernel(xp, inputs, outputs, params):
    total = inputs[0].copy()
    for array in inputs[1:]:
        total += array
    write(xp, outputs[0], total)


define(OpDef(
    name="add_n", aliases=("ElementWiseSum",), infer_shape=elementwise_shape("add_n"),
    params=schema([Param("num_args", "int", doc="Number of inputs.")]), kernel=_add_n_kernel,
    num_inputs=lambda p: p["num_args"], input_names=lambda p: tuple(f"arg{i}" for i in range(p["num_args"])),
    # every input's gradient is the output's; copies, so that no two inputs share one gradient array
    gradient=lambda F, p, i, o, g: [g[0] if k == 0 else F("identity", g[0]) for k in range(len(i))],
    backward_ignores=ALL_INPUTS, doc="Sums its inputs elementwise (all of one shape).",
))


_CONCAT_SCHEMA = schema([Param("num_args", "int", doc="Number of inputs."),
                         Param("dim", "int", 1, doc="The axis to join along.")])

define(OpDef(
    name="Concat", aliases=("concat",), infer_shape=_concat_shape, params=_CONCAT_SCHEMA,
    kernel=lambda xp, i, o, p: write(xp, o[0], xp.concatenate(list(i), axis=p["dim"])),
    num_inputs=lambda p: p["num_args"], input_names=lambda p: tuple(f"arg{i}" for i in range(p["num_args"])),
    gradient=lambda F, p, i, o, g: list(_as_list(F("_backward_Concat", g[0], *i, **_public(p)))),
    backward_ignores=ALL_INPUTS, doc="Joins arrays along an axis.",
))
define(OpDef(
    name="_backward_Concat", infer_shape=lambda p, s: [tuple(x) for x in s[1:]], params=_CONCAT_SCHEMA,
    kernel=_concat_backward_kernel, num_inputs=lambda p: p["num_args"] + 1,
    num_outputs=lambda p: p["num_args"], infer_dtype=lambda p, d: [d[0]] * p["num_args"],
    doc="Backward of Concat: the gradient cut into the inputs' pieces (inputs give only shapes).",
))


def _as_list(value):
    # type(), not isinstance: a symbolic F returns a graph Entry, which is a NamedTuple
    return value if type(value) in (list, tuple) else [value]


def _public(params):
    return {k: v for k, v in params.items() if not k.startswith("_")}


def _stack_shape(params, in_shapes):
    first = tuple(in_shapes[0])
    for shape in in_shapes:
        if tuple(shape) != first:
            raise ShapeError(f"stack: every input must have the same shape, got "
                             f"{', '.join(str(tuple(s)) for s in in_shapes)}")
    axis = normalize_axis(params["axis"], len(first) + 1, "stack")
    return [(*first[:axis], len(in_shapes), *first[axis:])]


define(OpDef(
    name="stack", infer_shape=_stack_shape,
    params=schema([Param("axis", "int", 0), Param("num_args", "int")]),
    kernel=lambda xp, i, o, p: write(xp, o[0], xp.stack(list(i), axis=p["axis"])),
    num_inputs=lambda p: p["num_args"], input_names=lambda p: tuple(f"arg{i}" for i in range(p["num_args"])),
    gradient=lambda F, p, i, o, g: list(_as_list(F("split", g[0], axis=p["axis"], num_outputs=p["num_args"],
                                                   squeeze_axis=True))),
    backward_ignores=ALL_INPUTS, doc="Joins arrays along a new axis.",
))


def _split_shape(params, in_shapes):
    shape = tuple(in_shapes[0])
    axis = normalize_axis(params["axis"], len(shape), "split")
    count = params["num_outputs"]
    if count < 1 or shape[axis] % count:
        raise ShapeError(f"split: axis {params['axis']} of {shape} (size {shape[axis]}) cannot be split "
                         f"into num_outputs={count} equal parts")
    part = (*shape[:axis], shape[axis] // count, *shape[axis + 1:])
    if params["squeeze_axis"]:
        if part[axis] != 1:
            raise ShapeError(f"split: squeeze_axis=True needs parts of size 1, got {part[axis]}")
        part = part[:axis] + part[axis + 1:]
    return [part] * count


def _split_kernel(xp, inputs, outputs, params):
    parts = xp.split(inputs[0], params["num_outputs"], axis=params["axis"])
    for out, part in zip(outputs, parts):
        write(xp, out, part.reshape(out.shape))


def _split_gradient(F, params, inputs, outputs, out_grads):
    if params["squeeze_axis"]:
        return [F("stack", *out_grads, axis=params["axis"], num_args=len(out_grads))]
    return [F("Concat", *out_grads, dim=params["axis"], num_args=len(out_grads))]


define(OpDef(
    name="SliceChannel", aliases=("split",), infer_shape=_split_shape, kernel=_split_kernel,
    params=schema([Param("num_outputs", "int"), Param("axis", "int", 1), Param("squeeze_axis", "bool", False)]),
    num_outputs=lambda p: p["num_outputs"], gradient=_split_gradient, backward_ignores=frozenset({0}),
    infer_dtype=lambda p, d: [d[0]] * p["num_outputs"],
    doc="Splits an array into equal parts along an axis.",
))


# ---- tile, repeat, flip ------------------------------------------------------------------

def _tile_reps(params, ndim):
    reps = tuple(params["reps"])
    if any(r < 1 for r in reps):
        raise ShapeError(f"tile: reps={reps} must all be positive (the repetitions per axis)")
    ndim_out = max(ndim, len(reps))
    return (1,) * (ndim_out - len(reps)) + reps, ndim_out


def _tile_shape(params, in_shapes):
    shape = tuple(in_shapes[0])
    reps, ndim_out = _tile_reps(params, len(shape))
    shape = (1,) * (ndim_out - len(shape)) + shape
    return [tuple(d * r for d, r in zip(shape, reps))]


def _tile_backward_kernel(xp, inputs, outputs, params):
    out_grad, x = inputs
    reps, ndim_out = _tile_reps(params, x.ndim)
    shape = (1,) * (ndim_out - x.ndim) + x.shape
    interleaved = []
    for r, d in zip(reps, shape):
        interleaved += [r, d]
    summed = out_grad.reshape(interleaved).sum(axis=tuple(range(0, 2 * ndim_out, 2)))
    write(xp, outputs[0], summed.reshape(x.shape))


_TILE_SCHEMA = schema([Param("reps", "shape", doc="Repetitions per axis.")])
define(OpDef(
    name="tile", infer_shape=_tile_shape, params=_TILE_SCHEMA,
    kernel=lambda xp, i, o, p: write(xp, o[0], xp.tile(i[0], p["reps"])),
    gradient=lambda F, p, i, o, g: [F("_backward_tile", g[0], i[0], reps=p["reps"])],
    doc="Repeats the whole array along each axis.",
))
define(OpDef(name="_backward_tile", infer_shape=lambda p, s: [tuple(s[1])], params=_TILE_SCHEMA,
             kernel=_tile_backward_kernel, num_inputs=2, input_names=("out_grad", "data"),
             infer_dtype=lambda p, d: [d[0]], doc="Backward of tile: the sum over the copies."))


def _repeat_shape(params, in_shapes):
    shape = tuple(in_shapes[0])
    repeats, axis = params["repeats"], params["axis"]
    if repeats < 0:
        raise ShapeError(f"repeat: repeats must be >= 0, got {repeats}")
    if axis is None:
        return [(size_of(shape) * repeats,)]
    axis = normalize_axis(axis, len(shape), "repeat")
    return [(*shape[:axis], shape[axis] * repeats, *shape[axis + 1:])]


def _repeat_backward_kernel(xp, inputs, outputs, params):
    out_grad, x = inputs
    repeats, axis = params["repeats"], params["axis"]
    if axis is None:
        summed = out_grad.reshape(-1, repeats).sum(axis=1)
    else:
        axis = normalize_axis(axis, x.ndim, "repeat")
        split = (*x.shape[:axis], x.shape[axis], repeats, *x.shape[axis + 1:])
        summed = out_grad.reshape(split).sum(axis=axis + 1)
    write(xp, outputs[0], summed.reshape(x.shape))


_REPEAT_SCHEMA = schema([Param("repeats", "int"), Param("axis", "int", None, optional=True)])
define(OpDef(
    name="repeat", infer_shape=_repeat_shape, params=_REPEAT_SCHEMA,
    kernel=lambda xp, i, o, p: write(xp, o[0], xp.repeat(i[0], p["repeats"], axis=p["axis"])),
    gradient=lambda F, p, i, o, g: [F("_backward_repeat", g[0], i[0], **_public(p))],
    doc="Repeats each element (along an axis, or of the flattened array).",
))
define(OpDef(name="_backward_repeat", infer_shape=lambda p, s: [tuple(s[1])], params=_REPEAT_SCHEMA,
             kernel=_repeat_backward_kernel, num_inputs=2, input_names=("out_grad", "data"),
             infer_dtype=lambda p, d: [d[0]], doc="Backward of repeat: the sum over the repeats."))


def _flip_axes(params, ndim):
    return tuple(normalize_axis(a, ndim, "reverse") for a in params["axis"])


define(OpDef(
    name="reverse", aliases=("flip",), infer_shape=lambda p, s: [tuple(s[0])],
    kernel=lambda xp, i, o, p: write(xp, o[0], xp.flip(i[0], _flip_axes(p, i[0].ndim))),
    params=schema([Param("axis", "shape", doc="The axes to reverse.")]),
    gradient=lambda F, p, i, o, g: [F("reverse", g[0], axis=p["axis"])], backward_ignores=frozenset({0}),
    doc="Reverses the order of elements along the given axes.",
))


# ---- slicing -------------------------------------------------------------------------------

def _slice_tuple(params, shape):
    begin, end = params["begin"], params["end"]
    step = params["step"] or (None,) * len(begin)
    if len(end) != len(begin) or len(step) != len(begin) or len(begin) > len(shape):
        raise ShapeError(f"slice: begin {begin}, end {end} and step {step} must have one entry per "
                         f"sliced axis (at most {len(shape)} for shape {tuple(shape)})")
    index = []
    for axis, (b, e, s) in enumerate(zip(begin, end, step)):
        if s == 0:
            raise ShapeError(f"slice: step must not be 0 (axis {axis})")
        index.append(slice(b, e, s))
    return tuple(index)


def _slice_shape(params, in_shapes):
    shape = tuple(in_shapes[0])
    index = _slice_tuple(params, shape)
    out = [len(range(*sl.indices(d))) for sl, d in zip(index, shape)]
    return [tuple(out) + shape[len(index):]]


def _backward_slice_kernel(xp, inputs, outputs, params):
    out_grad = inputs[0]
    grad = outputs[0]
    grad[...] = 0
    grad[_slice_tuple(params, grad.shape)] = out_grad


_SLICE_SCHEMA = schema([Param("begin", "ints_or_none"), Param("end", "ints_or_none"),
                        Param("step", "ints_or_none", ())])
define(OpDef(
    name="slice", aliases=("crop",), infer_shape=_slice_shape, params=_SLICE_SCHEMA,
    kernel=lambda xp, i, o, p: write(xp, o[0], i[0][_slice_tuple(p, i[0].shape)]),
    gradient=lambda F, p, i, o, g: [F("_backward_slice", g[0], i[0], **_public(p))],
    backward_ignores=frozenset({0}), doc="A copy of a box of the input: begin, end, step per axis.",
))
define(OpDef(name="_backward_slice", infer_shape=lambda p, s: [tuple(s[1])], params=_SLICE_SCHEMA,
             kernel=_backward_slice_kernel, num_inputs=2, input_names=("out_grad", "data"),
             infer_dtype=lambda p, d: [d[0]], doc="Backward of slice (data gives the shape)."))


def _slice_axis_index(params, shape):
    axis = normalize_axis(params["axis"], len(shape), "slice_axis")
    index = [slice(None)] * len(shape)
    index[axis] = slice(params["begin"], params["end"])
    return tuple(index)


def _slice_axis_shape(params, in_shapes):
    shape = tuple(in_shapes[0])
    index = _slice_axis_index(params, shape)
    return [tuple(len(range(*sl.indices(d))) for sl, d in zip(index, shape))]


def _backward_slice_axis_kernel(xp, inputs, outputs, params):
    grad = outputs[0]
    grad[...] = 0
    grad[_slice_axis_index(params, grad.shape)] = inputs[0]


_SLICE_AXIS_SCHEMA = schema([Param("axis", "int"), Param("begin", "int"),
                             Param("end", "int", None, optional=True)])
define(OpDef(
    name="slice_axis", infer_shape=_slice_axis_shape, params=_SLICE_AXIS_SCHEMA,
    kernel=lambda xp, i, o, p: write(xp, o[0], i[0][_slice_axis_index(p, i[0].shape)]),
    gradient=lambda F, p, i, o, g: [F("_backward_slice_axis", g[0], i[0], **_public(p))],
    backward_ignores=frozenset({0}), doc="A copy of a range of one axis.",
))
define(OpDef(name="_backward_slice_axis", infer_shape=lambda p, s: [tuple(s[1])], params=_SLICE_AXIS_SCHEMA,
             kernel=_backward_slice_axis_kernel, num_inputs=2, input_names=("out_grad", "data"),
             infer_dtype=lambda p, d: [d[0]], doc="Backward of slice_axis."))
