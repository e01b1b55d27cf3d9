"""Max and average pooling through cuDNN (forward and backward), where cuDNN computes what
mxkit's generic kernel does.

The generic kernel reads the input once per window offset (nine passes for a 3x3 window forward,
about forty kernels backward); cuDNN does one pass each way. It serves max and average pooling
of float data on 1 to 3 spatial axes whose windows cuDNN lays out the same way: the ``valid``
convention, or ``full`` where it gives the same output size, symmetric padding, and for
average pooling MXNet's choice of dividing by the whole window (``count_include_pad``, the
default) or by its cells inside the input. Other calls (``same`` padding, ``lp`` and ``sum``
pooling, other dtypes, ``cudnn_off``) go to the generic kernel.

Max pooling propagates NaN as the generic kernel does. Where a window holds its maximum more
than once, cuDNN's backward picks the cell that takes the gradient (MXNet's GPU backward does
the same); the generic kernel gives it to the first one.
"""

from __future__ import annotations

import ctypes
from typing import Any

from mxkit.ndarray.kernels import PoolGeometry

from mxkit_cuda import cudnn

_MAX, _AVERAGE_WITH_PADDING, _AVERAGE_WITHOUT_PADDING = 0, 1, 2
_PROPAGATE_NAN = 1


def _mode(params: dict) -> int | None:
    if params["pool_type"] == "max":
        return _MAX
    if params["pool_type"] == "avg":
        return _AVERAGE_WITHOUT_PADDING if params["count_include_pad"] is False else _AVERAGE_WITH_PADDING
    return None


def geometry(params: dict, *arrays: Any) -> PoolGeometry | None:
    """The call's windows when cuDNN serves it, else None."""
    if params["cudnn_off"] or params["pooling_convention"] == "same" or _mode(params) is None:
        return None
    if cudnn.library() is None:
        return None
    dtype = arrays[0].dtype
    if dtype.name not in cudnn.DATA_TYPES or any(a.dtype != dtype for a in arrays):
        return None
    g = PoolGeometry(params, arrays[0].shape)
    floor_sizes = tuple(1 + (size + 2 * p - k) // s
                        for size, p, k, s in zip(g.spatial, g.pad, g.kernel, g.stride))
    if floor_sizes != g.out_spatial:  # a 'full' window past cuDNN's symmetric padding
        return None
    return g


class _Plan:
    """The pooling and tensor descriptors of one call's shapes."""

    def __init__(self, g: PoolGeometry, mode: int, x_shape: tuple[int, ...], y_shape: tuple[int, ...],
                 dtype: str) -> None:
        lib = cudnn.library()
        kernel, pad, stride = list(g.kernel), list(g.pad), list(g.stride)
        if len(kernel) == 1:  # cuDNN pools 2-D or 3-D: a 1-D window is one row high
            kernel, pad, stride = [1, *kernel], [0, *pad], [1, *stride]
            x_shape, y_shape = (*x_shape[:2], 1, *x_shape[2:]), (*y_shape[:2], 1, *y_shape[2:])
        self.pooling = ctypes.c_void_p()
        cudnn.check(lib.cudnnCreatePoolingDescriptor(ctypes.byref(self.pooling)), "cudnnCreatePoolingDescriptor")
        ints = ctypes.c_int * len(kernel)
        cudnn.check(lib.cudnnSetPoolingNdDescriptor(self.pooling, mode, _PROPAGATE_NAN, len(kernel), ints(*kernel),
                                                    ints(*pad), ints(*stride)), "cudnnSetPoolingNdDescriptor")
        code = cudnn.DATA_TYPES[dtype]
        self.x = cudnn.tensor_descriptor(x_shape, code)
        self.y = cudnn.tensor_descriptor(y_shape, code)


_plans: dict[tuple, _Plan] = {}


def _plan(g: PoolGeometry, params: dict, x: Any, y_shape: tuple[int, ...]) -> _Plan:
    mode = _mode(params)
    key = (mode, g.kernel, g.pad, g.stride, tuple(x.shape), tuple(y_shape), x.dtype.name)
    return cudnn.cached(_plans, key, lambda: _Plan(g, mode, tuple(x.shape), tuple(y_shape), x.dtype.name))


def forward(xp: Any, g: PoolGeometry, params: dict, x: Any, y: Any) -> None:
    """``y`` = the pooling of ``x`` (``y`` C-contiguous)."""
    x = xp.ascontiguousarray(x)
    plan = _plan(g, params, x, y.shape)
    one, zero = cudnn.scalars(x.dtype)
    handle = cudnn.current_handle()
    with handle.lock:
        handle.follow_current_stream()
        cudnn.check(cudnn.library().cudnnPoolingForward(handle.ptr, plan.pooling, one, plan.x, cudnn.pointer(x), zero,
                                                        plan.y, cudnn.pointer(y)), "cudnnPoolingForward")


def backward(xp: Any, g: PoolGeometry, params: dict, dy: Any, x: Any, y: Any, dx: Any) -> None:
    """``dx`` = the gradient of the pooling of ``x`` (output ``y``) for output gradient ``dy``."""
    dy, x, y = (xp.ascontiguousarray(a) for a in (dy, x, y))
    plan = _plan(g, params, x, y.shape)
    one, zero = cudnn.scalars(x.dtype)
    handle = cudnn.current_handle()
    with handle.lock:
        handle.follow_current_stream()
        cudnn.check(cudnn.library().cudnnPoolingBackward(
            handle.ptr, plan.pooling, one, plan.y, cudnn.pointer(y), plan.y, cudnn.pointer(dy), plan.x,
            cudnn.pointer(x), zero, plan.x, cudnn.pointer(dx)), "cudnnPoolingBackward")
