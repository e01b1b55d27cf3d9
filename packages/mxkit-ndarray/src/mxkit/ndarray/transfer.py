"""Copies into an NDArray: from another NDArray (any device), a numpy array or a scalar."""

from __future__ import annotations

from typing import Any

import numpy as np
from mxkit.core.errors import DTypeError, ShapeError
from mxkit.ndarray.invoke import backend_of, push_raw


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (int, float, np.number, np.bool_)) and not isinstance(value, np.ndarray)


def copy_into(target: Any, source: Any) -> None:
    """Push a copy of ``source`` (NDArray, numpy array or scalar) into ``target``, broadcasting."""
    from mxkit.ndarray.ndarray import NDArray

    if isinstance(source, NDArray):
        src_data, dst_data = source._data, target._data
        if source._ctx.device_type == target._ctx.device_type == "cpu" or \
                source._ctx == target._ctx:
            xp = backend_of(target._ctx).xp

            def run() -> None:
                xp.copyto(dst_data, xp.broadcast_to(src_data, dst_data.shape), casting="unsafe")
        else:
            src_backend, dst_backend = backend_of(source._ctx), backend_of(target._ctx)
            if source._ctx.device_type == "cpu":
                # host data into a device: the device's own writer (a GPU's copy stream)
                def run() -> None:
                    dst_backend.copy_from_host(dst_data, np.broadcast_to(src_data, dst_data.shape))
            elif target._ctx.device_type == "cpu":
                def run() -> None:
                    np.copyto(dst_data, np.broadcast_to(src_backend.to_host(src_data), dst_data.shape),
                              casting="unsafe")
            else:
                def run() -> None:
                    src_backend.copy_to(src_data, dst_data, dst_backend)

            # a transfer runs on the copy workers of the accelerator it involves
            device_ctx = target._ctx if target._ctx.device_type != "cpu" else source._ctx
            push_raw(run, [source], [target], device_ctx, "_copyto", copy=True, overwrites=True)
            return
        # a copy within one device is a kernel like any other: a small one may run inline
        push_raw(run, [source], [target], target._ctx, "_copyto", overwrites=True,
                 nbytes=src_data.nbytes + dst_data.nbytes)
        return
    if _is_scalar(source):
        value = source
        data = target._data

        def fill() -> None:
            data[...] = value

        push_raw(fill, [], [target], target._ctx, "_set_value", overwrites=True, nbytes=data.nbytes)
        return
    try:
        host = np.asarray(source)
    except Exception as exc:
        raise DTypeError(f"cannot assign a {type(source).__name__} to an NDArray: {exc}") from None
    if host.dtype == object:
        raise DTypeError(f"cannot assign a {type(source).__name__} of mixed objects to an NDArray; "
                         f"use numbers, a numpy array or an NDArray")
    if not target.shape and host.size == 1:
        host = host.reshape(())  # one element into one element: b[0] = np.array([x]), as MXNet allows
    extra = host.ndim - len(target.shape)
    if extra > 0 and all(n == 1 for n in host.shape[:extra]):
        host = host.reshape(host.shape[extra:])  # MXNet drops a value's extra leading axes of length 1
    try:
        fits = np.broadcast_shapes(host.shape, target.shape) == tuple(target.shape)
    except ValueError:
        fits = False
    if not fits:  # the value must broadcast to the target, not the target to the value
        raise ShapeError(f"cannot assign a value of shape {host.shape} to an array of shape {target.shape}")
    ctx = target._ctx
    if ctx.device_type != "cpu":
        # a device with its own memory: one copy op, from a snapshot of the host data
        snapshot = np.array(np.broadcast_to(host, target.shape), dtype=target._data.dtype)
        backend = backend_of(ctx)
        data = target._data
        push_raw(lambda: backend.copy_from_host(data, snapshot), [], [target], ctx, "_copy_from_host", copy=True,
                 overwrites=True)
        return
    device_value = backend_of(ctx).from_host(np.ascontiguousarray(np.broadcast_to(host, target.shape),
                                                              dtype=target._data.dtype))
    data = target._data

    def copy_host() -> None:
        data[...] = device_value

    push_raw(copy_host, [], [target], ctx, "_copy_from_host", overwrites=True, nbytes=2 * data.nbytes)


def copy_from_host(target: Any, host: np.ndarray) -> None:
    """Push a copy of the host array ``host`` into all of ``target``, reading ``host`` when the copy
    runs rather than now.

    ``target[:] = host`` (:func:`copy_into`) first takes a snapshot of ``host``, because the
    caller may change it once the call returns; a caller whose host array stays unchanged
    until the copy has run (an iterator's own batch arrays, which it replaces rather than
    writes) saves that second copy here. The copy is ordered after every earlier use of
    ``target`` like any write of it.

    Raises
    ------
    ShapeError, DTypeError
        When ``host`` has not ``target``'s shape or dtype (nothing is converted here).
    """
    if tuple(host.shape) != tuple(target.shape):
        raise ShapeError(f"copy_from_host: the host array has shape {tuple(host.shape)}, the target "
                         f"{tuple(target.shape)}; they must be equal")
    data = target._data
    if host.dtype != data.dtype:
        raise DTypeError(f"copy_from_host: the host array has dtype {host.dtype}, the target {data.dtype}; "
                         f"they must be equal (convert with astype first)")
    ctx = target._ctx
    if ctx.device_type != "cpu":
        backend = backend_of(ctx)
        contiguous = np.ascontiguousarray(host)  # what a device's writer takes (a copy only for a strided view)
        push_raw(lambda: backend.copy_from_host(data, contiguous), [], [target], ctx, "_copy_from_host",
                 copy=True, overwrites=True)
        return

    def run() -> None:
        np.copyto(data, host)

    push_raw(run, [], [target], ctx, "_copy_from_host", overwrites=True, nbytes=2 * data.nbytes)


__all__ = ["copy_from_host", "copy_into"]
