"""``mx.npx``: MXNet's NumPy-extension namespace, as far as mxkit provides it.

The mode switches (``set_np``, ``reset_np``, ``is_np_array``, ``use_np``) follow
:mod:`mxkit.mx.numpy_mode`: the shape flag works, NumPy array mode raises
:class:`~mxkit.mx.numpy_mode.NumpyModeError`. The device helpers are ``mx``'s.
"""

from __future__ import annotations

from mxkit.core.context import cpu, current_context, gpu
from mxkit.mx.numpy_mode import NumpyModeError, is_np_array, is_np_shape, reset_np, set_np, use_np
from mxkit.mx.util import np_shape, use_np_shape

__all__ = ["NumpyModeError", "cpu", "current_context", "gpu", "is_np_array", "is_np_shape", "np_shape",
           "reset_np", "set_np", "use_np", "use_np_shape"]
