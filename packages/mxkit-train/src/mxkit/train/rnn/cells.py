"""Symbolic RNN cells (MXNet 1.x ``mx.rnn``): the base class and the RNN, LSTM and GRU cells.

A cell builds one time step of a graph (``cell(inputs, states) -> (output, states)``);
``unroll`` repeats it over a sequence. Parameters are variables named as MXNet names them
(``lstm_i2h_weight``...), shared by every step through :class:`RNNParams`, so an unrolled
graph lists exactly MXNet's arguments and loads MXNet's checkpoints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mxkit import symbol
from mxkit.core.errors import MXKitError
from mxkit.train.initializer import LSTMBias


class RNNParams:
    """A container of the variables of one cell (or of cells that share them).

    Parameters
    ----------
    prefix : str
        Prepended to every name asked for.
    """

    def __init__(self, prefix: str = "") -> None:
        self._prefix = prefix
        self._params: dict[str, Any] = {}

    def get(self, name: str, **kwargs: Any) -> Any:
        """The variable ``prefix + name``, created (with ``kwargs`` such as ``init``) on first use."""
        name = self._prefix + name
        if name not in self._params:
            self._params[name] = symbol.Variable(name, **kwargs)
        return self._params[name]


def normalize_sequence(length: int | None, inputs: Any, layout: str, merge: bool | None,
                       in_layout: str | None = None) -> tuple[Any, int]:
    """``inputs`` as one merged symbol (``merge=True``), a list of per-step symbols (``False``)
    or as given (``None``); also returns the time axis of ``layout``."""
    if inputs is None:
        raise MXKitError("unroll needs inputs: a symbol of layout NTC/TNC or a list of one symbol per step")
    if "T" not in layout:
        raise MXKitError(f"layout {layout!r} has no time axis 'T'; use 'NTC' or 'TNC'")
    axis = layout.find("T")
    in_axis = in_layout.find("T") if in_layout is not None else axis
    if isinstance(inputs, symbol.Symbol):
        if merge is False:
            if len(inputs.list_outputs()) != 1:
                raise MXKitError(f"unroll inputs must be a single-output symbol, got outputs {inputs.list_outputs()}")
            inputs = list(symbol.split(inputs, axis=in_axis, num_outputs=length, squeeze_axis=1))
    else:
        if length is not None and len(inputs) != length:
            raise MXKitError(f"unroll got {len(inputs)} input symbols for length={length}; give one per step")
        if merge is True:
            inputs = symbol.Concat(*[symbol.expand_dims(i, axis=axis) for i in inputs], dim=axis)
            in_axis = axis
    if isinstance(inputs, symbol.Symbol) and axis != in_axis:
        inputs = symbol.swapaxes(inputs, dim1=axis, dim2=in_axis)
    return inputs, axis


class BaseRNNCell:
    """The base of every cell.

    Parameters
    ----------
    prefix : str
        Prefix of the cell's parameter and state names.
    params : RNNParams, optional
        Shared parameters; by default the cell makes its own.
    """

    def __init__(self, prefix: str = "", params: RNNParams | None = None) -> None:
        if params is None:
            params = RNNParams(prefix)
            self._own_params = True
        else:
            self._own_params = False
        self._prefix = prefix
        self._params = params
        self._modified = False
        self.reset()

    def reset(self) -> None:
        """Restart the step and begin-state counters (``unroll`` calls it), for every sub-cell too."""
        self._init_counter = -1
        self._counter = -1
        for cell in getattr(self, "_cells", ()):
            cell.reset()

    def __call__(self, inputs: Any, states: Sequence[Any]) -> tuple[Any, list]:
        """One step: ``(output, next states)``."""
        raise NotImplementedError(f"{type(self).__name__} cannot be stepped")

    @property
    def params(self) -> RNNParams:
        """The parameter container (taking it means the cell no longer owns its parameters)."""
        self._own_params = False
        return self._params

    @property
    def state_info(self) -> list[dict | None]:
        """One dict per state: its ``shape`` (0 for the batch) and ``__layout__``."""
        raise NotImplementedError

    def _get_projections(self, **i2h_bias: Any) -> None:
        """The input-to-hidden and hidden-to-hidden weights and biases of a cell (MXNet's names;
        ``i2h_bias`` holds the bias variable's options, e.g. ``init``)."""
        params = self.params
        self._iW = params.get("i2h_weight")
        self._iB = params.get("i2h_bias", **i2h_bias)
        self._hW = params.get("h2h_weight")
        self._hB = params.get("h2h_bias")

    @property
    def state_shape(self) -> list:
        """The shapes of the states."""
        return [info["shape"] for info in self.state_info]

    @property
    def _gate_names(self) -> Sequence[str]:
        return ()

    def begin_state(self, func: Callable[..., Any] = symbol.zeros, **kwargs: Any) -> list:
        """Initial states made by ``func`` (``symbol.zeros`` by default; ``symbol.Variable`` for inputs).

        Their names are ``<prefix>begin_state_<k>``.
        """
        if self._modified:
            raise MXKitError(f"cell {self._prefix!r} is wrapped by a modifier cell (DropoutCell, ZoneoutCell, "
                             f"ResidualCell...): call begin_state and unroll on the modifier instead")
        states = []
        for info in self.state_info:
            self._init_counter += 1
            if info is not None:
                kwargs.update(info)
            states.append(func(name=f"{self._prefix}begin_state_{self._init_counter}", **kwargs))
        return states

    def unpack_weights(self, args: dict) -> dict:
        """Split each fused i2h/h2h weight and bias into one array per gate (``lstm_i2h_f_weight``)."""
        args = dict(args)
        if not self._gate_names:
            return args
        hidden = self._num_hidden
        for group in ("i2h", "h2h"):
            weight = args.pop(f"{self._prefix}{group}_weight")
            bias = args.pop(f"{self._prefix}{group}_bias")
            for j, gate in enumerate(self._gate_names):
                args[f"{self._prefix}{group}{gate}_weight"] = weight[j * hidden:(j + 1) * hidden].copy()
                args[f"{self._prefix}{group}{gate}_bias"] = bias[j * hidden:(j + 1) * hidden].copy()
        return args

    def pack_weights(self, args: dict) -> dict:
        """The inverse of :meth:`unpack_weights`."""
        from mxkit import ndarray

        args = dict(args)
        if not self._gate_names:
            return args
        for group in ("i2h", "h2h"):
            weights = [args.pop(f"{self._prefix}{group}{gate}_weight") for gate in self._gate_names]
            biases = [args.pop(f"{self._prefix}{group}{gate}_bias") for gate in self._gate_names]
            args[f"{self._prefix}{group}_weight"] = ndarray.concatenate(weights)
            args[f"{self._prefix}{group}_bias"] = ndarray.concatenate(biases)
        return args

    def unroll(self, length: int, inputs: Any, begin_state: Sequence[Any] | None = None, layout: str = "NTC",
               merge_outputs: bool | None = None) -> tuple[Any, list]:
        """Unroll over ``length`` steps.

        Parameters
        ----------
        length : int
        inputs : Symbol or list of Symbol
            One symbol of layout ``layout``, or one symbol per step of shape (N, C).
        begin_state : list of Symbol, optional
            Defaults to :meth:`begin_state`.
        layout : {'NTC', 'TNC'}
        merge_outputs : bool, optional
            One merged output symbol (True), a list per step (False) or whichever is natural (None).

        Returns
        -------
        (outputs, states)
        """
        self.reset()
        inputs, _ = normalize_sequence(length, inputs, layout, False)
        states = self.begin_state() if begin_state is None else begin_state
        outputs = []
        for step in range(length):
            output, states = self(inputs[step], states)
            outputs.append(output)
        outputs, _ = normalize_sequence(length, outputs, layout, merge_outputs)
        return outputs, states

    def _get_activation(self, inputs: Any, activation: Any, **kwargs: Any) -> Any:
        if isinstance(activation, str):
            return symbol.Activation(inputs, act_type=activation, **kwargs)
        return activation(inputs, **kwargs)


class RNNCell(BaseRNNCell):
    """A vanilla (Elman) RNN cell: ``h' = act(W_i2h x + b_i2h + W_h2h h + b_h2h)``.

    Parameters
    ----------
    num_hidden : int
    activation : str or callable, default 'tanh'
    prefix : str, default 'rnn_'
    params : RNNParams, optional
    """

    def __init__(self, num_hidden: int, activation: Any = "tanh", prefix: str = "rnn_",
                 params: RNNParams | None = None) -> None:
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._activation = activation
        self._get_projections()

    @property
    def state_info(self) -> list[dict]:
        return [{"shape": (0, self._num_hidden), "__layout__": "NC"}]

    @property
    def _gate_names(self) -> Sequence[str]:
        return ("",)

    def __call__(self, inputs: Any, states: Sequence[Any]) -> tuple[Any, list]:
        self._counter += 1
        name = f"{self._prefix}t{self._counter}_"
        i2h = symbol.FullyConnected(data=inputs, weight=self._iW, bias=self._iB, num_hidden=self._num_hidden,
                                    name=f"{name}i2h")
        h2h = symbol.FullyConnected(data=states[0], weight=self._hW, bias=self._hB, num_hidden=self._num_hidden,
                                    name=f"{name}h2h")
        output = self._get_activation(i2h + h2h, self._activation, name=f"{name}out")
        return output, [output]


class LSTMCell(BaseRNNCell):
    """A long short-term memory cell, gates ``i, f, c, o`` (MXNet's order).

    Parameters
    ----------
    num_hidden : int
    prefix : str, default 'lstm_'
    params : RNNParams, optional
    forget_bias : float, default 1.0
        Initial bias of the forget gate (through :class:`mx.init.LSTMBias`).
    """

    def __init__(self, num_hidden: int, prefix: str = "lstm_", params: RNNParams | None = None,
                 forget_bias: float = 1.0) -> None:
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        # the forget gate's bias starts at forget_bias so that early training keeps memory
        self._get_projections(init=LSTMBias(forget_bias=forget_bias))

    @property
    def state_info(self) -> list[dict]:
        return [{"shape": (0, self._num_hidden), "__layout__": "NC"},
                {"shape": (0, self._num_hidden), "__layout__": "NC"}]

    @property
    def _gate_names(self) -> Sequence[str]:
        return ("_i", "_f", "_c", "_o")

    def __call__(self, inputs: Any, states: Sequence[Any]) -> tuple[Any, list]:
        self._counter += 1
        name = f"{self._prefix}t{self._counter}_"
        hidden = self._num_hidden
        i2h = symbol.FullyConnected(data=inputs, weight=self._iW, bias=self._iB, num_hidden=hidden * 4,
                                    name=f"{name}i2h")
        h2h = symbol.FullyConnected(data=states[0], weight=self._hW, bias=self._hB, num_hidden=hidden * 4,
                                    name=f"{name}h2h")
        gates = i2h + h2h
        sliced = symbol.SliceChannel(gates, num_outputs=4, name=f"{name}slice")
        in_gate = symbol.Activation(sliced[0], act_type="sigmoid", name=f"{name}i")
        forget_gate = symbol.Activation(sliced[1], act_type="sigmoid", name=f"{name}f")
        in_transform = symbol.Activation(sliced[2], act_type="tanh", name=f"{name}c")
        out_gate = symbol.Activation(sliced[3], act_type="sigmoid", name=f"{name}o")
        next_c = symbol._plus(forget_gate * states[1], in_gate * in_transform, name=f"{name}state")
        next_h = symbol._mul(out_gate, symbol.Activation(next_c, act_type="tanh"), name=f"{name}out")
        return next_h, [next_h, next_c]


class GRUCell(BaseRNNCell):
    """A gated recurrent unit cell (cuDNN's form: the reset gate scales the hidden projection).

    Parameters
    ----------
    num_hidden : int
    prefix : str, default 'gru_'
    params : RNNParams, optional
    """

    def __init__(self, num_hidden: int, prefix: str = "gru_", params: RNNParams | None = None) -> None:
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._get_projections()

    @property
    def state_info(self) -> list[dict]:
        return [{"shape": (0, self._num_hidden), "__layout__": "NC"}]

    @property
    def _gate_names(self) -> Sequence[str]:
        return ("_r", "_z", "_o")

    def __call__(self, inputs: Any, states: Sequence[Any]) -> tuple[Any, list]:
        self._counter += 1
        name = f"{self._prefix}t{self._counter}_"
        hidden = self._num_hidden
        prev_h = states[0]
        i2h = symbol.FullyConnected(data=inputs, weight=self._iW, bias=self._iB, num_hidden=hidden * 3,
                                    name=f"{name}_i2h")
        h2h = symbol.FullyConnected(data=prev_h, weight=self._hW, bias=self._hB, num_hidden=hidden * 3,
                                    name=f"{name}_h2h")
        i2h_r, i2h_z, i2h = symbol.SliceChannel(i2h, num_outputs=3, name=f"{name}_i2h_slice")
        h2h_r, h2h_z, h2h = symbol.SliceChannel(h2h, num_outputs=3, name=f"{name}_h2h_slice")
        reset_gate = symbol.Activation(i2h_r + h2h_r, act_type="sigmoid", name=f"{name}_r_act")
        update_gate = symbol.Activation(i2h_z + h2h_z, act_type="sigmoid", name=f"{name}_z_act")
        next_h_tmp = symbol.Activation(i2h + reset_gate * h2h, act_type="tanh", name=f"{name}_h_act")
        next_h = symbol._plus((1.0 - update_gate) * next_h_tmp, update_gate * prev_h, name=f"{name}out")
        return next_h, [next_h]


__all__ = ["BaseRNNCell", "GRUCell", "LSTMCell", "RNNCell", "RNNParams", "normalize_sequence"]
