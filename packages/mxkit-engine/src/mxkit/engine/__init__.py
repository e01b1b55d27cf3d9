"""mxkit-engine: the dependency engine.

Every task is pushed with the variables it reads and writes; independent tasks run in
parallel on worker threads while each variable's writes keep their push order (MXNet
1.x's threaded engine). ::

    import mxkit.engine as engine

    eng = engine.get()                      # the process engine (config ``engine``)
    var = eng.new_var()
    eng.push(lambda: work(), reads=(), writes=(var,), name="work")
    eng.wait_for_var(var)                   # re-raises the error of a failed write

Engines are plugins (hook ``mxkit_engines``): ``naive``, ``threaded`` and
``threaded_per_device`` (the default) come with this package.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from mxkit.engine.bulk import bulk, set_bulk_size

_lock = threading.Lock()
_process_engine: Any = None
# In a child process made by os.fork(): the type of the parent's engine, for a fresh one.
_engine_name_after_fork: str | None = None


def create(name: str | None = None, **options: Any) -> Any:
    """Make a new engine, separate from the process engine.

    Parameters
    ----------
    name : str, optional
        A registered engine name (``"naive"``, ``"threaded"``, ``"threaded_per_device"``);
        by default the one config ``engine`` selects.
    **options
        Passed to the engine's factory (e.g. ``num_workers=2`` for the threaded engines).

    Raises
    ------
    UnknownPluginError
        If no plugin provides ``name``; the message lists the available engines.
    """
    from mxkit.core.plugins import get_engine_spec

    if not _autostart_checked:
        _check_profiler_autostart()
    spec = get_engine_spec(name)
    assert spec.factory is not None  # EngineSpec checks it is callable
    return spec.factory(**options)


_autostart_checked = False


def _check_profiler_autostart() -> None:
    # Config ``profiler_autostart`` (MXKIT_PROFILER_AUTOSTART=1) profiles the whole run: no
    # op can be pushed before an engine exists, so the first engine made is early enough.
    global _autostart_checked
    _autostart_checked = True
    from mxkit.core import config

    if config.get("profiler_autostart"):
        from mxkit.engine import profiler

        profiler.autostart()


def get() -> Any:
    """The process's engine, made on first call from config ``engine``.

    The engine type is read from the configuration once; :func:`set_engine` or
    :func:`reset` switch it later. A child process made by ``os.fork()`` gets a fresh
    engine of the same type on its first call.
    """
    engine = _process_engine
    if engine is not None:
        return engine
    return _make_process_engine()


def _make_process_engine() -> Any:
    global _process_engine
    with _lock:
        if _process_engine is None:
            _process_engine = create(_engine_name_after_fork)
        return _process_engine


def set_engine(engine: Any) -> Any:
    """Make ``engine`` (an engine object or a registered name) the process engine.

    The previous engine is waited for (so no work is lost) and returned.
    """
    global _process_engine
    if isinstance(engine, str):
        engine = create(engine)
    with _lock:
        previous, _process_engine = _process_engine, engine
    if previous is not None and previous is not engine:
        previous.wait_all()
    return previous


def reset() -> None:
    """Wait for and forget the process engine; the next :func:`get` reads the config again."""
    global _process_engine, _engine_name_after_fork
    with _lock:
        previous, _process_engine = _process_engine, None
        _engine_name_after_fork = None
    if previous is not None:
        try:
            previous.wait_all()
        finally:
            previous.shutdown()


#: engines inherited from the parent by a forked child, kept referenced and never released
_parent_engines: list[Any] = []


def _forget_process_engine_in_child() -> None:
    # The parent's worker threads do not exist in the child: the next get() makes a new
    # engine of the same type. (The lock may have been held by a parent thread: renew it.)
    # The parent's engine object is kept alive, not released: releasing it would run its
    # destructor, which stops and joins worker threads that the child does not have, under
    # mutexes that a parent thread may have held at the fork, and would hang the child.
    global _process_engine, _engine_name_after_fork, _lock
    if _process_engine is not None:
        _engine_name_after_fork = getattr(_process_engine, "name", None)
        _parent_engines.append(_process_engine)
    _process_engine = None
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_process_engine_in_child)


def wait_all() -> None:
    """Wait for every operation pushed to the process engine (``mx.nd.waitall()``)."""
    get().wait_all()


__all__ = ["bulk", "create", "get", "reset", "set_bulk_size", "set_engine", "wait_all"]
