"""DLPack exchange: zero-copy sharing of NDArray memory with numpy, CuPy and PyTorch.

Exporting waits for pending writes (the consumer reads the memory directly, outside the
engine); importing wraps the producer's memory in a new NDArray without copying.
"""

from __future__ import annotations

from typing import Any

from mxkit.core.context import Context
from mxkit.core.errors import DeviceError, MXKitError

#: DLPack device types (dlpack.h): kDLCPU 1, kDLCUDA 2, kDLCUDAHost 3
_DLPACK_DEVICE_TYPES = {1: "cpu", 2: "gpu", 3: "cpu_pinned"}


def dlpack_device(array: Any) -> tuple[int, int]:
    """``(device type, device id)`` of ``array`` in DLPack's numbering."""
    if array.context.device_type == "cpu":
        return (1, 0)  # every cpu(i) is host memory
    return tuple(array._data.__dlpack_device__())


def export_capsule(array: Any, stream: Any = None, **kwargs: Any) -> Any:
    """The DLPack capsule of ``array``'s memory, after its pending writes."""
    array.wait_to_read()
    if stream is not None:
        kwargs["stream"] = stream
    return array._data.__dlpack__(**kwargs)


class _CapsuleHolder:
    """Lets a bare DLPack capsule (MXNet's ``to_dlpack_for_read``) go through ``from_dlpack`` APIs."""

    def __init__(self, capsule: Any, device: tuple[int, int]):
        self._capsule = capsule
        self._device = device

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._device


def from_dlpack(source: Any) -> Any:
    """An NDArray sharing the memory of ``source``.

    Parameters
    ----------
    source : object with ``__dlpack__`` (numpy, CuPy, torch arrays, NDArray) or a DLPack capsule
        A bare capsule is assumed to hold host memory (as MXNet's CPU capsules do).

    Raises
    ------
    DeviceError
        If the memory is on a device type mxkit has no backend for.
    """
    from mxkit.ndarray.invoke import backend_of, engine
    from mxkit.ndarray.ndarray import NDArray

    if isinstance(source, NDArray):
        return source._view(source._data)
    if hasattr(source, "__dlpack__"):
        device_type, device_id = source.__dlpack_device__()
    elif type(source).__name__ == "PyCapsule":
        device_type, device_id = 1, 0
        source = _CapsuleHolder(source, (1, 0))
    else:
        raise MXKitError(f"from_dlpack needs an object with __dlpack__ or a DLPack capsule, got "
                         f"{type(source).__name__}")
    kind = _DLPACK_DEVICE_TYPES.get(int(device_type))
    if kind is None:
        raise DeviceError(f"DLPack device type {device_type} is not supported; supported: "
                          + ", ".join(f"{k} ({v})" for k, v in _DLPACK_DEVICE_TYPES.items()))
    ctx = Context("cpu", 0) if kind in ("cpu", "cpu_pinned") else Context(kind, int(device_id))
    backend = backend_of(ctx)
    return NDArray._from_data(backend.from_dlpack(source), ctx, engine().new_var())


def to_dlpack_for_read(data: Any) -> Any:
    """A DLPack capsule of ``data`` for reading (MXNet's ``mx.nd.to_dlpack_for_read``)."""
    return data.to_dlpack_for_read()


def to_dlpack_for_write(data: Any) -> Any:
    """A DLPack capsule of ``data`` for writing (MXNet's ``mx.nd.to_dlpack_for_write``)."""
    return data.to_dlpack_for_write()


def from_numpy(ndarray: Any, zero_copy: bool = True) -> Any:
    """An NDArray of a numpy array's values, in its dtype (MXNet's ``mx.nd.from_numpy``).

    Parameters
    ----------
    ndarray : numpy.ndarray
        A C-contiguous array when ``zero_copy``.
    zero_copy : bool
        Share the numpy array's memory instead of copying it. As in MXNet, the numpy array
        is then made read-only, so that it changes only through the NDArray (whose writes
        are ordered by the engine).

    Raises
    ------
    ShapeError
        If ``zero_copy`` is asked of an array that is not C-contiguous.
    """
    import numpy as np
    from mxkit.core.errors import ShapeError
    from mxkit.ndarray.creation import array

    if not isinstance(ndarray, np.ndarray):
        raise MXKitError(f"from_numpy needs a numpy.ndarray, got {type(ndarray).__name__}")
    if not zero_copy:
        return array(ndarray, dtype=ndarray.dtype)
    if not ndarray.flags.c_contiguous:
        raise ShapeError("from_numpy(zero_copy=True) needs a C-contiguous numpy array; pass "
                         "np.ascontiguousarray(a), or zero_copy=False to copy it")
    if not ndarray.flags.writeable:
        # read-only already (e.g. shared before): the NDArray still writes it, as MXNet's does,
        # so its view must be taken while the array is writeable
        try:
            ndarray.flags.writeable = True
        except ValueError:
            raise MXKitError("from_numpy(zero_copy=True) cannot share a read-only view of memory it does not "
                             "own; pass zero_copy=False to copy it") from None
    shared = from_dlpack(ndarray)
    ndarray.flags.writeable = False
    return shared


__all__ = ["from_dlpack", "from_numpy", "to_dlpack_for_read", "to_dlpack_for_write"]
