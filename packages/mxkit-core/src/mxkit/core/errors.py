"""The error classes of mxkit.

Every error mxkit raises on purpose is an :class:`MXKitError`, so a user can catch the
framework's complaints in one clause. :class:`MXKitError` is a ``RuntimeError``, as MXNet's
``MXNetError`` is, so code written for MXNet that catches ``RuntimeError`` (or
``mx.base.MXNetError``, the same class here) catches mxkit's errors too. Subclasses say
which part complained; several also derive from the builtin exception a Python programmer
would expect (``ValueError`` for a bad value, ``KeyError``-free lookups raise
:class:`UnknownPluginError`, a ``LookupError``).
"""

from __future__ import annotations


class MXKitError(RuntimeError):
    """Base class of every error raised by mxkit (MXNet's ``MXNetError``, a ``RuntimeError``)."""


class PluginError(MXKitError):
    """A plugin could not be loaded, validated or chosen."""


class DuplicatePluginError(PluginError):
    """Two plugins registered the same name for one kind of extension."""


class UnknownPluginError(PluginError, LookupError):
    """A plugin name was asked for that no installed plugin provides."""


class ConfigError(MXKitError, ValueError):
    """A configuration value is of the wrong type or outside its choices."""


class MissingComponentError(MXKitError, AttributeError):
    """A name of the facade needs a component that is not installed.

    It is an ``AttributeError`` too, so ``hasattr(mx, "nd")`` is simply false when
    mxkit-ndarray is missing.
    """


class DeviceError(MXKitError):
    """A device (context) is unknown, unavailable, or its backend is missing."""


class ShapeError(MXKitError, ValueError):
    """Shapes of the inputs of an operator do not agree."""


class DTypeError(MXKitError, TypeError):
    """A dtype is unknown or not supported where it was used."""


class EngineError(MXKitError):
    """An operation pushed to the engine failed, or the engine was misused."""


class FormatError(MXKitError, ValueError):
    """A file or message is not in the expected format (corrupt, truncated, wrong magic)."""


class KVStoreError(MXKitError):
    """A KVStore was misused: a key pushed or pulled before init, mixed key types, a bad value."""


class OutOfMemoryError(MXKitError, MemoryError):
    """An array (or a bound graph's memory) is larger than the device can allocate."""


__all__ = [
    "ConfigError",
    "DTypeError",
    "DeviceError",
    "DuplicatePluginError",
    "EngineError",
    "FormatError",
    "KVStoreError",
    "MXKitError",
    "MissingComponentError",
    "OutOfMemoryError",
    "PluginError",
    "ShapeError",
    "UnknownPluginError",
]
