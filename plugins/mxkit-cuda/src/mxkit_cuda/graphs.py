"""Recording a sequence of kernels into a CUDA graph and replaying it (``CUDABackend.record``).

Why: a ResNet-50 training step is well over a thousand kernel launches, and launching them
one by one from Python takes longer than the GPU takes to run them. A recorded graph is one
launch.

How: ``run`` is called while a fresh non-blocking stream captures (CUDA cannot capture the
legacy default stream, which is the compute stream) and while CuPy allocates from a memory
pool of the recording's own. The temporaries the recorded kernels use therefore keep their
addresses for every replay, and nothing outside the recording is ever handed those blocks;
the pool lives as long as the recording. Replays are launched on the compute stream, so
they are ordered after everything launched before them, as a kernel would be.

Anything in ``run`` that waits for the device or copies to the host makes CUDA refuse the
capture; then nothing ran, the reason is logged, and the caller runs ``run`` itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

_LOG = logging.getLogger("mxkit_cuda.graphs")


class Recording:
    """A captured CUDA graph with the memory pool its kernels' temporaries live in.

    Calling it launches the graph on the compute stream.
    """

    def __init__(self, graph: Any, pool: Any, compute_stream: Any) -> None:
        self._graph = graph
        self._pool = pool  # the graph's kernels use its blocks: it must outlive every replay
        self._compute_stream = compute_stream

    def __call__(self) -> None:
        self._graph.launch(self._compute_stream)

    @property
    def nbytes(self) -> int:
        """Device bytes the recording holds for its kernels' temporaries."""
        return int(self._pool.total_bytes())


def record(device: Any, compute_stream: Any, run: Callable[[], None]) -> Recording | None:
    """Capture the kernels ``run`` launches on ``device`` (nothing executes); None when CUDA refused.

    The capture uses CUDA's relaxed mode, which lets the recording's pool grow (``cudaMalloc``)
    while capturing; other threads keep launching on their own streams meanwhile.
    """
    import cupy

    with device:
        pool = cupy.cuda.MemoryPool()
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream, cupy.cuda.using_allocator(pool.malloc):
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
    return Recording(graph, pool, compute_stream)


def _end_abandoned(stream: Any) -> None:
    """End a capture whose recording is thrown away, so that the stream can be used again."""
    try:
        stream.end_capture()
    except Exception:
        pass  # an invalidated capture ends with an error; ended either way
