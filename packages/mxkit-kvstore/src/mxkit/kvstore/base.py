"""``KVStoreBase``: what every KVStore type shares (MXNet 1.x's ``mx.kv.KVStoreBase``).

A KVStore type is registered through the hook ``mxkit_kvstores`` (a
:class:`~mxkit.core.specs.KVStoreSpec`); ``mx.kv.create(name)`` finds it there. Its store
subclasses :class:`KVStoreBase`, implements :meth:`~KVStoreBase.init`,
:meth:`~KVStoreBase.push`, :meth:`~KVStoreBase.pull` and
:meth:`~KVStoreBase.set_updater`, and inherits the rest: the description properties,
``pushpull`` (a push then a pull), ``broadcast`` (an init then a pull), the capability
check, the refusal of sparse pulls, MXNet's private aliases, the key-kind rule (a store's
keys are all ints or all strs) and the errors of what it does not support.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mxkit.core.errors import KVStoreError
from mxkit.kvstore.keys import key_kind


class KVStoreBase:
    """The base class of KVStore types.

    Subclasses set ``self._type`` (the type's name) in their constructor and implement
    :meth:`init`, :meth:`push`, :meth:`pull` and :meth:`set_updater`; the others have
    working defaults for a single-worker store.
    """

    #: the capability of running an optimizer on pushes (MXNet's ``KVStoreBase.OPTIMIZER``)
    OPTIMIZER = "optimizer"

    _type: str = "?"
    _key_kind: type | None = None
    _model: Any = None
    _compressor: Any = None

    # -- description ------------------------------------------------------------------

    @property
    def type(self) -> str:
        """The store's type (``"local"``, ``"dist_sync"``...)."""
        return self._type

    @property
    def rank(self) -> int:
        """This worker's rank (0 on one machine)."""
        return 0

    @property
    def num_workers(self) -> int:
        """The number of workers (1 on one machine)."""
        return 1

    @property
    def consistency_model(self) -> Any:
        """The consistency model instance in force."""
        return self._model

    @property
    def gradient_compression(self) -> Any:
        """The compressor in force (``None`` without compression)."""
        return self._compressor

    def is_capable(self, capability: str) -> bool:
        """Whether the store supports ``capability`` (:attr:`OPTIMIZER`: yes, by default)."""
        return capability.lower() == self.OPTIMIZER

    # -- what a type implements ---------------------------------------------------------

    def init(self, key: Any, value: Any) -> None:
        """Initialise ``key`` (or each key of a list) with ``value``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement init")

    def push(self, key: Any, value: Any, priority: int = 0) -> None:
        """Push ``value`` (summed over a list of arrays) into ``key``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement push")

    def pull(self, key: Any, out: Any = None, priority: int = 0, ignore_sparse: bool = True) -> None:
        """Copy the value of ``key`` into ``out``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement pull")

    def set_updater(self, updater: Callable[[Any, Any, Any], None]) -> None:
        """Merge pushes with ``updater(key, pushed_sum, stored)``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement set_updater")

    # -- shared behaviour ---------------------------------------------------------------

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        """Push ``value`` then pull into ``out`` (into ``value`` itself when ``out`` is None)."""
        self.push(key, value, priority)
        self.pull(key, out=value if out is None else out, priority=priority)

    def broadcast(self, key: Any, value: Any, out: Any, priority: int = 0) -> None:
        """Initialise ``key`` with ``value`` and pull it into ``out``."""
        self.init(key, value)
        self.pull(key, out=out, priority=priority)

    def row_sparse_pull(self, key: Any, out: Any = None, priority: int = 0, row_ids: Any = None) -> None:
        """Pull chosen rows into row-sparse arrays: the single-machine stores provide it."""
        raise KVStoreError(f"row_sparse_pull is provided by the single-machine stores ('local', 'device'), not by "
                           f"{self.type!r}; pull() the whole value")

    def barrier(self) -> None:
        """Wait for every worker (one, by default: returns at once, as MXNet's local store does)."""

    def _barrier(self) -> None:
        """MXNet's private name of :meth:`barrier`."""
        self.barrier()

    def _set_updater(self, updater: Callable[[Any, Any, Any], None]) -> None:
        """MXNet's private name of :meth:`set_updater`."""
        self.set_updater(updater)

    def set_optimizer(self, optimizer: Any) -> None:
        """Run ``optimizer`` on each push (``create_state``/``update`` per key)."""
        from mxkit.kvstore.updater import OptimizerUpdater

        self.set_updater(OptimizerUpdater(optimizer))

    def set_gradient_compression(self, compression_params: dict[str, Any]) -> None:
        """Compress pushed gradients (not supported by this type unless it says so)."""
        raise KVStoreError(f"a {self._type!r} store does not compress gradients")

    def save_optimizer_states(self, fname: Any, dump_optimizer: bool = False) -> None:
        """Save the optimizer's states to ``fname`` (not supported by this type unless it says so)."""
        raise KVStoreError(f"a {self._type!r} store has no optimizer states to save")

    def load_optimizer_states(self, fname: Any) -> None:
        """Load optimizer states from ``fname`` (not supported by this type unless it says so)."""
        raise KVStoreError(f"a {self._type!r} store has no optimizer states to load")

    def _check_kind(self, key: Any, what: str) -> None:
        """Raise unless ``key`` is of the kind (int or str) of the keys already initialised."""
        kind = key_kind(key)
        if self._key_kind is not None and kind is not self._key_kind:
            raise KVStoreError(f"{what} of key {key!r} ({kind.__name__}): this store's keys are "
                               f"{self._key_kind.__name__}s; keys must be all ints or all strs")


__all__ = ["KVStoreBase"]
