"""``teststore``: MXNet 1.x's ``TestStore``, the smallest store a Trainer can use.

It keeps nothing: ``broadcast`` copies a value into the outputs and ``pushpull`` sums a list
of arrays (on the first one's device) and writes the sum back, so a Trainer over several
devices all-reduces its gradients through it and runs the optimizer on each device. It
cannot run an optimizer (``is_capable("optimizer")`` is False), which is what MXNet's Gluon
tests use it to check.
"""

from __future__ import annotations

from typing import Any

from mxkit.core.errors import KVStoreError
from mxkit.kvstore.base import KVStoreBase


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


class TestStore(KVStoreBase):
    """A store without state: ``broadcast`` and ``pushpull`` only (MXNet's ``teststore``)."""

    __test__ = False  # (not a pytest class, despite its MXNet name)

    def __init__(self) -> None:
        self._type = "teststore"

    def is_capable(self, capability: str) -> bool:
        """False for every capability: it runs no optimizer."""
        return False

    def broadcast(self, key: Any, value: Any, out: Any, priority: int = 0) -> None:
        """Copy ``value`` into each array of ``out``."""
        for target in _as_list(out):
            target[:] = value.as_in_context(target.context)

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        """Sum ``value`` (one array or a list) and write the sum into ``out`` (``value`` if None)."""
        values = _as_list(value)
        if not values:
            raise KVStoreError(f"teststore: pushpull of key {key!r} got no arrays")
        context = values[0].context
        total = values[0].copy()
        for other in values[1:]:
            if other.shape != total.shape:
                raise KVStoreError(f"teststore: pushpull of key {key!r} got shapes {total.shape} and {other.shape}; "
                                   f"every array of one key must have one shape")
            total += other.as_in_context(context)
        for target in _as_list(values if out is None else out):
            target[:] = total.as_in_context(target.context)

    def _refuse(self, what: str) -> KVStoreError:
        return KVStoreError(f"a 'teststore' store has no {what}: it only broadcasts and pushpulls "
                            f"(use 'local' or 'device' for a store that keeps values)")

    def init(self, key: Any, value: Any) -> None:
        """Not supported: the store keeps no values."""
        raise self._refuse("init (it keeps no values)")

    def push(self, key: Any, value: Any, priority: int = 0) -> None:
        """Not supported: use :meth:`pushpull`."""
        raise self._refuse("push")

    def pull(self, key: Any, out: Any = None, priority: int = 0, ignore_sparse: bool = True) -> None:
        """Not supported: use :meth:`pushpull`."""
        raise self._refuse("pull")

    def set_updater(self, updater: Any) -> None:
        """Not supported: the store runs no optimizer."""
        raise self._refuse("updater")

    def set_optimizer(self, optimizer: Any) -> None:
        """Not supported: the store runs no optimizer."""
        raise self._refuse("optimizer")


def create_test_store(name: str, **options: Any) -> TestStore:
    """The ``mxkit_kvstores`` factory of ``teststore`` (it takes no options)."""
    if options:
        raise KVStoreError(f"a 'teststore' store takes no options, got {sorted(options)}")
    return TestStore()


__all__ = ["TestStore", "create_test_store"]
