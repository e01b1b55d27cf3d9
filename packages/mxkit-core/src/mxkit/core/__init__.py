"""mxkit-core: the plugin manager, hookspecs, spec dataclasses, configuration, Context,
dtypes and error classes on which every other mxkit component builds.

Importing this package is cheap (pluggy and numpy are imported on first use).
"""

from mxkit.core import config
from mxkit.core.context import Context, cpu, cpu_pinned, current_context, gpu
from mxkit.core.errors import (
    ConfigError,
    DeviceError,
    DTypeError,
    DuplicatePluginError,
    EngineError,
    FormatError,
    MissingComponentError,
    MXKitError,
    PluginError,
    ShapeError,
    UnknownPluginError,
)
from mxkit.core.specs import BackendSpec, CompressorSpec, ConsistencySpec, EngineSpec, PlannerSpec


def __getattr__(name: str) -> object:
    # ``hookimpl`` lives with the hookspecs, which import pluggy: load it on first use.
    if name in ("hookimpl", "hookspec"):
        from mxkit.core import hookspecs

        return getattr(hookspecs, name)
    raise AttributeError(f"module 'mxkit.core' has no attribute {name!r}")


__all__ = [
    "BackendSpec",
    "CompressorSpec",
    "ConfigError",
    "ConsistencySpec",
    "Context",
    "DTypeError",
    "DeviceError",
    "DuplicatePluginError",
    "EngineError",
    "EngineSpec",
    "FormatError",
    "MXKitError",
    "MissingComponentError",
    "PlannerSpec",
    "PluginError",
    "ShapeError",
    "UnknownPluginError",
    "config",
    "cpu",
    "cpu_pinned",
    "current_context",
    "gpu",
    "hookimpl",
    "hookspec",
]
