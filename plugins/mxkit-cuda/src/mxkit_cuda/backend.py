"""The CUDA backend object of one ``gpu(i)``: CuPy arrays, streams, copies and memory statistics.

Streams. Kernels run on the device's legacy default stream (CuPy's ``Stream.null``), the
*compute stream*. The engine launches an operation only after the operations it depends on
have returned, and every one of them launched its kernels on this one stream, so stream
order is dependency order and a compute operation never waits for the GPU to finish:
the Python thread runs ahead of the device. Work that a caller does outside the engine
(an executor zeroing a fresh array, say) also lands on the legacy stream of its thread, so
it is ordered with the engine's kernels too.

An operation that can start when it is pushed runs on the pushing thread
(``launches_asynchronously``): it only queues kernels, and a worker would first have to
win the GIL from the thread still pushing, which leaves the GPU idle meanwhile. Such a
thread may have made another stream current (``with cupy.cuda.Stream():``); the operation's
kernels still go to the compute stream (:meth:`CUDABackend.bind_to_device`).

Copies between the host and the device run on a second, non-blocking *copy stream*, so
they overlap with kernels launched after them. A copy first makes the copy stream wait for
an event recorded on the compute stream (everything launched before the copy, which
includes whatever wrote the data it reads or read the buffer it overwrites), then
synchronises the copy stream before its operation returns, so that anything the engine
runs next sees the copied bytes. Host data passes through a page-locked staging buffer,
which is what lets the DMA engine run at full speed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from mxkit.ndarray.backend import Backend

from mxkit_cuda import graphs
from mxkit_cuda.device import require_gpu
from mxkit_cuda.rng import CupyGenerator


class _PinnedStaging:
    """A growing page-locked host buffer, one per device and direction, reused across copies."""

    def __init__(self) -> None:
        self._buffer: np.ndarray | None = None
        self.lock = threading.Lock()

    def view(self, nbytes: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        import cupyx

        if self._buffer is None or self._buffer.nbytes < nbytes:
            size = max(nbytes, 1 << 20)
            self._buffer = cupyx.empty_pinned((size,), dtype=np.uint8)
        return self._buffer[:nbytes].view(dtype).reshape(shape)


#: copies up to this size go through the staging buffer; larger ones pin nothing (a host
#: memcpy into pinned memory would cost more than the faster DMA saves)
STAGING_LIMIT = 64 * 1024 * 1024


class CUDABackend(Backend):
    """Backend of one ``gpu(i)`` device (``xp`` is :mod:`cupy`).

    Parameters
    ----------
    device_id : int
        The CUDA device ordinal.

    Raises
    ------
    DeviceError
        When CuPy, the driver or the device is missing (the message says which).
    """

    name = "cupy"
    device_type = "gpu"
    launches_asynchronously = True

    def __init__(self, device_id: int):
        require_gpu(device_id)
        import cupy

        self.xp = cupy
        self.device_id = device_id
        self._device = cupy.cuda.Device(device_id)
        with self._device:
            self._copy_stream = cupy.cuda.Stream(non_blocking=True)
            self.compute_stream = cupy.cuda.Stream.null
        self._pool = cupy.get_default_memory_pool()
        self._single_device = cupy.cuda.runtime.getDeviceCount() == 1
        self._peak_bytes = 0
        self._recorder: graphs.Recorder | None = None
        self._recorded = 0  # bytes the recordings' pool holds; it grows only while recording
        self._recorder_lock = threading.Lock()
        self._to_host_staging = _PinnedStaging()
        self._from_host_staging = _PinnedStaging()

    # -- memory ---------------------------------------------------------------------------

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """An uninitialised device array from CuPy's memory pool."""
        if self._single_device:
            array = self.xp.empty(shape, dtype)
        else:
            with self._device:
                array = self.xp.empty(shape, dtype)
        used = self._pool.used_bytes() + self._recorded
        if used > self._peak_bytes:
            self._peak_bytes = used
        return array

    def memory_stats(self) -> dict[str, int]:
        """Bytes of CuPy's pool: ``in_use`` by live arrays and by recordings' temporaries
        (``recorded``, see :meth:`record`), ``pooled`` (held, free for reuse), ``peak`` in use."""
        used = self._pool.used_bytes() + self._recorded
        self._peak_bytes = max(self._peak_bytes, used)
        return {"in_use": used, "pooled": self._pool.total_bytes() - self._pool.used_bytes(),
                "peak": self._peak_bytes, "recorded": self._recorded}

    def reset_peak(self) -> None:
        """Start measuring the peak again from what is in use now."""
        self._peak_bytes = self._pool.used_bytes() + self._recorded

    def release(self) -> None:
        """Give the pool's free blocks back to the driver (after the device's pending work)."""
        self.synchronize()
        self._pool.free_all_blocks()
        import cupy

        cupy.get_default_pinned_memory_pool().free_all_blocks()

    def synchronize(self) -> None:
        """Wait for every kernel and copy launched on this device."""
        self.compute_stream.synchronize()
        self._copy_stream.synchronize()

    # -- running on the device ------------------------------------------------------------

    def bind_to_device(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        """``fn`` made to run with this device current (CuPy launches on the current device) and
        the compute stream current (a pushing thread that runs it may have chosen another).

        On a one-GPU machine every thread's current device is this one, so only the stream is
        checked (well under a microsecond).
        """
        import cupy

        current_stream = cupy.cuda.get_current_stream
        compute_stream = self.compute_stream
        if self._single_device:
            def on_compute_stream() -> Any:
                if current_stream().ptr == 0:
                    return fn()
                with compute_stream:
                    return fn()

            return on_compute_stream
        device = self._device

        def on_device() -> Any:
            with device, compute_stream:
                return fn()

        return on_device

    def record(self, run: Callable[[], None]) -> Callable[[], None] | None:
        """The kernels ``run`` launches, captured into a CUDA graph (not executed); calling the
        result launches the graph on the compute stream. None when CUDA refused to capture them
        (``run`` waited for the device or copied to the host): nothing ran. See
        :mod:`mxkit_cuda.graphs`."""
        if self._recorder is None:
            with self._recorder_lock:
                if self._recorder is None:
                    self._recorder = graphs.Recorder(self._device, self.compute_stream)
        recording = self._recorder.record(run)
        self._recorded = self._recorder.nbytes  # a refused capture may have grown the pool too
        self._peak_bytes = max(self._peak_bytes, self._pool.used_bytes() + self._recorded)
        return recording

    # -- copies ---------------------------------------------------------------------------

    def from_host(self, array: np.ndarray) -> Any:
        """A device copy of a host array, launched on the compute stream (the caller may
        reuse ``array`` at once: a copy from pageable memory is staged before it returns)."""
        with self._device:
            out = self.xp.empty(array.shape, array.dtype)
            out.set(np.ascontiguousarray(array), stream=self.compute_stream)
        return out

    def to_host(self, array: Any) -> np.ndarray:
        """A numpy copy of a device array, once every kernel launched before has finished."""
        with self._device:
            if not array.flags.c_contiguous:
                array = self.xp.ascontiguousarray(array)  # on the compute stream, before the event
            stream = self._copy_stream
            stream.wait_event(self.compute_stream.record())
            if array.nbytes > STAGING_LIMIT:
                out = np.empty(array.shape, array.dtype)
                array.get(stream=stream, out=out)
                stream.synchronize()
                return out
            staging = self._to_host_staging
            with staging.lock:
                pinned = staging.view(array.nbytes, array.shape, array.dtype)
                array.get(stream=stream, out=pinned)
                stream.synchronize()
                return pinned.copy()

    def copy_from_host(self, target: Any, host: np.ndarray) -> None:
        """Write host data into an existing device array on the copy stream, and wait for it.

        The copy starts after every kernel launched before (one may still read ``target``)
        and has finished when this returns.
        """
        with self._device:
            stream = self._copy_stream
            stream.wait_event(self.compute_stream.record())
            contiguous = target.flags.c_contiguous
            destination = target if contiguous else self.xp.empty(target.shape, target.dtype)
            host = np.broadcast_to(host, target.shape)
            if host.nbytes > STAGING_LIMIT:
                destination.set(np.ascontiguousarray(host, dtype=target.dtype), stream=stream)
                stream.synchronize()
            else:
                staging = self._from_host_staging
                with staging.lock:
                    pinned = staging.view(target.nbytes, target.shape, target.dtype)
                    np.copyto(pinned, host, casting="unsafe")
                    destination.set(pinned, stream=stream)
                    stream.synchronize()
            if not contiguous:
                with stream:
                    target[...] = destination
                stream.synchronize()

    def copy_to(self, source: Any, target: Any, target_backend: Any) -> None:
        """Copy ``source`` (an array of this GPU, broadcast to ``target``'s shape) into ``target``.

        Into another GPU the bytes go device to device (``cudaMemcpyPeerAsync``: over NVLink or
        PCIe where the GPUs can reach each other, staged by the driver otherwise), on the target's
        copy stream, after every kernel launched before on either device (they may write
        ``source`` or still read ``target``), and finished when this returns. Into any other
        device, through host memory (the default).
        """
        if not isinstance(target_backend, CUDABackend):
            super().copy_to(source, target, target_backend)
            return
        xp = self.xp
        with self._device:
            if source.shape != target.shape or source.dtype != target.dtype or not source.flags.c_contiguous:
                # made on this GPU's compute stream, so the event below covers it too
                source = xp.ascontiguousarray(xp.broadcast_to(source, target.shape), dtype=target.dtype)
            written = self.compute_stream.record()
        with target_backend._device:
            stream = target_backend._copy_stream
            stream.wait_event(written)
            stream.wait_event(target_backend.compute_stream.record())
            contiguous = target.flags.c_contiguous
            destination = target if contiguous else xp.empty(target.shape, target.dtype)
            xp.cuda.runtime.memcpyPeerAsync(destination.data.ptr, target_backend.device_id, source.data.ptr,
                                            self.device_id, target.nbytes, stream.ptr)
            if not contiguous:
                with stream:
                    target[...] = destination
            stream.synchronize()

    # -- random numbers -------------------------------------------------------------------

    def make_rng(self, seed: Any) -> CupyGenerator:
        """The device's generator from an int or a sequence of ints (``None``: from the OS)."""
        with self._device:
            return CupyGenerator(seed)

    def __repr__(self) -> str:
        return f"CUDABackend(gpu({self.device_id}))"


def memory_info(device_id: int) -> tuple[int, int]:
    """``(free, total)`` bytes of GPU ``device_id`` as the driver reports them."""
    require_gpu(device_id)
    import cupy

    with cupy.cuda.Device(device_id):
        free, total = cupy.cuda.runtime.memGetInfo()
    return int(free), int(total)
