"""The CPU backend object: aligned numpy allocation and host copies."""

from __future__ import annotations

import threading
from typing import Any

import numpy

ALIGNMENT = 64  # bytes: a cache line, and what AVX-512 loads want
SMALL_LIMIT = 1024  # bytes: arrays up to this size are carved out of a shared slab
SLAB_BYTES = 64 * 1024


def _aligned_buffer(nbytes: int) -> numpy.ndarray:
    raw = numpy.empty(nbytes + ALIGNMENT, dtype=numpy.uint8)
    start = (-raw.ctypes.data) % ALIGNMENT
    return raw[start:start + nbytes]


class _SlabAllocator:
    """Bump allocation of small arrays from 64 KiB aligned slabs.

    Finding an aligned address costs numpy a ctypes round trip (over 1 µs), several times
    the cost of a small operator's arithmetic; a slab pays it once per 64 KiB. A slab is
    freed when the last array carved from it is; a long-lived small array therefore keeps
    at most one slab (64 KiB) alive.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slab = _aligned_buffer(SLAB_BYTES)
        self._offset = 0

    def empty(self, shape: tuple[int, ...], dtype: numpy.dtype, count: int) -> numpy.ndarray:
        nbytes = count * dtype.itemsize
        rounded = -(-max(nbytes, 1) // ALIGNMENT) * ALIGNMENT
        with self._lock:
            if self._offset + rounded > SLAB_BYTES:
                self._slab = _aligned_buffer(SLAB_BYTES)
                self._offset = 0
            offset = self._offset
            self._offset = offset + rounded
            slab = self._slab
        return numpy.ndarray(shape, dtype, slab, offset)


_small = _SlabAllocator()
# numpy dtype instances have one class per dtype (numpy.dtypes.Float32DType...): remember them
_DTYPE_TYPES = {type(numpy.dtype(name)): type(numpy.dtype(name)) for name in
                ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
                 "uint32", "uint64", "bool")}


class CPUBackend:
    """Backend of one ``cpu(i)`` device. Every cpu id is host memory; distinct ids are
    distinct devices so that data-parallel code can be tested on one machine."""

    name = "numpy"
    device_type = "cpu"
    xp = numpy

    def __init__(self, device_id: int):
        self.device_id = device_id

    def empty(self, shape: tuple[int, ...], dtype: Any) -> numpy.ndarray:
        """An uninitialised C-contiguous array whose data starts on a 64-byte boundary."""
        if type(dtype) is not _DTYPE_TYPES.get(type(dtype)):
            dtype = numpy.dtype(dtype)
        count = 1
        for dim in shape:
            count *= dim
        if count * dtype.itemsize <= SMALL_LIMIT:
            return _small.empty(shape, dtype, count)
        return _aligned_buffer(count * dtype.itemsize).view(dtype).reshape(shape)

    def from_host(self, array: numpy.ndarray) -> numpy.ndarray:
        """A device copy of a host array (an aligned copy on CPU)."""
        out = self.empty(array.shape, array.dtype)
        numpy.copyto(out, array)
        return out

    def to_host(self, array: numpy.ndarray) -> numpy.ndarray:
        """The host view of a device array (itself on CPU)."""
        return array

    def make_rng(self, seed: int | None) -> numpy.random.Generator:
        """The random generator of this device (``seed=None``: seeded from the OS)."""
        return numpy.random.default_rng(seed)

    def __repr__(self) -> str:
        return f"CPUBackend(cpu({self.device_id}))"
