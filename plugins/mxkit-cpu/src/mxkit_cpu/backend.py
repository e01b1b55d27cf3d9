"""The CPU backend object: aligned numpy allocation and host copies."""

from __future__ import annotations

from typing import Any

import numpy

ALIGNMENT = 64  # bytes: a cache line, and what AVX-512 loads want


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
        dtype = numpy.dtype(dtype)
        count = 1
        for dim in shape:
            count *= int(dim)
        nbytes = count * dtype.itemsize
        raw = numpy.empty(nbytes + ALIGNMENT, dtype=numpy.uint8)
        start = (-raw.ctypes.data) % ALIGNMENT
        return raw[start:start + nbytes].view(dtype).reshape(shape)

    def from_host(self, array: numpy.ndarray) -> numpy.ndarray:
        """A device copy of a host array (an aligned copy on CPU)."""
        out = self.empty(array.shape, array.dtype)
        numpy.copyto(out, array)
        return out

    def to_host(self, array: numpy.ndarray) -> numpy.ndarray:
        """The host view of a device array (itself on CPU)."""
        return array

    def __repr__(self) -> str:
        return f"CPUBackend(cpu({self.device_id}))"
