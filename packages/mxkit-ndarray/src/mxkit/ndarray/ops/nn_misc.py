"""``Dropout``, ``BlockGrad``, ``Pad`` and ``SequenceMask``, with their backward operators."""

from __future__ import annotations

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import elementwise_shape, write
from mxkit.ndarray.ops.nn_common import as_list, fmt, is_train, public
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define
from mxkit.ndarray.shapes import normalize_axis

# ---- Dropout ---------------------------------------------------------------------------------

_DROPOUT_SCHEMA = schema([
    Param("p", "float", 0.5, doc="Fraction of the input that is dropped."),
    Param("mode", "str", "training", choices=("always", "training"),
          doc="Drop only in training mode, or always."),
    Param("axes", "shape", (), doc="Axes along which one mask value is shared (variational dropout)."),
    Param("cudnn_off", "bool", False, optional=True, doc="Ignored on CPU."),
])


def _dropout_shape(params: dict, in_shapes: list) -> list:
    p = params["p"]
    if not 0 <= p <= 1:
        raise ShapeError(f"Dropout: p={p} must be in [0, 1]: the fraction of inputs dropped")
    data = tuple(in_shapes[0])
    for axis in params["axes"]:
        normalize_axis(axis, len(data), "Dropout")
    return [data]


def _dropout_active(params: dict) -> bool:
    return params["p"] > 0 and (params["mode"] == "always" or is_train(params))


def _dropout_kernel(xp, inputs, outputs, params):
    x = inputs[0]
    if not _dropout_active(params):
        write(xp, outputs[0], x)
        return
    shared = {normalize_axis(a, x.ndim, "Dropout") for a in params["axes"]}
    mask_shape = tuple(1 if i in shared else d for i, d in enumerate(x.shape))
    keep = 1 - params["p"]
    if keep <= 0:  # p=1 (MXNet's range includes it): every input is dropped
        write(xp, outputs[0], xp.zeros_like(x))
        return
    draws = xp.asarray(params["_rng"].random(mask_shape))
    mask = (draws < keep).astype(x.dtype) * x.dtype.type(1 / keep)
    write(xp, outputs[0], x * mask)


def _dropout_backward_kernel(xp, inputs, outputs, params):
    out_grad, data, output = inputs
    # The gradient reads from the arrays whether the forward dropped (a dropping forward zeroes or
    # rescales every non-zero input), so it is right whichever training flag the caller kept.
    # A cell whose input was exactly 0 counts as dropped: its true mask is not recoverable, and
    # only matters where the incoming value was 0 already.
    if params["p"] >= 1 and _dropout_active(params):  # p=1: nothing kept, nothing flows back
        write(xp, outputs[0], xp.zeros_like(out_grad))
        return
    dropped = xp.any(output != data)
    if params["p"] == 1:
        write(xp, outputs[0], xp.where(dropped, 0, out_grad))
        return
    kept = xp.where(output != 0, out_grad / (1 - params["p"]), 0)
    write(xp, outputs[0], xp.where(dropped, kept, out_grad))


def _dropout_gradient(F, params, inputs, outputs, out_grads):
    return [F("_backward_Dropout", out_grads[0], inputs[0], outputs[0], **public(params))]


define(OpDef(
    name="Dropout", infer_shape=_dropout_shape, kernel=_dropout_kernel, params=_DROPOUT_SCHEMA,
    gradient=_dropout_gradient, needs_rng=True,
    doc="Zeroes each input with probability p and scales the rest by 1 / (1 - p) (in training mode).",
))
define(OpDef(
    name="_backward_Dropout", params=_DROPOUT_SCHEMA, kernel=_dropout_backward_kernel,
    infer_shape=lambda p, s: [tuple(s[0])], num_inputs=3, input_names=("head_grad", "data", "output"),
    inplace=((0, 0, False),), doc="Backward of Dropout: the gradient through the kept cells, scaled.",
))

# ---- BlockGrad -------------------------------------------------------------------------------

define(OpDef(
    name="BlockGrad", aliases=("stop_gradient",), infer_shape=lambda p, s: [tuple(s[0])],
    kernel=lambda xp, i, o, p: write(xp, o[0], i[0]), inplace=((0, 0, True),),
    gradient=lambda F, p, i, o, g: [None], backward_ignores=frozenset({0}),
    doc="Passes the input through and stops the gradient: its input gets zero gradient.",
))

# The symbol front end's shape constraint: the value of lhs with the shape (and dtype) of rhs,
# so that shape inference can reach lhs from rhs (MXNet's _identity_with_attr_like_rhs)
define(OpDef(
    name="_identity_with_attr_like_rhs", infer_shape=elementwise_shape("_identity_with_attr_like_rhs"),
    kernel=lambda xp, i, o, p: write(xp, o[0], i[0]), num_inputs=2, input_names=("lhs", "rhs"),
    inplace=((0, 0, True),), gradient=lambda F, p, i, o, g: [g[0], None], backward_ignores=frozenset({0, 1}),
    reads_shape_only=frozenset({1}),
    doc="The value of lhs, constrained to the shape of rhs (shape inference flows between them).",
))

# ---- Pad -------------------------------------------------------------------------------------

_PAD_SCHEMA = schema([
    Param("mode", "str", "constant", choices=("constant", "edge", "reflect"), doc="How the border is filled."),
    Param("pad_width", "shape", doc="(before, after) per axis, flattened: 2 * ndim values, 0 for N and C."),
    Param("constant_value", "float", 0.0, doc="The fill value of constant mode."),
])


def _pad_pairs(params: dict, data) -> list[tuple[int, int]]:
    width = tuple(params["pad_width"])
    ndim = len(data)
    if ndim not in (4, 5):
        raise ShapeError(f"Pad: data shape {fmt(data)} must have 4 or 5 axes (N, C and 2 or 3 spatial)")
    if len(width) != 2 * ndim:
        raise ShapeError(f"Pad: pad_width={width} has {len(width)} values; data shape {fmt(data)} needs "
                         f"{2 * ndim} (before and after per axis)")
    if any(width[:4]):
        raise ShapeError(f"Pad: pad_width={width} pads the batch or channel axis; its first four values must be 0")
    if any(w < 0 for w in width):
        raise ShapeError(f"Pad: pad_width={width} must not be negative")
    pairs = [(width[2 * i], width[2 * i + 1]) for i in range(ndim)]
    if params["mode"] == "reflect":
        for axis, ((before, after), size) in enumerate(zip(pairs, data)):
            if max(before, after) >= size and (before or after):
                raise ShapeError(f"Pad: mode=reflect needs pad widths smaller than the axis: pad_width={width} "
                                 f"asks {max(before, after)} on axis {axis} of data shape {fmt(data)}")
    return pairs


def _pad_shape(params: dict, in_shapes: list) -> list:
    data = tuple(in_shapes[0])
    pairs = _pad_pairs(params, data)
    return [tuple(d + b + a for d, (b, a) in zip(data, pairs))]


def _pad_kernel(xp, inputs, outputs, params):
    x = inputs[0]
    pairs = _pad_pairs(params, x.shape)
    if params["mode"] == "constant":
        padded = xp.pad(x, pairs, mode="constant", constant_values=params["constant_value"])
    else:
        padded = xp.pad(x, pairs, mode=params["mode"])
    write(xp, outputs[0], padded)


def _pad_backward_kernel(xp, inputs, outputs, params):
    out_grad, x = inputs
    pairs = _pad_pairs(params, x.shape)
    grad = out_grad
    if params["mode"] == "constant":
        crop = tuple(slice(b, b + size) for (b, _), size in zip(pairs, x.shape))
        write(xp, outputs[0], grad[crop])
        return
    # each padded position copies one input position per axis: fold the gradient back, axis by axis,
    # with a one-hot matrix from padded positions to source positions
    for axis, ((before, after), size) in enumerate(zip(pairs, x.shape)):
        if not before and not after:
            continue
        source = xp.pad(xp.arange(size), (before, after), mode=params["mode"])
        fold = (source[:, None] == xp.arange(size)[None, :]).astype(grad.dtype)
        grad = xp.moveaxis(xp.tensordot(xp.moveaxis(grad, axis, -1), fold, axes=([-1], [0])), -1, axis)
    write(xp, outputs[0], grad)


define(OpDef(
    name="Pad", aliases=("pad",), infer_shape=_pad_shape, kernel=_pad_kernel, params=_PAD_SCHEMA,
    gradient=lambda F, p, i, o, g: [F("_backward_Pad", g[0], i[0], **public(p))], backward_ignores=frozenset({0}),
    doc="Pads the spatial axes of 4-D or 5-D data with a constant, the edge values or a reflection.",
))
define(OpDef(
    name="_backward_Pad", params=_PAD_SCHEMA, kernel=_pad_backward_kernel, infer_shape=lambda p, s: [tuple(s[1])],
    num_inputs=2, input_names=("head_grad", "data"), infer_dtype=lambda p, d: [d[0]],
    doc="Backward of Pad: the gradient of each padded cell added to the cell it copied (data gives the shape).",
))

# ---- SequenceMask ----------------------------------------------------------------------------

_SEQUENCE_MASK_SCHEMA = schema([
    Param("use_sequence_length", "bool", False, doc="Whether the second input gives each sequence's length."),
    Param("value", "float", 0.0, doc="The value written past each sequence's end."),
    Param("axis", "int", 0, doc="The time axis: 0 for (T, N, ...) data, 1 for (N, T, ...)."),
])


def _sequence_mask_shape(params: dict, in_shapes: list) -> list:
    data = tuple(in_shapes[0])
    if params["axis"] not in (0, 1):
        raise ShapeError(f"SequenceMask: axis={params['axis']} must be 0 (time-major) or 1 (batch-major)")
    if len(data) < 2:
        raise ShapeError(f"SequenceMask: data shape {data} needs a time axis and a batch axis")
    if params["use_sequence_length"]:
        batch = data[1 - params["axis"]]
        length = in_shapes[1]
        if length is not None and tuple(length) != (batch,):
            raise ShapeError(f"SequenceMask: sequence_length shape {fmt(length)} must be ({batch},), one length per "
                             f"sequence of data {data} (axis={params['axis']})")
    return [data]


def _sequence_keep(xp, x, lengths, axis: int):
    steps = xp.arange(x.shape[axis])
    if axis == 0:
        keep = steps[:, None] < lengths[None, :]
    else:
        keep = steps[None, :] < lengths[:, None]
    return keep.reshape(keep.shape + (1,) * (x.ndim - 2))


def _sequence_mask_kernel(xp, inputs, outputs, params):
    x = inputs[0]
    if not params["use_sequence_length"]:
        write(xp, outputs[0], x)
        return
    keep = _sequence_keep(xp, x, inputs[1], params["axis"])
    write(xp, outputs[0], xp.where(keep, x, params["value"]))


def _sequence_mask_backward_kernel(xp, inputs, outputs, params):
    out_grad, lengths = inputs
    keep = _sequence_keep(xp, out_grad, lengths, params["axis"])
    write(xp, outputs[0], xp.where(keep, out_grad, 0))
    outputs[1][...] = 0


def _sequence_mask_gradient(F, params, inputs, outputs, out_grads):
    if not params["use_sequence_length"]:
        return [out_grads[0]]
    return as_list(F("_backward_SequenceMask", out_grads[0], inputs[1], **public(params)))


define(OpDef(
    name="SequenceMask", infer_shape=_sequence_mask_shape, kernel=_sequence_mask_kernel,
    params=_SEQUENCE_MASK_SCHEMA, num_inputs=lambda p: 2 if p["use_sequence_length"] else 1,
    input_names=lambda p: ("data", "sequence_length") if p["use_sequence_length"] else ("data",),
    infer_dtype=lambda p, d: [d[0]], gradient=_sequence_mask_gradient, backward_ignores=frozenset({0}),
    doc="Replaces the steps past each sequence's length by ``value``.",
))
define(OpDef(
    name="_backward_SequenceMask", params=_SEQUENCE_MASK_SCHEMA, kernel=_sequence_mask_backward_kernel,
    infer_shape=lambda p, s: [tuple(s[0]), tuple(s[1])], num_inputs=2, input_names=("head_grad", "sequence_length"),
    num_outputs=2, output_names=("data", "sequence_length"), infer_dtype=lambda p, d: [d[0], d[1]],
    doc="Backward of SequenceMask: the gradient with the masked steps zeroed; none for the lengths.",
))
