"""The recurrences behind the fused ``RNN`` operator, forward and backward through time.

Written against an array module ``xp`` (numpy or CuPy). One *layer-direction* runs a time
loop of products over time-major data ``(T, N, C)``; the input projection of every step is
one matrix product before the loop. Each forward keeps what its backward needs (gate
activations, cell states, previous hidden states) in a :class:`Trace`.

A backend may do the elementwise part of a step itself: ``cell`` (see :class:`CellKernels`),
which the CPU plugin passes for float32 (an LSTM step in one vectorized pass instead of a dozen
numpy ones, GRU and tanh RNN activations vectorized); without it the ``xp`` code below runs,
and is the reference.

The packed parameter layout is MXNet's (and cuDNN's): every weight, layer by layer and
direction by direction (``W_i2h (G*H, in)`` then ``W_h2h (G*H, H)``), then every bias in the
same order (``b_i2h (G*H,)`` then ``b_h2h (G*H,)``). Gate order: LSTM ``i, f, g, o``; GRU
``r, z, n`` with the reset gate applied to the hidden projection plus its bias (cuDNN's GRU).

An LSTM with a projection of size ``P`` (LSTMP, cuDNN's and MXNet's ``projection_size``)
carries ``r = W_h2r h`` of ``P`` units as its recurrent state and output, the cell state keeps
``H``: each layer-direction's weights are then ``W_i2h (4H, in)``, ``W_h2h (4H, P)`` and
``W_h2r (P, H)`` (in that order, biases unchanged), and layers above the first take ``D*P``
features.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


def layer_input_size(layer: int, input_size: int, state_size: int, directions: int,
                     projection_size: int | None = None) -> int:
    """Features entering ``layer``: the data's for layer 0, both directions' outputs (``H``, or
    ``P`` with a projection) after."""
    return input_size if layer == 0 else directions * (projection_size or state_size)


def packed_size(mode: str, num_layers: int, input_size: int, state_size: int, directions: int,
                projection_size: int | None = None) -> int:
    """Length of the flat ``parameters`` vector (MXNet's ``GetRnnParamSize``)."""
    gates_h = GATES[mode] * state_size
    recurrent = projection_size or state_size
    total = 0
    for layer in range(num_layers):
        width = layer_input_size(layer, input_size, state_size, directions, projection_size)
        total += directions * (gates_h * width + gates_h * recurrent + 2 * gates_h)
        if projection_size:
            total += directions * projection_size * state_size
    return total


@dataclass
class LayerWeights:
    """Views into the packed vector for one layer-direction (``w_h2r``: LSTMP's projection)."""

    w_i2h: Any
    w_h2h: Any
    b_i2h: Any
    b_h2h: Any
    w_h2r: Any = None


def unpack(flat: Any, mode: str, num_layers: int, input_size: int, state_size: int,
           directions: int, projection_size: int | None = None) -> list[list[LayerWeights]]:
    """``[layer][direction]`` views of the packed vector ``flat`` (views, so gradients write through)."""
    gates_h = GATES[mode] * state_size
    recurrent = projection_size or state_size
    weights, biases = [], []
    offset = 0
    for layer in range(num_layers):
        width = layer_input_size(layer, input_size, state_size, directions, projection_size)
        for _ in range(directions):
            entry = [(offset, (gates_h, width)), (offset + gates_h * width, (gates_h, recurrent))]
            offset += gates_h * (width + recurrent)
            if projection_size:
                entry.append((offset, (projection_size, state_size)))
                offset += projection_size * state_size
            weights.append(entry)
    for _ in weights:
        biases.append([(offset, (gates_h,)), (offset + gates_h, (gates_h,))])
        offset += 2 * gates_h

    def view(start: int, shape: tuple[int, ...]) -> Any:
        return flat[start:start + _size(shape)].reshape(shape)

    views = [LayerWeights(view(*w[0]), view(*w[1]), view(*b[0]), view(*b[1]),
                          view(*w[2]) if len(w) == 3 else None)
             for w, b in zip(weights, biases)]
    return [views[layer * directions:(layer + 1) * directions] for layer in range(num_layers)]


def _size(shape: tuple[int, ...]) -> int:
    size = 1
    for dim in shape:
        size *= dim
    return size


def sigmoid(xp: Any, x: Any) -> Any:
    # the tanh form cannot overflow, unlike 1 / (1 + exp(-x)) for large negative float32 x
    return 0.5 * (xp.tanh(0.5 * x) + 1)


class CellKernels(Protocol):
    """The elementwise part of a step, done by a backend on C-contiguous arrays that do not
    overlap (LSTM gate order i, f, g, o)."""

    def tanh(self, x: Any) -> Any:
        """A new array, ``tanh(x)``."""

    def sigmoid(self, x: Any) -> Any:
        """A new array, ``1 / (1 + exp(-x))``."""

    def lstm_forward(self, pre: Any, c_prev: Any, gates: Any, cells: Any, tanh_cells: Any, h: Any) -> None:
        """From the gate pre-activations ``pre (N, 4H)`` and ``c_prev (N, H)``, write the
        activated ``gates``, the new cell state ``cells``, ``tanh_cells`` and ``h``."""

    def lstm_backward(self, d_h: Any, d_c: Any, gates: Any, tanh_cells: Any, c_prev: Any, d_pre: Any) -> None:
        """Write the gradient of the gate pre-activations ``d_pre (N, 4H)``; ``d_c`` becomes the
        gradient of the previous cell state, in place."""


@dataclass
class Trace:
    """What one layer-direction's forward keeps for its backward."""

    inputs: Any  # (T, N, in), in the direction's own time order
    prev_h: Any  # (T, N, H or P): the recurrent state entering each step
    gates: Any  # (T, N, G*H): activated gates (rnn: the new state)
    cells: Any = None  # LSTM: (T, N, H) cell states after each step; prev cell at t is cells[t-1] or c0
    tanh_cells: Any = None
    c0: Any = None
    h_proj: Any = None  # GRU: (T, N, H) the hidden projection of n's gate, before the reset gate
    hidden: Any = None  # LSTMP: (T, N, H) the hidden states before their projection
    extra: dict = field(default_factory=dict)


def run_forward(xp: Any, mode: str, weights: LayerWeights, x: Any, h0: Any, c0: Any,
                cell: CellKernels | None = None) -> tuple[Any, Any, Any, Trace]:
    """One layer-direction over ``x (T, N, in)``: (outputs (T, N, H or P), h_T (or r_T), c_T or
    None, trace)."""
    tanh = xp.tanh if cell is None else cell.tanh
    gate = (lambda values: sigmoid(xp, values)) if cell is None else cell.sigmoid
    steps, batch, _ = x.shape
    hidden = weights.b_i2h.shape[0] // GATES[mode]
    recurrent = h0.shape[-1]  # H, or P with a projection
    projected = (x.reshape(steps * batch, -1) @ weights.w_i2h.T).reshape(steps, batch, -1)
    projected += weights.b_i2h
    if mode != "gru":
        projected += weights.b_h2h
    w_h2h_t = xp.ascontiguousarray(weights.w_h2h.T)  # a contiguous right operand is ~20% faster per step
    outputs = xp.empty((steps, batch, recurrent), dtype=x.dtype)
    prev_h = xp.empty_like(outputs)
    gates = xp.empty_like(projected)
    trace = Trace(inputs=x, prev_h=prev_h, gates=gates)
    h, c = h0, c0
    w_h2r_t = None if weights.w_h2r is None else xp.ascontiguousarray(weights.w_h2r.T)
    if mode == "lstm":
        trace.cells = xp.empty((steps, batch, hidden), dtype=x.dtype)
        trace.tanh_cells = xp.empty_like(trace.cells)
        trace.c0 = c0
        # with a projection the hidden states are kept apart from the (projected) outputs
        trace.hidden = outputs if w_h2r_t is None else xp.empty_like(trace.cells)
    elif mode == "gru":
        trace.h_proj = xp.empty_like(outputs)
    for t in range(steps):
        prev_h[t] = h
        if mode == "gru":
            hidden_part = h @ w_h2h_t + weights.b_h2h
            reset = gate(projected[t, :, :hidden] + hidden_part[:, :hidden])
            update = gate(projected[t, :, hidden:2 * hidden] + hidden_part[:, hidden:2 * hidden])
            h_proj = hidden_part[:, 2 * hidden:]
            new = tanh(projected[t, :, 2 * hidden:] + reset * h_proj)
            gates[t, :, :hidden], gates[t, :, hidden:2 * hidden], gates[t, :, 2 * hidden:] = reset, update, new
            trace.h_proj[t] = h_proj
            h = (1 - update) * new + update * h
        else:
            pre = projected[t] + h @ w_h2h_t
            if mode == "lstm":
                if cell is not None:
                    cell.lstm_forward(pre, c, gates[t], trace.cells[t], trace.tanh_cells[t], trace.hidden[t])
                else:
                    ifo = sigmoid(xp, pre)
                    g = xp.tanh(pre[:, 2 * hidden:3 * hidden])
                    i, f, o = ifo[:, :hidden], ifo[:, hidden:2 * hidden], ifo[:, 3 * hidden:]
                    trace.cells[t] = f * c + i * g
                    trace.tanh_cells[t] = xp.tanh(trace.cells[t])
                    trace.hidden[t] = o * trace.tanh_cells[t]
                    gates[t] = ifo
                    gates[t, :, 2 * hidden:3 * hidden] = g
                c = trace.cells[t]
                if w_h2r_t is not None:
                    outputs[t] = trace.hidden[t] @ w_h2r_t  # the projection r is the recurrent state
                h = outputs[t]
                continue
            else:
                h = tanh(pre) if mode == "rnn_tanh" else xp.maximum(pre, 0)
                gates[t] = h
        outputs[t] = h
    return outputs, h, c, trace


def run_backward(xp: Any, mode: str, weights: LayerWeights, trace: Trace, d_out: Any, d_h: Any, d_c: Any,
                 grads: LayerWeights, need_input_grad: bool,
                 cell: CellKernels | None = None) -> tuple[Any, Any, Any]:
    """Backpropagation through time of one layer-direction.

    ``d_out (T, N, H)`` is the gradient of its outputs, ``d_h``/``d_c`` of its final states.
    Weight and bias gradients are *added* into ``grads``. Returns (d_inputs or None, d_h0, d_c0).
    """
    steps, batch, recurrent = d_out.shape
    gates, w_h2h, w_h2r = trace.gates, weights.w_h2h, weights.w_h2r
    hidden = gates.shape[-1] // GATES[mode]
    d_pre = xp.empty_like(gates)  # gradient of each step's gate pre-activations (input side)
    d_hidden_pre = xp.empty_like(gates) if mode == "gru" else d_pre
    d_projected = None if w_h2r is None else xp.empty_like(d_out)  # LSTMP: gradient of each r
    if mode == "lstm" and cell is not None:
        d_c = xp.array(d_c, copy=True)  # updated in place, step by step
    for t in range(steps - 1, -1, -1):
        d_h = d_h + d_out[t]
        if d_projected is not None:
            d_projected[t] = d_h
            d_h = d_h @ w_h2r  # back through r = W_h2r h to the hidden state
        if mode == "lstm" and cell is not None:
            cell.lstm_backward(d_h, d_c, gates[t], trace.tanh_cells[t], trace.cells[t - 1] if t > 0 else trace.c0,
                               d_pre[t])
            d_h = d_pre[t] @ w_h2h
        elif mode == "lstm":
            i, f = gates[t, :, :hidden], gates[t, :, hidden:2 * hidden]
            g, o = gates[t, :, 2 * hidden:3 * hidden], gates[t, :, 3 * hidden:]
            tanh_c = trace.tanh_cells[t]
            c_prev = trace.cells[t - 1] if t > 0 else trace.c0
            d_c = d_c + d_h * o * (1 - tanh_c * tanh_c)
            d_pre[t, :, :hidden] = d_c * g * i * (1 - i)
            d_pre[t, :, hidden:2 * hidden] = d_c * c_prev * f * (1 - f)
            d_pre[t, :, 2 * hidden:3 * hidden] = d_c * i * (1 - g * g)
            d_pre[t, :, 3 * hidden:] = d_h * tanh_c * o * (1 - o)
            d_c = d_c * f
            d_h = d_pre[t] @ w_h2h
        elif mode == "gru":
            reset, update, new = gates[t, :, :hidden], gates[t, :, hidden:2 * hidden], gates[t, :, 2 * hidden:]
            h_prev = trace.prev_h[t]
            d_new = d_h * (1 - update) * (1 - new * new)
            d_reset = d_new * trace.h_proj[t] * reset * (1 - reset)
            d_update = d_h * (h_prev - new) * update * (1 - update)
            d_pre[t, :, :hidden], d_pre[t, :, hidden:2 * hidden], d_pre[t, :, 2 * hidden:] = d_reset, d_update, d_new
            d_hidden_pre[t, :, :2 * hidden] = d_pre[t, :, :2 * hidden]
            d_hidden_pre[t, :, 2 * hidden:] = d_new * reset
            d_h = d_h * update + d_hidden_pre[t] @ w_h2h
        else:
            new = gates[t]
            d_pre[t] = d_h * (1 - new * new) if mode == "rnn_tanh" else d_h * (new > 0)
            d_h = d_pre[t] @ w_h2h
    flat_pre = d_pre.reshape(steps * batch, -1)
    flat_hidden_pre = d_hidden_pre.reshape(steps * batch, -1)
    grads.w_i2h += flat_pre.T @ trace.inputs.reshape(steps * batch, -1)
    grads.w_h2h += flat_hidden_pre.T @ trace.prev_h.reshape(steps * batch, recurrent)
    if d_projected is not None:
        grads.w_h2r += d_projected.reshape(steps * batch, recurrent).T @ trace.hidden.reshape(steps * batch, hidden)
    grads.b_i2h += flat_pre.sum(axis=0)
    grads.b_h2h += flat_hidden_pre.sum(axis=0)
    d_inputs = (flat_pre @ weights.w_i2h).reshape(steps, batch, -1) if need_input_grad else None
    return d_inputs, d_h, (d_c if mode == "lstm" else None)
