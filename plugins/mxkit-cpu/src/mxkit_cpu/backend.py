"""The CPU backend object: aligned numpy allocation and host copies."""

from __future__ import annotations

import sys
import threading
from typing import Any

import numpy
from mxkit.ndarray.backend import Backend

try:
    from mxkit_cpu import _alloc
except ImportError:  # built without the extensions: the slower path below serves
    _alloc = None

ALIGNMENT = 64  # bytes: a cache line, and what AVX-512 loads want
SMALL_LIMIT = 1024  # bytes: arrays up to this size are carved out of a shared slab
SLAB_BYTES = 64 * 1024


POOL_MIN_BYTES = 64 * 1024  # arrays from this size on are recycled through _BufferPool
POOL_PER_SIZE = 16
POOL_MAX_BYTES = 512 * 1024 * 1024


def _address_by_ctypes(array: numpy.ndarray) -> int:
    return array.ctypes.data


#: the address of an array's data (the compiled helper when built: ctypes takes ~1 µs of a small output's call)
_address = _alloc.address if _alloc is not None else _address_by_ctypes


def _aligned_buffer(nbytes: int) -> numpy.ndarray:
    raw = numpy.empty(nbytes + ALIGNMENT, dtype=numpy.uint8)
    start = (-_address(raw)) % ALIGNMENT
    return raw[start:start + nbytes]


class _BufferPool:
    """Recycles large buffers, like MXNet's pooled storage manager.

    A fresh large buffer costs page faults on first touch (a 1e7-element add spends most
    of its time there); a recycled one is warm. A pooled buffer is free when nothing but
    the pool refers to its memory: numpy views point at the owner of the memory, so the
    owner's reference count tells whether any array, view or pending kernel still uses it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free: dict[int, list[tuple[numpy.ndarray, numpy.ndarray]]] = {}
        self._bytes = 0

    def empty(self, nbytes: int) -> numpy.ndarray:
        with self._lock:
            entries = self._free.setdefault(nbytes, [])
            for owner, aligned in entries:
                if _refcount(owner) <= _FREE_REFS:
                    return aligned
            aligned = _aligned_buffer(nbytes)
            if len(entries) < POOL_PER_SIZE and self._bytes + nbytes <= POOL_MAX_BYTES:
                entries.append((aligned.base, aligned))
                self._bytes += nbytes
            return aligned

    def nbytes(self) -> tuple[int, int]:
        """The bytes of the pooled buffers, and of those among them that no array uses now."""
        with self._lock:
            total = self._bytes
            free = sum(nbytes for nbytes, entries in self._free.items()
                       for owner, _aligned in entries if _refcount(owner) <= _FREE_REFS)
        return total, free

    def clear(self) -> None:
        """Forget every pooled buffer (their memory is freed once no array uses it)."""
        with self._lock:
            self._free.clear()
            self._bytes = 0


def _refcount(owner: numpy.ndarray) -> int:
    return sys.getrefcount(owner)


def _calibrate_free_refs() -> int:
    # the count a pooled buffer has when only the pool holds it, measured the way empty() does
    entries = [(lambda aligned: (aligned.base, aligned))(_aligned_buffer(ALIGNMENT))]
    for owner, _aligned in entries:
        return _refcount(owner)
    raise AssertionError("unreachable")


_FREE_REFS = _calibrate_free_refs()
_pool = _BufferPool()


def _new_slab() -> numpy.ndarray:
    return _aligned_buffer(SLAB_BYTES)


def _array_of_own_buffer(shape: tuple[int, ...], dtype: numpy.dtype, count: int) -> numpy.ndarray:
    """An aligned array of ``shape`` (``count`` elements) in a buffer of its own."""
    nbytes = count * dtype.itemsize
    # (at least one byte: numpy does not move the data pointer of an empty slice, which would stay unaligned)
    return _aligned_buffer(max(nbytes, 1))[:nbytes].view(dtype).reshape(shape)


def _as_shape(buffer: numpy.ndarray, shape: tuple[int, ...], dtype: numpy.dtype) -> numpy.ndarray:
    return buffer.view(dtype).reshape(shape)


# numpy dtype instances have one class per dtype (numpy.dtypes.Float32DType...): remember them
_DTYPE_TYPES = {type(numpy.dtype(name)): type(numpy.dtype(name)) for name in
                ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
                 "uint32", "uint64", "bool")}


class CPUBackend(Backend):
    """Backend of one ``cpu(i)`` device. Every cpu id is host memory; distinct ids are
    distinct devices so that data-parallel code can be tested on one machine."""

    name = "numpy"
    device_type = "cpu"
    xp = numpy

    def _empty_in_python(self, shape: tuple[int, ...], dtype: Any) -> numpy.ndarray:
        """An uninitialised C-contiguous array whose data starts on a 64-byte boundary."""
        if type(dtype) is not _DTYPE_TYPES.get(type(dtype)):
            dtype = numpy.dtype(dtype)
        shape = shape if type(shape) is tuple else tuple(shape)
        count = 1
        for dim in shape:
            if dim < 0:  # (a product of them could still look like a size)
                raise ValueError(f"negative dimensions are not allowed, got shape {shape}")
            count *= dim
        nbytes = count * dtype.itemsize
        if nbytes >= POOL_MIN_BYTES:
            return _as_shape(_pool.empty(nbytes), shape, dtype)
        return _array_of_own_buffer(shape, dtype, count)  # (the compiled route carves the small ones from slabs)

    # Built, the same routes are chosen in C (_alloc.backend_empty), where arrays up to 1 KiB are
    # bump-allocated from 64 KiB aligned slabs and every array header is made with numpy's C API.
    # Finding an aligned address costs numpy a ctypes round trip (over 1 µs), several times a small
    # operator's arithmetic; a slab pays it once per 64 KiB. A slab is freed when the last array
    # carved from it is, so a long-lived small array keeps at most one slab (64 KiB) alive. The
    # Python route above serves without the extension.
    if _alloc is not None:
        _alloc.configure(ALIGNMENT, _new_slab, SMALL_LIMIT, POOL_MIN_BYTES, _pool.empty)
        empty = _alloc.backend_empty
    else:
        empty = _empty_in_python

    def from_host(self, array: numpy.ndarray) -> numpy.ndarray:
        """A device copy of a host array (an aligned copy on CPU)."""
        out = self.empty(array.shape, array.dtype)
        numpy.copyto(out, array)
        return out

    def to_host(self, array: numpy.ndarray) -> numpy.ndarray:
        """The host view of a device array (itself on CPU)."""
        return array

    def copy_from_host(self, target: numpy.ndarray, host: numpy.ndarray) -> None:
        """Write host data into an existing array (a plain copy: both are host memory)."""
        numpy.copyto(target, host, casting="unsafe")

    def memory_stats(self) -> dict[str, int]:
        """Bytes of host memory this backend keeps (for every CPU device: they share the host's).

        ``pooled``: large buffers kept for reuse, in use or not; ``pooled_free``: those no array
        uses now; ``scratch``: the kernels' scratch buffers kept between calls (column matrices,
        products: :func:`mxkit_cpu.parallel.scratch_bytes`)."""
        from mxkit_cpu.parallel import scratch_bytes

        pooled, free = _pool.nbytes()
        return {"pooled": pooled, "pooled_free": free, "scratch": scratch_bytes()}

    def release_scratch(self) -> int:
        """Drop the kernels' scratch buffers that no kernel is using now; the bytes they held."""
        from mxkit_cpu.parallel import release_scratch

        return release_scratch()

    def __repr__(self) -> str:
        return f"CPUBackend(cpu({self.device_id}))"
