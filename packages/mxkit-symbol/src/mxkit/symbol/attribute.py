"""Attribute scopes: ``with mx.AttrScope(ctx_group="dev1"):`` attaches attributes to every
symbol created inside (MXNet's ``AttrScope``)."""

from __future__ import annotations

import threading

from mxkit.core.errors import MXKitError


class AttrScope:
    """Attributes given to every symbol made in the scope; inner scopes add to outer ones.

    Parameters
    ----------
    **attrs : str
        Attribute names and string values (``ctx_group="stage1"``, ``lr_mult="0.1"``).

    Raises
    ------
    MXKitError
        If a value is not a string (MXNet keeps attributes as strings).
    """

    _local = threading.local()

    def __init__(self, **attrs: str) -> None:
        for key, value in attrs.items():
            if not isinstance(value, str):
                raise MXKitError(f"AttrScope: attribute {key}={value!r} must be a string, "
                                 f"e.g. {key}={str(value)!r}")
        self._attrs = dict(attrs)
        self._previous: AttrScope | None = None

    def get(self, attrs: dict[str, str] | None) -> dict[str, str]:
        """The scope's attributes updated with ``attrs`` (explicit ones win)."""
        merged = dict(self._attrs)
        if attrs:
            merged.update(attrs)
        return merged

    def __enter__(self) -> AttrScope:
        self._previous = AttrScope.current()
        merged = dict(self._previous._attrs)
        merged.update(self._attrs)
        self._attrs = merged
        AttrScope._local.current = self
        return self

    def __exit__(self, *exc: object) -> None:
        AttrScope._local.current = self._previous
        self._previous = None

    @staticmethod
    def current() -> AttrScope:
        """The innermost active scope of this thread (an empty one at the bottom)."""
        scope = getattr(AttrScope._local, "current", None)
        if scope is None:
            scope = AttrScope._local.current = AttrScope()
        return scope


current = AttrScope.current

__all__ = ["AttrScope", "current"]
