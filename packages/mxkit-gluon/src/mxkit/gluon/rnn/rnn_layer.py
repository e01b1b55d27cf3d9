"""Fused recurrent layers (``mx.gluon.rnn.RNN``, ``LSTM``, ``GRU``) over the ``RNN`` operator.

Each layer and direction has MXNet 1.9.1's four parameters ``{l|r}{layer}_{i2h|h2h}_{weight|bias}``
(``lstm0_l0_i2h_weight``); a call flattens them into the operator's packed vector in MXNet's
order (all weights layer by layer, direction by direction, ``i2h`` before ``h2h``, then all
biases in the same order). ``save_parameters`` writes MXNet's structural names
(``_unfused.0.l_cell.i2h_weight`` for a bidirectional layer, ``_unfused.0.i2h_weight``
otherwise), so files go both ways between MXNet and mxkit.

``LSTM(projection_size=P)`` is an LSTMP (as ``contrib.rnn.LSTMPCell``): each layer-direction
also has ``h2r_weight (P, H)``, packed after its ``h2h_weight``; the output and the hidden
state have ``P`` units, the cell state ``H``.
"""

from __future__ import annotations

import re
from typing import Any

from mxkit.gluon.block import HybridBlock
from mxkit.gluon.parameter import GluonError
from mxkit.gluon.rnn.rnn_cell import make_state

_GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}
_KEY = re.compile(r"(l|r)(\d+)_(i2h|h2h|h2r)_(weight|bias)\Z")


class _RNNLayer(HybridBlock):
    """The shared implementation of :class:`RNN`, :class:`LSTM` and :class:`GRU`."""

    def __init__(self, hidden_size: int, num_layers: int, layout: str, dropout: float, bidirectional: bool,
                 input_size: int, i2h_weight_initializer: Any, h2h_weight_initializer: Any,
                 i2h_bias_initializer: Any, h2h_bias_initializer: Any, mode: str, projection_size: Any = None,
                 h2r_weight_initializer: Any = None, lstm_state_clip_min: Any = None, lstm_state_clip_max: Any = None,
                 lstm_state_clip_nan: bool = False, dtype: Any = "float32", use_sequence_length: bool = False,
                 **kwargs: Any) -> None:
        self._mode = mode  # _alias (the prefix) needs it before Block.__init__
        super().__init__(**kwargs)
        name = type(self).__name__
        if layout not in ("TNC", "NTC"):
            raise GluonError(f"{name}: layout must be 'TNC' or 'NTC', got {layout!r}")
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise GluonError(f"{name}: hidden_size must be a positive int, got {hidden_size!r}")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise GluonError(f"{name}: num_layers must be a positive int, got {num_layers!r}")
        if not 0 <= dropout < 1:
            raise GluonError(f"{name}: dropout must be in [0, 1), got {dropout!r}")
        unsupported = {"lstm_state_clip_min": lstm_state_clip_min, "lstm_state_clip_max": lstm_state_clip_max}
        for key, value in unsupported.items():
            if value:
                raise GluonError(f"{name}({key}={value!r}) is not supported: the RNN operator has no LSTM "
                                 f"state clipping; leave it None")
        projection_size = projection_size or None  # MXNet's rule: 0 means no projection
        if projection_size is not None and (not isinstance(projection_size, int) or mode != "lstm"
                                            or not 0 < projection_size <= hidden_size):
            raise GluonError(f"{name}: projection_size must be an int in [1, hidden_size={hidden_size}] for an "
                             f"LSTM, got {projection_size!r}")
        self._projection_size = projection_size
        if use_sequence_length:
            raise GluonError(f"{name}(use_sequence_length=True) is not supported by the RNN operator; pad the "
                             f"sequences, or unroll the cells with valid_length")
        self._hidden_size = hidden_size
        self._num_layers = num_layers
        self._layout = layout
        self._dropout = dropout
        self._dir = 2 if bidirectional else 1
        self._input_size = input_size
        self._dtype = dtype
        self._gates = _GATES[mode]
        self.skip_states: bool | None = None
        self._initializers = {"i2h_weight_initializer": i2h_weight_initializer,
                              "h2h_weight_initializer": h2h_weight_initializer,
                              "i2h_bias_initializer": i2h_bias_initializer,
                              "h2h_bias_initializer": h2h_bias_initializer}
        self._h2r_weight_initializer = h2r_weight_initializer
        rows, inputs, width = self._gates * hidden_size, input_size, self._output_width()
        for layer in range(num_layers):
            for direction in "lr"[: self._dir]:
                # MXNet's order of registration (it decides the order of initialisation too)
                self._register_param(f"{direction}{layer}_i2h_weight", (rows, inputs), i2h_weight_initializer)
                self._register_param(f"{direction}{layer}_h2h_weight", (rows, width), h2h_weight_initializer)
                self._register_param(f"{direction}{layer}_i2h_bias", (rows,), i2h_bias_initializer)
                self._register_param(f"{direction}{layer}_h2h_bias", (rows,), h2h_bias_initializer)
                if projection_size:
                    self._register_param(f"{direction}{layer}_h2r_weight", (projection_size, hidden_size),
                                         h2r_weight_initializer)
            inputs = width * self._dir

    def _output_width(self) -> int:
        """Units of each direction's output and hidden state: the projection's, else ``hidden_size``."""
        return self._projection_size or self._hidden_size

    def _register_param(self, name: str, shape: tuple, init: Any) -> None:
        param = self.params.get(name, shape=shape, init=init, allow_deferred_init=True, dtype=self._dtype)
        setattr(self, name, param)

    def _unfuse(self) -> Any:
        """This layer as a stack of cells that share its parameters (MXNet's ``_unfuse``): the
        same computation, stepped in Python, e.g. to unroll with ``valid_length`` or to change one
        layer. Parameters are the layer's own objects, so training either trains both."""
        from mxkit.gluon.rnn import rnn_cell

        makers = {"rnn_relu": lambda **kw: rnn_cell.RNNCell(self._hidden_size, activation="relu", **kw),
                  "rnn_tanh": lambda **kw: rnn_cell.RNNCell(self._hidden_size, activation="tanh", **kw),
                  "lstm": lambda **kw: rnn_cell.LSTMCell(self._hidden_size, **kw),
                  "gru": lambda **kw: rnn_cell.GRUCell(self._hidden_size, **kw)}
        make = makers[self._mode]
        if self._projection_size:
            from mxkit.gluon.contrib.rnn.rnn_cell import LSTMPCell

            def make(**kw: Any) -> Any:
                return LSTMPCell(self._hidden_size, self._projection_size,
                                 h2r_weight_initializer=self._h2r_weight_initializer, **kw)
        stack = rnn_cell.HybridSequentialRNNCell(prefix=self.prefix, params=self.params)
        with stack.name_scope():
            inputs = self._input_size
            for layer in range(self._num_layers):
                kwargs = {"input_size": inputs, **self._initializers}
                if self._dir == 2:
                    stack.add(rnn_cell.BidirectionalCell(make(prefix=f"l{layer}_", **kwargs),
                                                         make(prefix=f"r{layer}_", **kwargs)))
                else:
                    stack.add(make(prefix=f"l{layer}_", **kwargs))
                if self._dropout > 0 and layer != self._num_layers - 1:
                    stack.add(rnn_cell.DropoutCell(self._dropout))
                inputs = self._output_width() * self._dir
        return stack

    def _alias(self) -> str:
        return {"rnn_relu": "rnn", "rnn_tanh": "rnn"}.get(self._mode, self._mode)

    def __repr__(self) -> str:
        rows, cols = self.l0_i2h_weight.shape
        text = f"{type(self).__name__}({cols if cols else None} -> {rows // self._gates}, {self._layout}"
        if self._num_layers != 1:
            text += f", num_layers={self._num_layers}"
        if self._dropout:
            text += f", dropout={self._dropout}"
        if self._dir == 2:
            text += ", bidirectional"
        return text + ")"

    def _collect_params_with_prefix(self, prefix: str = "") -> dict:
        # MXNet 1.9.1 saves a fused layer under the names of its unfused stack of cells
        if prefix:
            prefix += "."
        result = {}
        for key, param in self._reg_params.items():
            direction, layer, kind, what = _KEY.match(key).groups()
            if self._dir == 2:
                result[f"{prefix}_unfused.{layer}.{direction}_cell.{kind}_{what}"] = param
            else:
                result[f"{prefix}_unfused.{layer}.{kind}_{what}"] = param
        return result

    def state_info(self, batch_size: int = 0) -> list[dict]:
        """The shape ``(num_layers * directions, batch, units)`` and layout of each state (an
        LSTM's hidden state has ``projection_size`` units when it projects, its cell state
        ``hidden_size``)."""
        widths = [self._output_width(), self._hidden_size] if self._mode == "lstm" else [self._hidden_size]
        return [{"shape": (self._num_layers * self._dir, batch_size, width), "__layout__": "LNC",
                 "dtype": self._dtype} for width in widths]

    def cast(self, dtype: Any) -> None:
        super().cast(dtype)
        self._dtype = dtype

    def begin_state(self, batch_size: int = 0, func: Any = None, **kwargs: Any) -> list[Any]:
        """The initial states: ``func(name=..., shape=..., dtype=..., **kwargs)`` for each
        (default ``mx.nd.zeros``)."""
        if func is None:
            from mxkit import ndarray

            func = ndarray.zeros
        states = []
        for index, info in enumerate(self.state_info(batch_size)):
            spec = dict(info)
            spec.pop("__layout__")
            spec.update(kwargs)
            states.append(make_state(func, f"{self.prefix}h0_{index}", spec))
        return states

    def infer_shape(self, inputs: Any, *args: Any) -> None:
        """Layer 0's input width from ``inputs``; every other shape is known from the start."""
        if len(inputs.shape) != 3:
            raise GluonError(f"{type(self).__name__}: input of shape {tuple(inputs.shape)} must have 3 axes "
                             f"({self._layout})")
        width = inputs.shape[2]
        for layer in range(self._num_layers):
            for direction in "lr"[: self._dir]:
                getattr(self, f"{direction}{layer}_i2h_weight").shape = (self._gates * self._hidden_size, width)
            width = self._output_width() * self._dir

    def __call__(self, inputs: Any, states: Any = None, sequence_length: Any = None) -> Any:
        from mxkit import ndarray

        if sequence_length is not None:
            raise GluonError(f"{type(self).__name__}: sequence_length is not supported (use_sequence_length is "
                             f"not available)")
        skip_states = states is None
        if skip_states:
            if isinstance(inputs, ndarray.NDArray):
                if len(inputs.shape) != 3:
                    raise GluonError(f"{type(self).__name__}: input of shape {tuple(inputs.shape)} must have 3 "
                                     f"axes ({self._layout})")
                batch = inputs.shape[self._layout.find("N")]
                states = self.begin_state(batch, ctx=inputs.context, dtype=inputs.dtype)
            else:
                states = None
        elif not isinstance(states, list | tuple):
            states = [states]
        self.skip_states = skip_states
        if states is None:
            # traced without states: zeros made from the input inside the graph
            output, new_states = super().__call__(inputs)
        else:
            expected = len(self.state_info())
            if len(states) != expected:
                raise GluonError(f"{type(self).__name__} takes {expected} state array(s), got {len(states)}")
            if isinstance(inputs, ndarray.NDArray):
                batch = inputs.shape[self._layout.find("N")]
                for state, info in zip(states, self.state_info(batch)):
                    if tuple(state.shape) != info["shape"]:
                        raise GluonError(f"{type(self).__name__}: a state has shape {tuple(state.shape)}, expected "
                                         f"{info['shape']} (num_layers * directions, batch, units); see "
                                         f"state_info()")
            output, new_states = super().__call__(inputs, list(states))
        return output if skip_states else (output, list(new_states))

    def _zero_states(self, F: Any, inputs: Any) -> list[Any]:
        # (1, N, 1) zeros from the time-major input, broadcast to (L*D, N, units)
        column = F.zeros_like(F.slice_axis(F.slice_axis(inputs, axis=0, begin=0, end=1), axis=2, begin=0, end=1))
        return [F.broadcast_axis(column, axis=(0, 2), size=(self._num_layers * self._dir, info["shape"][2]))
                for info in self.state_info()]

    def hybrid_forward(self, F: Any, inputs: Any, states: Any = None, **params: Any) -> Any:
        if self._layout == "NTC":
            inputs = F.swapaxes(inputs, dim1=0, dim2=1)
        if states is None:
            states = self._zero_states(F, inputs)
        kinds = ("i2h", "h2h", "h2r") if self._projection_size else ("i2h", "h2h")
        flat = [params[f"{direction}{layer}_{kind}_{what}"].reshape((-1,))
                for what in ("weight", "bias")
                for layer in range(self._num_layers)
                for direction in "lr"[: self._dir]
                for kind in kinds
                if what == "weight" or kind != "h2r"]
        packed = F.concat(*flat, dim=0)
        result = F.RNN(inputs, packed, *states, state_size=self._hidden_size, num_layers=self._num_layers,
                       bidirectional=self._dir == 2, p=self._dropout, state_outputs=True, mode=self._mode,
                       projection_size=self._projection_size)
        output = result[0]
        new_states = [result[1], result[2]] if self._mode == "lstm" else [result[1]]
        if self._layout == "NTC":
            output = F.swapaxes(output, dim1=0, dim2=1)
        return output, new_states


_COMMON_DOC = """
    Parameters
    ----------
    hidden_size : int
        The number of features of the hidden state.
    num_layers : int
        The number of stacked layers.
    layout : {'TNC', 'NTC'}
        The axes of the input and output (time, batch, features).
    dropout : float
        Dropout on the outputs of every layer but the last (training only).
    bidirectional : bool
        Also run each layer backwards in time and concatenate (output width ``2 * hidden_size``).
    input_size : int
        The input features (0: inferred from the first input).

    A call ``layer(x)`` returns the output; ``layer(x, states)`` returns ``(output, new_states)``
    with states of shape ``(num_layers * directions, batch, hidden_size)`` (see ``begin_state``).
"""


class RNN(_RNNLayer):
    __doc__ = "Elman RNN (``activation`` 'relu' or 'tanh') over a sequence." + _COMMON_DOC

    def __init__(self, hidden_size: int, num_layers: int = 1, activation: str = "relu", layout: str = "TNC",
                 dropout: float = 0, bidirectional: bool = False, i2h_weight_initializer: Any = None,
                 h2h_weight_initializer: Any = None, i2h_bias_initializer: Any = "zeros",
                 h2h_bias_initializer: Any = "zeros", input_size: int = 0, dtype: Any = "float32",
                 **kwargs: Any) -> None:
        if activation not in ("relu", "tanh"):
            raise GluonError(f"RNN: activation must be 'relu' or 'tanh', got {activation!r}")
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size, i2h_weight_initializer,
                         h2h_weight_initializer, i2h_bias_initializer, h2h_bias_initializer, "rnn_" + activation,
                         dtype=dtype, **kwargs)


class LSTM(_RNNLayer):
    __doc__ = ("Long short-term memory over a sequence (two states: hidden and cell)." + _COMMON_DOC + """
    projection_size : int, optional
        LSTMP: project each hidden state to this many units (``r = W_h2r h``, parameters
        ``{l|r}{layer}_h2r_weight`` of shape ``(projection_size, hidden_size)``); the output and
        the hidden state then have ``projection_size`` units per direction, the cell state
        ``hidden_size``.
    h2r_weight_initializer : Initializer, optional
        The initializer of the projection weights.
""")

    def __init__(self, hidden_size: int, num_layers: int = 1, layout: str = "TNC", dropout: float = 0,
                 bidirectional: bool = False, input_size: int = 0, i2h_weight_initializer: Any = None,
                 h2h_weight_initializer: Any = None, i2h_bias_initializer: Any = "zeros",
                 h2h_bias_initializer: Any = "zeros", projection_size: Any = None, h2r_weight_initializer: Any = None,
                 state_clip_min: Any = None, state_clip_max: Any = None, state_clip_nan: bool = False,
                 dtype: Any = "float32", **kwargs: Any) -> None:
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size, i2h_weight_initializer,
                         h2h_weight_initializer, i2h_bias_initializer, h2h_bias_initializer, "lstm",
                         projection_size, h2r_weight_initializer, state_clip_min, state_clip_max, state_clip_nan,
                         dtype, **kwargs)


class GRU(_RNNLayer):
    __doc__ = "Gated recurrent unit over a sequence." + _COMMON_DOC

    def __init__(self, hidden_size: int, num_layers: int = 1, layout: str = "TNC", dropout: float = 0,
                 bidirectional: bool = False, input_size: int = 0, i2h_weight_initializer: Any = None,
                 h2h_weight_initializer: Any = None, i2h_bias_initializer: Any = "zeros",
                 h2h_bias_initializer: Any = "zeros", dtype: Any = "float32", **kwargs: Any) -> None:
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size, i2h_weight_initializer,
                         h2h_weight_initializer, i2h_bias_initializer, h2h_bias_initializer, "gru", dtype=dtype,
                         **kwargs)


__all__ = ["GRU", "LSTM", "RNN"]
