"""Memory counters of the profiler: bytes in use per device, by kind of storage.

The allocation points (NDArray creation in mxkit-ndarray, the executor's pools in
mxkit-symbol) test :data:`memory_state.on` (one attribute load when the profiler is off)
and call :func:`track_ndarray` / :func:`track_buffer` when it is on. A tracked allocation
is counted freed when the object owning it is garbage-collected (``weakref.finalize``):
for an NDArray that is its engine var, which its views share, so the bytes stay in use
while any view of them lives.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

NDARRAY = "ndarray"
EXECUTOR_POOL = "executor_pool"


class MemoryState:
    """Whether allocations are being recorded (read on every allocation: keep it one slot)."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = False


memory_state = MemoryState()

_lock = threading.Lock()
# (t_ns, device, kind, bytes in use of that kind on that device after the event)
_events: list[tuple[int, str, str, int]] = []
_in_use: dict[tuple[str, str], int] = {}
_tracked: set[int] = set()   # id() of the owners tracked and not yet freed


def _change(device: str, kind: str, delta: int) -> None:
    with _lock:
        total = _in_use.get((device, kind), 0) + delta
        _in_use[(device, kind)] = total
        _events.append((time.monotonic_ns(), device, kind, total))


def _freed(key: int, device: str, kind: str, nbytes: int) -> None:
    _tracked.discard(key)
    _change(device, kind, -nbytes)


def track_buffer(owner: Any, nbytes: int, device: str, kind: str) -> None:
    """Count ``nbytes`` of ``kind`` in use on ``device`` until ``owner`` is garbage-collected.

    Parameters
    ----------
    owner : object
        Supports weak references; its collection frees the bytes. An owner tracked
        already is ignored (a view made from a tracked array adds nothing).
    nbytes : int
        Bytes allocated.
    device : str
        The device, as ``str(ctx)`` (``"cpu(0)"``).
    kind : str
        The counter's series (``"ndarray"``, ``"executor_pool"``).
    """
    key = id(owner)
    if key in _tracked:
        return
    try:
        finalizer = weakref.finalize(owner, _freed, key, device, kind, int(nbytes))
    except TypeError:  # no weak references to it: its bytes cannot be followed
        return
    finalizer.atexit = False  # what is alive at exit is in use at the end of the trace
    _tracked.add(key)
    _change(device, kind, int(nbytes))


def track_ndarray(array: Any) -> None:
    """Count the storage of a new NDArray (owner: its engine var, shared by its views).

    ``array`` is read through NDArray's public accessors (``var``, ``storage``, ``context``),
    so the engine needs no import of mxkit-ndarray.
    """
    var = array.var
    if id(var) in _tracked:
        return
    track_buffer(var, array.storage.nbytes, str(array.context), NDARRAY)


def take_events() -> list[tuple[int, str, str, int]]:
    """Return and forget the counter events recorded so far (the totals carry on)."""
    global _events
    with _lock:
        events, _events = _events, []
    return events


def bytes_in_use() -> dict[tuple[str, str], int]:
    """Bytes in use now by (device, kind), for what was allocated while recording."""
    with _lock:
        return dict(_in_use)
