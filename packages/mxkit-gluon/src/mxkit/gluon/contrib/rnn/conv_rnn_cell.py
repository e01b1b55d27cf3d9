"""Convolutional recurrent cells (MXNet 1.x's ``gluon.contrib.rnn.Conv{1,2,3}D{RNN,LSTM,GRU}Cell``).

The cells of :mod:`mxkit.gluon.rnn` with the two matrix products replaced by convolutions
(Shi et al., "Convolutional LSTM Network", 2015): the input-to-hidden convolution has kernel
``i2h_kernel`` and padding ``i2h_pad``; the hidden-to-hidden one keeps the state's spatial size
(odd ``h2h_kernel``, "same" padding). States are ``(batch, hidden_channels, *spatial)``, where
the spatial size is that of the i2h convolution's output over ``input_shape``.
"""

from __future__ import annotations

from typing import Any

from mxkit.gluon.parameter import GluonError
from mxkit.gluon.rnn.rnn_cell import HybridRecurrentCell

_LAYOUTS = {1: ("NCW", "NWC"), 2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}


def _tuple(value: Any, dims: int, what: str, owner: str) -> tuple[int, ...]:
    values = (value,) * dims if not isinstance(value, (tuple, list)) else tuple(value)
    if len(values) != dims or not all(isinstance(v, int) and v >= 0 for v in values):
        raise GluonError(f"{owner}: {what} must be an int or {dims} non-negative ints, got {value!r}")
    return values


class _ConvRNNCellBase(HybridRecurrentCell):
    """Parameters, state shapes and the two convolutions shared by the convolutional cells."""

    _gates = 1

    def __init__(self, input_shape: Any, hidden_channels: int, i2h_kernel: Any, h2h_kernel: Any, i2h_pad: Any,
                 i2h_dilate: Any, h2h_dilate: Any, i2h_weight_initializer: Any, h2h_weight_initializer: Any,
                 i2h_bias_initializer: Any, h2h_bias_initializer: Any, dims: int, conv_layout: str, activation: Any,
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix=prefix, params=params)
        owner = type(self).__name__
        if conv_layout not in _LAYOUTS[dims]:
            raise GluonError(f"{owner}: conv_layout must be one of {_LAYOUTS[dims]}, got {conv_layout!r}")
        if not isinstance(hidden_channels, int) or hidden_channels <= 0:
            raise GluonError(f"{owner}: hidden_channels must be a positive int, got {hidden_channels!r}")
        input_shape = tuple(input_shape)
        if len(input_shape) != dims + 1:
            raise GluonError(f"{owner}: input_shape is one sample's ({dims + 1} numbers: channels and {dims} spatial "
                             f"sizes in {conv_layout[1:]} order), got {input_shape!r}")
        self._dims = dims
        self._conv_layout = conv_layout
        self._channel_axis = conv_layout.find("C")
        self._hidden_channels = hidden_channels
        self._activation = activation
        self._i2h_kernel = _tuple(i2h_kernel, dims, "i2h_kernel", owner)
        self._h2h_kernel = _tuple(h2h_kernel, dims, "h2h_kernel", owner)
        if not all(k % 2 == 1 for k in self._h2h_kernel):
            raise GluonError(f"{owner}: h2h_kernel must be odd so that the state keeps its size, "
                             f"got {self._h2h_kernel}")
        self._i2h_pad = _tuple(i2h_pad, dims, "i2h_pad", owner)
        self._i2h_dilate = _tuple(i2h_dilate, dims, "i2h_dilate", owner)
        self._h2h_dilate = _tuple(h2h_dilate, dims, "h2h_dilate", owner)
        self._h2h_pad = tuple(d * (k - 1) // 2 for d, k in zip(self._h2h_dilate, self._h2h_kernel, strict=True))
        channels_first = self._channel_axis == 1
        in_channels = input_shape[0] if channels_first else input_shape[-1]
        spatial = input_shape[1:] if channels_first else input_shape[:-1]
        out_spatial = tuple(size + 2 * pad - dilate * (kernel - 1)
                            for size, pad, dilate, kernel in zip(spatial, self._i2h_pad, self._i2h_dilate,
                                                                 self._i2h_kernel, strict=True))
        if any(size <= 0 for size in out_spatial):
            raise GluonError(f"{owner}: the i2h convolution (kernel {self._i2h_kernel}, pad {self._i2h_pad}, dilate "
                             f"{self._i2h_dilate}) leaves nothing of input_shape {input_shape}")
        self._state_shape = ((hidden_channels, *out_spatial) if channels_first
                             else (*out_spatial, hidden_channels))
        rows = self._gates * hidden_channels
        self.i2h_weight = self.params.get("i2h_weight", shape=(rows, in_channels, *self._i2h_kernel),
                                          init=i2h_weight_initializer, allow_deferred_init=True)
        self.h2h_weight = self.params.get("h2h_weight", shape=(rows, hidden_channels, *self._h2h_kernel),
                                          init=h2h_weight_initializer, allow_deferred_init=True)
        self.i2h_bias = self.params.get("i2h_bias", shape=(rows,), init=i2h_bias_initializer,
                                        allow_deferred_init=True)
        self.h2h_bias = self.params.get("h2h_bias", shape=(rows,), init=h2h_bias_initializer,
                                        allow_deferred_init=True)

    def state_info(self, batch_size: int = 0) -> list[dict]:
        info = {"shape": (batch_size, *self._state_shape), "__layout__": self._conv_layout}
        return [dict(info) for _ in range(self._num_states)]

    _num_states = 1

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.i2h_weight.shape[1] or None} -> {self._hidden_channels}, "
                f"i2h_kernel={self._i2h_kernel}, h2h_kernel={self._h2h_kernel})")

    def _convolutions(self, F: Any, inputs: Any, state: Any, i2h_weight: Any, h2h_weight: Any, i2h_bias: Any,
                      h2h_bias: Any) -> tuple[Any, Any]:
        prefix = f"t{self._counter}_"
        filters = self._gates * self._hidden_channels
        stride = (1,) * self._dims
        i2h = F.Convolution(data=inputs, weight=i2h_weight, bias=i2h_bias, num_filter=filters, kernel=self._i2h_kernel,
                            stride=stride, pad=self._i2h_pad, dilate=self._i2h_dilate, layout=self._conv_layout,
                            name=prefix + "i2h")
        h2h = F.Convolution(data=state, weight=h2h_weight, bias=h2h_bias, num_filter=filters, kernel=self._h2h_kernel,
                            stride=stride, pad=self._h2h_pad, dilate=self._h2h_dilate, layout=self._conv_layout,
                            name=prefix + "h2h")
        return i2h, h2h


class _ConvRNNCell(_ConvRNNCellBase):
    def _alias(self) -> str:
        return "conv_rnn"

    def hybrid_forward(self, F: Any, inputs: Any, states: Any, i2h_weight: Any, h2h_weight: Any, i2h_bias: Any,
                       h2h_bias: Any) -> Any:
        prefix = f"t{self._counter}_"
        i2h, h2h = self._convolutions(F, inputs, states[0], i2h_weight, h2h_weight, i2h_bias, h2h_bias)
        output = self._get_activation(F, F.elemwise_add(i2h, h2h, name=prefix + "plus0"), self._activation,
                                      name=prefix + "out")
        return output, [output]


class _ConvLSTMCell(_ConvRNNCellBase):
    _gates = 4
    _num_states = 2

    def _alias(self) -> str:
        return "conv_lstm"

    def hybrid_forward(self, F: Any, inputs: Any, states: Any, i2h_weight: Any, h2h_weight: Any, i2h_bias: Any,
                       h2h_bias: Any) -> Any:
        prefix = f"t{self._counter}_"
        i2h, h2h = self._convolutions(F, inputs, states[0], i2h_weight, h2h_weight, i2h_bias, h2h_bias)
        gates = F.SliceChannel(F.elemwise_add(i2h, h2h, name=prefix + "plus0"), num_outputs=4,
                               axis=self._channel_axis, name=prefix + "slice")
        in_gate = F.sigmoid(gates[0], name=prefix + "i")
        forget_gate = F.sigmoid(gates[1], name=prefix + "f")
        in_transform = self._get_activation(F, gates[2], self._activation, name=prefix + "c")
        out_gate = F.sigmoid(gates[3], name=prefix + "o")
        next_c = F.elemwise_add(F.elemwise_mul(forget_gate, states[1], name=prefix + "mul0"),
                                F.elemwise_mul(in_gate, in_transform, name=prefix + "mul1"), name=prefix + "state")
        next_h = F.elemwise_mul(out_gate, self._get_activation(F, next_c, self._activation,
                                                               name=prefix + "activation0"), name=prefix + "out")
        return next_h, [next_h, next_c]


class _ConvGRUCell(_ConvRNNCellBase):
    _gates = 3

    def _alias(self) -> str:
        return "conv_gru"

    def hybrid_forward(self, F: Any, inputs: Any, states: Any, i2h_weight: Any, h2h_weight: Any, i2h_bias: Any,
                       h2h_bias: Any) -> Any:
        prefix = f"t{self._counter}_"
        i2h, h2h = self._convolutions(F, inputs, states[0], i2h_weight, h2h_weight, i2h_bias, h2h_bias)
        axis = self._channel_axis
        i2h_r, i2h_z, i2h_n = F.SliceChannel(i2h, num_outputs=3, axis=axis, name=prefix + "i2h_slice")
        h2h_r, h2h_z, h2h_n = F.SliceChannel(h2h, num_outputs=3, axis=axis, name=prefix + "h2h_slice")
        reset_gate = F.sigmoid(F.elemwise_add(i2h_r, h2h_r, name=prefix + "plus0"), name=prefix + "r_act")
        update_gate = F.sigmoid(F.elemwise_add(i2h_z, h2h_z, name=prefix + "plus1"), name=prefix + "z_act")
        candidate = self._get_activation(F, F.elemwise_add(i2h_n, F.elemwise_mul(reset_gate, h2h_n,
                                                                                 name=prefix + "mul0"),
                                                           name=prefix + "plus2"),
                                         self._activation, name=prefix + "h_act")
        keep = F.elemwise_sub(F.ones_like(update_gate, name=prefix + "ones_like0"), update_gate)
        next_h = F.elemwise_add(F.elemwise_mul(keep, candidate, name=prefix + "mul1"),
                                F.elemwise_mul(update_gate, states[0], name=prefix + "mul20"), name=prefix + "out")
        return next_h, [next_h]


def _make(base: type, dims: int, name: str, doc: str) -> type:
    default_layout = _LAYOUTS[dims][0]
    zeros = (0,) * dims
    ones = (1,) * dims

    def __init__(self: Any, input_shape: Any, hidden_channels: int, i2h_kernel: Any, h2h_kernel: Any,
                 i2h_pad: Any = zeros, i2h_dilate: Any = ones, h2h_dilate: Any = ones,
                 i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros",
                 conv_layout: str = default_layout, activation: Any = "tanh", prefix: str | None = None,
                 params: Any = None) -> None:
        base.__init__(self, input_shape, hidden_channels, i2h_kernel, h2h_kernel, i2h_pad, i2h_dilate, h2h_dilate,
                      i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer, h2h_bias_initializer,
                      dims, conv_layout, activation, prefix, params)

    return type(name, (base,), {"__init__": __init__, "__doc__": doc, "__module__": __name__, "__qualname__": name})


_DOC = """{kind} cell over {dims}-D inputs (layout ``{layout}``).

    Parameters
    ----------
    input_shape : tuple
        One sample's shape (channels first for ``{layout}``); a 0 channel count is inferred.
    hidden_channels : int
        Channels of the state.
    i2h_kernel, h2h_kernel : int or tuple
        Kernels of the input and state convolutions (``h2h_kernel`` odd).
    i2h_pad, i2h_dilate, h2h_dilate : int or tuple
        Padding and dilation (the state convolution pads to keep the state's size).
    conv_layout : str
        ``{layout}`` or channels-last.
    activation : str or Block
        The activation (default tanh).
    """

Conv1DRNNCell = _make(_ConvRNNCell, 1, "Conv1DRNNCell", _DOC.format(kind="Convolutional RNN", dims=1, layout="NCW"))
Conv2DRNNCell = _make(_ConvRNNCell, 2, "Conv2DRNNCell", _DOC.format(kind="Convolutional RNN", dims=2, layout="NCHW"))
Conv3DRNNCell = _make(_ConvRNNCell, 3, "Conv3DRNNCell", _DOC.format(kind="Convolutional RNN", dims=3, layout="NCDHW"))
Conv1DLSTMCell = _make(_ConvLSTMCell, 1, "Conv1DLSTMCell", _DOC.format(kind="Convolutional LSTM", dims=1, layout="NCW"))
Conv2DLSTMCell = _make(_ConvLSTMCell, 2, "Conv2DLSTMCell",
                       _DOC.format(kind="Convolutional LSTM", dims=2, layout="NCHW"))
Conv3DLSTMCell = _make(_ConvLSTMCell, 3, "Conv3DLSTMCell",
                       _DOC.format(kind="Convolutional LSTM", dims=3, layout="NCDHW"))
Conv1DGRUCell = _make(_ConvGRUCell, 1, "Conv1DGRUCell", _DOC.format(kind="Convolutional GRU", dims=1, layout="NCW"))
Conv2DGRUCell = _make(_ConvGRUCell, 2, "Conv2DGRUCell", _DOC.format(kind="Convolutional GRU", dims=2, layout="NCHW"))
Conv3DGRUCell = _make(_ConvGRUCell, 3, "Conv3DGRUCell", _DOC.format(kind="Convolutional GRU", dims=3, layout="NCDHW"))

__all__ = ["Conv1DGRUCell", "Conv1DLSTMCell", "Conv1DRNNCell", "Conv2DGRUCell", "Conv2DLSTMCell", "Conv2DRNNCell",
           "Conv3DGRUCell", "Conv3DLSTMCell", "Conv3DRNNCell"]
