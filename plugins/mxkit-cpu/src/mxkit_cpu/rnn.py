"""``RNN`` and ``_backward_RNN`` with the elementwise part of each LSTM step in one vectorized C pass.

The recurrences stay mxkit-ndarray's (:mod:`mxkit.ndarray.ops._rnn_math`); for float32 LSTMs
this module hands them :mod:`mxkit_cpu._fastmath`'s step kernels, which replace a dozen numpy
passes and temporaries per time step (2-layer LSTM, T=35, N=32, H=200: see
``benchmarks/rnn.py``). Other modes and dtypes run the generic code unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxkit_cpu import _fastmath


class FastLSTMCell:
    """:class:`mxkit.ndarray.ops._rnn_math.LSTMCellKernels` on float32 numpy arrays."""

    lstm_forward = staticmethod(_fastmath.lstm_forward)
    lstm_backward = staticmethod(_fastmath.lstm_backward)


_CELL = FastLSTMCell()


def _cell_for(params: dict, arrays: list) -> FastLSTMCell | None:
    if params["mode"] != "lstm":
        return None
    if all(isinstance(a, np.ndarray) and a.dtype == np.float32 and a.flags.c_contiguous for a in arrays):
        return _CELL
    return None


def rnn(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    from mxkit.ndarray.ops import nn_rnn  # here: importing it defines operators, which loads this plugin

    nn_rnn.rnn_kernel(xp, inputs, outputs, params, cell=_cell_for(params, [*inputs, *outputs]))


def rnn_backward(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    from mxkit.ndarray.ops import nn_rnn

    nn_rnn.rnn_backward_kernel(xp, inputs, outputs, params, cell=_cell_for(params, [*inputs, *outputs]))


#: operator name -> kernel
KERNELS = {"RNN": rnn, "_backward_RNN": rnn_backward}

__all__ = ["KERNELS", "FastLSTMCell"]
