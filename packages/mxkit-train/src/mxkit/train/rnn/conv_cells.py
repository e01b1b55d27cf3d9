"""Convolutional RNN cells (MXNet 1.x's ``ConvRNNCell``, ``ConvLSTMCell``, ``ConvGRUCell``).

The cells of :mod:`mxkit.train.rnn.cells` with ``Convolution`` in place of
``FullyConnected``: the input-to-hidden projection is a convolution of the input (its
kernel, stride, padding and dilation chosen freely) and the hidden-to-hidden projection a
"same" convolution of the state, so the states are feature maps (Shi et al. 2015,
Convolutional LSTM). The state shape is the input-to-hidden convolution's output shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mxkit import symbol
from mxkit.core.errors import ShapeError
from mxkit.train.rnn.cells import BaseRNNCell, RNNParams

__all__ = ["BaseConvRNNCell", "ConvGRUCell", "ConvLSTMCell", "ConvRNNCell"]


def _leaky_relu(inputs: Any, **kwargs: Any) -> Any:
    """MXNet's default activation of the conv RNN and GRU cells: leaky ReLU with slope 0.2."""
    return symbol.LeakyReLU(inputs, act_type="leaky", slope=0.2, **kwargs)


def _tanh(inputs: Any, **kwargs: Any) -> Any:
    """MXNet's default activation of the conv LSTM cell."""
    return symbol.Activation(inputs, act_type="tanh", **kwargs)


class BaseConvRNNCell(BaseRNNCell):
    """The shared part of the convolutional cells: the two convolutions and the state shape.

    Parameters
    ----------
    input_shape : tuple of int
        The shape of one step's input, batch included (``(N, C, H, W)``).
    num_hidden : int
        Channels of the state.
    h2h_kernel, h2h_dilate : tuple of int
        The state convolution (odd kernel sizes: it pads to keep the size).
    i2h_kernel, i2h_stride, i2h_pad, i2h_dilate : tuple of int
        The input convolution.
    i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer, h2h_bias_initializer
        Initializers of the four variables (``init`` attributes).
    activation : str or callable
        The activation of the candidate state.
    prefix : str
    params : RNNParams, optional
    conv_layout : str, default 'NCHW'
    """

    def __init__(self, input_shape: Sequence[int], num_hidden: int, h2h_kernel: Sequence[int],
                 h2h_dilate: Sequence[int], i2h_kernel: Sequence[int], i2h_stride: Sequence[int],
                 i2h_pad: Sequence[int], i2h_dilate: Sequence[int], i2h_weight_initializer: Any,
                 h2h_weight_initializer: Any, i2h_bias_initializer: Any, h2h_bias_initializer: Any,
                 activation: Any, prefix: str = "", params: RNNParams | None = None,
                 conv_layout: str = "NCHW") -> None:
        super().__init__(prefix=prefix, params=params)
        if any(k % 2 != 1 for k in h2h_kernel):
            raise ShapeError(f"{type(self).__name__}: h2h_kernel must have odd sizes (the state convolution keeps "
                             f"the state's size), got {tuple(h2h_kernel)}")
        self._h2h_kernel = tuple(h2h_kernel)
        self._h2h_dilate = tuple(h2h_dilate)
        self._h2h_pad = tuple(d * (k - 1) // 2 for d, k in zip(h2h_dilate, h2h_kernel))
        self._i2h_kernel = tuple(i2h_kernel)
        self._i2h_stride = tuple(i2h_stride)
        self._i2h_pad = tuple(i2h_pad)
        self._i2h_dilate = tuple(i2h_dilate)
        self._num_hidden = num_hidden
        self._input_shape = tuple(input_shape)
        self._conv_layout = conv_layout
        self._activation = activation
        probe = symbol.Convolution(data=symbol.Variable("data"), num_filter=num_hidden, kernel=self._i2h_kernel,
                                   stride=self._i2h_stride, pad=self._i2h_pad, dilate=self._i2h_dilate,
                                   layout=conv_layout)
        self._state_shape = (0, *probe.infer_shape(data=self._input_shape)[1][0][1:])
        params_ = self.params
        self._iW = params_.get("i2h_weight", **_init(i2h_weight_initializer))
        self._hW = params_.get("h2h_weight", **_init(h2h_weight_initializer))
        self._iB = params_.get("i2h_bias", **_init(i2h_bias_initializer))
        self._hB = params_.get("h2h_bias", **_init(h2h_bias_initializer))

    @property
    def _num_gates(self) -> int:
        return len(self._gate_names)

    @property
    def _gate_names(self) -> Sequence[str]:
        return ("",)

    @property
    def state_info(self) -> list[dict]:
        return [{"shape": self._state_shape, "__layout__": self._conv_layout}]

    def _conv_forward(self, inputs: Any, states: Sequence[Any], name: str) -> tuple[Any, Any]:
        filters = self._num_hidden * self._num_gates
        i2h = symbol.Convolution(name=f"{name}i2h", data=inputs, num_filter=filters, kernel=self._i2h_kernel,
                                 stride=self._i2h_stride, pad=self._i2h_pad, dilate=self._i2h_dilate,
                                 weight=self._iW, bias=self._iB, layout=self._conv_layout)
        h2h = symbol.Convolution(name=f"{name}h2h", data=states[0], num_filter=filters, kernel=self._h2h_kernel,
                                 dilate=self._h2h_dilate, pad=self._h2h_pad, stride=(1,) * len(self._h2h_kernel),
                                 weight=self._hW, bias=self._hB, layout=self._conv_layout)
        return i2h, h2h


def _init(initializer: Any) -> dict[str, Any]:
    return {} if initializer is None else {"init": initializer}


class ConvRNNCell(BaseConvRNNCell):
    """``h' = act(conv_i2h(x) + conv_h2h(h))``; see :class:`BaseConvRNNCell` for the arguments."""

    def __init__(self, input_shape: Sequence[int], num_hidden: int, h2h_kernel: Sequence[int] = (3, 3),
                 h2h_dilate: Sequence[int] = (1, 1), i2h_kernel: Sequence[int] = (3, 3),
                 i2h_stride: Sequence[int] = (1, 1), i2h_pad: Sequence[int] = (1, 1),
                 i2h_dilate: Sequence[int] = (1, 1), i2h_weight_initializer: Any = None,
                 h2h_weight_initializer: Any = None, i2h_bias_initializer: Any = "zeros",
                 h2h_bias_initializer: Any = "zeros", activation: Any = _leaky_relu, prefix: str = "ConvRNN_",
                 params: RNNParams | None = None, conv_layout: str = "NCHW") -> None:
        super().__init__(input_shape, num_hidden, h2h_kernel, h2h_dilate, i2h_kernel, i2h_stride, i2h_pad,
                         i2h_dilate, i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, activation, prefix, params, conv_layout)

    def __call__(self, inputs: Any, states: Sequence[Any]) -> tuple[Any, list]:
        self._counter += 1
        name = f"{self._prefix}t{self._counter}_"
        i2h, h2h = self._conv_forward(inputs, states, name)
        output = self._get_activation(i2h + h2h, self._activation, name=f"{name}out")
        return output, [output]


class ConvLSTMCell(BaseConvRNNCell):
    """A convolutional LSTM, gates ``i, f, c, o`` along the channel axis (MXNet's order);
    see :class:`BaseConvRNNCell` for the arguments."""

    def __init__(self, input_shape: Sequence[int], num_hidden: int, h2h_kernel: Sequence[int] = (3, 3),
                 h2h_dilate: Sequence[int] = (1, 1), i2h_kernel: Sequence[int] = (3, 3),
                 i2h_stride: Sequence[int] = (1, 1), i2h_pad: Sequence[int] = (1, 1),
                 i2h_dilate: Sequence[int] = (1, 1), i2h_weight_initializer: Any = None,
                 h2h_weight_initializer: Any = None, i2h_bias_initializer: Any = "zeros",
                 h2h_bias_initializer: Any = "zeros",
                 activation: Any = _tanh,
                 prefix: str = "ConvLSTM_", params: RNNParams | None = None, conv_layout: str = "NCHW") -> None:
        super().__init__(input_shape, num_hidden, h2h_kernel, h2h_dilate, i2h_kernel, i2h_stride, i2h_pad,
                         i2h_dilate, i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, activation, prefix, params, conv_layout)

    @property
    def _gate_names(self) -> Sequence[str]:
        return ("_i", "_f", "_c", "_o")

    @property
    def state_info(self) -> list[dict]:
        return [{"shape": self._state_shape, "__layout__": self._conv_layout}] * 2

    def __call__(self, inputs: Any, states: Sequence[Any]) -> tuple[Any, list]:
        self._counter += 1
        name = f"{self._prefix}t{self._counter}_"
        i2h, h2h = self._conv_forward(inputs, states, name)
        sliced = symbol.SliceChannel(i2h + h2h, num_outputs=4, axis=self._conv_layout.find("C"),
                                     name=f"{name}slice")
        in_gate = symbol.Activation(sliced[0], act_type="sigmoid", name=f"{name}i")
        forget_gate = symbol.Activation(sliced[1], act_type="sigmoid", name=f"{name}f")
        in_transform = self._get_activation(sliced[2], self._activation, name=f"{name}c")
        out_gate = symbol.Activation(sliced[3], act_type="sigmoid", name=f"{name}o")
        next_c = symbol._plus(forget_gate * states[1], in_gate * in_transform, name=f"{name}state")
        next_h = symbol._mul(out_gate, self._get_activation(next_c, self._activation), name=f"{name}out")
        return next_h, [next_h, next_c]


class ConvGRUCell(BaseConvRNNCell):
    """A convolutional GRU, gates ``r, z`` and the candidate along the channel axis; see
    :class:`BaseConvRNNCell` for the arguments."""

    def __init__(self, input_shape: Sequence[int], num_hidden: int, h2h_kernel: Sequence[int] = (3, 3),
                 h2h_dilate: Sequence[int] = (1, 1), i2h_kernel: Sequence[int] = (3, 3),
                 i2h_stride: Sequence[int] = (1, 1), i2h_pad: Sequence[int] = (1, 1),
                 i2h_dilate: Sequence[int] = (1, 1), i2h_weight_initializer: Any = None,
                 h2h_weight_initializer: Any = None, i2h_bias_initializer: Any = "zeros",
                 h2h_bias_initializer: Any = "zeros", activation: Any = _leaky_relu, prefix: str = "ConvGRU_",
                 params: RNNParams | None = None, conv_layout: str = "NCHW") -> None:
        super().__init__(input_shape, num_hidden, h2h_kernel, h2h_dilate, i2h_kernel, i2h_stride, i2h_pad,
                         i2h_dilate, i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, activation, prefix, params, conv_layout)

    @property
    def _gate_names(self) -> Sequence[str]:
        return ("_r", "_z", "_o")

    def __call__(self, inputs: Any, states: Sequence[Any]) -> tuple[Any, list]:
        self._counter += 1
        name = f"{self._prefix}t{self._counter}_"
        i2h, h2h = self._conv_forward(inputs, states, name)
        axis = self._conv_layout.find("C")
        i2h_r, i2h_z, i2h = symbol.SliceChannel(i2h, num_outputs=3, axis=axis, name=f"{name}_i2h_slice")
        h2h_r, h2h_z, h2h = symbol.SliceChannel(h2h, num_outputs=3, axis=axis, name=f"{name}_h2h_slice")
        reset_gate = symbol.Activation(i2h_r + h2h_r, act_type="sigmoid", name=f"{name}_r_act")
        update_gate = symbol.Activation(i2h_z + h2h_z, act_type="sigmoid", name=f"{name}_z_act")
        candidate = self._get_activation(i2h + reset_gate * h2h, self._activation, name=f"{name}_h_act")
        next_h = symbol._plus((1.0 - update_gate) * candidate, update_gate * states[0], name=f"{name}out")
        return next_h, [next_h]
