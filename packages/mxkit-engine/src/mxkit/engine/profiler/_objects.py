"""MXNet's user-defined profiler objects: Domain, Task, Frame, Event, Counter, Marker.

They record on the ``host`` track of the trace while the profiler runs (and
``profile_api`` or ``profile_all`` is set); otherwise they cost a flag test.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from mxkit.core.errors import ConfigError

_MARKER_SCOPES = {"global": "g", "process": "p", "thread": "t", "task": "t", "marker": "t"}


def _profiler() -> Any:
    from mxkit.engine import profiler

    return profiler


def _checked_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise ConfigError(f"profiler.{what}(name={name!r}): the name must be a non-empty str")
    return name


class Domain:
    """A named group of tasks, frames, counters and markers (its name is their category)."""

    def __init__(self, name: str) -> None:
        self.name = _checked_name(name, "Domain")

    def new_task(self, name: str) -> Task:
        """A :class:`Task` of this domain."""
        return Task(self, name)

    def new_frame(self, name: str) -> Frame:
        """A :class:`Frame` of this domain."""
        return Frame(self, name)

    def new_counter(self, name: str, value: int | None = None) -> Counter:
        """A :class:`Counter` of this domain, set to ``value`` if given."""
        return Counter(self, name, value)

    def new_marker(self, name: str) -> Marker:
        """A :class:`Marker` of this domain."""
        return Marker(self, name)

    def __str__(self) -> str:
        return self.name


class _Slice:
    """Something with start()/stop() that becomes one ``"X"`` slice on the calling thread."""

    _category = "event"

    def __init__(self, domain: Domain | None, name: str) -> None:
        self.domain = domain
        self.name = _checked_name(name, type(self).__name__)
        self._start: int | None = None

    def start(self) -> None:
        """Begin the slice (on this thread)."""
        self._start = time.monotonic_ns()

    def stop(self) -> None:
        """End the slice; it is recorded if the profiler records and :meth:`start` was called."""
        start, self._start = self._start, None
        profiler = _profiler()
        if start is None or not profiler._host_recording():
            return
        category = self.domain.name if self.domain is not None else self._category
        profiler.record_host_event({"name": self.name, "cat": category, "ph": "X", "t_ns": start,
                                    "end_ns": time.monotonic_ns(), "ident": threading.get_ident(),
                                    "args": {"type": self._category}})

    def __enter__(self) -> _Slice:
        self.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def __str__(self) -> str:
        return self.name


class Task(_Slice):
    """A named piece of work of a :class:`Domain` (``start()`` ... ``stop()``)."""

    _category = "task"

    def __init__(self, domain: Domain, name: str) -> None:
        super().__init__(domain, name)


class Frame(_Slice):
    """A frame of a :class:`Domain` (e.g. one training iteration)."""

    _category = "frame"

    def __init__(self, domain: Domain, name: str) -> None:
        super().__init__(domain, name)


class Event(_Slice):
    """A named slice outside any domain."""

    _category = "event"

    def __init__(self, name: str) -> None:
        super().__init__(None, name)


class Counter:
    """A named integer drawn as a ``"C"`` counter track (``set_value``, ``+=``, ``-=``)."""

    def __init__(self, domain: Domain, name: str, value: int | None = None) -> None:
        self.domain = domain
        self.name = _checked_name(name, "Counter")
        self.value = 0
        self._lock = threading.Lock()
        if value is not None:
            self.set_value(value)

    def set_value(self, value: int) -> None:
        """Set the counter to ``value`` (an int)."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"Counter {self.name!r}: set_value({value!r}) needs an int")
        with self._lock:
            self.value = value
        self._record(value)

    def increment(self, delta: int = 1) -> None:
        """Add ``delta``."""
        if isinstance(delta, bool) or not isinstance(delta, int):
            raise ConfigError(f"Counter {self.name!r}: increment({delta!r}) needs an int")
        with self._lock:
            self.value += delta
            value = self.value
        self._record(value)

    def decrement(self, delta: int = 1) -> None:
        """Subtract ``delta``."""
        self.increment(-delta)

    def __iadd__(self, delta: int) -> Counter:
        self.increment(delta)
        return self

    def __isub__(self, delta: int) -> Counter:
        self.decrement(delta)
        return self

    def _record(self, value: int) -> None:
        profiler = _profiler()
        if profiler._host_recording():
            profiler.record_host_event({"name": self.name, "cat": self.domain.name, "ph": "C",
                                        "t_ns": time.monotonic_ns(), "args": {self.name: value}})

    def __str__(self) -> str:
        return self.name


class Marker:
    """An instant event (``mark()``), drawn across the thread, process or whole trace."""

    def __init__(self, domain: Domain, name: str) -> None:
        self.domain = domain
        self.name = _checked_name(name, "Marker")

    def mark(self, scope: str = "process") -> None:
        """Record the instant; ``scope`` is ``"global"``, ``"process"`` or ``"thread"``."""
        if scope not in _MARKER_SCOPES:
            raise ConfigError(f"Marker {self.name!r}: mark(scope={scope!r}) must be one of "
                              f"{', '.join(repr(s) for s in _MARKER_SCOPES)}")
        profiler = _profiler()
        if profiler._host_recording():
            profiler.record_host_event({"name": self.name, "cat": self.domain.name, "ph": "i",
                                        "s": _MARKER_SCOPES[scope], "t_ns": time.monotonic_ns(),
                                        "ident": threading.get_ident()})
