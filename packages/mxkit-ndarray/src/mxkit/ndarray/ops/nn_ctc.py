"""``CTCLoss`` (aliases ``ctc_loss``, ``contrib.CTCLoss``, ``contrib.ctc_loss``): the
connectionist temporal classification loss of Graves et al. (2006), as MXNet defines it.

``data`` is ``(T, N, C)`` unnormalised activations (a softmax over C is applied inside),
``label`` ``(N, L)`` class indices. The blank is class 0 (``blank_label="first"``, labels
padded with 0) or class C - 1 (``"last"``, padded with -1); optional inputs give each
sequence's length and each label's length instead. The output is the negative
log-likelihood per sequence, ``(N,)``. The forward-backward recursions run in log space; the
gradient with respect to the activations is ``softmax - occupancy`` (steps past a sequence's
length get none and are never read, so they may hold anything, NaN included). As in MXNet, a
sequence too short for its label (no alignment exists) has loss 0 and gradient 0.
"""

from __future__ import annotations

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define

_SCHEMA = schema([
    Param("use_data_lengths", "bool", False, doc="Take a data_lengths input: the steps of each sequence."),
    Param("use_label_lengths", "bool", False, doc="Take a label_lengths input (else padding ends a label)."),
    Param("blank_label", "str", "first", choices=("first", "last"), doc="The blank is class 0 or class C - 1."),
])


def _input_names(params):
    names = ["data", "label"]
    if params["use_data_lengths"]:
        names.append("data_lengths")
    if params["use_label_lengths"]:
        names.append("label_lengths")
    return tuple(names)


def _shape(params, in_shapes):
    data, label = tuple(in_shapes[0]), tuple(in_shapes[1])
    if len(data) != 3:
        raise ShapeError(f"CTCLoss: data must be (sequence length, batch, classes), got shape {data}")
    if len(label) != 2 or label[0] != data[1]:
        raise ShapeError(f"CTCLoss: label must be (batch, max label length) with batch {data[1]}, got {label}")
    for extra in in_shapes[2:]:
        if tuple(extra) != (data[1],):
            raise ShapeError(f"CTCLoss: the length inputs must be ({data[1]},), got {tuple(extra)}")
    return [(data[1],)]


def _sequences(params, inputs):
    """Per batch element: (number of steps, label as a list of class indices, blank index)."""
    import numpy as np

    data, label = inputs[0], np.asarray(inputs[1])
    steps, batch, classes = data.shape
    blank = 0 if params["blank_label"] == "first" else classes - 1
    rest = list(inputs[2:])
    data_lengths = np.asarray(rest.pop(0)).astype(np.int64) if params["use_data_lengths"] else None
    label_lengths = np.asarray(rest.pop(0)).astype(np.int64) if params["use_label_lengths"] else None
    padding = 0 if params["blank_label"] == "first" else -1
    result = []
    for n in range(batch):
        row = label[n].astype(np.int64)
        if label_lengths is not None:
            row = row[:label_lengths[n]]
        else:
            ends = np.nonzero(row == padding)[0]
            row = row[:ends[0]] if ends.size else row
        count = int(data_lengths[n]) if data_lengths is not None else steps
        if not 0 <= count <= steps:
            raise ShapeError(f"CTCLoss: data_lengths[{n}] = {count} is outside [0, {steps}]")
        # A label may hold the blank's index (MXNet's Gluon CTCLoss always says blank_label="last"
        # and lets labels use class C - 1): as in MXNet's warp-ctc recursion, the lattice is
        # over positions, a position holding the blank's value is never skipped to, and its
        # occupancy counts toward that class.
        if row.size and (row.min() < 0 or row.max() >= classes):
            raise ShapeError(f"CTCLoss: label {n} holds {row.tolist()}; classes must lie in [0, {classes})")
        result.append((count, row, blank))
    return result


def _log_softmax(np, x):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _shifted(np, values, by):
    """``values`` moved ``by`` places right (left if negative), -inf filling the vacated places; the
    length stays, even for the one-place extended label of an empty label."""
    out = np.full(values.shape, -np.inf)
    if by > 0:
        out[by:] = values[:-by]
    else:
        out[:by] = values[-by:]
    return out


def _forward_backward(np, logp, label, blank):
    """(log-likelihood, occupancy of each class at each step: (T, C)) for one sequence."""
    steps, classes = logp.shape
    extended = np.full(2 * label.size + 1, blank, dtype=np.int64)
    extended[1::2] = label
    size = extended.size
    # a label may skip the blank before it unless it repeats the label two places back
    skip = np.zeros(size, dtype=bool)
    skip[2:] = (extended[2:] != blank) & (extended[2:] != extended[:-2])
    neg = -np.inf
    alpha = np.full((steps, size), neg)
    beta = np.full((steps, size), neg)
    if steps == 0:
        return (0.0 if size == 1 else neg), np.zeros((0, classes))
    emit = logp[:, extended]
    alpha[0, 0] = emit[0, 0]
    if size > 1:
        alpha[0, 1] = emit[0, 1]
    for t in range(1, steps):
        prev = alpha[t - 1]
        one = _shifted(np, prev, 1)
        two = np.where(skip, _shifted(np, prev, 2), neg)
        alpha[t] = np.logaddexp(np.logaddexp(prev, one), two) + emit[t]
    beta[-1, -1] = emit[-1, -1]
    if size > 1:
        beta[-1, -2] = emit[-1, -2]
    skip_next = np.zeros(size, dtype=bool)  # s + 2 may be reached from s
    skip_next[:-2] = skip[2:]
    for t in range(steps - 2, -1, -1):
        after = beta[t + 1]
        one = _shifted(np, after, -1)
        two = np.where(skip_next, _shifted(np, after, -2), neg)
        beta[t] = np.logaddexp(np.logaddexp(after, one), two) + emit[t]
    ends = alpha[-1, -1] if size == 1 else np.logaddexp(alpha[-1, -1], alpha[-1, -2])
    occupancy = np.zeros((steps, classes))
    if np.isfinite(ends):
        # alpha and beta both count the emission at t once: remove one
        gamma = np.exp(alpha + beta - emit - ends)
        for s in range(size):
            occupancy[:, extended[s]] += gamma[:, s]
    return ends, occupancy


def _kernel(xp, inputs, outputs, params):
    import numpy as np

    data = np.asarray(inputs[0].get() if type(inputs[0]).__module__.startswith("cupy") else inputs[0],
                      dtype=np.float64)
    host = [data] + [np.asarray(a.get() if type(a).__module__.startswith("cupy") else a) for a in inputs[1:]]
    losses = np.zeros(data.shape[1])
    for n, (count, label, blank) in enumerate(_sequences(params, host)):
        likelihood, _ = _forward_backward(np, _log_softmax(np, data[:count, n]), label, blank)
        # a label no alignment fits in the steps (too long, counting the blanks its repeats need)
        # costs 0 and gets no gradient in MXNet 1.9.1, so one such sequence does not make a batch's
        # loss infinite
        losses[n] = -likelihood if np.isfinite(likelihood) else 0.0
    write(xp, outputs[0], xp.asarray(losses))


def _backward_kernel(xp, inputs, outputs, params):
    import numpy as np

    out_grad = np.asarray(inputs[0].get() if type(inputs[0]).__module__.startswith("cupy") else inputs[0],
                          dtype=np.float64)
    host = [np.asarray(a.get() if type(a).__module__.startswith("cupy") else a) for a in inputs[1:]]
    data = host[0].astype(np.float64)
    grad = np.zeros_like(data)
    for n, (count, label, blank) in enumerate(_sequences(params, host)):
        logp = _log_softmax(np, data[:count, n])
        likelihood, occupancy = _forward_backward(np, logp, label, blank)
        if np.isfinite(likelihood):
            grad[:count, n] = (np.exp(logp) - occupancy) * out_grad[n]
    write(xp, outputs[0], xp.asarray(grad))


def _gradient(F, params, inputs, outputs, out_grads):
    public = {k: v for k, v in params.items() if not k.startswith("_")}
    return [F("_backward_CTCLoss", out_grads[0], *inputs, **public)] + [None] * (len(inputs) - 1)


define(OpDef(
    name="CTCLoss", aliases=("ctc_loss", "_contrib_CTCLoss", "_contrib_ctc_loss"), infer_shape=_shape,
    kernel=_kernel, params=_SCHEMA, num_inputs=lambda p: len(_input_names(p)), input_names=_input_names,
    gradient=_gradient, doc="The CTC loss (negative log-likelihood) of each sequence: output (batch,).",
))
define(OpDef(
    name="_backward_CTCLoss", infer_shape=lambda p, s: [tuple(s[1])], kernel=_backward_kernel, params=_SCHEMA,
    num_inputs=lambda p: len(_input_names(p)) + 1, input_names=lambda p: ("out_grad", *_input_names(p)),
    infer_dtype=lambda p, d: [d[1]], doc="Backward of CTCLoss with respect to data.",
))
