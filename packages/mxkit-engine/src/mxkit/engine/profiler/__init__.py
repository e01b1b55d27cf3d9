"""The engine profiler (MXNet 1.x's ``mx.profiler``): where time and memory go.

::

    from mxkit import mx

    mx.profiler.set_config(filename="trace.json", profile_all=True, aggregate_stats=True)
    mx.profiler.set_state("run")
    with mx.profiler.scope("layer1"):       # ops pushed inside are named "layer1:<op>"
        y = mx.nd.dot(a, b) + 1
    mx.nd.waitall()
    mx.profiler.set_state("stop")
    mx.profiler.dump()                      # Chrome trace JSON: chrome://tracing, Perfetto
    print(mx.profiler.dumps(sort_by="avg")) # per-operator count/total/min/max/mean (ms)

Every operation pushed to an engine while the profiler runs is recorded by the engine
itself (push, start and end time, worker thread, device, name, vars read and written,
and which operation's write it waited for); with the profiler stopped each push pays one
test of a C flag. ``MXKIT_PROFILER_AUTOSTART=1`` (config ``profiler_autostart``) profiles
a whole run and dumps to config ``profiler_filename`` at exit. The file format is
described in :mod:`mxkit.engine.profiler._trace`.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mxkit.core.errors import ConfigError
from mxkit.engine.profiler import _memory, _stats, _trace
from mxkit.engine.profiler._memory import memory_state, track_buffer, track_ndarray
from mxkit.engine.profiler._objects import Counter, Domain, Event, Frame, Marker, Task

_DEFAULTS: dict[str, Any] = {
    "filename": "profile.json", "profile_all": False, "profile_symbolic": True, "profile_imperative": True,
    "profile_memory": True, "profile_api": True, "aggregate_stats": False, "continuous_dump": False,
    "dump_period": 1.0,
}
STATES = ("run", "stop")

_lock = threading.RLock()
_config: dict[str, Any] = dict(_DEFAULTS)
_state = "stop"
_paused = False
_epoch_ns: int | None = None
_ops: list[tuple[Any, ...]] = []
_flows: list[tuple[Any, ...]] = []
_memory_events: list[tuple[int, str, str, int]] = []
_host_events: list[dict[str, Any]] = []


class _ScopeState(threading.local):
    """The profiler scope of each pushing thread; the engines read ``name`` at push (a
    class default, so that a thread outside any scope costs no failed attribute lookup)."""

    name: str | None = None


_scope_local = _ScopeState()


def set_config(**kwargs: Any) -> None:
    """Set profiler options (MXNet's ``mx.profiler.set_config``); unnamed ones keep their value.

    Parameters
    ----------
    filename : str
        Where :func:`dump` writes the trace (default ``"profile.json"``); its directory
        must exist.
    profile_all : bool
        Record everything (operators and memory), whatever the other flags say.
    profile_symbolic, profile_imperative : bool
        Record engine operations (default True). The engine records the executor's bulk
        segments and imperative operators alike, so either flag turns operations on.
    profile_memory : bool
        Record bytes in use by NDArrays and executor pools as counters (default True).
    profile_api : bool
        Record :class:`Task`/:class:`Frame`/:class:`Event`/:class:`Counter`/:class:`Marker`
        objects and :func:`scope` slices on the host track (default True).
    aggregate_stats : bool
        Accepted for MXNet compatibility: :func:`dumps` always aggregates.
    continuous_dump : bool
        Accepted for MXNet compatibility: ``dump(finished=False)`` snapshots at any time.
    dump_period : float
        Accepted for MXNet compatibility.

    Raises
    ------
    ConfigError
        For an unknown option, a value of the wrong type, or a filename whose directory
        does not exist.
    """
    updates = {}
    for key, value in kwargs.items():
        if key not in _DEFAULTS:
            raise ConfigError(f"profiler.set_config() got an unknown option {key!r}; the options are "
                              f"{', '.join(sorted(_DEFAULTS))}")
        if key == "filename":
            value = _checked_filename(value)
        elif key == "dump_period":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"profiler.set_config(dump_period={value!r}): expected a number of seconds > 0")
            value = float(value)
        elif not isinstance(value, bool):
            raise ConfigError(f"profiler.set_config({key}={value!r}): expected True or False")
        updates[key] = value
    with _lock:
        _config.update(updates)
        _apply()


def get_config() -> dict[str, Any]:
    """The profiler options in force (a copy)."""
    with _lock:
        return dict(_config)


def _checked_filename(value: Any) -> str:
    if not isinstance(value, (str, os.PathLike)) or not str(value):
        raise ConfigError(f"profiler.set_config(filename={value!r}): expected a file path (str)")
    path = os.fspath(value)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ConfigError(f"profiler.set_config(filename={path!r}): the directory {directory!r} does not "
                          f"exist; create it first or choose a path in an existing directory")
    if os.path.isdir(path):
        raise ConfigError(f"profiler.set_config(filename={path!r}) is a directory; give a file path like "
                          f"{os.path.join(path, 'profile.json')!r}")
    return path


def set_state(state: str = "stop") -> None:
    """Start (``"run"``) or stop (``"stop"``) recording (MXNet's ``mx.profiler.set_state``).

    Operations pushed while the profiler runs (and is not paused) are recorded, even if
    they complete after it stops. Records accumulate until :func:`dump` or
    ``dumps(reset=True)``.

    Raises
    ------
    ConfigError
        For a state other than ``"run"`` or ``"stop"``.
    """
    global _state, _epoch_ns, _paused
    if state not in STATES:
        raise ConfigError(f"profiler.set_state({state!r}): the state must be 'run' or 'stop'")
    with _lock:
        if state == "run" and _epoch_ns is None:
            _epoch_ns = time.monotonic_ns()
        _state = state
        if state == "stop":
            _paused = False
        _apply()


def get_state() -> str:
    """``"run"`` or ``"stop"``."""
    return _state


def pause() -> None:
    """Stop recording until :func:`resume`; operations pushed meanwhile are left out."""
    global _paused
    with _lock:
        _paused = True
        _apply()


def resume() -> None:
    """Record again after :func:`pause` (if the state is ``"run"``)."""
    global _paused
    with _lock:
        _paused = False
        _apply()


def is_recording() -> bool:
    """True while pushed operations are recorded (running and not paused)."""
    return _state == "run" and not _paused


def _engine_modules() -> list[Any]:
    from mxkit.engine import _core, _naive

    return [_core, _naive]


def _apply() -> None:
    recording = is_recording()
    ops_on = recording and (_config["profile_all"] or _config["profile_symbolic"] or _config["profile_imperative"])
    for module in _engine_modules():
        module._set_profiling(ops_on, _scope_local)
    memory_state.on = recording and (_config["profile_all"] or _config["profile_memory"])


def _collect() -> None:
    """Move the engines' and the memory counters' new records into the profiler's lists."""
    for module in _engine_modules():
        ops, flows = module._take_profile()
        _ops.extend(ops)
        _flows.extend(flows)
    _memory_events.extend(_memory.take_events())


def _host_recording() -> bool:
    return is_recording() and (_config["profile_all"] or _config["profile_api"])


def record_host_event(event: dict[str, Any]) -> None:
    """Add an event recorded from Python (``t_ns``, optional ``end_ns``, ``ident``, ``ph``...)."""
    with _lock:
        _host_events.append(event)


@contextmanager
def scope(name: str = "<unk>:", append_mode: bool = False) -> Iterator[None]:
    """Name the operations pushed inside: ``"<name>:<op name>"`` (MXNet's ``profiler.scope``).

    Parameters
    ----------
    name : str
        The prefix (a ``":"`` is added if it does not end with one).
    append_mode : bool
        Inside another scope, append to its prefix (``"outer:inner:"``) instead of
        replacing it.

    The scope belongs to the thread that enters it; while the profiler records, the
    scope also appears as a slice on the host track.
    """
    if not isinstance(name, str) or not name:
        raise ConfigError(f"profiler.scope({name!r}): the name must be a non-empty str")
    prefix = name if name.endswith(":") else name + ":"
    previous = getattr(_scope_local, "name", None)
    current = (previous or "") + prefix if append_mode else prefix
    _scope_local.name = current
    start = time.monotonic_ns()
    try:
        yield
    finally:
        _scope_local.name = previous
        if _host_recording():
            record_host_event({"name": current.rstrip(":"), "cat": "scope", "ph": "X", "t_ns": start,
                               "end_ns": time.monotonic_ns(), "ident": threading.get_ident()})


#: the aggregate domain of custom operators' Python code and of what they push (MXNet's name)
CUSTOM_OPERATOR_DOMAIN = "Custom Operator"
_custom_scopes: set[str] = set()


@contextmanager
def custom_operator_scope(name: str) -> Iterator[None]:
    """Profile a custom operator's Python method, as MXNet does: the time of the body is
    ``<name>::pure_python`` and every operation pushed inside is ``<name>::<op>``, both in
    the ``"Custom Operator"`` domain of :func:`dumps`.

    Parameters
    ----------
    name : str
        The operator type (``"MySigmoid"``; ``"_backward_MySigmoid"`` for its backward).
    """
    prefix = f"{name}::"
    with _lock:
        _custom_scopes.add(prefix)
    previous = getattr(_scope_local, "name", None)
    _scope_local.name = prefix
    start = time.monotonic_ns()
    try:
        yield
    finally:
        _scope_local.name = previous
        if is_recording():
            record_host_event({"name": f"{name}::pure_python", "cat": CUSTOM_OPERATOR_DOMAIN, "ph": "X",
                               "t_ns": start, "end_ns": time.monotonic_ns(), "ident": threading.get_ident()})


def _take_all(reset: bool) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    with _lock:
        _collect()
        taken = (list(_ops), list(_flows), list(_memory_events), list(_host_events))
        if reset:
            _ops.clear()
            _flows.clear()
            _memory_events.clear()
            _host_events.clear()
    return taken


def trace(reset: bool = False) -> dict[str, Any]:
    """The Chrome trace object of everything recorded so far (what :func:`dump` writes).

    Parameters
    ----------
    reset : bool
        Forget the records afterwards.
    """
    from mxkit.engine import _core

    ops, flows, memory, host = _take_all(reset)
    epoch = _epoch_ns if _epoch_ns is not None else time.monotonic_ns()
    labels: dict[tuple[int, int], str] = dict(_core._pool_labels)
    names = _trace.thread_names(_core._worker_names)
    built: dict[str, Any] = _trace.build_trace(ops, flows, labels, names, host, memory, epoch)
    return built


def dump(finished: bool = True, profile_process: str = "worker") -> None:
    """Write the trace (Chrome trace event format JSON) to the configured ``filename``.

    Parameters
    ----------
    finished : bool
        True: this is the final dump, the profiler stops (as ``set_state("stop")``).
        False: a snapshot; recording goes on and later dumps include these events again.
    profile_process : str
        Accepted for MXNet compatibility (only ``"worker"``: there is no server process).

    Operations still running are written by a later dump; call ``mx.nd.waitall()`` first
    to include everything pushed so far.
    """
    if profile_process != "worker":
        raise ConfigError(f"profiler.dump(profile_process={profile_process!r}): only 'worker' is profiled")
    if finished:
        set_state("stop")
    data = trace()
    path = _config["filename"]
    from mxkit.core.files import atomic_open

    with atomic_open(path, "w") as fh:
        json.dump(data, fh, separators=(",", ":"))


def dumps(reset: bool = False, format: str = "table", sort_by: str = "total", ascending: bool = False) -> str:
    """The aggregate statistics of the operations recorded so far (MXNet's ``profiler.dumps``).

    Parameters
    ----------
    reset : bool
        Forget every record afterwards (the next statistics start from zero).
    format : {"table", "json"}
        A text table of the operators, or JSON ``{"Time": {"operator": {name: {"Count",
        "Total", "Min", "Max", "Avg"}}, <domain>: {...}}, "Memory": {<domain>: {counter:
        {"Count", "Min", "Max", "Avg"}}}, "Unit": {"Time": "ms", "Memory": "kB"}}``: the
        user's tasks, frames and events by domain beside the operators, and the values of
        counters (the user's; memory in use with ``profile_memory``), as MXNet's.
    sort_by : {"total", "avg", "min", "max", "count"}
        The column that orders the rows.
    ascending : bool
        Smallest first (default: largest first).

    Raises
    ------
    ConfigError
        For an unknown ``sort_by`` or ``format``.
    """
    _stats.check_choices(sort_by, format)
    ops, _flows_taken, memory, host = _take_all(reset)
    with _lock:
        custom_scopes = set(_custom_scopes)
    in_custom = [record[3] in custom_scopes for record in ops]
    domains = _stats.aggregate_host(host)
    custom = _stats.aggregate(record for record, inside in zip(ops, in_custom) if inside)
    if custom:
        domains.setdefault(CUSTOM_OPERATOR_DOMAIN, {}).update(custom)
    table: str = _stats.render(_stats.aggregate(record for record, inside in zip(ops, in_custom) if not inside),
                               sort_by=sort_by, ascending=ascending, format=format, host=domains,
                               counters=_stats.aggregate_counters(host, memory))
    return table


def reset() -> None:
    """Stop the profiler, forget every record and restore the default options (tests)."""
    global _epoch_ns
    with _lock:
        _config.clear()
        _config.update(_DEFAULTS)
        set_state("stop")
        _take_all(True)
        _epoch_ns = None
        _scope_local.name = None


# -- MXNet 1.0's names, still used by older scripts -------------------------------------

_MODES = {"symbolic": {"profile_symbolic": True, "profile_imperative": False},
          "imperative": {"profile_symbolic": False, "profile_imperative": True},
          "api": {"profile_api": True}, "memory": {"profile_memory": True}, "all": {"profile_all": True}}


def profiler_set_config(mode: str = "symbolic", filename: str = "profile.json") -> None:
    """MXNet 1.0's ``profiler_set_config(mode, filename)``: ``mode`` is ``"symbolic"``,
    ``"imperative"``, ``"api"``, ``"memory"`` or ``"all"`` (see :func:`set_config`)."""
    if mode not in _MODES:
        raise ConfigError(f"profiler_set_config(mode={mode!r}): choose one of {', '.join(map(repr, _MODES))}")
    set_config(filename=filename, **_MODES[mode])


def profiler_set_state(state: str = "stop") -> None:
    """MXNet 1.0's name of :func:`set_state`."""
    set_state(state)


# -- MXKIT_PROFILER_AUTOSTART ---------------------------------------------------------

_autostarted = False


def autostart() -> None:
    """Start profiling now and dump to config ``profiler_filename`` at interpreter exit
    (what config ``profiler_autostart`` / ``MXKIT_PROFILER_AUTOSTART=1`` does)."""
    global _autostarted
    if _autostarted:
        return
    from mxkit.core import config

    _autostarted = True
    set_config(filename=config.get("profiler_filename"), profile_all=True)
    set_state("run")
    atexit.register(_dump_at_exit)


def _dump_at_exit() -> None:
    try:
        engine = sys.modules.get("mxkit.engine")
        process_engine = getattr(engine, "_process_engine", None)
        if process_engine is not None:
            try:
                process_engine.wait_all()
            except Exception:  # an op's error was the program's business: still write the trace
                pass
        dump(finished=True)
    except Exception as exc:  # never turn a finished run into a failing exit
        print(f"mxkit profiler: could not write the trace at exit: {exc}", file=sys.stderr)


__all__ = ["CUSTOM_OPERATOR_DOMAIN", "Counter", "Domain", "Event", "Frame", "Marker", "Task", "autostart",
           "custom_operator_scope", "dump", "dumps", "get_config", "get_state", "is_recording", "memory_state", "pause",
           "profiler_set_config", "profiler_set_state", "reset", "resume", "scope", "set_config", "set_state", "trace",
           "track_buffer", "track_ndarray"]
