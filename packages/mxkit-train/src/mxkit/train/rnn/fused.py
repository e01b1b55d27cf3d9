"""``FusedRNNCell``: a whole stack on the fused ``RNN`` operator, and its ``FusedRNN`` initializer.

The cell's one ``<prefix>parameters`` variable is the packed vector of the ``RNN`` operator;
:meth:`FusedRNNCell.unpack_weights` names its pieces as the unfused cells do
(``lstm_l0_i2h_f_weight``), and :meth:`FusedRNNCell.unfuse` builds those cells, so weights
move between the two forms.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mxkit import symbol
from mxkit.core.errors import MXKitError
from mxkit.train.initializer import InitDesc, Initializer, create, register
from mxkit.train.rnn.cells import BaseRNNCell, GRUCell, LSTMCell, RNNCell, RNNParams, normalize_sequence
from mxkit.train.rnn.wrappers import BidirectionalCell, DropoutCell, SequentialRNNCell

_GATE_NAMES = {"rnn_relu": ("",), "rnn_tanh": ("",), "lstm": ("_i", "_f", "_c", "_o"), "gru": ("_r", "_z", "_o")}


@register
class FusedRNN(Initializer):
    """Initializes the packed ``parameters`` of a fused RNN piece by piece.

    Parameters
    ----------
    init : Initializer or str (its ``dumps()``), optional
        For every weight and bias; by default the global initializer of the call.
    num_hidden, num_layers : int
    mode : str
    bidirectional : bool
    forget_bias : float
        The LSTM forget gates' biases.
    """

    def __init__(self, init: Any, num_hidden: int, num_layers: int, mode: str, bidirectional: bool = False,
                 forget_bias: float = 1.0) -> None:
        if isinstance(init, str):
            init = create(init)
        super().__init__(init=init.dumps() if init is not None else None, num_hidden=num_hidden,
                         num_layers=num_layers, mode=mode, bidirectional=bidirectional, forget_bias=forget_bias)
        self._init = init
        self._num_hidden = num_hidden
        self._num_layers = num_layers
        self._mode = mode
        self._bidirectional = bidirectional
        self._forget_bias = forget_bias

    def _init_weight(self, desc: Any, arr: Any) -> None:
        cell = FusedRNNCell(self._num_hidden, self._num_layers, self._mode, self._bidirectional,
                            forget_bias=self._forget_bias, prefix="")
        args = cell.unpack_weights({"parameters": arr})
        global_init = getattr(desc, "global_init", None)
        for name in args:
            piece = InitDesc(name, global_init=global_init)
            if self._mode == "lstm" and name.endswith("_f_bias"):
                args[name][:] = self._forget_bias
            elif self._init is not None:
                self._init(piece, args[name])
            elif global_init is not None:
                global_init(piece, args[name])
            else:
                raise MXKitError(f"FusedRNN for {str(desc)!r} has no initializer for its pieces: give init= or "
                                 f"call it through a global initializer (mod.init_params(mx.init.Xavier()))")
        arr[:] = cell.pack_weights(args)["parameters"]


class FusedRNNCell(BaseRNNCell):
    """A stack of RNN/LSTM/GRU layers run by the fused ``RNN`` operator.

    Parameters
    ----------
    num_hidden : int
    num_layers : int, default 1
    mode : {'rnn_relu', 'rnn_tanh', 'lstm', 'gru'}, default 'lstm'
    bidirectional : bool, default False
    dropout : float, default 0
        Dropout between layers (training only).
    get_next_state : bool, default False
        Whether ``unroll`` returns the final states.
    forget_bias : float, default 1.0
    prefix : str, optional
        Defaults to ``'<mode>_'``.
    params : RNNParams, optional
    """

    def __init__(self, num_hidden: int, num_layers: int = 1, mode: str = "lstm", bidirectional: bool = False,
                 dropout: float = 0.0, get_next_state: bool = False, forget_bias: float = 1.0,
                 prefix: str | None = None, params: RNNParams | None = None) -> None:
        if mode not in _GATE_NAMES:
            raise MXKitError(f"FusedRNNCell: unknown mode {mode!r}; expected one of {', '.join(_GATE_NAMES)}")
        if prefix is None:
            prefix = f"{mode}_"
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._num_layers = num_layers
        self._mode = mode
        self._bidirectional = bidirectional
        self._dropout = dropout
        self._get_next_state = get_next_state
        self._directions = ["l", "r"] if bidirectional else ["l"]
        initializer = FusedRNN(None, num_hidden, num_layers, mode, bidirectional, forget_bias)
        self._parameter = self.params.get("parameters", init=initializer)

    @property
    def state_info(self) -> list[dict]:
        count = 2 if self._mode == "lstm" else 1
        shape = (len(self._directions) * self._num_layers, 0, self._num_hidden)
        return [{"shape": shape, "__layout__": "LNC"} for _ in range(count)]

    @property
    def _gate_names(self) -> Sequence[str]:
        return _GATE_NAMES[self._mode]

    def _slice_weights(self, arr: Any, num_input: int, num_hidden: int) -> dict[str, Any]:
        """Name to view of every per-gate weight and bias in the packed vector ``arr``."""
        args: dict[str, Any] = {}
        directions = len(self._directions)
        position = 0
        for layer in range(self._num_layers):
            width = num_input if layer == 0 else directions * num_hidden
            for direction in self._directions:
                for group, cols in (("i2h", width), ("h2h", num_hidden)):
                    for gate in self._gate_names:
                        size = num_hidden * cols
                        name = f"{self._prefix}{direction}{layer}_{group}{gate}_weight"
                        args[name] = arr[position:position + size].reshape((num_hidden, cols))
                        position += size
        for layer in range(self._num_layers):
            for direction in self._directions:
                for group in ("i2h", "h2h"):
                    for gate in self._gate_names:
                        args[f"{self._prefix}{direction}{layer}_{group}{gate}_bias"] = \
                            arr[position:position + num_hidden]
                        position += num_hidden
        if position != arr.size:
            raise MXKitError(f"FusedRNNCell {self._prefix!r}: the packed parameters have {arr.size} values, the "
                             f"layout for {num_input} inputs needs {position}")
        return args

    def _num_input(self, size: int) -> int:
        directions, gates, hidden = len(self._directions), len(self._gate_names), self._num_hidden
        per_gate = size // directions // hidden // gates
        return per_gate - (self._num_layers - 1) * (hidden + directions * hidden + 2) - hidden - 2

    def unpack_weights(self, args: dict) -> dict:
        """Replace ``<prefix>parameters`` by one array per layer, direction, gate, weight and bias."""
        args = dict(args)
        arr = args.pop(self._parameter.name)
        pieces = self._slice_weights(arr, self._num_input(arr.size), self._num_hidden)
        args.update({name: value.copy() for name, value in pieces.items()})
        return args

    def pack_weights(self, args: dict) -> dict:
        """The inverse of :meth:`unpack_weights`."""
        from mxkit import ndarray

        args = dict(args)
        first = args[f"{self._prefix}l0_i2h{self._gate_names[0]}_weight"]
        num_input = first.shape[1]
        directions, gates, hidden = len(self._directions), len(self._gate_names), self._num_hidden
        total = ((num_input + hidden + 2) * hidden * gates * directions
                 + (self._num_layers - 1) * gates * hidden * (hidden + directions * hidden + 2) * directions)
        arr = ndarray.zeros((total,), ctx=first.context, dtype=first.dtype)
        for name, view in self._slice_weights(arr, num_input, hidden).items():
            view[:] = args.pop(name)
        args[self._parameter.name] = arr
        return args

    def __call__(self, inputs: Any, states: Sequence[Any]) -> tuple[Any, list]:
        raise MXKitError("FusedRNNCell cannot be stepped; use unroll, or unfuse() it into steppable cells")

    def unroll(self, length: int, inputs: Any, begin_state: Sequence[Any] | None = None, layout: str = "NTC",
               merge_outputs: bool | None = None) -> tuple[Any, list]:
        self.reset()
        inputs, axis = normalize_sequence(length, inputs, layout, True)
        if axis == 1:
            # the operator is time-major; NTC costs a transpose each way
            inputs = symbol.swapaxes(inputs, dim1=0, dim2=1)
        begin_state = self.begin_state() if begin_state is None else begin_state
        states = {"state": begin_state[0]}
        if self._mode == "lstm":
            states["state_cell"] = begin_state[1]
        rnn = symbol.RNN(data=inputs, parameters=self._parameter, state_size=self._num_hidden,
                         num_layers=self._num_layers, bidirectional=self._bidirectional, p=self._dropout,
                         state_outputs=self._get_next_state, mode=self._mode, name=self._prefix + "rnn", **states)
        if not self._get_next_state:
            outputs, next_states = rnn, []
        elif self._mode == "lstm":
            outputs, next_states = rnn[0], [rnn[1], rnn[2]]
        else:
            outputs, next_states = rnn[0], [rnn[1]]
        if axis == 1:
            outputs = symbol.swapaxes(outputs, dim1=0, dim2=1)
        outputs, _ = normalize_sequence(length, outputs, layout, merge_outputs)
        return outputs, next_states

    def unfuse(self) -> SequentialRNNCell:
        """The same network as unfused cells (named ``<prefix>l0_``, ``<prefix>r0_``...)."""
        hidden = self._num_hidden

        def make(prefix: str) -> BaseRNNCell:
            if self._mode == "lstm":
                return LSTMCell(hidden, prefix=prefix)
            if self._mode == "gru":
                return GRUCell(hidden, prefix=prefix)
            return RNNCell(hidden, activation=self._mode[4:], prefix=prefix)

        stack = SequentialRNNCell()
        for layer in range(self._num_layers):
            if self._bidirectional:
                stack.add(BidirectionalCell(make(f"{self._prefix}l{layer}_"), make(f"{self._prefix}r{layer}_"),
                                            output_prefix=f"{self._prefix}bi_l{layer}_"))
            else:
                stack.add(make(f"{self._prefix}l{layer}_"))
            if self._dropout > 0 and layer != self._num_layers - 1:
                stack.add(DropoutCell(self._dropout, prefix=f"{self._prefix}_dropout{layer}_"))
        return stack


__all__ = ["FusedRNN", "FusedRNNCell"]
