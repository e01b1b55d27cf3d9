"""MXNet 1.6+'s NumPy-mode switches (``npx.set_np``, ``reset_np``, ``is_np_array``, ``use_np``).

MXNet's NumPy mode has two halves. The *shape* half (0 is a real size, 0-d arrays exist) is
what mxkit's arrays always do; its flag is kept (:mod:`mxkit.core.shape_mode`). The *array*
half makes every operator, ``Parameter.data()`` and Gluon block return ``mx.np.ndarray``
objects with NumPy's operator set, and ``mx.sym`` become ``mx.sym.np``. mxkit does not provide
that half: its one array type is :class:`mx.nd.NDArray`. Switching it on therefore raises
:class:`NumpyModeError` instead of pretending, so a ported script stops where it would start to
behave differently, and :func:`is_np_array` is always False (code that branches on it takes
the ``mx.nd`` path, which works).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from mxkit.core.errors import MXKitError
from mxkit.core.shape_mode import is_np_shape, set_np_shape


class NumpyModeError(MXKitError, NotImplementedError):
    """MXNet's NumPy array mode (``npx.set_np()``, ``@use_np``) was asked for; mxkit lacks it."""


_HOW_TO_PORT = ("mxkit has one array type, mx.nd.NDArray, which already has NumPy shape semantics "
                "(0-d and zero-size arrays); port mx.np code to mx.nd, and switch on only the shape "
                "flag with npx.set_np(shape=True, array=False) or mx.util.set_np_shape(True)")


def is_np_array() -> bool:
    """Whether MXNet's NumPy array mode is on: always False in mxkit (see :class:`NumpyModeError`)."""
    return False


def set_np(shape: bool = True, array: bool = True, dtype: bool = False) -> None:
    """Switch MXNet's NumPy semantics on, as far as mxkit provides them.

    Parameters
    ----------
    shape : bool
        NumPy shape semantics: sets the per-thread flag (:func:`mxkit.core.shape_mode.set_np_shape`).
    array : bool
        NumPy array semantics (``mx.np.ndarray`` results everywhere): not provided, so True
        raises :class:`NumpyModeError`.
    dtype : bool
        float64 as the default dtype of ``mx.np`` creation functions: not provided, so True
        raises :class:`NumpyModeError`.
    """
    if array:
        raise NumpyModeError(f"set_np(array=True): MXNet's NumPy array mode is not provided; {_HOW_TO_PORT}")
    if dtype:
        raise NumpyModeError("set_np(dtype=True): float64 as the default dtype of NumPy mode is not provided; "
                             "pass dtype= to the creation functions instead")
    set_np_shape(shape)


def reset_np() -> None:
    """Switch NumPy semantics off (MXNet's ``npx.reset_np()``): clears the shape flag."""
    set_np_shape(False)


def use_np(func: Any) -> Any:
    """MXNet's ``@use_np``: runs ``func`` (or a class's methods) under NumPy array mode.

    mxkit does not provide array mode, so the decorated function raises
    :class:`NumpyModeError` when *called* (decorating is fine, so that modules that
    decorate import).
    """
    if inspect.isclass(func):
        for name, method in list(vars(func).items()):
            if callable(method) and (not name.startswith("_") or name == "__init__"):
                setattr(func, name, use_np(method))
        return func
    if not callable(func):
        raise TypeError(f"use_np decorates a function or a class, got {func!r}")

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        raise NumpyModeError(f"{getattr(func, '__qualname__', func)!s} is decorated with @use_np, which needs "
                             f"MXNet's NumPy array mode; it is not provided: {_HOW_TO_PORT}")
    return wrapper


__all__ = ["NumpyModeError", "is_np_array", "is_np_shape", "reset_np", "set_np", "use_np"]
