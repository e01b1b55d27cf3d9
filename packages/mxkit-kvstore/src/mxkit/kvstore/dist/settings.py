"""What a worker's store asks of every server besides data: the update rule, gradient
compression, and the optimizer's states (a mixin of :class:`~.store.DistKVStore`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mxkit.core.errors import KVStoreError, MXKitError


class ServerSettings:
    """:class:`~.store.DistKVStore`'s calls that configure the servers (over Ray, not the
    data channel: they are rare and every server must agree on them)."""

    _compressor: Any
    _residuals: dict[Any, Any]

    # -- updaters, compression --------------------------------------------------------

    def set_optimizer(self, optimizer: Any) -> None:
        """Run ``optimizer`` on the servers, sent by registry name and JSON parameters.

        Raises
        ------
        KVStoreError
            If ``optimizer`` is not an mxkit optimizer that describes itself as JSON
            (``optimizer.dumps()``).
        """
        dumps = getattr(optimizer, "dumps", None)
        if not callable(dumps):
            raise KVStoreError(f"set_optimizer on a distributed store sends the optimizer by its registered name "
                               f"and parameters; pass an mxkit optimizer (mx.optimizer.create('sgd', ...)), got "
                               f"{type(optimizer).__name__}. A custom update rule needs set_updater and "
                               f"allow_remote_code=True")
        try:
            description = dumps()
        except MXKitError as exc:
            raise KVStoreError(f"set_optimizer: the optimizer cannot be sent to the servers: {exc}") from None
        self._flush()
        self._wait_all([server.set_optimizer.remote(self._rank, description) for server in self._servers],
                       "set_optimizer")

    def set_updater(self, updater: Callable[[Any, Any, Any], None]) -> None:
        """Run ``updater(key, grad, weight)`` on the servers (needs ``allow_remote_code=True``).

        Raises
        ------
        KVStoreError
            Without the opt-in (the function would be serialised and run on the servers),
            or if ``updater`` is not callable.
        """
        if not callable(updater):
            raise KVStoreError(f"set_updater needs a callable updater(key, grad, weight), got {updater!r}")
        if not self._allow_remote_code:
            raise KVStoreError("set_updater on a distributed store ships the function to the servers and runs it "
                               "there; create the store with mx.kv.create(..., allow_remote_code=True) to allow "
                               "that, or use set_optimizer(mx.optimizer.create(name, ...)), which sends only a "
                               "name and parameters")
        self._flush()
        self._wait_all([server.set_updater.remote(self._rank, updater) for server in self._servers], "set_updater")

    _set_updater = set_updater

    def set_gradient_compression(self, compression_params: dict[str, Any]) -> None:
        """Compress this worker's pushes, e.g. ``{'type': '2bit', 'threshold': 0.5}``.

        Workers compress their summed gradient (residuals per key part); servers decode.

        Raises
        ------
        KVStoreError
            If the argument is not a dict with a ``type``, or has bad parameters.
        UnknownPluginError
            If no plugin provides the type.
        """
        from mxkit.kvstore.compression import make_compressor

        compressor = make_compressor(compression_params)
        self._flush()
        self._wait_all([server.set_compression.remote(self._rank, dict(compression_params))
                        for server in self._servers], "set_gradient_compression")
        self._compressor = None if compressor.type == "none" else compressor
        self._residuals.clear()

    @property
    def gradient_compression(self) -> Any:
        """The compressor in force (``None`` without compression)."""
        return self._compressor

    # -- optimizer states -------------------------------------------------------------

    def save_optimizer_states(self, fname: Any, dump_optimizer: bool = False) -> None:
        """Save the servers' optimizer states to ``fname`` (``.npz`` + JSON manifest, no pickle).

        The parts of split keys are joined, so the file is the same for any number of servers.
        """
        from mxkit.kvstore.dist.states import gather_states, write_states

        self._flush()
        write_states(fname, gather_states(self._keys, self._wait_all(
            [server.states.remote() for server in self._servers], "save_optimizer_states")))

    def load_optimizer_states(self, fname: Any) -> None:
        """Load states written by :meth:`save_optimizer_states` onto the servers.

        Raises
        ------
        FormatError
            If ``fname`` is not such a file.
        """
        from mxkit.kvstore.dist.states import read_states, split_states

        self._flush()
        per_server = split_states(self._keys, read_states(fname), len(self._servers))
        self._wait_all([server.load_states.remote(per_server[index]) for index, server in enumerate(self._servers)],
                       "load_optimizer_states")


__all__ = ["ServerSettings"]
