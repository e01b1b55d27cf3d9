"""``mx.util``: MXNet's numpy-shape switches and environment helpers.

MXNet 1.x had two shape semantics: the legacy one, where a 0 in a shape meant "unknown"
and scalars did not exist, and NumPy's (``mx.np_shape()``/``npx.set_np()``), where 0 is a
real size. mxkit's NDArray always has NumPy's semantics for arrays (zero-size and 0-d
arrays exist); in ``infer_shape`` a 0 or -1 dimension of an *input hint* is read as unknown,
as in legacy MXNet. The switch below is therefore a recorded, per-thread flag that code can
set and query as in MXNet (``is_np_shape()``); setting it changes no array semantics.
NumPy *array* mode (``set_np``, ``use_np``, ``is_np_array``) is :mod:`mxkit.mx.numpy_mode`'s:
not provided, and asking for it raises.
"""

from __future__ import annotations

import functools
import inspect
import os
from typing import Any

from mxkit.core.shape_mode import is_np_shape, set_np_shape
from mxkit.mx.numpy_mode import NumpyModeError, is_np_array, reset_np, set_np, use_np


class _NumpyShapeScope:
    """``with np_shape(active):`` sets the flag for the block and restores it after."""

    def __init__(self, active: bool = True):
        self._active = bool(active)
        self._previous: bool | None = None

    def __enter__(self) -> _NumpyShapeScope:
        self._previous = set_np_shape(self._active)
        return self

    def __exit__(self, *exc: object) -> None:
        set_np_shape(bool(self._previous))


def np_shape(active: bool = True) -> _NumpyShapeScope:
    """A scope with NumPy shape semantics on (``active=True``) or off: ``with mx.np_shape(): ...``."""
    return _NumpyShapeScope(active)


def use_np_shape(func: Any) -> Any:
    """Decorator: run a function, or every public method of a class, under ``np_shape(True)``."""
    if inspect.isclass(func):
        for name, method in list(vars(func).items()):
            if callable(method) and (not name.startswith("_") or name == "__init__"):
                setattr(func, name, use_np_shape(method))
        return func
    if not callable(func):
        raise TypeError(f"use_np_shape decorates a function or a class, got {func!r}")

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with np_shape(True):
            return func(*args, **kwargs)
    return wrapper


def getenv(name: str) -> str | None:
    """The value of environment variable ``name`` (None when unset)."""
    return os.environ.get(name)


def setenv(name: str, value: str | None) -> None:
    """Set environment variable ``name`` (None unsets it)."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = str(value)


def makedirs(path: str) -> None:
    """Create ``path`` and its parents; an existing directory is fine."""
    os.makedirs(os.path.expanduser(path), exist_ok=True)


__all__ = ["NumpyModeError", "getenv", "is_np_array", "is_np_shape", "makedirs", "np_shape", "reset_np", "set_np",
           "set_np_shape", "setenv", "use_np", "use_np_shape"]
