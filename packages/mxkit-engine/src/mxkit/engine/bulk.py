"""``mx.engine.bulk``: how many operations an executor pushes to the engine as one.

MXNet's ``set_bulk_size``/``bulk`` set, for the calling thread, the largest number of
operations the engine runs as one segment. In mxkit, executors push their nodes in bulk
segments (config ``exec_bulk_size``); a size set here, for this thread, takes precedence
for executors bound while it is in force. Imperative NDArray operations are pushed one by
one either way.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_local = threading.local()


def bulk_size() -> int | None:
    """The size :func:`set_bulk_size` set in this thread, or None (config ``exec_bulk_size`` applies)."""
    size: int | None = getattr(_local, "size", None)
    return size


def set_bulk_size(size: int | None) -> int:
    """Set this thread's bulk size (None: back to config ``exec_bulk_size``); returns the previous one.

    The previous size is 0 when none was set (MXNet returns its own default there).
    """
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise ValueError(f"a bulk size must be a non-negative int (0 or 1: no bulking), got {size!r}")
    previous = bulk_size()
    _local.size = size
    return previous or 0


@contextmanager
def bulk(size: int) -> Iterator[None]:
    """``with mx.engine.bulk(size):`` executors bound in the block push ``size`` nodes at a time."""
    previous = bulk_size()
    set_bulk_size(size)
    try:
        yield
    finally:
        _local.size = previous


__all__ = ["bulk", "bulk_size", "set_bulk_size"]
