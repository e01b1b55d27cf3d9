"""``RNN`` and ``_backward_RNN`` with the elementwise part of each step in vectorized C.

The recurrences stay mxkit-ndarray's (:mod:`mxkit.ndarray.kernels`); for float32 this
module hands them :mod:`mxkit_cpu._fastmath`'s kernels: an LSTM step in one pass instead of a
dozen numpy passes and temporaries (2-layer LSTM, T=35, N=32, H=200: see
``benchmarks/rnn.py``), and the GRU and tanh RNN activations. Other dtypes run the generic
code unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxkit_cpu import _fastmath


def _into_new_array(function: Any) -> Any:
    """``function(x, out)`` as ``f(x) -> out`` (what the recurrence calls)."""

    def apply(x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x)
        out = np.empty_like(x)
        function(x.reshape(-1), out.reshape(-1))
        return out

    return staticmethod(apply)


class FastCell:
    """:class:`mxkit.ndarray.kernels.CellKernels` on float32 numpy arrays."""

    lstm_forward = staticmethod(_fastmath.lstm_forward)
    lstm_backward = staticmethod(_fastmath.lstm_backward)
    tanh = _into_new_array(_fastmath.tanh)
    sigmoid = _into_new_array(_fastmath.sigmoid)


_CELL = FastCell()


def _cell_for(arrays: list) -> FastCell | None:
    if all(isinstance(a, np.ndarray) and a.dtype == np.float32 and a.flags.c_contiguous for a in arrays):
        return _CELL
    return None


def rnn(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    from mxkit.ndarray.kernels import rnn_kernel  # here: importing it defines operators, which loads this plugin

    rnn_kernel(xp, inputs, outputs, params, cell=_cell_for([*inputs, *outputs]))


def rnn_backward(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    from mxkit.ndarray.kernels import rnn_backward_kernel

    rnn_backward_kernel(xp, inputs, outputs, params, cell=_cell_for([*inputs, *outputs]))


#: operator name -> kernel
KERNELS = {"RNN": rnn, "_backward_RNN": rnn_backward}

__all__ = ["KERNELS", "FastCell"]
