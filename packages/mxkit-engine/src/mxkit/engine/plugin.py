"""The engine plugin: registers mxkit's built-in engines through the ``mxkit_engines`` hook.

The factories import the engine modules lazily so that building the plugin registry
does not load the compiled extension.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mxkit.core import hookimpl
from mxkit.core.specs import EngineSpec, OptionSpec


def _make_naive(**options: Any) -> Any:
    from mxkit.engine.naive import NaiveEngine

    return NaiveEngine(**options)


def _make_threaded(**options: Any) -> Any:
    from mxkit.engine.threaded import make_threaded_engine

    return make_threaded_engine(**options)


def _make_threaded_per_device(**options: Any) -> Any:
    from mxkit.engine.threaded import make_threaded_per_device_engine

    return make_threaded_per_device_engine(**options)


@hookimpl(tryfirst=True)
def mxkit_engines() -> Iterator[EngineSpec]:
    """Yield the ``naive``, ``threaded`` and ``threaded_per_device`` engines."""
    yield EngineSpec(name="naive", factory=_make_naive,
                     description="runs every operation at push on the caller's thread (debugging)")
    yield EngineSpec(name="threaded", factory=_make_threaded,
                     description="one shared pool of worker threads for every device")
    yield EngineSpec(name="threaded_per_device", factory=_make_threaded_per_device,
                     description="a worker pool per device plus a priority pool (default)")


@hookimpl
def mxkit_options() -> Iterator[OptionSpec]:
    """The engine's and the profiler's configuration keys."""
    yield OptionSpec("engine_exit_timeout", "float", 10.0,
                     "seconds the threaded engines wait at interpreter exit for pending operations", minimum=0.0)
    yield OptionSpec("profiler_autostart", "bool", False, "start the profiler at import")
    yield OptionSpec("profiler_filename", "str", "profile.json",
                     "where the profiler started by profiler_autostart writes its trace at exit")
