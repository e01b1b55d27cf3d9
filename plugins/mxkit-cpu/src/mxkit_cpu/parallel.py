"""Intra-operator parallelism of the CPU kernels: a batch split into blocks of samples, one per thread,
and per-thread scratch buffers reused across calls.

A convolution's im2col, its BLAS products and its layout copies all split cleanly along the
batch, so each thread runs the whole pipeline on its own block of samples with its own column
buffer (no locks, no shared scratch). Our Cython loops and numpy's BLAS calls release the
GIL, so the blocks really run side by side. This matters because BLAS runs on one thread
under the engine (see :mod:`mxkit_cpu.blas`): in a chain such as
a convolutional network only one operator is ready at a time, and without this split it
would run on one core.

The number of threads is the config key ``cpu_kernel_threads`` (environment
``MXKIT_CPU_KERNEL_THREADS``; 0 means one per core), read once, when the first parallel
kernel runs (:func:`reset` reads it again).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

#: below this many multiply-adds (or element visits) a kernel runs on the calling thread alone:
#: handing a block to another thread costs tens of microseconds
MIN_PARALLEL_WORK = 1 << 21

#: scratch buffers kept per thread (the least recently used goes first)
MAX_BUFFERS_PER_THREAD = 8

#: the most bytes a kernel's scratch buffer should need: kernels whose temporaries grow with the batch
#: (a convolution's column matrix) run a block of samples in chunks of samples that fit (see :func:`chunks`).
#: A whole-block column matrix of ResNet-50 at batch 32 took 115 MB per thread, and kept per shape, the
#: buffers of one forward pass held 650 MB per thread beside a 300 MB memory plan; 16 MB keeps every
#: BLAS product at thousands of columns (several samples of a 56x56 layer) while bounding what stays
SCRATCH_BYTES = 16 << 20

_OPTION_KEY = "cpu_kernel_threads"
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_threads: int | None = None
_local = threading.local()
_blas: list | None = None


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def kernel_threads() -> int:
    """How many threads a parallel kernel uses (config ``cpu_kernel_threads``; 0 means one per core)."""
    global _threads
    if _threads is None:
        from mxkit.core import config

        wanted = int(config.get(_OPTION_KEY))
        _threads = wanted if wanted > 0 else _cores()
    return _threads


def reset() -> None:
    """Forget the thread count and stop the worker threads (the next kernel reads the config again)."""
    global _pool, _threads
    with _lock:
        pool, _pool, _threads = _pool, None, None
    if pool is not None:
        pool.shutdown(wait=True)


def _forget_after_fork() -> None:
    """In a forked child the helper threads do not exist: start afresh (else a kernel waits forever)."""
    global _pool, _local, _lent_lock, _lent_sets, _sets_lock
    _pool = None
    _local = threading.local()
    _lent_lock = threading.Lock()  # a parent thread may have held it at the fork
    _sets_lock = threading.Lock()
    _lent_sets = []


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def _executor() -> ThreadPoolExecutor:
    """The helper threads: one fewer than :func:`kernel_threads` (the caller runs a block too)."""
    global _pool
    workers = max(1, kernel_threads() - 1)
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mxkit-cpu-kernel")
        return _pool


def split(count: int, blocks: int) -> list[tuple[int, int]]:
    """``count`` items as at most ``blocks`` contiguous, nearly equal, non-empty ``(start, stop)`` ranges."""
    blocks = max(1, min(blocks, count))
    base, extra = divmod(count, blocks)
    ranges, start = [], 0
    for b in range(blocks):
        stop = start + base + (1 if b < extra else 0)
        ranges.append((start, stop))
        start = stop
    return ranges


def blas_threads() -> int:
    """Threads numpy's BLAS uses now (1 under ``threadpool_limits(1)``, as ``mxkit train`` runs)."""
    global _blas
    if _blas is None:
        from threadpoolctl import ThreadpoolController

        with _lock:
            _blas = ThreadpoolController().select(user_api="blas").lib_controllers
    return max((lib.get_num_threads() or 1 for lib in _blas), default=1)


def plan_blocks(count: int, work: int, uses_blas: bool = False) -> list[tuple[int, int]]:
    """The blocks of ``range(count)`` a kernel of ``work`` multiply-adds (or element visits) splits into:
    one per thread when the work is large enough to pay for the hand-over, else one.

    A kernel whose blocks call BLAS runs as one block when BLAS itself is multithreaded: two
    multithreaded BLAS calls at once from two threads oversubscribe the cores many times over
    (measured: a LeNet convolution gradient 20x slower), and one call already uses every core.
    """
    if work < MIN_PARALLEL_WORK or (uses_blas and blas_threads() > 1):
        return split(count, 1)
    return split(count, kernel_threads())


def run_split(task: Callable[[int, int, int], Any], count: int, work: int, uses_blas: bool = False) -> None:
    """``run_blocks(task, plan_blocks(count, work, uses_blas))``, with work too small to split run
    here at once: most calls of a small kernel, which should not pay for planning a single block."""
    if work < MIN_PARALLEL_WORK:
        task(0, 0, count)
        return
    run_blocks(task, plan_blocks(count, work, uses_blas))


def run_blocks(task: Callable[[int, int, int], Any], blocks: list[tuple[int, int]]) -> None:
    """Run ``task(index, start, stop)`` for every block of :func:`plan_blocks`, in parallel.

    The calling thread runs the first block itself. An exception of any block is raised here,
    after every block has finished (they all write into the caller's arrays).
    """
    task = _with_lent_scratch(task)
    if len(blocks) <= 1:
        for index, (start, stop) in enumerate(blocks):
            task(index, start, stop)
        return
    pool = _executor()
    futures = [pool.submit(task, index, start, stop) for index, (start, stop) in enumerate(blocks) if index]
    error = None
    try:
        task(0, *blocks[0])
    except BaseException as exc:
        error = exc
    for future in futures:
        try:
            future.result()
        except BaseException as exc:
            error = error or exc
    if error is not None:
        raise error


def chunks(start: int, stop: int, bytes_per_sample: int, budget: int | None = None) -> list[tuple[int, int]]:
    """``range(start, stop)`` as consecutive ``(first, last)`` ranges of samples whose scratch fits
    ``budget`` bytes (:data:`SCRATCH_BYTES`), at least one sample each."""
    per_chunk = max(1, (SCRATCH_BYTES if budget is None else budget) // max(1, bytes_per_sample))
    return [(first, min(first + per_chunk, stop)) for first in range(start, stop, per_chunk)]


def scratch(name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """A reusable C-contiguous buffer ``name`` of ``shape`` and ``dtype`` (contents undefined), from
    the scratch set lent to the running block of :func:`run_blocks`, or else this thread's own.

    Big temporaries are the costly part of allocation on CPU (fresh pages fault in on first
    touch), so column matrices are kept per thread: one buffer per name and dtype, grown to the
    largest shape asked for and viewed as the shape of each call. Keeping one per shape instead
    held the sum of every layer's buffers; this way a thread keeps the largest of each name,
    which kernels bound by working in :func:`chunks`. Use a buffer only within one kernel call,
    and never return it to a caller: the next call on this thread that asks for the same name
    gets the same memory.
    """
    cache: OrderedDict | None = getattr(_local, "buffers", None)
    if cache is None:
        cache = _local.buffers = _new_set()
    dtype = np.dtype(dtype)
    count = 1
    for extent in shape:
        count *= int(extent)
    key = (name, dtype.str)
    buffer = cache.get(key)
    # release_scratch may empty this set from another thread at any moment: the buffer in hand stays
    # valid (this call holds it), and a key gone between two dictionary calls is simply put back
    if buffer is None or buffer.size < count:
        buffer = np.empty(max(count, 1), dtype=dtype)
        cache[key] = buffer
        while len(cache) > MAX_BUFFERS_PER_THREAD:
            try:
                cache.popitem(last=False)
            except KeyError:
                break
    else:
        try:
            cache.move_to_end(key)
        except KeyError:
            cache[key] = buffer
    return buffer[:count].reshape(shape)


class _ScratchSet(OrderedDict):
    """Named scratch buffers of one thread or one lent set (weakly referable, so they can be counted;
    hashed and compared by identity, so that two sets with equal contents stay two)."""

    __hash__ = object.__hash__
    __eq__ = object.__eq__


#: every scratch set alive (threads' own and lent), for scratch_bytes and release_scratch
_every_set: weakref.WeakSet = weakref.WeakSet()
_sets_lock = threading.Lock()


def _new_set() -> _ScratchSet:
    buffers = _ScratchSet()
    with _sets_lock:
        _every_set.add(buffers)
    return buffers


def _all_sets() -> list[_ScratchSet]:
    with _sets_lock:
        return list(_every_set)


# Scratch sets lent to the blocks of run_blocks: a block takes a free set for its length and gives
# it back, so the process keeps as many sets as blocks ever ran at once (the kernel threads), not one
# per thread that ever ran a block (each engine worker calls kernels, and runs their first block
# itself: with two workers and one helper, three sets where two ever worked at once).
_lent_sets: list[OrderedDict] = []
_lent_lock = threading.Lock()


def _with_lent_scratch(task: Callable[[int, int, int], Any]) -> Callable[[int, int, int], Any]:
    def lent(index: int, start: int, stop: int) -> Any:
        with _lent_lock:
            buffers = _lent_sets.pop() if _lent_sets else _new_set()
        own = getattr(_local, "buffers", None)
        _local.buffers = buffers
        try:
            return task(index, start, stop)
        finally:
            _local.buffers = own
            with _lent_lock:
                _lent_sets.append(buffers)

    return lent


def scratch_bytes() -> int:
    """The bytes of every thread's scratch buffers and of the sets lent to kernel blocks: the
    kernels' workspace, kept between calls."""
    return sum(buffer.nbytes for buffers in _all_sets() for buffer in list(buffers.values()))


def release_scratch() -> int:
    """Drop the scratch buffers no kernel is using now: the free lent sets and every thread's own
    (a kernel running meanwhile keeps the buffers it holds); the bytes that were kept.

    For when these kernels stop serving: a kernel plugin that replaces them times them once per
    shape and then serves the shape itself, and the buffers of those trials would otherwise stay
    for the life of the process (58 MB on ResNet-50 prediction at batch 32)."""
    before = scratch_bytes()
    with _lent_lock:
        _lent_sets.clear()
    for buffers in _all_sets():
        buffers.clear()
    return before


def clear_scratch() -> None:
    """Drop every scratch buffer not in use (:func:`release_scratch`) and start this thread afresh."""
    release_scratch()
    _local.buffers = _new_set()


__all__ = ["MIN_PARALLEL_WORK", "SCRATCH_BYTES", "blas_threads", "chunks", "clear_scratch", "kernel_threads",
           "plan_blocks", "release_scratch", "reset", "run_blocks", "run_split", "scratch", "scratch_bytes", "split"]
