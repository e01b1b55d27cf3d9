"""The fused ``RNN`` operator (MXNet 1.x): stacked, optionally bidirectional RNN/LSTM/GRU.

Inputs ``data (T, N, C)``, one flat ``parameters`` vector in MXNet's packed layout (see
:mod:`mxkit.ndarray.ops._rnn_math`), ``state (L*D, N, H)`` and, for LSTM, ``state_cell``.
Outputs ``output (T, N, D*H)`` and, with ``state_outputs``, the final ``state_output`` (and
``statecell_output``). Dropout with probability ``p`` is applied to the outputs of every
layer but the last, in training mode only.

``projection_size=P`` (LSTM only, ``P <= H``) makes it an LSTMP: each layer's output and
recurrent state is ``r = W_h2r h`` of ``P`` units, so ``output`` is ``(T, N, D*P)`` and ``state``
is ``(L*D, N, P)`` while ``state_cell`` keeps ``H``. MXNet 1.9.1 runs it forward only on CPU
(cuDNN on GPUs trains it); here forward and backward run everywhere.

The backward operator needs the forward's gate activations (MXNet keeps them in a "reserve
space"). The registry gives an operator no hidden outputs, so a training forward leaves its
traces in a small table keyed by the address of its output buffer, with a copy of the output
to prove they belong to the values the backward receives; a backward that finds no matching
trace runs the forward again (impossible with dropout, whose masks must be the forward's).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any

from mxkit.core.errors import MXKitError, ShapeError
from mxkit.ndarray.ops import _rnn_math as rnn_math
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.ops.nn_common import as_list, fmt, is_train, public, wanted
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define

_RNN_SCHEMA = schema([
    Param("state_size", "int", doc="Number of hidden units H of each layer."),
    Param("num_layers", "int", doc="Number of stacked layers L."),
    Param("mode", "str", choices=("rnn_relu", "rnn_tanh", "lstm", "gru"), doc="The recurrent cell."),
    Param("bidirectional", "bool", False, doc="Whether each layer also runs backwards in time (D = 2)."),
    Param("state_outputs", "bool", False, doc="Whether the final states are outputs too."),
    Param("p", "float", 0.0, doc="Dropout probability on the outputs of every layer but the last (training)."),
    Param("use_sequence_length", "bool", False, doc="Not supported here: must be False."),
    Param("projection_size", "int", None, optional=True,
          doc="LSTM only: the size P of the projected recurrent state r = W_h2r h (LSTMP)."),
    Param("lstm_state_clip_min", "float", None, optional=True, doc="Not supported here: must be None."),
    Param("lstm_state_clip_max", "float", None, optional=True, doc="Not supported here: must be None."),
    Param("lstm_state_clip_nan", "bool", False, doc="Not supported here: ignored."),
])


def _directions(params: dict) -> int:
    return 2 if params["bidirectional"] else 1


def _input_names(params: dict) -> tuple[str, ...]:
    base = ("data", "parameters", "state")
    return (*base, "state_cell") if params["mode"] == "lstm" else base


def _output_names(params: dict) -> tuple[str, ...]:
    if not params["state_outputs"]:
        return ("output",)
    return ("output", "state_output", "statecell_output") if params["mode"] == "lstm" else ("output", "state_output")


def rnn_param_size(mode: str, num_layers: int, input_size: int, state_size: int, bidirectional: bool = False,
                   projection_size: int | None = None) -> int:
    """Length of the packed ``parameters`` vector of an ``RNN`` operator with these sizes.

    Parameters
    ----------
    mode : {'rnn_relu', 'rnn_tanh', 'lstm', 'gru'}
    num_layers, input_size, state_size : int
    bidirectional : bool
    projection_size : int, optional
        LSTM only: the projected state's size P.

    Returns
    -------
    int
        ``sum over layers l and directions of G*H*(in_l + H) + 2*G*H`` with G the gate count
        (1, 1, 4, 3), ``in_0 = input_size`` and ``in_l = D*H`` after; with a projection
        ``G*H*(in_l + P) + 2*G*H + P*H`` and ``in_l = D*P``.
    """
    if mode not in rnn_math.GATES:
        raise MXKitError(f"RNN: unknown mode {mode!r}; expected one of {', '.join(rnn_math.GATES)}")
    return rnn_math.packed_size(mode, num_layers, input_size, state_size, 2 if bidirectional else 1,
                                projection_size)


def _check_params(params: dict) -> None:
    if params["state_size"] <= 0 or params["num_layers"] <= 0:
        raise ShapeError(f"RNN: state_size={params['state_size']} and num_layers={params['num_layers']} must both "
                         f"be positive")
    if not 0 <= params["p"] < 1:
        raise ShapeError(f"RNN: p={params['p']} must be in [0, 1): the dropout probability between layers")
    projection = params["projection_size"]
    if projection is not None:
        if params["mode"] != "lstm":
            raise ShapeError(f"RNN: projection_size={projection} is for mode='lstm' only (LSTMP), got "
                             f"mode={params['mode']!r}; leave projection_size None")
        if not 0 < projection <= params["state_size"]:
            raise ShapeError(f"RNN: projection_size={projection} must be in [1, state_size={params['state_size']}]: "
                             f"it projects the hidden state down")
    unsupported = {"use_sequence_length": params["use_sequence_length"] or None,
                   "lstm_state_clip_min": params["lstm_state_clip_min"],
                   "lstm_state_clip_max": params["lstm_state_clip_max"]}
    for name, value in unsupported.items():
        if value is not None:
            raise ShapeError(f"RNN: {name}={value} is not supported by mxkit's RNN operator; leave it at its "
                             f"default (pad sequences and mask with SequenceMask/SequenceLast instead)")


def _recurrent_size(params: dict) -> int:
    """The width of ``state`` and of each direction's output: ``P`` with a projection, else ``H``."""
    return params["projection_size"] or params["state_size"]


def _expected_sizes(params: dict, data: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The ``parameters`` and ``state`` shapes that ``data (T, N, C)`` implies (``state_cell``
    has ``state_size`` as its last axis)."""
    if len(data) != 3:
        raise ShapeError(f"RNN: data shape {fmt(data)} must have 3 axes (sequence length T, batch N, features C), "
                         f"time-major; transpose (N, T, C) data with swapaxes(0, 1)")
    _, batch, features = data
    size = rnn_param_size(params["mode"], params["num_layers"], features, params["state_size"],
                          params["bidirectional"], params["projection_size"])
    state = (params["num_layers"] * _directions(params), batch, _recurrent_size(params))
    return (size,), state


def _cell_shape(state: tuple[int, ...], params: dict) -> tuple[int, ...]:
    return (*state[:2], params["state_size"])


def _size_formula(params: dict, features: int) -> str:
    gates = rnn_math.GATES[params["mode"]]
    hidden, directions, projection = params["state_size"], _directions(params), params["projection_size"]
    if projection:
        return (f"mode=lstm with projection_size={projection}, num_layers={params['num_layers']}, "
                f"bidirectional={params['bidirectional']}, state_size={hidden}, {features} input features: the sum "
                f"over layers and directions of G*H*(in + P) + 2*G*H + P*H with G=4, H={hidden}, P={projection}, "
                f"in={features} for layer 0 and in={directions * projection} after")
    return (f"mode={params['mode']} ({gates} gate{'s' if gates > 1 else ''}), num_layers={params['num_layers']}, "
            f"bidirectional={params['bidirectional']}, state_size={hidden}, {features} input features: "
            f"the sum over layers and directions of G*H*(in + H) + 2*G*H with G={gates}, H={hidden}, "
            f"in={features} for layer 0 and in={directions * hidden} after")


def _rnn_shape(params: dict, in_shapes: list) -> list:
    _check_params(params)
    data = tuple(in_shapes[0])
    param_shape, state = _expected_sizes(params, data)
    given = tuple(in_shapes[1])
    if len(given) != 1 or (given[0] and given[0] != param_shape[0]):
        raise ShapeError(f"RNN: parameters has shape {given}, expected {param_shape} for "
                         f"{_size_formula(params, data[2])}")
    names = _input_names(params)
    for position in range(2, len(names)):
        got = tuple(in_shapes[position])
        want = state if position == 2 else _cell_shape(state, params)
        if len(got) != 3 or any(g and g != w for g, w in zip(got, want)):
            last = "projection_size" if position == 2 and params["projection_size"] else "state_size"
            raise ShapeError(f"RNN: {names[position]} has shape {got}, expected {want} "
                             f"(num_layers * directions, batch, {last})")
    out = (data[0], data[1], _directions(params) * _recurrent_size(params))
    return [out, state, _cell_shape(state, params)][:len(_output_names(params))]


def rnn_input_shapes(params: dict, ins: list, outs: list) -> dict[int, tuple[int, ...]]:
    """Backward shape rule: ``parameters`` and the states from the data shape (for ``simple_bind``)."""
    data = ins[0]
    if data is None or len(data) != 3 or not all(int(d) > 0 for d in data):
        return {}
    param_shape, state = _expected_sizes(params, tuple(int(d) for d in data))
    found = {1: param_shape, 2: state}
    if params["mode"] == "lstm":
        found[3] = _cell_shape(state, params)
    return found


# ---- forward and backward over the stack ------------------------------------------------------

class _TraceTable:
    """The forward traces of recent training forwards, keyed by their output buffer's address.

    An entry goes when the output's buffer is freed (a finalizer on the array that owns the
    memory) or when more than ``capacity`` entries are held, so that imperative loops, which
    make a fresh output every step, do not keep old traces alive.
    """

    def __init__(self, capacity: int = 16) -> None:
        self._entries: OrderedDict[tuple, tuple[Any, list]] = OrderedDict()
        self._capacity = capacity
        # reentrant: a finalizer (discard) can run inside put() on this thread when the copy
        # below triggers a garbage collection that frees an older output
        self._lock = threading.RLock()

    def put(self, key: tuple, output: Any, traces: list) -> None:
        with self._lock:
            self._entries[key] = (output.copy(), traces)
            self._entries.move_to_end(key)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)
        owner = output
        while getattr(owner, "base", None) is not None and hasattr(owner.base, "shape"):
            owner = owner.base
        try:
            weakref.finalize(owner, self.discard, key).atexit = False  # nothing to tidy at exit
        except TypeError:  # an owner that takes no weak references: the capacity bound still holds
            pass

    def discard(self, key: tuple) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def get(self, xp: Any, key: tuple, output: Any) -> list | None:
        with self._lock:
            entry = self._entries.get(key)
        if entry is None or not bool(xp.array_equal(entry[0], output)):
            return None
        return entry[1]

    def __len__(self) -> int:
        return len(self._entries)


_TRACES = _TraceTable()


def _address(array: Any) -> int:
    data = array.data
    return int(data.ptr) if hasattr(data, "ptr") else int(array.__array_interface__["data"][0])


def _trace_key(output: Any) -> tuple:
    return (_address(output), tuple(output.shape), str(output.dtype))


def _states(params: dict, inputs) -> tuple[Any, Any]:
    return inputs[2], (inputs[3] if params["mode"] == "lstm" else None)


def _forward_stack(xp, params: dict, data, flat, h0_all, c0_all, training: bool, cell=None):
    """Runs every layer; returns (output, final h per layer-direction, final c, traces, dropout masks)."""
    mode, hidden, directions = params["mode"], params["state_size"], _directions(params)
    layers = rnn_math.unpack(flat, mode, params["num_layers"], data.shape[2], hidden, directions,
                             params["projection_size"])
    x = data
    final_h, final_c, traces, masks = [], [], [], []
    for layer, weights in enumerate(layers):
        outputs = []
        for direction, w in enumerate(weights):
            index = layer * directions + direction
            c0 = c0_all[index] if c0_all is not None else None
            seq = x if direction == 0 else x[::-1]
            out, h, c, trace = rnn_math.run_forward(xp, mode, w, xp.ascontiguousarray(seq), h0_all[index], c0, cell)
            outputs.append(out if direction == 0 else out[::-1])
            final_h.append(h)
            final_c.append(c)
            traces.append(trace)
        x = outputs[0] if directions == 1 else xp.concatenate(outputs, axis=2)
        if training and params["p"] > 0 and layer < len(layers) - 1:
            keep = 1 - params["p"]
            mask = (xp.asarray(params["_rng"].random(x.shape)) < keep).astype(x.dtype) / x.dtype.type(keep)
            masks.append(mask)
            x = x * mask
    return x, final_h, final_c, traces, masks


def rnn_kernel(xp, inputs, outputs, params, cell: rnn_math.CellKernels | None = None):
    """The ``RNN`` kernel; a backend's kernel may call it with its own ``cell`` kernels."""
    data, flat = inputs[0], inputs[1]
    h0, c0 = _states(params, inputs)
    training = is_train(params)
    out, final_h, final_c, traces, masks = _forward_stack(xp, params, data, flat, h0, c0, training, cell)
    write(xp, outputs[0], out)
    if params["state_outputs"]:
        write(xp, outputs[1], xp.stack(final_h))
        if params["mode"] == "lstm":
            write(xp, outputs[2], xp.stack(final_c))
    if training:
        _TRACES.put(_trace_key(outputs[0]), outputs[0], [traces, masks])


def rnn_backward_kernel(xp, inputs, outputs, params, cell: rnn_math.CellKernels | None = None):
    """The ``_backward_RNN`` kernel; a backend's kernel may call it with its own ``cell`` kernels."""
    names = _input_names(params)
    num_heads = len(_output_names(params))
    heads, forward_inputs, output = inputs[:num_heads], inputs[num_heads:num_heads + len(names)], inputs[-1]
    data, flat = forward_inputs[0], forward_inputs[1]
    h0, c0 = _states(params, forward_inputs)
    found = _TRACES.get(xp, _trace_key(output), output)
    if found is None:
        if params["p"] > 0:
            raise MXKitError(f"RNN backward with dropout p={params['p']} needs the training forward's dropout masks, "
                             f"and none matches this output; run forward(is_train=True) before backward")
        _, _, _, traces, masks = _forward_stack(xp, params, data, flat, h0, c0, training=False, cell=cell)
    else:
        traces, masks = found
    mode, hidden, directions = params["mode"], params["state_size"], _directions(params)
    num_layers, projection = params["num_layers"], params["projection_size"]
    width = _recurrent_size(params)  # of each direction's output
    grad_flat = xp.zeros(flat.shape, dtype=flat.dtype)
    weights = rnn_math.unpack(flat, mode, num_layers, data.shape[2], hidden, directions, projection)
    grads = rnn_math.unpack(grad_flat, mode, num_layers, data.shape[2], hidden, directions, projection)
    d_state = xp.zeros(h0.shape, dtype=h0.dtype)
    d_cell = xp.zeros(c0.shape, dtype=c0.dtype) if mode == "lstm" else None
    if params["state_outputs"]:
        d_state += heads[1]
        if mode == "lstm":
            d_cell += heads[2]
    d_x = heads[0]
    for layer in range(num_layers - 1, -1, -1):
        need_input = layer > 0 or wanted(params, 0)
        d_below = None
        for direction in range(directions):
            index = layer * directions + direction
            d_out = d_x[:, :, direction * width:(direction + 1) * width]
            d_out = d_out if direction == 0 else d_out[::-1]
            d_c = d_cell[index] if d_cell is not None else None
            d_in, d_h0, d_c0 = rnn_math.run_backward(
                xp, mode, weights[layer][direction], traces[index], xp.ascontiguousarray(d_out), d_state[index], d_c,
                grads[layer][direction], need_input, cell)
            d_state[index] = d_h0
            if d_cell is not None:
                d_cell[index] = d_c0
            if need_input:
                d_in = d_in if direction == 0 else d_in[::-1]
                d_below = d_in if d_below is None else d_below + d_in
        if layer > 0 and masks:
            d_below = d_below * masks[layer - 1]
        d_x = d_below
    if wanted(params, 0):
        write(xp, outputs[0], d_x)
    write(xp, outputs[1], grad_flat)
    write(xp, outputs[2], d_state)
    if mode == "lstm":
        write(xp, outputs[3], d_cell)


def _rnn_gradient(F, params, inputs, outputs, out_grads):
    return as_list(F("_backward_RNN", *out_grads, *inputs, outputs[0], **public(params)))


def _backward_input_names(params: dict) -> tuple[str, ...]:
    heads = tuple(f"{name}_grad" for name in _output_names(params))
    return heads + _input_names(params) + ("output",)


define(OpDef(
    name="RNN", infer_shape=_rnn_shape, kernel=rnn_kernel, params=_RNN_SCHEMA,
    num_inputs=lambda p: len(_input_names(p)), input_names=_input_names,
    num_outputs=lambda p: len(_output_names(p)), output_names=_output_names,
    infer_dtype=lambda p, d: [d[0]] * len(_output_names(p)),
    gradient=_rnn_gradient, needs_rng=True,
    doc="Stacked (bidirectional) vanilla RNN, LSTM or GRU over time-major data, with packed parameters "
        "(MXNet's and cuDNN's layout).",
))
define(OpDef(
    name="_backward_RNN", params=_RNN_SCHEMA, kernel=rnn_backward_kernel,
    infer_shape=lambda p, s: [tuple(x) for x in s[len(_output_names(p)):len(_output_names(p)) + len(_input_names(p))]],
    num_inputs=lambda p: len(_backward_input_names(p)), input_names=_backward_input_names,
    num_outputs=lambda p: len(_input_names(p)), output_names=_input_names,
    infer_dtype=lambda p, d: [d[0]] * len(_input_names(p)),
    doc="Backward of RNN: backpropagation through time, the gradients of data, parameters and states.",
))

__all__ = ["rnn_backward_kernel", "rnn_input_shapes", "rnn_kernel", "rnn_param_size"]
