"""Freed host buffers go back to the operating system (glibc's malloc, fixed mmap threshold).

glibc serves an allocation from its mmap threshold on (128 KiB at start) with its own mapping,
unmapped again on free. But the first time such a block is freed, glibc raises the threshold to
its size (up to 32 MiB), so that later blocks of that size come from the heap, where freed
memory stays mapped to the process. A training step frees large arrays all the time (kernel
temporaries, initializer draws, a first call's timing runs): with the moving threshold they
stayed resident, and a hybridized ResNet-18 step (batch 8) peaked about 50 MB higher than with
the threshold held (285 against 335 MiB, oneDNN on; 226 against 307 MiB with mxkit-cpu's kernels alone).

Large NDArray buffers are recycled warm by the backend's pool, and kernel scratch by its
caches, so the mappings this costs are the unpooled temporaries'. Config
``cpu_malloc_mmap_threshold`` sets the threshold in bytes when the first CPU device is made
(0 leaves glibc's moving threshold); the setting holds for the whole process.

The default is 1 MiB, not glibc's starting 128 KiB: every block above the threshold is a
fresh mapping whose pages fault in on first touch, and an LSTM step full of temporaries of a
few hundred KiB ran 35-40% slower with 128 KiB (``benchmarks/rnn.py``: 76-78 against 56-58 ms
per step), while the ResNet-18 peak above was the same with 1 MiB (261.7 against 261.3 MiB). Other C
libraries have no such option and are left alone.
"""

from __future__ import annotations

import ctypes
import threading

_OPTION_KEY = "cpu_malloc_mmap_threshold"
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
_lock = threading.Lock()
_outcome: bool | None = None  # whether the threshold is held, once applied


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)
        if not (hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "mallopt")):  # glibc's own names
            return None
    except OSError:
        return None
    return libc


def hold_mmap_threshold() -> bool:
    """Apply config ``cpu_malloc_mmap_threshold`` to glibc's malloc, once per process; whether
    a threshold is in force (False: the option is 0, or the C library is not glibc)."""
    global _outcome
    with _lock:
        if _outcome is not None:
            return _outcome
        from mxkit.core import config

        wanted = int(config.get(_OPTION_KEY))
        libc = _glibc() if wanted > 0 else None
        held = libc is not None and libc.mallopt(ctypes.c_int(_M_MMAP_THRESHOLD), ctypes.c_int(wanted)) == 1
        _outcome = held
        return held


__all__ = ["hold_mmap_threshold"]
