"""How the CPU backend uses numpy's BLAS: one BLAS thread, and big products split by us.

The engine runs kernels on its worker threads while the Python thread goes on pushing. A
multi-threaded BLAS underneath (OpenBLAS's helper threads spin while they wait for work)
fights those threads for the cores: on 2 cores an MLP training step ran 13-25x slower
(1.6k-3.1k against 40k samples/s), whether the engine had one worker or two. So when the
first CPU device is made, BLAS is limited to config ``cpu_blas_threads`` threads (default 1;
0 leaves the library's own setting, e.g. ``OPENBLAS_NUM_THREADS``). The limit holds for the
whole process, numpy calls outside mxkit included.

The parallelism a single big product loses comes back from :func:`product`, which splits
the rows of the result across the ``cpu_kernel_threads`` threads (each block is a BLAS call
that releases the GIL), as the convolution kernels already split a batch.
"""

from __future__ import annotations

import threading

import numpy as np

from mxkit_cpu import parallel

_OPTION_KEY = "cpu_blas_threads"
_lock = threading.Lock()
_applied = False


def limit_blas_threads() -> None:
    """Apply config ``cpu_blas_threads`` to numpy's BLAS, once per process (later calls do nothing)."""
    global _applied
    if _applied:
        return
    with _lock:
        if _applied:
            return
        from mxkit.core import config

        wanted = int(config.get(_OPTION_KEY))
        if wanted > 0:
            from threadpoolctl import threadpool_limits

            threadpool_limits(limits=wanted, user_api="blas")  # not a context: the limit stays
        _applied = True


def product(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """``out[...] = a @ b`` for 2-D operands, the rows of ``out`` split across the kernel threads
    when the product is big enough and BLAS itself runs on one thread.

    ``out`` must be C-contiguous with the operands' dtype (row blocks of it are then
    contiguous, and each block is one BLAS call writing in place).
    """
    def block(_index: int, start: int, stop: int) -> None:
        np.matmul(a[start:stop], b, out=out[start:stop])

    rows = a.shape[0]
    parallel.run_split(block, rows, rows * a.shape[1] * b.shape[1], uses_blas=True)


__all__ = ["limit_blas_threads", "product"]
