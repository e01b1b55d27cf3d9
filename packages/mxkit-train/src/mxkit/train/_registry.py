"""Name registries and error classes shared by optimizers, initializers, metrics and schedulers.

MXNet keeps one registry per kind (``Optimizer.opt_registry``, the initializer and metric
registries) keyed by the lower-cased class name. :class:`NameRegistry` is that registry
with the errors mxkit promises: an unknown name lists the choices (and the close ones).
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any, TypeVar

from mxkit.core.errors import MXKitError

T = TypeVar("T")


class TrainingValueError(MXKitError, ValueError):
    """A bad argument to an optimizer, scheduler, initializer, metric or callback."""


class UnknownNameError(MXKitError, ValueError, LookupError):
    """A registry name (optimizer, initializer, metric, scheduler) that nothing registered."""


class NameRegistry(MutableMapping[str, Any]):
    """Classes of one kind by lower-cased name, behaving like MXNet's registry dicts.

    Parameters
    ----------
    kind : str
        What is registered (``optimizer``, ``initializer``...), for messages.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Any] = {}

    def register(self, klass: T, name: str | None = None) -> T:
        """Register ``klass`` under ``name`` (default: its lower-cased class name); return it.

        A second registration of a name replaces the first with a warning, as in MXNet.
        """
        if not isinstance(klass, type):
            raise TrainingValueError(f"only classes can be registered as a {self.kind}, got {klass!r}")
        key = (name or klass.__name__).lower()
        previous = self._entries.get(key)
        if previous is not None and previous is not klass:
            warnings.warn(f"new {self.kind} {klass.__module__}.{klass.__name__} is overriding existing "
                          f"{self.kind} {previous.__module__}.{previous.__name__}", stacklevel=3)
        self._entries[key] = klass
        return klass

    def alias(self, *names: str) -> Callable[[T], T]:
        """A class decorator registering the class under extra ``names``."""

        def decorate(klass: T) -> T:
            for name in names:
                self.register(klass, name)
            return klass

        return decorate

    def lookup(self, name: Any) -> Any:
        """The class registered as ``name`` (case-insensitive).

        Raises
        ------
        UnknownNameError
            Naming the unknown name and listing every registered one.
        """
        if not isinstance(name, str):
            raise UnknownNameError(f"a {self.kind} name must be a string, got {type(name).__name__} {name!r}; "
                                   f"choices: {', '.join(sorted(self._entries))}")
        key = name.strip().lower()
        try:
            return self._entries[key]
        except KeyError:
            close = difflib.get_close_matches(key, list(self._entries), n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise UnknownNameError(f"unknown {self.kind} {name!r}{hint}; choices: "
                                   f"{', '.join(sorted(self._entries))}") from None

    def name_of(self, klass: type) -> str:
        """The name ``klass`` was registered under (its lower-cased class name if it was)."""
        own = klass.__name__.lower()
        if self._entries.get(own) is klass:
            return own
        for key, value in self._entries.items():
            if value is klass:
                return key
        raise UnknownNameError(f"{self.kind} class {klass.__module__}.{klass.__name__} is not registered; "
                               f"decorate it with register so that it can be described and recreated by name")

    # MutableMapping, so that code written against MXNet's plain dict keeps working
    def __getitem__(self, key: str) -> Any:
        return self._entries[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._entries[key.lower()] = value

    def __delitem__(self, key: str) -> None:
        del self._entries[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"NameRegistry({self.kind!r}, {sorted(self._entries)})"


def check_number(owner: str, name: str, value: Any, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False, allow_none: bool = False) -> Any:
    """``value`` if it is a real number within the bounds, else a :class:`TrainingValueError`.

    Parameters
    ----------
    owner, name : str
        Who takes the argument and its name, for the message.
    low, high : float, optional
        Bounds (closed unless ``low_open``/``high_open``).
    allow_none : bool
        Whether ``None`` is accepted (and returned).
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or (not isinstance(value, (int, float)) and not hasattr(value, "__float__")):
        raise TrainingValueError(f"{owner}: {name} must be a number, got {type(value).__name__} {value!r}")
    number = float(value)
    bounds = ("(" if low_open else "[") + ("-inf" if low is None else repr(low)) + ", " + \
        ("inf" if high is None else repr(high)) + (")" if high_open else "]")
    too_low = low is not None and (number < low or (low_open and number == low))
    too_high = high is not None and (number > high or (high_open and number == high))
    if too_low or too_high or number != number:
        raise TrainingValueError(f"{owner}: {name}={value!r} is outside {bounds}")
    return value


__all__ = ["NameRegistry", "TrainingValueError", "UnknownNameError", "check_number"]
