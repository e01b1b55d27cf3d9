"""The per-thread NumPy-shape flag of MXNet 1.6+ (``mx.np_shape()``, ``mx.util.set_np_shape``).

mxkit's arrays always have NumPy's shape semantics, so the flag changes no results; it is
kept because MXNet code sets and reads it, and because MXNet records it in what it writes
(symbol JSON carries ``attrs.is_np_shape`` when the flag was on). It lives in core so that
every component that writes such files reads the same flag.
"""

from __future__ import annotations

import threading

_state = threading.local()


def is_np_shape() -> bool:
    """Whether NumPy shape semantics were switched on in this thread (``set_np_shape``)."""
    return bool(getattr(_state, "np_shape", False))


def set_np_shape(active: bool) -> bool:
    """Switch NumPy shape semantics on or off in this thread; returns the previous setting."""
    previous = is_np_shape()
    _state.np_shape = bool(active)
    return previous


__all__ = ["is_np_shape", "set_np_shape"]
