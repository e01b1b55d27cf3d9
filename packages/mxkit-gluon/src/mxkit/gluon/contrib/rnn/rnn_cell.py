"""MXNet 1.x's contributed recurrent cells: ``VariationalDropoutCell`` and ``LSTMPCell``."""

from __future__ import annotations

from typing import Any

from mxkit.gluon.parameter import GluonError
from mxkit.gluon.rnn.rnn_cell import (
    BidirectionalCell,
    HybridRecurrentCell,
    ModifierCell,
    RecurrentCell,
    format_sequence,
)


class VariationalDropoutCell(ModifierCell):
    """Variational dropout (Gal and Ghahramani, 2016): one dropout mask per unroll, shared by
    every time step, on the inputs, the first state and/or the outputs of ``base_cell``.

    Parameters
    ----------
    base_cell : RecurrentCell
        The cell to wrap (not a BidirectionalCell).
    drop_inputs, drop_states, drop_outputs : float
        Dropout rates; 0 leaves that part alone. Masks apply in training (under
        ``autograd.record()``) only, and are drawn anew after :meth:`reset` (each ``unroll``).
    """

    def __init__(self, base_cell: RecurrentCell, drop_inputs: float = 0.0, drop_states: float = 0.0,
                 drop_outputs: float = 0.0) -> None:
        if isinstance(base_cell, BidirectionalCell):
            raise GluonError("VariationalDropoutCell cannot wrap a BidirectionalCell (it cannot be stepped); wrap "
                             "the cells inside it instead")
        for what, rate in (("drop_inputs", drop_inputs), ("drop_states", drop_states),
                           ("drop_outputs", drop_outputs)):
            if not 0.0 <= rate < 1.0:
                raise GluonError(f"VariationalDropoutCell: {what} must be in [0, 1), got {rate!r}")
        super().__init__(base_cell)
        self.drop_inputs = drop_inputs
        self.drop_states = drop_states
        self.drop_outputs = drop_outputs
        self.drop_inputs_mask = None
        self.drop_states_mask = None
        self.drop_outputs_mask = None

    def _alias(self) -> str:
        return "vardrop"

    def reset(self) -> None:
        super().reset()
        self.drop_inputs_mask = None
        self.drop_states_mask = None
        self.drop_outputs_mask = None

    def hybrid_forward(self, F: Any, inputs: Any, states: Any) -> Any:
        states = list(states)
        if self.drop_states:
            if self.drop_states_mask is None:
                self.drop_states_mask = F.Dropout(F.ones_like(states[0]), p=self.drop_states)
            states[0] = states[0] * self.drop_states_mask
        if self.drop_inputs:
            if self.drop_inputs_mask is None:
                self.drop_inputs_mask = F.Dropout(F.ones_like(inputs), p=self.drop_inputs)
            inputs = inputs * self.drop_inputs_mask
        output, next_states = self.base_cell(inputs, states)
        if self.drop_outputs:
            if self.drop_outputs_mask is None:
                self.drop_outputs_mask = F.Dropout(F.ones_like(output), p=self.drop_outputs)
            output = output * self.drop_outputs_mask
        return output, next_states

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(p_out={self.drop_outputs}, p_state={self.drop_states}, "
                f"p_in={self.drop_inputs}, {self.base_cell!r})")


class LSTMPCell(HybridRecurrentCell):
    """LSTM with a projected recurrent state (Sak et al., 2014): the output and the recurrent
    state are ``r = W_hr h`` of ``projection_size`` units, the cell state has ``hidden_size``.

    Parameters: ``i2h_weight (4H, in)``, ``h2h_weight (4H, P)``, ``h2r_weight (P, H)``,
    ``i2h_bias``, ``h2h_bias``; states ``[r (batch, P), c (batch, H)]``.
    """

    def __init__(self, hidden_size: int, projection_size: int, i2h_weight_initializer: Any = None,
                 h2h_weight_initializer: Any = None, h2r_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros", input_size: int = 0,
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix=prefix, params=params)
        for what, size in (("hidden_size", hidden_size), ("projection_size", projection_size)):
            if not isinstance(size, int) or size <= 0:
                raise GluonError(f"LSTMPCell: {what} must be a positive int, got {size!r}")
        self._hidden_size = hidden_size
        self._projection_size = projection_size
        self._input_size = input_size
        self.i2h_weight = self.params.get("i2h_weight", shape=(4 * hidden_size, input_size),
                                          init=i2h_weight_initializer, allow_deferred_init=True)
        self.h2h_weight = self.params.get("h2h_weight", shape=(4 * hidden_size, projection_size),
                                          init=h2h_weight_initializer, allow_deferred_init=True)
        self.h2r_weight = self.params.get("h2r_weight", shape=(projection_size, hidden_size),
                                          init=h2r_weight_initializer, allow_deferred_init=True)
        self.i2h_bias = self.params.get("i2h_bias", shape=(4 * hidden_size,), init=i2h_bias_initializer,
                                        allow_deferred_init=True)
        self.h2h_bias = self.params.get("h2h_bias", shape=(4 * hidden_size,), init=h2h_bias_initializer,
                                        allow_deferred_init=True)

    def _alias(self) -> str:
        return "lstmp"

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return [{"shape": (batch_size, self._projection_size), "__layout__": "NC"},
                {"shape": (batch_size, self._hidden_size), "__layout__": "NC"}]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.i2h_weight.shape[1] or None} -> {self._hidden_size} -> " \
               f"{self._projection_size})"

    def hybrid_forward(self, F: Any, inputs: Any, states: Any, i2h_weight: Any, h2h_weight: Any, h2r_weight: Any,
                       i2h_bias: Any, h2h_bias: Any) -> Any:
        prefix = f"t{self._counter}_"
        units = 4 * self._hidden_size
        i2h = F.FullyConnected(data=inputs, weight=i2h_weight, bias=i2h_bias, num_hidden=units, name=prefix + "i2h")
        h2h = F.FullyConnected(data=states[0], weight=h2h_weight, bias=h2h_bias, num_hidden=units,
                               name=prefix + "h2h")
        gates = F.SliceChannel(F.elemwise_add(i2h, h2h, name=prefix + "plus0"), num_outputs=4, name=prefix + "slice")
        in_gate = F.sigmoid(gates[0], name=prefix + "i")
        forget_gate = F.sigmoid(gates[1], name=prefix + "f")
        in_transform = F.tanh(gates[2], name=prefix + "c")
        out_gate = F.sigmoid(gates[3], name=prefix + "o")
        next_c = F.elemwise_add(F.elemwise_mul(forget_gate, states[1], name=prefix + "mul0"),
                                F.elemwise_mul(in_gate, in_transform, name=prefix + "mul1"), name=prefix + "state")
        hidden = F.elemwise_mul(out_gate, F.tanh(next_c, name=prefix + "activation0"), name=prefix + "hidden")
        next_r = F.FullyConnected(data=hidden, weight=h2r_weight, num_hidden=self._projection_size, no_bias=True,
                                  name=prefix + "out")
        return next_r, [next_r, next_c]


def dynamic_unroll(cell: Any, inputs: Any, begin_state: Any, drop_inputs: float = 0, drop_outputs: float = 0,
                   layout: str = "TNC", valid_length: Any = None) -> tuple[Any, Any]:
    """Run ``cell`` over the time axis of ``inputs`` with a ``foreach`` loop (MXNet's
    ``contrib.rnn.rnn_cell.dynamic_unroll``), imperatively on NDArrays or as one loop node in
    a graph (a hybridized block), whatever the number of steps.

    Parameters
    ----------
    cell : RecurrentCell
        The cell of one step.
    inputs : NDArray or Symbol
        ``(T, N, ...)`` for layout ``'TNC'``, ``(N, T, ...)`` for ``'NTC'``.
    begin_state : list of NDArray or Symbol
        The cell's initial states.
    drop_inputs, drop_outputs : float
        Dropout rates on the inputs and the outputs (shared over the time axis).
    layout : {'TNC', 'NTC'}
        Where the time axis is.
    valid_length : NDArray or Symbol, optional
        ``(N,)`` steps of each sequence: its states stop changing after them (the returned
        states are those of its last valid step) and its outputs past them are 0.

    Returns
    -------
    (outputs, states)
        The outputs in ``layout`` and the final states (as a list).
    """
    inputs, axis, F, _ = format_sequence(None, inputs, layout, True)
    if axis != 0:
        axes = list(range(len(layout)))
        axes[0], axes[axis] = axes[axis], axes[0]
        inputs = F.transpose(inputs, axes=axes)
    states = list(begin_state) if isinstance(begin_state, list | tuple) else [begin_state]
    if drop_inputs:
        inputs = F.Dropout(inputs, p=drop_inputs, axes=(0,))
    if valid_length is None:
        def loop_body(step: Any, step_states: Any) -> Any:
            return cell(step, step_states)
    else:
        # the step number rides along as one more state: a sequence past its length keeps its states
        states.append(F.zeros((1,)))

        def loop_body(step: Any, step_states: Any) -> Any:
            cell_states, step_no = step_states[:-1], step_states[-1]
            out, new_states = cell(step, cell_states)
            still = F.broadcast_greater(valid_length, step_no)
            new_states = [F.where(still, new, old) for new, old in zip(new_states, cell_states)]
            return out, [*new_states, step_no + 1]
    outputs, states = F.contrib.foreach(loop_body, inputs, states)
    if drop_outputs:
        outputs = F.Dropout(outputs, p=drop_outputs, axes=(0,))
    if axis != 0:
        outputs = F.transpose(outputs, axes=axes)
    if valid_length is not None:
        outputs = F.SequenceMask(outputs, sequence_length=valid_length, use_sequence_length=True, axis=axis)
        states = states[:-1]  # (the step counter)
    return outputs, states


__all__ = ["LSTMPCell", "VariationalDropoutCell", "dynamic_unroll"]
