"""The kernels of a KVStore: sums of per-device values, copies to pull targets, placement.

The sums run inside engine operations. On the CPU a large array is cut into ranges
reduced in parallel by a small thread pool (numpy releases the GIL), and each range is
walked in cache-sized blocks so that the partial sum stays in cache while every source
is added to it: the sources are read once and the result written once, where a plain
``a + b + c + d`` writes and rereads the partial sum from memory after every addition.
Other backends (CuPy) get one ``xp`` call per source, which their device runs in parallel.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

#: elements per cache block (256 KiB of float32: the partial sum plus one source fit in L2)
BLOCK_ELEMENTS = 1 << 16
#: sums moving this many bytes (sources plus result) are split across threads; below it the
#: hand-off costs more than a second core gains (measured on 2 cores: even at 20 MiB)
PARALLEL_MIN_BYTES = 32 << 20

_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_pid = -1


def merge_threads() -> int:
    """Threads that reduce one large array (the machine's cores, at most 8)."""
    return max(1, min(8, os.cpu_count() or 1))


def _thread_pool() -> ThreadPoolExecutor:
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():  # a forked child has no pool threads
            _pool = ThreadPoolExecutor(max_workers=merge_threads(), thread_name_prefix="mxkit-kvstore-merge")
            _pool_pid = os.getpid()
        return _pool


def _flat(array: Any) -> Any:
    return array.reshape(-1)


def _ranges(size: int, parts: int) -> list[tuple[int, int]]:
    # ranges aligned to whole blocks, so no two threads share a cache line
    blocks = -(-size // BLOCK_ELEMENTS)
    per_part = -(-blocks // parts)
    bounds = [min(size, i * per_part * BLOCK_ELEMENTS) for i in range(parts + 1)]
    return [(start, stop) for start, stop in itertools.pairwise(bounds) if stop > start]


def _sum_range(out: Any, sources: Sequence[Any], accumulate: bool, start: int, stop: int) -> None:
    add = np.add
    for begin in range(start, stop, BLOCK_ELEMENTS):
        end = min(stop, begin + BLOCK_ELEMENTS)
        block = out[begin:end]
        first = 0
        if not accumulate:
            if len(sources) == 1:
                np.copyto(block, sources[0][begin:end], casting="unsafe")
                continue
            add(sources[0][begin:end], sources[1][begin:end], out=block, casting="unsafe")
            first = 2
        for source in sources[first:]:
            add(block, source[begin:end], out=block, casting="unsafe")


def _run_parallel(task: Any, size: int, nbytes: int) -> None:
    parts = merge_threads() if nbytes >= PARALLEL_MIN_BYTES else 1
    ranges = _ranges(size, parts)
    if len(ranges) <= 1:
        task(0, size)
        return
    futures = [_thread_pool().submit(task, start, stop) for start, stop in ranges[1:]]
    task(*ranges[0])  # this thread takes a share instead of waiting idle
    for future in futures:
        future.result()


def sum_into(xp: Any, out: Any, sources: Sequence[Any], accumulate: bool = False) -> None:
    """``out = sum(sources)`` (or ``out += sum(sources)``), all of ``out``'s shape.

    Parameters
    ----------
    xp : module
        The array module of ``out`` and ``sources`` (numpy or CuPy).
    out : array
        The result; may not alias a source unless ``accumulate``.
    sources : sequence of arrays
        At least one array.
    accumulate : bool
        Add to ``out`` instead of overwriting it.
    """
    if xp is np and out.size > BLOCK_ELEMENTS and out.flags.c_contiguous and \
            all(s.flags.c_contiguous for s in sources):
        flat_out = _flat(out)
        flat_sources = [_flat(s) for s in sources]
        _run_parallel(lambda start, stop: _sum_range(flat_out, flat_sources, accumulate, start, stop),
                      flat_out.shape[0], out.nbytes * (len(sources) + 1))
        return
    # one block (or another backend): whole-array calls
    first = 0
    if not accumulate:
        if len(sources) == 1:
            xp.copyto(out, sources[0], casting="unsafe")
            return
        xp.add(sources[0], sources[1], out=out, casting="unsafe")
        first = 2
    for source in sources[first:]:
        xp.add(out, source, out=out, casting="unsafe")


def copy_to_all(xp: Any, outs: Sequence[Any], source: Any) -> None:
    """Copy ``source`` into every array of ``outs`` (all of one shape, on ``xp``'s device).

    Whole-array copies on one thread: for large arrays numpy's copy is a ``memcpy`` whose
    streaming stores skip reading the target into cache, which beats both cache blocking
    and splitting the copy across threads.
    """
    for out in outs:
        xp.copyto(out, source, casting="unsafe")


def shares_memory_space(a: Any, b: Any) -> bool:
    """Whether arrays of contexts ``a`` and ``b`` can be used by one kernel without a copy."""
    return a is b or (a.device_type in _HOST_TYPES and b.device_type in _HOST_TYPES) or a == b


_HOST_TYPES = frozenset(("cpu", "cpu_pinned", "cpu_shared"))


def all_readable_from(arrays: Sequence[Any], ctx: Any) -> bool:
    """Whether a kernel on ``ctx`` can read every NDArray of ``arrays`` where it is."""
    if ctx.device_type in _HOST_TYPES:
        for array in arrays:
            if array.context.device_type not in _HOST_TYPES:
                return False
        return True
    return all(array.context is ctx or array.context == ctx for array in arrays)


def transfer(data: Any, source_ctx: Any, target_ctx: Any) -> Any:
    """``data`` (an array of ``source_ctx``) as an array of ``target_ctx`` (itself when shared)."""
    if shares_memory_space(source_ctx, target_ctx):
        return data
    host = source_ctx.backend.to_host(data)
    return target_ctx.backend.from_host(np.ascontiguousarray(host))


class DevicePlacer:
    """Assigns keys' merge buffers to devices: largest first, each onto the least-loaded.

    MXNet's ``CommDevice`` places every key at the first reduction in one sweep; keys that
    arrive later are placed one by one with the same rule.
    """

    def __init__(self) -> None:
        self.load: dict[Any, int] = {}

    def place(self, sized_keys: Sequence[tuple[Any, int]], devices: Sequence[Any]) -> dict[Any, Any]:
        """``{key: device}`` for ``(key, nbytes)`` pairs over ``devices`` (in their given order)."""
        candidates = list(dict.fromkeys(devices))
        for device in candidates:
            self.load.setdefault(device, 0)
        placement: dict[Any, Any] = {}
        # ties keep the key's first appearance and the first listed device (stable sorts)
        for key, nbytes in sorted(sized_keys, key=lambda item: -item[1]):
            device = min(candidates, key=lambda d: self.load[d])
            self.load[device] += nbytes
            placement[key] = device
        return placement


__all__ = ["BLOCK_ELEMENTS", "DevicePlacer", "copy_to_all", "merge_threads", "shares_memory_space",
           "sum_into", "all_readable_from", "transfer"]
