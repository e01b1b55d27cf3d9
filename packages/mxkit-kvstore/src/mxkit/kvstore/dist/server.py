"""A parameter server: a Ray actor that owns key parts and merges pushes into them.

The class is plain Python (:func:`mxkit.kvstore.dist.job.start_job` makes it an actor
with many threads, so that pulls blocked on a round do not keep pushes out). It keeps a
:class:`~.rounds.ShardTable` and what turns a round into an update:

- no updater: the round's sum replaces the value (MXNet's server without an updater);
- ``set_optimizer``: the optimizer described by JSON (``Optimizer.dumps()``: a registry
  name and its parameters) is rebuilt here through the optimizer registry (hook
  ``mxkit_optimizers``, served by mxkit-train) and run on mxkit
  NDArrays by :class:`mxkit.kvstore.updater.OptimizerUpdater`; nothing is unpickled;
- ``set_updater``: a user function shipped by Ray's serialisation, accepted only when the
  worker opted in with ``allow_remote_code=True`` (it runs code on the servers);
- gradient compression: payloads are decoded with the same compressor the workers encode with.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from mxkit.core.errors import KVStoreError
from mxkit.kvstore.dist import batches, wire
from mxkit.kvstore.dist.rounds import Shard, ShardId, ShardTable

#: bytes a request may carry beyond twice the server's shards (headers, small keys, compression)
FRAME_SLACK_BYTES = 1 << 20
#: header bytes per shard a request may name besides its key (part and round, its array's spec)
HEADER_BYTES_PER_SHARD = 256
#: body bytes per shard a request may carry besides its value (its rows of the pushed and pulled tables)
TABLE_BYTES_PER_SHARD = 2 * 3 * 8


def _resolve(payloads: list[Any]) -> list[Any]:
    """Payloads with object-store references (large values) fetched, also inside tuples
    (compressed payloads)."""
    import ray

    refs = [item for payload in payloads for item in (payload if isinstance(payload, tuple) else (payload,))
            if isinstance(item, ray.ObjectRef)]
    if not refs:
        return payloads
    fetched = dict(zip(refs, ray.get(refs), strict=True))

    def fetch(item: Any) -> Any:
        return fetched[item] if isinstance(item, ray.ObjectRef) else item

    return [tuple(fetch(i) for i in p) if isinstance(p, tuple) else fetch(p) for p in payloads]


class ParameterServer:
    """The shards of one server of a job.

    Parameters
    ----------
    index : int
        This server's number (``0..num_servers-1``).
    num_workers : int
        The job's workers.
    num_servers : int
        The job's servers.
    replicate : bool
        Keep a copy of every shard on the next server (chain replication).
    namespace : str, optional
        The job's Ray namespace, where the other servers are found by name.
    secret : str
        The job's data-channel secret (:mod:`.auth`); without it the channel does not open.
    allow_remote_code : bool
        Whether this job's servers accept :meth:`set_updater` (a serialised function, run
        here); the job decides, not the worker that sends it.
    inline_updates : bool
        Run this process's NDArray operations (the optimizer's updates) on the calling
        thread, with mxkit's naive engine, instead of handing each one to an engine worker
        thread and waiting for it. A server applies a round while it holds its table's lock
        and must wait for the result anyway, so the hand-off is pure latency (two thread
        switches per key). :func:`~.job.start_job` sets it: a server actor owns its process.
    """

    def __init__(self, index: int, num_workers: int, num_servers: int = 1, replicate: bool = False,
                 namespace: str | None = None, secret: str = "", allow_remote_code: bool = False,
                 inline_updates: bool = False):
        if inline_updates:
            import mxkit.engine

            mxkit.engine.set_engine(mxkit.engine.create("naive"))
        self._secret = secret
        self._allow_remote_code = bool(allow_remote_code)
        self.index = index
        self.num_servers = num_servers
        self.namespace = namespace  # of the job's actors (not this process's own Ray namespace)
        self.table = ShardTable(num_workers)
        self.table.replicating = bool(replicate) and num_servers > 1
        self._config: dict[str, Any] = {}  # what the workers agreed on, by setting
        self._settings: dict[str, Any] = {}  # the same, as a restarted server re-applies them
        self._updater: Any = None
        self._optimizer_states = "shared"
        # per key: (the value the updater last produced, the NDArray it was updated in), so a
        # round reuses the weight's NDArray instead of copying the stored value into a new one
        self._weights: dict[Any, tuple[np.ndarray, Any]] = {}
        self._replicas = Replicas()
        self._channel: Any = None
        self._channel_lock = threading.Lock()
        self._frame_limits: tuple[int, int, int] | None = None  # (shards, header, body) of the last count
        if self.table.replicating and _restarted():
            self._recover()

    def ping(self) -> int:
        """This server's index (a readiness check)."""
        return self.index

    def restarted(self) -> bool:
        """Whether this instance is a restart after the server died (and recovered)."""
        return self.table.restored

    # -- settings every worker sends (the first sets, the others must agree) ----------

    def _agree(self, setting: str, value: Any, rank: int) -> bool:
        """Record ``value`` for ``setting``; False if it was already set to it."""
        current = self._config.get(setting)
        if current is None:
            self._config[setting] = (value, rank)
            return True
        if current[0] != value:
            raise KVStoreError(f"rank {rank} asks for {setting} {value!r}, but rank {current[1]} set {current[0]!r}; "
                               f"every worker of a job must use the same {setting}")
        return False

    def configure(self, rank: int, model_name: str, model_options: dict[str, Any],
                  optimizer_states: str = "shared") -> None:
        """Use consistency model ``model_name`` (made with ``model_options``), and keep the
        optimizer's states ``"shared"`` (one per key) or ``"per_worker"`` (one per key and
        worker: see :class:`~mxkit.kvstore.updater.PerWorkerUpdater`)."""
        from mxkit.kvstore.consistency import make_model

        if optimizer_states not in ("shared", "per_worker"):
            raise KVStoreError(f"optimizer_states is 'shared' or 'per_worker', got {optimizer_states!r}")
        with self.table.condition:
            if self._agree("consistency model", (model_name, sorted(model_options.items())), rank):
                self.table.model = make_model(model_name, num_workers=self.table.num_workers, **model_options)
                self._settings["model"] = (model_name, dict(model_options))
            if self._agree("optimizer states", optimizer_states, rank):
                self._optimizer_states = optimizer_states
                self._settings["optimizer_states"] = optimizer_states

    def set_optimizer(self, rank: int, description: str) -> None:
        """Run the optimizer ``description`` (``Optimizer.dumps()`` JSON) on every round."""
        with self.table.condition:
            if not self._agree("optimizer", description, rank):
                return
            from mxkit.kvstore.updater import OptimizerUpdater, PerWorkerUpdater

            optimizer = _optimizer_from(description)
            self._set_update(PerWorkerUpdater(optimizer, self.table.num_workers)
                             if self._optimizer_states == "per_worker" else OptimizerUpdater(optimizer))
            self._settings["optimizer"] = description
            self._settings.pop("updater", None)

    def set_updater(self, rank: int, serialized: bytes) -> None:
        """Run ``updater(key, grad, weight)`` (NDArrays, its function serialised by Ray's
        cloudpickle) on every round, if the job allows remote code.

        The bytes are checked before they are deserialised (deserialising is what runs code).

        Raises
        ------
        KVStoreError
            If the job was not started with ``allow_remote_code=True``, or ``serialized``
            is not bytes.
        """
        if not self._allow_remote_code:
            raise KVStoreError("this job's servers do not run functions sent to them: start the job with "
                               "allow_remote_code=True (mxkit launch --allow-remote-code) to allow set_updater, "
                               "or use set_optimizer")
        if not isinstance(serialized, bytes):
            raise KVStoreError(f"set_updater on a server takes the function serialised to bytes, got "
                               f"{type(serialized).__name__}")
        from ray import cloudpickle

        updater = cloudpickle.loads(serialized)
        with self.table.condition:
            self._config.pop("optimizer", None)
            self._set_update(updater)
            self._settings["updater"] = serialized
            self._settings.pop("optimizer", None)

    def _set_update(self, updater: Any) -> None:
        from mxkit.core.context import cpu
        from mxkit.ndarray.backend import backend_of

        # the updater runs on this process's CPU backend: made now (a workers' set-up call),
        # not by the training loop's first round (finding the BLAS libraries takes ~10 ms)
        backend_of(cpu())
        self._updater = updater
        self._weights.clear()
        self.table.apply = self._apply_updater
        # an optimizer's updater takes the rounds a request completes in one call
        self.table.apply_many = self._apply_updater_many if callable(getattr(updater, "update_all", None)) else None

    def _weight_for(self, key: Any, value: np.ndarray) -> Any:
        """The NDArray the updater updates for ``key``, holding ``value``."""
        import mxkit.ndarray as nd

        cached = self._weights.get(key)
        if cached is not None and cached[0] is value:
            return cached[1]
        return nd.array(value, dtype=value.dtype)

    def _grad_for(self, merged: np.ndarray, value: np.ndarray, weight: Any) -> Any:
        import mxkit.ndarray as nd

        if merged.dtype == value.dtype and merged.flags.c_contiguous and merged.flags.writeable:
            return nd.NDArray.from_storage(merged, weight.context)
        return nd.array(merged, dtype=value.dtype)

    def _kept(self, key: Any, weight: Any, shape: tuple[int, ...]) -> np.ndarray:
        result = weight.asnumpy().reshape(shape)
        self._weights[key] = (result, weight)
        return result

    def _apply_updater_many(self, keys: list[Any], merged: list[np.ndarray], values: list[np.ndarray],
                            contributors: list[list[int]]) -> list[np.ndarray]:
        """:meth:`_apply_updater` of several keys, the optimizer called once for all (see
        :meth:`mxkit.kvstore.updater.OptimizerUpdater.update_all`).

        Runs once per request that completes rounds: one pass over its keys makes their
        weights and gradients (the same arrays :meth:`_weight_for` and :meth:`_grad_for`
        make, without a method call per key), the optimizer updates them all, one more pass
        keeps the results.
        """
        import mxkit.ndarray as nd

        from_storage, make = nd.NDArray.from_storage, nd.array
        cache = self._weights
        weights, grads = [], []
        ctx = None
        for key, grad_value, value in zip(keys, merged, values, strict=True):
            cached = cache.get(key)
            weight = cached[1] if cached is not None and cached[0] is value else make(value, dtype=value.dtype)
            weights.append(weight)
            if ctx is None:
                ctx = weight.context
            flags = grad_value.flags
            grads.append(from_storage(grad_value, ctx)
                         if grad_value.dtype == value.dtype and flags.c_contiguous and flags.writeable
                         and weight.context is ctx else make(grad_value, dtype=value.dtype))
        self._updater.update_all(keys, grads, weights, **self._worker_of(contributors))
        results = []
        for key, weight, value in zip(keys, weights, values, strict=True):
            result = weight.asnumpy().reshape(value.shape)
            cache[key] = (result, weight)
            results.append(result)
        return results

    def _worker_of(self, contributors: list[list[int]]) -> dict[str, int]:
        """``{"rank": r}`` when the updater keeps per-worker states and every round was one
        worker's (a request's rounds are its sender's), else ``{}``."""
        from mxkit.kvstore.updater import PerWorkerUpdater

        if isinstance(self._updater, PerWorkerUpdater):
            first = contributors[0]
            if len(first) == 1:
                rank = first[0]
                # (a request's rounds are one worker's: checked without building a set per request)
                if all(len(ranks_of) == 1 and ranks_of[0] == rank for ranks_of in contributors):
                    return {"rank": rank}
        return {}

    def _apply_updater(self, key: Any, merged: np.ndarray, value: np.ndarray, contributors: list[int]) -> np.ndarray:
        """The value after the updater ran on ``value`` with the round's ``merged`` gradient.

        The weight's NDArray is kept between rounds (MXNet's server keeps its NDArrays too);
        it is made again from ``value`` whenever the stored value is not the one it last
        produced (a restore, a resend). ``merged`` is the table's own array, handed to the
        updater without a copy. The result is a copy, because a stored value is never
        written in place (a pull may be sending the previous one).
        """
        weight = self._weight_for(key, value)
        grad = self._grad_for(merged, value, weight)
        worker = self._worker_of([contributors])
        if worker:
            self._updater.update(worker["rank"], key, grad, weight)
        else:
            self._updater(key, grad, weight)
        return self._kept(key, weight, value.shape)

    def set_compression(self, rank: int, params: dict[str, Any]) -> None:
        """Decode pushes with the compressor ``params`` (``{"type": ..., ...}``)."""
        from mxkit.kvstore.compression import make_compressor

        with self.table.condition:
            self._config.pop("compression", None)
            self._agree("compression", json.dumps(params, sort_keys=True), rank)
            compressor = make_compressor(params)
            self.table.decode = None if compressor.type == "none" else _decoder(compressor)
            self._settings["compression"] = dict(params)

    # -- data -------------------------------------------------------------------------

    def init(self, items: list[tuple[ShardId, Any]]) -> None:
        """Store the initial value of each shard."""
        values = _resolve([value for _, value in items])
        self.table.init([(shard_id, value) for (shard_id, _), value in zip(items, values, strict=True)])
        self._forward()

    def push(self, rank: int, epoch: int, rounds: list[tuple[ShardId, int]], packed: wire.Packed,
             resend: bool = False) -> None:
        """Contribute ``rank``'s values (``packed``, one per ``(shard_id, round)``); with
        ``resend``, rounds this server already holds are skipped (see :meth:`ShardTable.push`)."""
        self.push_values(rank, epoch, rounds, _resolve(wire.unpack(packed)), resend)

    def push_values(self, rank: int, epoch: int, rounds: list[tuple[ShardId, int]], values: list[Any],
                    resend: bool = False, owned: bool = False) -> None:
        """:meth:`push` of unpacked values (the data channel's entry point too; ``owned``: see
        :meth:`ShardTable.push`)."""
        self._check_configured()
        self.table.push(rank, epoch, [(s, r, v) for (s, r), v in zip(rounds, values, strict=True)], resend, owned)
        self._forward()

    def define_batch(self, pairs: Any) -> Any:
        """The :class:`~.batches.Batch` of the ``[key, part]`` list ``pairs`` (see :func:`.batches.define`)."""
        return batches.define(self.table, pairs)

    def push_batch(self, rank: int, epoch: int, batch: Any, rounds: np.ndarray, flat: np.ndarray,
                   owned: bool = False) -> None:
        """:meth:`push_values` of a batch's flat values (see :func:`.batches.push`)."""
        self._check_configured()
        batches.push(self.table, rank, epoch, batch, rounds, flat, owned)
        self._forward()

    def pull_batch(self, rank: int, epoch: int, batch: Any, pulled: np.ndarray, timeout: float
                   ) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """:meth:`pull_values` of a batch: its values as one flat array, and the clocks."""
        self._check_configured()
        if self.table.replicating:
            self.table.advance(rank, epoch)
            self._forward()
        values, clocks = batches.pull(self.table, rank, epoch, batch, pulled, timeout)
        return batches.flat_values(batch, values), clocks

    def shard_shape(self, shard_id: ShardId) -> tuple[int, ...]:
        """The shape of a key part this server holds (how a packed push is cut).

        Raises
        ------
        KVStoreError
            If the part was never initialised here.
        """
        return self.table.shape_of(shard_id)

    def shard_shapes(self, shard_ids: list[ShardId]) -> list[tuple[int, ...]]:
        """:meth:`shard_shape` of each part (how a packed push of many keys is cut).

        Raises
        ------
        KVStoreError
            If a part was never initialised here.
        """
        return self.table.shapes_of(shard_ids)

    def pull(self, rank: int, epoch: int, items: list[tuple[ShardId, int]], timeout: float
             ) -> tuple[wire.Packed, list[tuple[int, int]]]:
        """The values of the shards once ``rank`` may read them (see :meth:`ShardTable.pull`), packed."""
        values, clocks = self.pull_values(rank, epoch, items, timeout)
        return wire.pack(values), clocks

    def pull_values(self, rank: int, epoch: int, items: list[tuple[ShardId, int]], timeout: float
                    ) -> tuple[list[np.ndarray], list[tuple[int, int]]]:
        """:meth:`pull`, unpacked (the data channel's entry point too)."""
        self._check_configured()
        if self.table.replicating:
            # a new epoch moves every shard's round clock: the backup gets that before a read waits on it
            self.table.advance(rank, epoch)
            self._forward()
        return self.table.pull(rank, epoch, items, timeout)

    def channel_address(self) -> tuple[str, int]:
        """``(host, port)`` of this server's data channel (see :mod:`.channel`), opened on first use
        on the host Ray runs this actor on."""
        with self._channel_lock:
            if self._channel is None:
                from mxkit.kvstore.dist.channel import ChannelServer

                self._channel = ChannelServer(self, _bind_host(), self._secret)
            return self._channel.address

    def frame_limits(self) -> tuple[int, int]:
        """``(header bytes, body bytes)`` a data-channel request may have: enough for one
        push of every shard this server holds (twice over, plus room for small keys), so a
        peer's size claim is checked against what the job really stores."""
        shards = list(self.table.shards.values())
        cached = self._frame_limits
        if cached is not None and cached[0] == len(shards):  # shards are only added, never resized
            return cached[1], cached[2]
        # a request's shard tables travel as int64 arrays (two of them, 24 bytes a row: see channel.shard_table)
        body = 2 * sum(shard.value.nbytes + TABLE_BYTES_PER_SHARD for shard in shards) + FRAME_SLACK_BYTES
        # JSON writes a non-ASCII character of a str key as 6 bytes (\\uXXXX)
        header = FRAME_SLACK_BYTES + 2 * sum(HEADER_BYTES_PER_SHARD + 6 * len(str(shard.key)) for shard in shards)
        self._frame_limits = (len(shards), header, body)
        return header, body

    def pushpull(self, rank: int, epoch: int, rounds: list[tuple[ShardId, int]], packed: wire.Packed,
                 items: list[tuple[ShardId, int]], timeout: float) -> tuple[wire.Packed, list[tuple[int, int]]]:
        """:meth:`push` then :meth:`pull`, in one request."""
        if rounds:
            self.push(rank, epoch, rounds, packed)
        return self.pull(rank, epoch, items, timeout)

    def end_epoch(self, rank: int, epoch: int, rounds: dict[Any, int]) -> None:
        """``rank`` enters a barrier after pushing ``rounds[key]`` rounds this epoch."""
        self._check_configured()
        self.table.end_epoch(rank, epoch, rounds)
        self._forward(meta_changed=True)

    def _check_configured(self) -> None:
        if self.table.model is None:
            raise KVStoreError("this server has no consistency model yet: workers connect with "
                               "mx.kv.create('dist_sync'), which configures the servers")

    def states(self) -> dict[Any, Any]:
        """The optimizer's state of each key on this server, as numpy (nested tuples/lists)."""
        with self.table.condition:
            states = getattr(self._updater, "states", None)
            if states is None:
                raise KVStoreError("optimizer states need an optimizer on the servers: call "
                                   "kv.set_optimizer(optimizer) first")
            return {key: _to_numpy(state) for key, state in states.items()}

    def load_states(self, states: dict[Any, Any]) -> None:
        """Replace the optimizer's states (numpy, as :meth:`states` returns them)."""
        import mxkit.ndarray as nd

        with self.table.condition:
            updater = self._updater
            if getattr(updater, "states", None) is None:
                raise KVStoreError("load_optimizer_states needs an optimizer on the servers: call "
                                   "kv.set_optimizer(optimizer) first")
            updater.states = {key: _from_numpy(state, nd) for key, state in states.items()}

    def value(self, shard_id: ShardId) -> np.ndarray:
        """A copy of a shard's stored value (for tests and diagnostics)."""
        with self.table.condition:
            return self.table._shard(shard_id, "value").value.copy()

    def rounds(self, shard_id: ShardId) -> tuple[list[int], list[int]]:
        """``(pushed, applied)`` rounds per rank of a shard (for tests and diagnostics)."""
        return self.table.rounds(shard_id)

    # -- chain replication (see mxkit.kvstore.dist.replication) -------------------------

    def _forward(self, meta_changed: bool = False) -> None:
        if self.table.replicating:
            from mxkit.kvstore.dist.replication import forward

            forward(self, meta_changed)

    def _with_states(self, snapshots: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Snapshots with the optimizer state of their keys (copied: the optimizer updates
        its states in place)."""
        if getattr(self._updater, "states", None):
            with self.table.condition:
                for snap in snapshots:
                    state = self._state_of(snap["id"][0])
                    if state is not None:
                        snap["state"] = _to_numpy(state)
        return snapshots

    def replicate(self, primary: int, snapshots: list[dict[str, Any]], meta: dict[str, Any] | None) -> None:
        """Keep the snapshots of ``primary``'s shards (the newest version of each)."""
        self._replicas.keep(primary, snapshots, meta)

    def replica_of(self, primary: int) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any] | None]:
        """What this server keeps of ``primary``: its settings, shard snapshots and epoch state."""
        snapshots, meta = self._replicas.of(primary)
        return dict(self._settings), snapshots, meta

    def primary_snapshot(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Every shard of this server and its epoch state (for the backup that restarted)."""
        return self._with_states(self.table.snapshot_all()), self.table.meta()

    def _recover(self) -> None:
        from mxkit.kvstore.dist.replication import recover

        recover(self)

    def _apply_settings(self, settings: dict[str, Any]) -> None:
        model = settings.get("model")
        if model is not None:
            self.configure(-1, model[0], model[1], settings.get("optimizer_states", "shared"))
        if "optimizer" in settings:
            self.set_optimizer(-1, settings["optimizer"])
        if "updater" in settings:
            self.set_updater(-1, settings["updater"])
        if "compression" in settings:
            self.set_compression(-1, settings["compression"])

    def _restore_states(self, snapshots: list[dict[str, Any]]) -> None:
        import mxkit.ndarray as nd

        if getattr(self._updater, "states", None) is None:
            return
        for snap in snapshots:
            if "state" in snap:
                self._set_state(snap["id"][0], _from_numpy(snap["state"], nd))

    def _state_of(self, key: Any) -> Any:
        state_of = getattr(self._updater, "state_of", None)
        return state_of(key) if state_of is not None else self._updater.states.get(key)

    def _set_state(self, key: Any, state: Any) -> None:
        set_state = getattr(self._updater, "set_state", None)
        if set_state is not None:
            set_state(key, state)
        else:
            self._updater.states[key] = state


def _optimizer_from(description: str) -> Any:
    """The optimizer ``Optimizer.dumps()`` JSON describes, built through the optimizer
    registry (hook ``mxkit_optimizers``, which mxkit-train serves): no import of train."""
    from mxkit.core.errors import MissingComponentError, UnknownPluginError
    from mxkit.core.plugins import get_optimizer

    try:
        params = json.loads(description)
    except (TypeError, ValueError) as exc:
        raise KVStoreError(f"an optimizer description must be JSON text, got {description!r:.80}: {exc}") from None
    if not isinstance(params, dict) or not isinstance(params.get("name"), str):
        raise KVStoreError(f"an optimizer description is a JSON object with a 'name', got {description!r:.80}")
    name = params.pop("name")
    try:
        spec = get_optimizer(name)
    except UnknownPluginError as exc:
        raise MissingComponentError(f"set_optimizer on a distributed store: the servers have no optimizer {name!r} "
                                    f"({exc}); install mxkit-train (or the plugin that registers it) on the "
                                    f"servers' machines") from None
    return spec.factory(**params)


def _restarted() -> bool:
    import ray

    return bool(ray.get_runtime_context().was_current_actor_reconstructed)


class Replicas:
    """The shards this server keeps for the server before it in the ring (thread-safe)."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self._snapshots: dict[int, dict[ShardId, dict[str, Any]]] = {}
        self._meta: dict[int, dict[str, Any]] = {}

    def keep(self, primary: int, snapshots: list[dict[str, Any]], meta: dict[str, Any] | None) -> None:
        """Keep each snapshot newer than the one held (copies may arrive out of order)."""
        with self._lock:
            held = self._snapshots.setdefault(primary, {})
            for snap in snapshots:
                shard_id = tuple(snap["id"])
                if shard_id not in held or held[shard_id]["version"] < snap["version"]:
                    held[shard_id] = snap
            if meta is not None:
                self._meta[primary] = meta

    def of(self, primary: int) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """The snapshots and epoch state kept for ``primary``."""
        with self._lock:
            return list(self._snapshots.get(primary, {}).values()), self._meta.get(primary)


def _bind_host() -> str:
    """The address Ray runs this process on (127.0.0.1 for a local cluster): the data
    channel listens there and nowhere else."""
    import ray

    return ray.util.get_node_ip_address() if ray.is_initialized() else "127.0.0.1"


def _decoder(compressor: Any) -> Callable[[Shard, Any], np.ndarray]:
    def decode(shard: Shard, payload: Any) -> np.ndarray:
        out = np.empty(shard.value.size, dtype=shard.value.dtype)
        compressor.decompress(np, tuple(payload), out, False)
        return out.reshape(shard.value.shape)

    return decode


def _to_numpy(state: Any) -> Any:
    if isinstance(state, (tuple, list)):
        return type(state)(_to_numpy(item) for item in state)
    if hasattr(state, "asnumpy"):
        return state.asnumpy()
    return state


def _from_numpy(state: Any, nd: Any) -> Any:
    if isinstance(state, (tuple, list)):
        return type(state)(_from_numpy(item, nd) for item in state)
    if isinstance(state, np.ndarray):
        return nd.array(state, dtype=state.dtype)
    return state


__all__ = ["ParameterServer"]
