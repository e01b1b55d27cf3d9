"""Factories of the threaded engines (temporary: the naive engine until the Cython one lands)."""

from __future__ import annotations

from typing import Any


def make_threaded_engine(**options: Any) -> Any:
    """Make a ``threaded`` engine."""
    from mxkit.engine.naive import NaiveEngine

    return NaiveEngine()


def make_threaded_per_device_engine(**options: Any) -> Any:
    """Make a ``threaded_per_device`` engine."""
    from mxkit.engine.naive import NaiveEngine

    return NaiveEngine()
