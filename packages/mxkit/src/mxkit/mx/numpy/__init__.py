"""``mx.np`` / ``mx.numpy``: the array-creation part of MXNet 1.6+'s NumPy interface.

mxkit does not provide MXNet's NumPy array *mode* (see :mod:`mxkit.mx.numpy_mode`):
``mx.np.ndarray`` is mxkit's one array type, :class:`mx.nd.NDArray`, which already has NumPy
shape semantics (0-d and zero-size arrays, ``shape`` tuples). What is here is what ported code
calls to *make* arrays, with ``mx.np``'s signatures (``size=``, ``dtype`` before ``ctx``) and its
default dtype, float32. The results are NDArrays: their operators are ``mx.nd``'s.
"""

from __future__ import annotations

from typing import Any

import numpy as _onp
from mxkit.core.errors import DTypeError
from mxkit.mx.numpy import random
from mxkit.ndarray import NDArray
from mxkit.ndarray import creation as _creation

#: ``mx.np.ndarray``: mxkit's array type (``isinstance(x, mx.np.ndarray)`` holds for every NDArray).
ndarray = NDArray

float16 = _onp.float16
float32 = _onp.float32
float64 = _onp.float64
int8 = _onp.int8
int32 = _onp.int32
int64 = _onp.int64
uint8 = _onp.uint8
bool_ = _onp.bool_
pi = _onp.pi
e = _onp.e
inf = _onp.inf
nan = _onp.nan
newaxis = None


def _check_order(order: str, name: str) -> None:
    if order != "C":
        raise DTypeError(f"mx.np.{name}: order={order!r} is not supported; arrays are row-major, pass order='C'")


def array(object: Any, dtype: Any = None, ctx: Any = None) -> NDArray:
    """An array holding a copy of ``object``; float32 unless ``dtype`` is given or ``object`` is an NDArray."""
    return _creation.array(object, ctx=ctx, dtype=dtype)


def zeros(shape: Any, dtype: Any = None, order: str = "C", ctx: Any = None) -> NDArray:
    """An array of zeros (float32 unless ``dtype`` is given)."""
    _check_order(order, "zeros")
    return _creation.zeros(shape, ctx=ctx, dtype=dtype)


def ones(shape: Any, dtype: Any = None, order: str = "C", ctx: Any = None) -> NDArray:
    """An array of ones (float32 unless ``dtype`` is given)."""
    _check_order(order, "ones")
    return _creation.ones(shape, ctx=ctx, dtype=dtype)


def empty(shape: Any, dtype: Any = None, order: str = "C", ctx: Any = None) -> NDArray:
    """An uninitialised array (float32 unless ``dtype`` is given)."""
    _check_order(order, "empty")
    return _creation.empty(shape, ctx=ctx, dtype=dtype)


def full(shape: Any, fill_value: Any, dtype: Any = None, order: str = "C", ctx: Any = None,
         out: NDArray | None = None) -> NDArray:
    """An array filled with ``fill_value`` (float32 unless ``dtype`` is given)."""
    _check_order(order, "full")
    return _creation.full(shape, fill_value, ctx=ctx, dtype=dtype, out=out)


def arange(start: float, stop: float | None = None, step: float = 1, dtype: Any = None, ctx: Any = None) -> NDArray:
    """Evenly spaced values in ``[start, stop)`` (``arange(n)`` is ``0 .. n-1``), float32 by default."""
    return _creation.arange(start, stop, step, ctx=ctx, dtype=dtype)


def concatenate(seq: Any, axis: int = 0, out: NDArray | None = None) -> NDArray:
    """Join the arrays of ``seq`` along ``axis``."""
    result = _creation.concatenate(list(seq), axis=axis)
    if out is None:
        return result
    out[:] = result
    return out


__all__ = ["arange", "array", "bool_", "concatenate", "e", "empty", "float16", "float32", "float64", "full",
           "inf", "int32", "int64", "int8", "nan", "ndarray", "newaxis", "ones", "pi", "random", "uint8", "zeros"]
