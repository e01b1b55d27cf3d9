"""Automatic names of symbols: MXNet's ``NameManager`` and ``Prefix``.

An operator created without ``name=`` gets ``<hint><n>``, where the hint is the lower-case
operator name and ``n`` counts per hint in the active manager (``fullyconnected0``,
``fullyconnected1``...). Managers nest as context managers; ``Prefix`` prepends a string
to every name, given or generated, made inside it.
"""

from __future__ import annotations

import threading


class NameManager:
    """Hands out unique names per hint; use ``with NameManager():`` to start fresh counters."""

    _local = threading.local()

    def __init__(self) -> None:
        self._counter: dict[str, int] = {}
        self._previous: NameManager | None = None

    def get(self, name: str | None, hint: str) -> str:
        """``name`` when given, else ``hint`` followed by its next counter value.

        Parameters
        ----------
        name : str or None
            The name the user gave.
        hint : str
            The stem of a generated name (the operator name in lower case).
        """
        if name:
            return name
        count = self._counter.get(hint, 0)
        self._counter[hint] = count + 1
        return f"{hint}{count}"

    def __enter__(self) -> NameManager:
        self._previous = NameManager.current()
        NameManager._local.current = self
        return self

    def __exit__(self, *exc: object) -> None:
        NameManager._local.current = self._previous
        self._previous = None

    @staticmethod
    def current() -> NameManager:
        """The innermost active manager of this thread (a process-wide default at the bottom)."""
        manager = getattr(NameManager._local, "current", None)
        if manager is None:
            manager = NameManager._local.current = NameManager()
        return manager


class Prefix(NameManager):
    """A name manager that prepends ``prefix`` to every name made inside it.

    Examples
    --------
    >>> with Prefix("mynet_"):
    ...     net = mx.sym.FullyConnected(data, num_hidden=10, name="fc1")
    >>> net.list_arguments()
    ['data', 'mynet_fc1_weight', 'mynet_fc1_bias']
    """

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self._prefix = prefix

    def get(self, name: str | None, hint: str) -> str:
        return self._prefix + super().get(name, hint)


current = NameManager.current

__all__ = ["NameManager", "Prefix", "current"]
