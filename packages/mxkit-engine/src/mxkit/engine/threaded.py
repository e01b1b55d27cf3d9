"""Factories of the threaded engines (the compiled :mod:`mxkit.engine._threaded`)."""

from __future__ import annotations

from typing import Any

from mxkit.core.errors import EngineError


def _engine_class() -> Any:
    try:
        from mxkit.engine._threaded import ThreadedEngine
    except ImportError as exc:  # a source checkout whose extension was never built
        raise EngineError(
            f"the threaded engine's compiled module mxkit.engine._threaded is missing ({exc}); "
            f"reinstall mxkit-engine (uv sync, or pip install mxkit-engine) so that it is built, "
            f"or set engine = 'naive'"
        ) from exc
    return ThreadedEngine


def make_threaded_engine(**options: Any) -> Any:
    """Make a ``threaded`` engine: one pool of ``num_workers`` threads for every device."""
    return _engine_class()("threaded", **options)


def make_threaded_per_device_engine(**options: Any) -> Any:
    """Make a ``threaded_per_device`` engine: a pool per device plus a priority pool."""
    return _engine_class()("threaded_per_device", **options)
