"""Recording a sequence of kernels into a CUDA graph and replaying it (``CUDABackend.record``).

Why: a ResNet-50 training step is well over a thousand kernel launches, and launching them
one by one from Python takes longer than the GPU takes to run them. A recorded graph is one
launch.

How: ``run`` is called while the device's capturing stream captures (CUDA cannot capture the
legacy default stream, which is the compute stream) and while CuPy allocates from the device's
recording pool. The temporaries the recorded kernels use therefore keep their addresses for
every replay, and no allocation outside the recordings is ever handed those blocks. Every
recording of a device shares that one pool (and that one stream, whose free lists CuPy keeps
apart per stream): replays all run on the compute stream, one after another, so the
temporaries of one recording are free again when the next starts, and the pool holds the
largest need of any recording rather than their sum. Replays are launched on the compute
stream, so they are ordered after everything launched before them, as a kernel would be.

Anything in ``run`` that waits for the device or copies to the host makes CUDA refuse the
capture; then nothing ran, the reason is logged, and the caller runs ``run`` itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

_LOG = logging.getLogger("mxkit_cuda.graphs")
_captures_begun = 0


def captures_begun() -> int:
    """How many captures have begun in this process (a buffer made before the latest one may be
    used by a recording: its owner must not free it)."""
    return _captures_begun


class Recording:
    """A captured CUDA graph, replayed by calling it (on the compute stream)."""

    def __init__(self, graph: Any, pool: Any, compute_stream: Any) -> None:
        self._graph = graph
        self._pool = pool  # the graph's kernels use its blocks: it must outlive every replay
        self._compute_stream = compute_stream

    def __call__(self) -> None:
        self._graph.launch(self._compute_stream)


class Recorder:
    """The capturing stream and the memory pool of one device's recordings (see the module's notes)."""

    def __init__(self, device: Any, compute_stream: Any) -> None:
        import cupy

        self._device = device
        self._compute_stream = compute_stream
        with device:
            self._stream = cupy.cuda.Stream(non_blocking=True)
        self.pool = cupy.cuda.MemoryPool()
        self._lock = threading.Lock()  # one capture at a time on the one stream

    @property
    def nbytes(self) -> int:
        """Device bytes the recordings hold for their kernels' temporaries."""
        return int(self.pool.total_bytes())

    def record(self, run: Callable[[], None]) -> Recording | None:
        """Capture the kernels ``run`` launches (nothing executes); None when CUDA refused.

        The capture uses CUDA's relaxed mode, which lets the pool grow (``cudaMalloc``) while
        capturing; other threads keep launching on their own streams meanwhile.
        """
        import cupy

        global _captures_begun
        stream = self._stream
        with self._lock, self._device, stream, cupy.cuda.using_allocator(self.pool.malloc):
            _captures_begun += 1
            stream.begin_capture()
            try:
                run()
            except Exception as exc:
                _end_abandoned(stream)
                _LOG.info("kernels not recorded (they run one by one): %s: %s", type(exc).__name__, exc,
                          exc_info=_LOG.isEnabledFor(logging.DEBUG))
                return None
            try:
                graph = stream.end_capture()
            except Exception as exc:  # the capture was invalidated by a call CUDA cannot record
                _LOG.info("kernels not recorded (they run one by one): %s: %s", type(exc).__name__, exc)
                return None
        return Recording(graph, self.pool, self._compute_stream)


def _end_abandoned(stream: Any) -> None:
    """End a capture whose recording is thrown away, so that the stream can be used again."""
    try:
        stream.end_capture()
    except Exception:
        pass  # an invalidated capture ends with an error; ended either way
