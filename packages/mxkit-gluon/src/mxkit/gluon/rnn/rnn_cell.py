"""Recurrent cells (``mx.gluon.rnn.RNNCell``...): one time step each, unrolled in Python.

A cell is called as ``output, new_states = cell(x_t, states)`` with ``states`` a list of
``(batch, hidden)`` arrays; :meth:`RecurrentCell.unroll` runs it over a sequence. Names,
parameter shapes and gate orders are MXNet 1.9.1's (LSTM gates ``i, f, c, o``; GRU gates
``r, z, n``), so parameters saved by MXNet load here and the other way round.
"""

from __future__ import annotations

from typing import Any

from mxkit.gluon.block import Block, HybridBlock
from mxkit.gluon.parameter import GluonError


def _is_symbol(value: Any) -> bool:
    from mxkit.symbol import Symbol

    return isinstance(value, Symbol)


def _modules(value: Any) -> Any:
    """``mx.sym`` for Symbols, ``mx.nd`` for NDArrays (the ``F`` of ``hybrid_forward``)."""
    from mxkit import ndarray, symbol

    return symbol if _is_symbol(value) else ndarray


def make_state(func: Any, name: str, spec: dict) -> Any:
    """``func(name=name, **spec)``; NDArray creators take no ``name`` (MXNet's ignore it)."""
    if getattr(func, "__module__", "").startswith("mxkit.ndarray"):
        return func(**spec)
    return func(name=name, **spec)


def _cells_state_info(cells: Any, batch_size: int) -> list[dict]:
    return [info for cell in cells for info in cell.state_info(batch_size)]


def _cells_begin_state(cells: Any, **kwargs: Any) -> list[Any]:
    return [state for cell in cells for state in cell.begin_state(**kwargs)]


def _check_layout(layout: str) -> None:
    if layout not in ("NTC", "TNC"):
        raise GluonError(f"unroll: layout must be 'NTC' or 'TNC', got {layout!r}")


def format_sequence(length: int | None, inputs: Any, layout: str, merge: bool | None,
                    in_layout: str | None = None) -> tuple[Any, int, Any, int]:
    """A sequence as a list of steps (``merge=False``), one array (``True``) or as given
    (``None``); returns ``(inputs, time axis, F, batch size)`` (batch size 0 for Symbols)."""
    _check_layout(layout)
    if inputs is None:
        raise GluonError("unroll needs inputs: an array (NTC/TNC) or a list of per-step arrays")
    axis = layout.find("T")
    batch_axis = layout.find("N")
    in_axis = in_layout.find("T") if in_layout is not None else axis
    batch_size = 0
    if isinstance(inputs, list | tuple):
        if not inputs:
            raise GluonError("unroll: the list of inputs is empty")
        if length is not None and len(inputs) != length:
            raise GluonError(f"unroll(length={length}) got a list of {len(inputs)} steps")
        F = _modules(inputs[0])
        if not _is_symbol(inputs[0]):
            batch_size = inputs[0].shape[0]
        if merge is True:
            inputs = F.stack(*inputs, axis=axis)
            in_axis = axis
    else:
        F = _modules(inputs)
        if not _is_symbol(inputs):
            # N and T lead (in layout order); the features after them may have any rank (the
            # convolutional cells take (C, W), (C, H, W)... per step)
            if len(inputs.shape) < 3:
                raise GluonError(f"unroll: inputs of shape {tuple(inputs.shape)} need the two axes of {layout[:2]!r} "
                                 f"and at least one feature axis")
            batch_size = inputs.shape[batch_axis]
            if length is not None and inputs.shape[in_axis] != length:
                raise GluonError(f"unroll(length={length}) got inputs of {inputs.shape[in_axis]} steps "
                                 f"along the T axis of layout {layout}")
        if merge is False:
            if length is None:
                length = inputs.shape[in_axis]
            steps = F.split(inputs, axis=in_axis, num_outputs=length, squeeze_axis=True)
            inputs = [steps] if length == 1 and not _is_symbol(steps) and not isinstance(steps, list | tuple) \
                else list(steps)
    if not isinstance(inputs, list) and axis != in_axis:
        inputs = F.swapaxes(inputs, dim1=axis, dim2=in_axis)
    return inputs, axis, F, batch_size


def _mask_variable_length(F: Any, data: Any, length: int, valid_length: Any, time_axis: int, merge: bool) -> Any:
    if isinstance(data, list):
        data = F.stack(*data, axis=time_axis)
    outputs = F.SequenceMask(data, sequence_length=valid_length, use_sequence_length=True, axis=time_axis)
    if not merge:
        steps = F.split(outputs, num_outputs=length, axis=time_axis, squeeze_axis=True)
        outputs = list(steps) if isinstance(steps, list | tuple) or _is_symbol(steps) else [steps]
    return outputs


def _reverse_steps(steps: list[Any], length: int, valid_length: Any = None) -> list[Any]:
    if valid_length is None:
        return list(reversed(steps))
    F = _modules(steps[0])
    reversed_seq = F.SequenceReverse(F.stack(*steps, axis=0), sequence_length=valid_length,
                                     use_sequence_length=True)
    if length > 1 or F.__name__.endswith("symbol"):
        return list(F.split(reversed_seq, axis=0, num_outputs=length, squeeze_axis=True))
    return [reversed_seq[0]]


def _begin_state_for(cell: Any, F: Any, begin_state: Any, inputs: Any, batch_size: int) -> list[Any]:
    if begin_state is not None:
        return list(begin_state)
    if F.__name__.endswith("symbol"):
        # MXNet's way: zero states of batch size 0, which shape inference reads as unknown and
        # completes from the step that adds them to the inputs' projection
        return cell.begin_state(batch_size=0, func=F.zeros)
    first = inputs if not isinstance(inputs, list) else inputs[0]
    return cell.begin_state(batch_size=batch_size, func=F.zeros, ctx=first.context, dtype=first.dtype)


class RecurrentCell(Block):
    """The base class of recurrent cells (MXNet's ``gluon.rnn.RecurrentCell``).

    Subclasses give :meth:`state_info` and the step computation; ``cell(x_t, states)``
    returns ``(output, new_states)``.
    """

    def __init__(self, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix=prefix, params=params)
        self._modified = False
        self.reset()

    def reset(self) -> None:
        """Reset the step counters (before unrolling anew)."""
        self._init_counter = -1
        self._counter = -1
        for cell in self._children.values():
            if isinstance(cell, RecurrentCell):
                cell.reset()

    def state_info(self, batch_size: int = 0) -> list[dict]:
        """The shape (``(batch_size, hidden)``) and layout of each state."""
        raise NotImplementedError(f"{type(self).__name__} must implement state_info()")

    def _check_unmodified(self) -> None:
        if self._modified:
            raise GluonError(f"{self.name}: after a modifier cell (ResidualCell, ZoneoutCell) wraps this cell it "
                             f"cannot be used directly; call the modifier cell instead")

    def begin_state(self, batch_size: int = 0, func: Any = None, **kwargs: Any) -> list[Any]:
        """The initial states: ``func(name=..., shape=..., **kwargs)`` for each (default ``mx.nd.zeros``)."""
        self._check_unmodified()
        if func is None:
            from mxkit import ndarray

            func = ndarray.zeros
        states = []
        for info in self.state_info(batch_size):
            self._init_counter += 1
            spec = dict(info)
            spec.pop("__layout__", None)
            spec.update(kwargs)
            states.append(make_state(func, f"{self._prefix}begin_state_{self._init_counter}", spec))
        return states

    def unroll(self, length: int, inputs: Any, begin_state: Any = None, layout: str = "NTC",
               merge_outputs: bool | None = None, valid_length: Any = None) -> tuple[Any, list[Any]]:
        """Run the cell over ``length`` steps.

        Parameters
        ----------
        length : int
            The number of steps.
        inputs : NDArray, Symbol or list
            The sequence in ``layout``, or a list of ``(batch, features)`` steps.
        begin_state : list, optional
            The initial states (default: zeros).
        layout : {'NTC', 'TNC'}
        merge_outputs : bool, optional
            One array (``True``), a list of steps (``False``), or the form of ``inputs``.
        valid_length : NDArray or Symbol, optional
            The length of each sequence of the batch: outputs past it are zero and the
            states returned are those of each sequence's last valid step.

        Returns
        -------
        (outputs, states)
        """
        self.reset()
        steps, axis, F, batch_size = format_sequence(length, inputs, layout, False)
        states = _begin_state_for(self, F, begin_state, steps, batch_size)
        outputs, all_states = [], []
        for step in steps[:length]:
            output, states = self(step, states)
            outputs.append(output)
            if valid_length is not None:
                all_states.append(states)
        if valid_length is not None:
            states = [F.SequenceLast(F.stack(*per_step, axis=0), sequence_length=valid_length,
                                     use_sequence_length=True, axis=0) for per_step in zip(*all_states)]
            outputs = _mask_variable_length(F, outputs, length, valid_length, axis, True)
        outputs, _, _, _ = format_sequence(length, outputs, layout, merge_outputs)
        return outputs, states

    def _get_activation(self, F: Any, inputs: Any, activation: Any, **kwargs: Any) -> Any:
        from mxkit.gluon.nn import LeakyReLU

        named = {"tanh": F.tanh, "relu": F.relu, "sigmoid": F.sigmoid, "softsign": F.softsign}
        if isinstance(activation, str):
            if activation in named:
                return named[activation](inputs, **kwargs)
            return F.Activation(inputs, act_type=activation, **kwargs)
        if isinstance(activation, LeakyReLU):
            return F.LeakyReLU(inputs, act_type="leaky", slope=activation._alpha, **kwargs)
        return activation(inputs, **kwargs)

    def forward(self, inputs: Any, states: Any) -> Any:
        self._counter += 1
        return super().forward(inputs, states)


class HybridRecurrentCell(RecurrentCell, HybridBlock):
    """A recurrent cell whose step is a ``hybrid_forward(F, inputs, states, **params)``."""

    def __init__(self, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix=prefix, params=params)

    def forward(self, inputs: Any, states: Any) -> Any:
        if not isinstance(states, list | tuple):
            raise GluonError(f"{type(self).__name__}: states must be a list of arrays (see begin_state), got "
                             f"{type(states).__name__}")
        self._counter += 1
        result = HybridBlock.forward(self, inputs, list(states))
        output, new_states = result
        return output, list(new_states)

    def hybrid_forward(self, F: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement hybrid_forward()")


class _GatedCell(HybridRecurrentCell):
    """The four parameters of a cell with ``gates`` gates over ``hidden_size`` units."""

    _gates = 1

    def __init__(self, hidden_size: int, i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros", input_size: int = 0,
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix=prefix, params=params)
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise GluonError(f"{type(self).__name__}: hidden_size must be a positive int, got {hidden_size!r}")
        self._hidden_size = hidden_size
        self._input_size = input_size
        rows = self._gates * hidden_size
        self.i2h_weight = self.params.get("i2h_weight", shape=(rows, input_size), init=i2h_weight_initializer,
                                          allow_deferred_init=True)
        self.h2h_weight = self.params.get("h2h_weight", shape=(rows, hidden_size), init=h2h_weight_initializer,
                                          allow_deferred_init=True)
        self.i2h_bias = self.params.get("i2h_bias", shape=(rows,), init=i2h_bias_initializer,
                                        allow_deferred_init=True)
        self.h2h_bias = self.params.get("h2h_bias", shape=(rows,), init=h2h_bias_initializer,
                                        allow_deferred_init=True)

    def __repr__(self) -> str:
        rows, cols = self.i2h_weight.shape
        return f"{type(self).__name__}({cols if cols else None} -> {rows})"

    def _projections(self, F: Any, inputs: Any, state: Any, i2h_weight: Any, h2h_weight: Any, i2h_bias: Any,
                     h2h_bias: Any) -> tuple[Any, Any]:
        prefix = f"t{self._counter}_"
        units = self._gates * self._hidden_size
        i2h = F.FullyConnected(data=inputs, weight=i2h_weight, bias=i2h_bias, num_hidden=units, name=prefix + "i2h")
        h2h = F.FullyConnected(data=state, weight=h2h_weight, bias=h2h_bias, num_hidden=units, name=prefix + "h2h")
        return i2h, h2h


class RNNCell(_GatedCell):
    """Elman cell: ``h' = act(W_ih x + b_ih + W_hh h + b_hh)`` (``activation`` default ``'tanh'``)."""

    _gates = 1

    def __init__(self, hidden_size: int, activation: Any = "tanh", i2h_weight_initializer: Any = None,
                 h2h_weight_initializer: Any = None, i2h_bias_initializer: Any = "zeros",
                 h2h_bias_initializer: Any = "zeros", input_size: int = 0, prefix: str | None = None,
                 params: Any = None) -> None:
        super().__init__(hidden_size, i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, input_size, prefix, params)
        self._activation = activation

    def _alias(self) -> str:
        return "rnn"

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return [{"shape": (batch_size, self._hidden_size), "__layout__": "NC"}]

    def hybrid_forward(self, F: Any, inputs: Any, states: Any, i2h_weight: Any, h2h_weight: Any, i2h_bias: Any,
                       h2h_bias: Any) -> Any:
        prefix = f"t{self._counter}_"  # MXNet 1.9.1's node names: a step's output is <cell>t<i>_out
        i2h, h2h = self._projections(F, inputs, states[0], i2h_weight, h2h_weight, i2h_bias, h2h_bias)
        output = self._get_activation(F, F.elemwise_add(i2h, h2h, name=prefix + "plus0"), self._activation,
                                      name=prefix + "out")
        return output, [output]


class LSTMCell(_GatedCell):
    """Long short-term memory cell; gates in MXNet's order input, forget, cell, output."""

    _gates = 4

    def __init__(self, hidden_size: int, i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros", input_size: int = 0,
                 prefix: str | None = None, params: Any = None, activation: Any = "tanh",
                 recurrent_activation: Any = "sigmoid") -> None:
        super().__init__(hidden_size, i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, input_size, prefix, params)
        self._activation = activation
        self._recurrent_activation = recurrent_activation

    def _alias(self) -> str:
        return "lstm"

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return [{"shape": (batch_size, self._hidden_size), "__layout__": "NC"},
                {"shape": (batch_size, self._hidden_size), "__layout__": "NC"}]

    def hybrid_forward(self, F: Any, inputs: Any, states: Any, i2h_weight: Any, h2h_weight: Any, i2h_bias: Any,
                       h2h_bias: Any) -> Any:
        prefix = f"t{self._counter}_"
        i2h, h2h = self._projections(F, inputs, states[0], i2h_weight, h2h_weight, i2h_bias, h2h_bias)
        gates = F.SliceChannel(F.elemwise_add(i2h, h2h, name=prefix + "plus0"), num_outputs=4, name=prefix + "slice")
        in_gate = self._get_activation(F, gates[0], self._recurrent_activation, name=prefix + "i")
        forget_gate = self._get_activation(F, gates[1], self._recurrent_activation, name=prefix + "f")
        in_transform = self._get_activation(F, gates[2], self._activation, name=prefix + "c")
        out_gate = self._get_activation(F, gates[3], self._recurrent_activation, name=prefix + "o")
        next_c = F.elemwise_add(F.elemwise_mul(forget_gate, states[1], name=prefix + "mul0"),
                                F.elemwise_mul(in_gate, in_transform, name=prefix + "mul1"), name=prefix + "state")
        squashed = self._get_activation(F, next_c, self._activation, name=prefix + "activation0")
        next_h = F.elemwise_mul(out_gate, squashed, name=prefix + "out")
        return next_h, [next_h, next_c]


class GRUCell(_GatedCell):
    """Gated recurrent unit (MXNet's form: the reset gate scales ``W_hh h + b_hh``)."""

    _gates = 3

    def _alias(self) -> str:
        return "gru"

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return [{"shape": (batch_size, self._hidden_size), "__layout__": "NC"}]

    def hybrid_forward(self, F: Any, inputs: Any, states: Any, i2h_weight: Any, h2h_weight: Any, i2h_bias: Any,
                       h2h_bias: Any) -> Any:
        prefix = f"t{self._counter}_"
        prev_h = states[0]
        i2h, h2h = self._projections(F, inputs, prev_h, i2h_weight, h2h_weight, i2h_bias, h2h_bias)
        i2h_r, i2h_z, i2h_n = F.SliceChannel(i2h, num_outputs=3, name=prefix + "i2h_slice")
        h2h_r, h2h_z, h2h_n = F.SliceChannel(h2h, num_outputs=3, name=prefix + "h2h_slice")
        reset_gate = F.sigmoid(F.elemwise_add(i2h_r, h2h_r, name=prefix + "plus0"), name=prefix + "r_act")
        update_gate = F.sigmoid(F.elemwise_add(i2h_z, h2h_z, name=prefix + "plus1"), name=prefix + "z_act")
        candidate = F.tanh(F.elemwise_add(i2h_n, F.elemwise_mul(reset_gate, h2h_n, name=prefix + "mul0"),
                                          name=prefix + "plus2"), name=prefix + "h_act")
        keep = F.elemwise_sub(F.ones_like(update_gate, name=prefix + "ones_like0"), update_gate)
        next_h = F.elemwise_add(F.elemwise_mul(keep, candidate, name=prefix + "mul1"),
                                F.elemwise_mul(update_gate, prev_h, name=prefix + "mul20"), name=prefix + "out")
        return next_h, [next_h]


class _SequentialCellMixin:
    """Stacking cells: the states of the stack are each cell's states in order."""

    def add(self, cell: RecurrentCell) -> None:
        """Append ``cell`` to the stack (a BidirectionalCell too: the stack is then unrolled, not
        stepped, as in MXNet)."""
        self.register_child(cell)

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return _cells_state_info(self._children.values(), batch_size)

    def begin_state(self, **kwargs: Any) -> list[Any]:
        self._check_unmodified()
        return _cells_begin_state(self._children.values(), **kwargs)

    def __call__(self, inputs: Any, states: Any) -> tuple[Any, list[Any]]:
        self._counter += 1
        next_states = []
        position = 0
        for cell in self._children.values():
            count = len(cell.state_info())
            inputs, state = cell(inputs, list(states[position:position + count]))
            position += count
            next_states.extend(state)
        return inputs, next_states

    def unroll(self, length: int, inputs: Any, begin_state: Any = None, layout: str = "NTC",
               merge_outputs: bool | None = None, valid_length: Any = None) -> tuple[Any, list[Any]]:
        self.reset()
        inputs, _, F, batch_size = format_sequence(length, inputs, layout, None)
        begin_state = _begin_state_for(self, F, begin_state, inputs, batch_size)
        position, next_states = 0, []
        cells = list(self._children.values())
        for index, cell in enumerate(cells):
            count = len(cell.state_info())
            inputs, states = cell.unroll(length, inputs=inputs, begin_state=begin_state[position:position + count],
                                         layout=layout, merge_outputs=None if index < len(cells) - 1 else merge_outputs,
                                         valid_length=valid_length)
            position += count
            next_states.extend(states)
        return inputs, next_states

    def __getitem__(self, index: int) -> RecurrentCell:
        return self._children[str(index)]

    def __len__(self) -> int:
        return len(self._children)

    def __repr__(self) -> str:
        body = "\n".join(f"({key}): {cell!r}" for key, cell in self._children.items())
        return f"{type(self).__name__}(\n{body}\n)"


class SequentialRNNCell(_SequentialCellMixin, RecurrentCell):
    """A stack of cells run one after the other at each step."""


class HybridSequentialRNNCell(_SequentialCellMixin, HybridRecurrentCell):
    """A stack of hybrid cells run one after the other at each step."""

    def hybrid_forward(self, F: Any, inputs: Any, states: Any) -> Any:
        return self.__call__(inputs, states)


class DropoutCell(HybridRecurrentCell):
    """Dropout on the step's input (in training mode); no states."""

    def __init__(self, rate: float, axes: tuple = (), prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix, params)
        if not isinstance(rate, int | float) or not 0 <= rate < 1:
            raise GluonError(f"DropoutCell: rate must be a number in [0, 1), got {rate!r}")
        self._rate = rate
        self._axes = axes

    def __repr__(self) -> str:
        return f"DropoutCell(rate={self._rate}, axes={self._axes})"

    def _alias(self) -> str:
        return "dropout"

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return []

    def forward(self, inputs: Any, states: Any) -> Any:
        self._counter += 1
        # no parameters and no states: run directly (a hybridized graph would have no state outputs)
        return self.hybrid_forward(_modules(inputs), inputs, list(states))

    def hybrid_forward(self, F: Any, inputs: Any, states: Any) -> Any:
        if self._rate > 0:
            inputs = F.Dropout(data=inputs, p=self._rate, axes=self._axes)
        return inputs, states

    def unroll(self, length: int, inputs: Any, begin_state: Any = None, layout: str = "NTC",
               merge_outputs: bool | None = None, valid_length: Any = None) -> tuple[Any, list[Any]]:
        self.reset()
        inputs, _, F, _ = format_sequence(length, inputs, layout, merge_outputs)
        if not isinstance(inputs, list):
            return self.hybrid_forward(F, inputs, list(begin_state) if begin_state else [])
        return super().unroll(length, inputs, begin_state=begin_state, layout=layout, merge_outputs=merge_outputs)


class ModifierCell(HybridRecurrentCell):
    """A cell that wraps ``base_cell`` and changes what it computes; shares its parameters."""

    def __init__(self, base_cell: RecurrentCell) -> None:
        if base_cell._modified:
            raise GluonError(f"cell {base_cell.name} is already wrapped by a modifier cell; a cell can be modified "
                             f"once")
        base_cell._modified = True
        super().__init__(prefix=base_cell.prefix + self._alias(), params=None)
        self.base_cell = base_cell

    @property
    def params(self) -> Any:
        return self.base_cell.params

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return self.base_cell.state_info(batch_size)

    def begin_state(self, func: Any = None, **kwargs: Any) -> list[Any]:
        self._check_unmodified()
        self.base_cell._modified = False
        try:
            return self.base_cell.begin_state(func=func, **kwargs)
        finally:
            self.base_cell._modified = True

    def forward(self, inputs: Any, states: Any) -> Any:
        self._counter += 1
        # the base cell runs (and hybridizes) on its own; the modification is a few operators
        return self.hybrid_forward(_modules(inputs), inputs, list(states))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_cell!r})"


class ResidualCell(ModifierCell):
    """Adds the step's input to the base cell's output (``output = cell(x) + x``)."""

    def hybrid_forward(self, F: Any, inputs: Any, states: Any) -> Any:
        output, states = self.base_cell(inputs, states)
        return F.elemwise_add(output, inputs), states

    def unroll(self, length: int, inputs: Any, begin_state: Any = None, layout: str = "NTC",
               merge_outputs: bool | None = None, valid_length: Any = None) -> tuple[Any, list[Any]]:
        self.reset()
        self.base_cell._modified = False
        try:
            outputs, states = self.base_cell.unroll(length, inputs=inputs, begin_state=begin_state, layout=layout,
                                                    merge_outputs=merge_outputs, valid_length=valid_length)
        finally:
            self.base_cell._modified = True
        merge = not isinstance(outputs, list) if merge_outputs is None else merge_outputs
        inputs, axis, F, _ = format_sequence(length, inputs, layout, merge)
        if valid_length is not None:
            inputs = _mask_variable_length(F, inputs, length, valid_length, axis, merge)
        if merge:
            return F.elemwise_add(outputs, inputs), states
        return [F.elemwise_add(o, i) for o, i in zip(outputs, inputs)], states


class ZoneoutCell(ModifierCell):
    """Zoneout (Krueger et al.): in training, each output and state unit keeps its previous
    value with probability ``zoneout_outputs`` / ``zoneout_states``."""

    def __init__(self, base_cell: RecurrentCell, zoneout_outputs: float = 0.0, zoneout_states: float = 0.0) -> None:
        if isinstance(base_cell, BidirectionalCell):
            raise GluonError("ZoneoutCell cannot wrap a BidirectionalCell (it cannot be stepped); wrap the cells "
                             "inside it instead")
        super().__init__(base_cell)
        self.zoneout_outputs = zoneout_outputs
        self.zoneout_states = zoneout_states
        self._prev_output = None

    def _alias(self) -> str:
        return "zoneout"

    def reset(self) -> None:
        super().reset()
        self._prev_output = None

    def hybrid_forward(self, F: Any, inputs: Any, states: Any) -> Any:
        next_output, next_states = self.base_cell(inputs, states)

        def mask(p: float, like: Any) -> Any:
            return F.Dropout(F.ones_like(like), p=p)

        prev_output = self._prev_output if self._prev_output is not None else F.zeros_like(next_output)
        output = (F.where(mask(self.zoneout_outputs, next_output), next_output, prev_output)
                  if self.zoneout_outputs != 0 else next_output)
        new_states = ([F.where(mask(self.zoneout_states, new), new, old) for new, old in zip(next_states, states)]
                      if self.zoneout_states != 0 else next_states)
        self._prev_output = output
        return output, new_states


class BidirectionalCell(HybridRecurrentCell):
    """Runs ``l_cell`` forwards and ``r_cell`` backwards in time and concatenates their outputs.

    It cannot be stepped, only unrolled.
    """

    def __init__(self, l_cell: RecurrentCell, r_cell: RecurrentCell, output_prefix: str = "bi_") -> None:
        super().__init__(prefix="", params=None)
        self.register_child(l_cell, "l_cell")
        self.register_child(r_cell, "r_cell")
        self._output_prefix = output_prefix

    def __call__(self, inputs: Any, states: Any) -> Any:
        raise GluonError("a BidirectionalCell cannot be stepped (the backward direction needs the whole sequence); "
                         "use unroll()")

    def __repr__(self) -> str:
        return f"BidirectionalCell(forward={self._children['l_cell']!r}, backward={self._children['r_cell']!r})"

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return _cells_state_info(self._children.values(), batch_size)

    def begin_state(self, **kwargs: Any) -> list[Any]:
        self._check_unmodified()
        return _cells_begin_state(self._children.values(), **kwargs)

    def unroll(self, length: int, inputs: Any, begin_state: Any = None, layout: str = "NTC",
               merge_outputs: bool | None = None, valid_length: Any = None) -> tuple[Any, list[Any]]:
        self.reset()
        steps, axis, F, batch_size = format_sequence(length, inputs, layout, False)
        reversed_steps = _reverse_steps(steps, length, valid_length)
        states = _begin_state_for(self, F, begin_state, steps, batch_size)
        l_cell, r_cell = self._children.values()
        split = len(l_cell.state_info(batch_size))
        l_outputs, l_states = l_cell.unroll(length, inputs=steps, begin_state=states[:split], layout=layout,
                                            merge_outputs=merge_outputs, valid_length=valid_length)
        r_outputs, r_states = r_cell.unroll(length, inputs=reversed_steps, begin_state=states[split:],
                                            layout=layout, merge_outputs=False, valid_length=valid_length)
        r_outputs = _reverse_steps(r_outputs, length, valid_length)
        if merge_outputs is None:
            merge_outputs = not isinstance(l_outputs, list)
            l_outputs, _, _, _ = format_sequence(None, l_outputs, layout, merge_outputs)
            r_outputs, _, _, _ = format_sequence(None, r_outputs, layout, merge_outputs)
        if merge_outputs:
            if isinstance(r_outputs, list):
                r_outputs = F.stack(*r_outputs, axis=axis)
            outputs = F.concat(l_outputs, r_outputs, dim=2, name=f"{self._output_prefix}out")
        else:
            outputs = [F.concat(left, right, dim=1, name=f"{self._output_prefix}t{step}")
                       for step, (left, right) in enumerate(zip(l_outputs, r_outputs))]
        if valid_length is not None:
            outputs = _mask_variable_length(F, outputs, length, valid_length, axis, merge_outputs)
        return outputs, l_states + r_states


__all__ = ["BidirectionalCell", "DropoutCell", "GRUCell", "HybridRecurrentCell", "HybridSequentialRNNCell",
           "LSTMCell", "ModifierCell", "RNNCell", "RecurrentCell", "ResidualCell", "SequentialRNNCell",
           "ZoneoutCell", "format_sequence", "make_state"]
