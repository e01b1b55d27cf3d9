"""``SequenceLast`` and ``SequenceReverse`` over padded batches of sequences, with gradients.

Both follow MXNet 1.x: data is time-major ``(T, N, ...)`` (``axis=0``) unless ``axis=1``
says ``(N, T, ...)``; with ``use_sequence_length`` a second input gives each sequence's
length (MXNet passes it as a float array, so it is cast to integers here).
"""

from __future__ import annotations

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.ops.nn_common import as_list, fmt, public
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define


def _sequence_schema(doc_axis: str):
    return schema([
        Param("use_sequence_length", "bool", False, doc="Whether the second input gives each sequence's length."),
        Param("axis", "int", 0, doc=doc_axis),
    ])


_LAST_SCHEMA = _sequence_schema("The time axis: 0 for (T, N, ...) data, 1 for (N, T, ...).")
_REVERSE_SCHEMA = _sequence_schema("The time axis; MXNet supports only 0, (T, N, ...) data.")


def _input_names(params: dict) -> tuple[str, ...]:
    return ("data", "sequence_length") if params["use_sequence_length"] else ("data",)


def _num_inputs(params: dict) -> int:
    return 2 if params["use_sequence_length"] else 1


def _check(op: str, params: dict, in_shapes: list, allowed_axes: tuple[int, ...]) -> tuple[int, ...]:
    data = tuple(in_shapes[0])
    axis = params["axis"]
    if axis not in allowed_axes:
        choices = " or ".join(str(a) for a in allowed_axes)
        raise ShapeError(f"{op}: axis={axis} is not supported; it must be {choices} (the time axis)")
    if len(data) < 2:
        raise ShapeError(f"{op}: data shape {fmt(data)} needs a time axis and a batch axis")
    if params["use_sequence_length"] and len(in_shapes) > 1 and in_shapes[1] is not None:
        batch = data[1 - axis]
        if tuple(in_shapes[1]) != (batch,):
            raise ShapeError(f"{op}: sequence_length shape {fmt(in_shapes[1])} must be ({batch},), one length per "
                             f"sequence of data {data} (axis={axis})")
    return data


def _lengths(xp, params: dict, inputs, steps: int, batch: int):
    """Each sequence's length as integers (every sequence is full without ``use_sequence_length``)."""
    if not params["use_sequence_length"]:
        return xp.full((batch,), steps, dtype=xp.int64)
    lengths = inputs[1].astype(xp.int64)
    return xp.clip(lengths, 1, steps)


# ---- SequenceLast ----------------------------------------------------------------------------

def _last_shape(params: dict, in_shapes: list) -> list:
    data = _check("SequenceLast", params, in_shapes, (0, 1))
    axis = params["axis"]
    return [data[:axis] + data[axis + 1:]]


def _last_index(xp, params, inputs, x):
    axis = params["axis"]
    steps, batch = x.shape[axis], x.shape[1 - axis]
    return _lengths(xp, params, inputs, steps, batch) - 1, xp.arange(batch)


def _last_kernel(xp, inputs, outputs, params):
    x = inputs[0]
    last, batch = _last_index(xp, params, inputs, x)
    picked = x[last, batch] if params["axis"] == 0 else x[batch, last]
    write(xp, outputs[0], picked)


def _last_backward_kernel(xp, inputs, outputs, params):
    out_grad, x = inputs[0], inputs[1]
    last, batch = _last_index(xp, params, inputs[1:], x)
    grad = xp.zeros(x.shape, dtype=out_grad.dtype)
    if params["axis"] == 0:
        grad[last, batch] = out_grad
    else:
        grad[batch, last] = out_grad
    write(xp, outputs[0], grad)
    if params["use_sequence_length"]:
        outputs[1][...] = 0


def _last_gradient(F, params, inputs, outputs, out_grads):
    return as_list(F("_backward_SequenceLast", out_grads[0], *inputs, **public(params)))


define(OpDef(
    name="SequenceLast", infer_shape=_last_shape, kernel=_last_kernel, params=_LAST_SCHEMA,
    num_inputs=_num_inputs, input_names=_input_names, infer_dtype=lambda p, d: [d[0]],
    gradient=_last_gradient, backward_ignores=frozenset({0}),
    doc="The last step of each sequence: ``data[length - 1, n]`` (``data[T - 1]`` without lengths).",
))
define(OpDef(
    name="_backward_SequenceLast", params=_LAST_SCHEMA, kernel=_last_backward_kernel,
    infer_shape=lambda p, s: [tuple(s[1])] + ([tuple(s[2])] if p["use_sequence_length"] else []),
    num_inputs=lambda p: 1 + _num_inputs(p),
    input_names=lambda p: ("out_grad", *_input_names(p)),
    num_outputs=_num_inputs, output_names=_input_names,
    infer_dtype=lambda p, d: [d[0]] + ([d[2]] if p["use_sequence_length"] else []),
    doc="Backward of SequenceLast: the gradient scattered to each sequence's last step; none for the lengths.",
))

# ---- SequenceReverse -------------------------------------------------------------------------

def _reverse_shape(params: dict, in_shapes: list) -> list:
    return [_check("SequenceReverse", params, in_shapes, (0,))]


def _reverse(xp, x, lengths):
    # step t of sequence n reads step length[n] - 1 - t; steps past the length stay where they are
    steps = xp.arange(x.shape[0])[:, None]
    source = xp.where(steps < lengths[None, :], lengths[None, :] - 1 - steps, steps)
    return x[source, xp.arange(x.shape[1])[None, :]]


def _reverse_kernel(xp, inputs, outputs, params):
    x = inputs[0]
    write(xp, outputs[0], _reverse(xp, x, _lengths(xp, params, inputs, x.shape[0], x.shape[1])))


def _reverse_backward_kernel(xp, inputs, outputs, params):
    out_grad = inputs[0]
    lengths = _lengths(xp, params, inputs, out_grad.shape[0], out_grad.shape[1])
    # the reversal is a permutation that is its own inverse
    write(xp, outputs[0], _reverse(xp, out_grad, lengths))
    if params["use_sequence_length"]:
        outputs[1][...] = 0


def _reverse_gradient(F, params, inputs, outputs, out_grads):
    return as_list(F("_backward_SequenceReverse", out_grads[0], *inputs[1:], **public(params)))


define(OpDef(
    name="SequenceReverse", infer_shape=_reverse_shape, kernel=_reverse_kernel, params=_REVERSE_SCHEMA,
    num_inputs=_num_inputs, input_names=_input_names, infer_dtype=lambda p, d: [d[0]],
    gradient=_reverse_gradient, backward_ignores=frozenset({0}),
    doc="Reverses the first ``length`` steps of each sequence (all steps without lengths).",
))
define(OpDef(
    name="_backward_SequenceReverse", params=_REVERSE_SCHEMA, kernel=_reverse_backward_kernel,
    infer_shape=lambda p, s: [tuple(s[0])] + ([tuple(s[1])] if p["use_sequence_length"] else []),
    num_inputs=_num_inputs, input_names=lambda p: ("out_grad", *_input_names(p)[1:]),
    num_outputs=_num_inputs, output_names=_input_names,
    infer_dtype=lambda p, d: [d[0]] + ([d[1]] if p["use_sequence_length"] else []),
    doc="Backward of SequenceReverse: the gradient reversed back; none for the lengths.",
))
