"""The worker's side of the distributed KVStore: ``DistKVStore``.

A push sums this worker's devices first (the local store's :func:`~mxkit.kvstore.merge.sum_into`),
compresses the sum when gradient compression is on, cuts it into the key's parts
(:mod:`.sharding`) and sends **one request per server** with every part that server owns,
values of at least :data:`OBJECT_STORE_MIN_BYTES` through Ray's object store. Pushes do not
wait for an answer (their errors surface at the next pull or barrier); a pull sends one
request per server and blocks until each server's consistency model lets this worker read.

Each push to a key is one *round* of this worker; the servers merge round ``r`` of every
worker (``dist_sync``), or apply pushes on arrival (``dist_async``), or on arrival but with
no pull more than ``tau`` rounds stale (``dist_ssp``). A :meth:`~DistKVStore.barrier` ends
an epoch: see :mod:`.rounds` for why that lets workers with uneven numbers of batches
finish an epoch without deadlock.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from mxkit.core.errors import KVStoreError, MXKitError, ShapeError
from mxkit.kvstore import merge
from mxkit.kvstore.base import KVStoreBase
from mxkit.kvstore.dist import channel, overlap, plans, recovery, remote, transfer
from mxkit.kvstore.dist.sharding import Part, ShardPlan
from mxkit.kvstore.dist.transfer import Key, int_setting
from mxkit.kvstore.keys import dense_only, group, key_kind

#: values of at least this many bytes go to the servers through the object store
OBJECT_STORE_MIN_BYTES = 1 << 20
#: a push of at most this many bytes waits to ride along with the next call (a copy);
#: a bigger one is sent at once
DEFER_MAX_BYTES = 1 << 20


def _payload_bytes(payload: Any) -> int:
    if isinstance(payload, np.ndarray):
        return payload.nbytes
    return sum(item.nbytes for item in payload) if isinstance(payload, tuple) else 0


def _flush_at_exit(store_ref: Any) -> None:
    store = store_ref()
    if store is not None and (store._deferred or store._deferred_batch or store._overlap.pending):
        try:
            with store._lock:
                store._overlap.drain()
                store._flush()
        except Exception:
            pass


@functools.cache
def _ndarray_class() -> type:
    from mxkit.ndarray import NDArray

    return NDArray


def _serialized(method: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``method`` holding the store's lock (see "Threads" in :class:`DistKVStore`), once
    the requests running as engine operations are done (see :mod:`.overlap`)."""

    @functools.wraps(method)
    def locked(self: DistKVStore, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            self._overlap.drain()
            return method(self, *args, **kwargs)

    return locked


class DistKVStore(KVStoreBase):
    """A worker's handle on a distributed KVStore (MXNet's ``KVStoreDist``).

    Made by ``mx.kv.create("dist_sync")`` (see :func:`mxkit.kvstore.dist.create` for the
    options); the API is the local store's: :meth:`init`, :meth:`push`, :meth:`pull`,
    :meth:`pushpull`, :meth:`broadcast`, :meth:`set_optimizer`, :meth:`barrier`...

    Threads
    -------
    Every method is thread-safe: calls from several threads run one at a time, in the
    order they take the store's lock, as if one thread had made them in that order (a
    store keeps one connection per server, its round counters and its deferred push,
    which a request must see and change together). A blocking pull that waits for other
    workers holds the lock while it waits, so the other threads of this worker wait too:
    that is the serial order, and it keeps this worker's rounds in step with the job's. A
    pull or pushpull that runs as an engine operation (see :mod:`.overlap`) is sent in the
    order of the calls, and any later call that needs the connections waits for it first.

    Batches
    -------
    A call of one CPU array per key, all of one dtype, travels as one batched frame per
    server (:mod:`.plans`, :mod:`.batches`; config ``kvstore_batch``): the list of key parts
    is described once per connection, the values go as one flat array.
    """

    def __init__(self, kvtype: str, consistency: str, *, rank: Any = None, num_workers: Any = None,
                 namespace: str | None = None, address: str | None = None, tau: Any = None,
                 timeout: Any = None, allow_remote_code: bool = False, **unknown: Any):
        if unknown:
            raise KVStoreError(f"mx.kv.create({kvtype!r}) got unknown options {sorted(unknown)}; it takes rank=, "
                               f"num_workers=, namespace=, address=, tau= (dist_ssp), timeout=, allow_remote_code=")
        from mxkit.core import config
        from mxkit.kvstore.consistency import make_model

        self._lock = threading.RLock()
        self._overlap = overlap.Overlap()
        #: whether pushpull and pull run as engine operations (config kvstore_overlap; see .overlap)
        self._overlapping = bool(config.get("kvstore_overlap"))
        #: whether calls of many keys travel as batches (config kvstore_batch; see .plans)
        self._batching = bool(config.get("kvstore_batch"))
        self._plans = plans.Plans()
        self._type = kvtype
        self._rank = int_setting("rank", rank, 0)
        model_options: dict[str, Any] = {}
        if consistency == "bounded_delay":
            model_options["tau"] = tau if tau is not None else config.get("staleness")
        elif tau is not None:
            raise KVStoreError(f"tau= is the staleness bound of dist_ssp; a {kvtype} store takes no tau (got {tau!r})")
        make_model(consistency, num_workers=1, **model_options)  # a bad tau fails here, before joining
        self._timeout = float(config.get("kvstore_timeout", timeout))
        if not self._timeout > 0:
            raise KVStoreError(f"timeout must be a positive number of seconds, got {timeout!r}")
        namespace = namespace or os.environ.get(transfer.ENV["namespace"])
        if not namespace:
            raise KVStoreError(f"a distributed KVStore needs its job's namespace: run the script under 'mxkit "
                               f"launch' (which sets {transfer.ENV['namespace']}), or pass namespace= to mx.kv.create")
        self._namespace = namespace
        self._allow_remote_code = bool(allow_remote_code)
        from mxkit.kvstore.dist.runtime import _import_ray, connect

        ray = _import_ray()
        connect(address, namespace)
        from mxkit.kvstore.dist.job import COORDINATOR_NAME

        try:
            self._coordinator = ray.get_actor(COORDINATOR_NAME, namespace=namespace)
        except ValueError:
            raise KVStoreError(f"no job runs in namespace {namespace!r} (no coordinator actor there): start "
                               f"one with 'mxkit launch' or mxkit.kvstore.dist.job.start_job") from None
        info = remote.wait(self._coordinator.join.remote(self._rank, kvtype, (consistency, model_options)),
                           "joining the job", self._timeout + remote.ANSWER_MARGIN)
        self._num_workers = int(info["num_workers"])
        if num_workers is not None or os.environ.get(transfer.ENV["num_workers"]):
            expected = int_setting("num_workers", num_workers, 1)
            if expected != self._num_workers:
                raise KVStoreError(f"num_workers is {expected}, but the job in namespace {namespace!r} was "
                                   f"started for {self._num_workers} workers")
        self._model = make_model(consistency, num_workers=self._num_workers, **model_options)
        self._servers = [ray.get_actor(name, namespace=namespace) for name in info["servers"]]
        self._plan = ShardPlan(len(self._servers), int(info["bigarray_bound"]))
        # the data path: one persistent connection per server (Ray carries only control calls)
        self._channels = [channel.Connection(index, self._address_of(server, index),
                                             self._timeout + remote.ANSWER_MARGIN, str(info.get("secret", "")))
                          for index, server in enumerate(self._servers)]
        # a server that applies each push on its own keeps an optimizer state per worker
        # (see mxkit.kvstore.updater.PerWorkerUpdater); a merged round has one state
        optimizer_states = "shared" if consistency == "sequential" else str(config.get("kvstore_async_states"))
        self._wait_all([server.configure.remote(self._rank, consistency, model_options, optimizer_states)
                        for server in self._servers], "configuring the servers")
        self._keys: dict[Any, Key] = {}
        self._key_kind: type | None = None
        self._rounds: dict[Any, int] = {}  # pushes per key in this epoch
        self._epoch = int(info["epoch"])
        self._in_flight: list[Any] = []
        self._deferred: dict[int, tuple[list[Any], list[Any]]] = {}  # the last push, sent with the next call
        #: the last push when it was a plan's: ``(plan, [(share, flat values, rounds)])``
        self._deferred_batch: tuple[plans.Plan, list[tuple[Any, Any, np.ndarray]]] | None = None
        atexit.register(_flush_at_exit, weakref.ref(self))
        self._compressor: Any = None
        self._residuals: dict[tuple[Any, int], np.ndarray] = {}
        # with replicated servers: pushes not yet confirmed by a pull, per server and part,
        # kept to send again to a server that was restarted
        self._replicated = bool(info.get("replicated"))
        self._unconfirmed: dict[int, dict[tuple[Any, int], list[tuple[int, Any]]]] = {}
        # the clocks of the last pull: a list, or (plan, each share's clock array) made a list when read
        self._clocks: Any = []

    # -- description ------------------------------------------------------------------

    @property
    def rank(self) -> int:
        """This worker's rank, ``0..num_workers-1``."""
        return self._rank

    @property
    def num_workers(self) -> int:
        """The job's number of workers."""
        return self._num_workers

    @property
    def num_servers(self) -> int:
        """The job's number of servers."""
        return len(self._servers)

    @property
    def namespace(self) -> str:
        """The job's Ray namespace."""
        return self._namespace

    @property
    def last_pull_clocks(self) -> list[tuple[Any, int, int]]:
        """``[(key, worker_round, slowest_round)]`` of the last pull: the clocks the staleness
        bound is about (once the pulls running as engine operations are done)."""
        with self._lock:
            self._overlap.drain()
            clocks = self._clocks
            if isinstance(clocks, tuple):
                plan, arrays = clocks
                by_key: dict[int, tuple[int, int]] = {}
                for share, array in zip(plan.shares, arrays):
                    for (index, *_), clock in zip(share.slots, array.tolist()):
                        by_key[index] = tuple(clock)
                clocks = self._clocks = [(key, *by_key[index]) for index, key in enumerate(plan.keys)]
            return list(clocks)

    def __repr__(self) -> str:
        return (f"<DistKVStore {self._type} rank={self._rank}/{self._num_workers} servers={len(self._servers)} "
                f"keys={len(self._keys)}>")

    # -- helpers ----------------------------------------------------------------------

    def _address_of(self, server: Any, index: int) -> Callable[[], tuple[str, int]]:
        def resolve() -> tuple[str, int]:
            return tuple(remote.wait(server.channel_address.remote(), f"finding server {index}'s data channel",
                                     self._timeout + remote.ANSWER_MARGIN))

        return resolve

    def _wait_all(self, refs: list[Any], what: str) -> list[Any]:
        """The answers of Ray calls, or of data-channel requests (:class:`.channel.Pending`)."""
        if refs and isinstance(refs[0], channel.Pending):
            return channel.results(refs)  # (each server's answer read as it comes)
        return remote.wait(refs, what, self._timeout + remote.ANSWER_MARGIN)

    @contextlib.contextmanager
    def _sending(self) -> Iterator[channel.Outbox]:
        """An outbox for the requests of one call (see :class:`.channel.Outbox`): written to
        every server at once when the block ends. A push that never left (its connection
        dropped first) is not kept among the pushes in flight: its error is raised here."""
        outbox = channel.Outbox()
        try:
            with outbox:
                yield outbox
        except BaseException:
            self._in_flight = [pending for pending in self._in_flight if pending.sent]
            raise

    def _send_deferred(self, outbox: channel.Outbox | None = None) -> None:
        """Send the push that waits to travel with the next pull (queued in ``outbox`` when
        given, else written to its servers at once)."""
        if outbox is None:
            if self._deferred or self._deferred_batch is not None:
                with self._sending() as outbox:
                    self._send_deferred(outbox)
            return
        deferred, self._deferred = self._deferred, {}
        for server, (rounds, values) in deferred.items():
            self._in_flight.append(self._channels[server].push(self._rank, self._epoch, rounds, values, outbox=outbox))
        batch, self._deferred_batch = self._deferred_batch, None
        if batch is not None:
            for share, flat, rounds in batch[1]:
                self._in_flight.append(self._channels[share.server].batch(self._rank, self._epoch, share, flat, rounds,
                                                                          outbox=outbox))

    def _plan_for(self, checked: list[tuple[Key, list[Any]]]) -> plans.Plan | None:
        """The batch plan of a call of ``checked`` (see :mod:`.plans`), or None for the per-part path."""
        if not self._batching or self._compressor is not None or self._replicated or \
                not plans.worth_batching(checked):
            return None
        return self._plans.plan(checked)

    def _planned(self, key: Any, value: Any, what: str) -> tuple[plans.Plan, list[Any], list[np.ndarray]] | None:
        """``(plan, arrays, their flat views)`` of a call that a plan serves, else None (the
        per-part path).

        A list of keys that has a plan already (a training loop's call after the first) is
        checked in one pass over its arrays, or not at all when they are the arrays of a
        recent call; any other call is checked in full first.
        """
        if not self._batching or self._compressor is not None or self._replicated:
            return None
        if type(key) is self._key_kind and type(value) is _ndarray_class():  # one key, one array
            key, value = [key], [value]
        if type(key) is list and type(value) is list and len(key) == len(value):
            plan = self._plans.known(key)
            # (the type test keeps out what equals a key without being one: True for 1)
            if plan is not None and set(map(type, key)) == {self._key_kind}:
                flats = plan.seen(value)
                if flats is not None:
                    return plan, value, flats
                ndarray = _ndarray_class()
                for entry, array in zip(plan.entries, value):
                    if type(array) is not ndarray or array.shape != entry.shape:
                        break
                    storage = array.storage
                    if type(storage) is not np.ndarray or not storage.flags.c_contiguous or \
                            array.context.device_type != "cpu":
                        break
                else:
                    return plan, value, plan.remember(value)
        checked = self._checked(key, value, what)
        plan = self._plan_for(checked)
        if plan is None:
            return None
        arrays = [arrays[0] for _, arrays in checked]
        flats = plan.seen(arrays)
        return plan, arrays, flats if flats is not None else plan.remember(arrays)

    def _count_rounds(self, plan: plans.Plan) -> list[np.ndarray]:
        """This push's round of each key part of ``plan``, per share (the keys' counts move on)."""
        counts = self._rounds
        before = []
        for key in plan.keys:
            round_index = counts.get(key, 0)
            counts[key] = round_index + 1
            before.append(round_index)
        return [np.array([before[slot[0]] for slot in share.slots], dtype=np.int64) for share in plan.shares]

    def _pulled(self, plan: plans.Plan) -> list[np.ndarray]:
        """The rounds this worker pushed to each key part of ``plan``, per share (what a pull must see)."""
        counts = self._rounds
        pushed = [counts.get(key, 0) for key in plan.keys]
        return [np.array([pushed[slot[0]] for slot in share.slots], dtype=np.int64) for share in plan.shares]

    def _flush(self) -> None:
        """Send the deferred push and wait for the pushes in flight (raising their errors)."""
        self._send_deferred()
        refs, self._in_flight = self._in_flight, []
        if refs:
            first = [refs]  # after a recovery the lost pushes were sent again: nothing to ask twice
            self._ask(lambda: first.pop() if first else [], "push")

    def _check_pushes(self) -> None:
        """Raise the errors of finished pushes (recovering from a lost server when replicated)."""
        recovery.check_pushes(self)

    def _ask(self, send: Callable[[], list[Any]], what: str) -> list[Any]:
        """Wait for the calls ``send()`` makes (see :func:`.recovery.ask`)."""
        return recovery.ask(self, send, what)

    def _entry(self, key: Any, what: str) -> Key:
        entry = self._keys.get(key)
        if entry is None:
            self._check_kind(key, what)
            raise KVStoreError(f"{what} of key {key!r} before init; call kv.init({key!r}, value) first")
        return entry

    def _checked(self, key: Any, value: Any, what: str) -> list[tuple[Key, list[Any]]]:
        fast = self._checked_fast(key, value, what)
        if fast is not None:
            return fast
        checked = []
        keys = self._keys
        for k, arrays in dense_only(group(key, value, what), what, self.type):
            entry = keys.get(k) or self._entry(k, what)
            shape = entry.shape
            for array in arrays:
                if array.shape != shape:  # (both tuples)
                    raise ShapeError(f"{what} of key {k!r}: an array has shape {tuple(array.shape)}, the key was "
                                     f"initialised with shape {shape}")
            checked.append((entry, arrays))
        return checked

    def _checked_fast(self, key: Any, value: Any, what: str) -> list[tuple[Key, list[Any]]] | None:
        """:meth:`_checked` of the common call of a training loop, a list of distinct known keys
        of this store's kind with one NDArray each, checked without grouping; None for any
        other call (which the general path checks and explains)."""
        if type(key) is not list or type(value) is not list or len(key) != len(value) or len(key) < 2:
            return None
        kind, keys = self._key_kind, self._keys
        entries = [keys.get(k) for k in key]
        # the type test keeps out what equals a key without being one (True for 1, 1.0, numpy ints)
        if None in entries or not all(type(k) is kind for k in key) or len(set(key)) != len(key):
            return None
        ndarray = _ndarray_class()
        checked = []
        for entry, array in zip(entries, value):
            if type(array) is not ndarray:
                return None
            if array.shape != entry.shape:
                raise ShapeError(f"{what} of key {entry.key!r}: an array has shape {tuple(array.shape)}, the key "
                                 f"was initialised with shape {entry.shape}")
            checked.append((entry, [array]))
        return checked

    @staticmethod
    def _payload(value: Any) -> Any:
        if isinstance(value, np.ndarray) and value.nbytes >= OBJECT_STORE_MIN_BYTES:
            import ray

            return ray.put(value)  # zero-copy for a server on this node
        return value


    # -- init -------------------------------------------------------------------------

    @_serialized
    def init(self, key: Any, value: Any) -> None:
        """Initialise ``key`` (or each key of a list) on the servers with ``value``.

        Every worker calls it (as in MXNet); rank 0's value is stored, and all workers
        meet at a barrier so that no worker pulls before the value is there.

        Raises
        ------
        KVStoreError
            If a key is initialised twice, keys mix ints and strs, or a value is not an NDArray.
        """
        pairs = dense_only(group(key, value, "init"), "init", self.type)
        for k, values in pairs:
            self._check_kind(k, "init")
            if k in self._keys or len(values) > 1:
                raise KVStoreError(f"duplicate init of key {k!r}; each key is initialised once, with one value")
        batches: dict[int, list[Any]] = {}
        for k, values in pairs:
            self._key_kind = key_kind(k)
            array = values[0]
            entry = self._keys[k] = Key(k, tuple(array.shape), array.dtype,
                                         self._plan.parts(k, int(np.prod(array.shape, dtype=np.int64))))
            if self._rank == 0:
                data = array.asnumpy()
                for part in entry.parts:
                    part_value = data if part.whole else data.reshape(-1)[part.start:part.stop]
                    batches.setdefault(part.server, []).append(((k, part.index), self._payload(part_value)))
        self._flush()
        self._wait_all([self._servers[server].init.remote(items) for server, items in batches.items()], "init")
        for server in sorted({part.server for k, _ in pairs for part in self._keys[k].parts}):
            self._channels[server].connect_early()
        self.barrier()

    # -- push -------------------------------------------------------------------------

    def _local_sum(self, entry: Key, arrays: list[Any], waited: bool = False) -> np.ndarray:
        """This worker's devices summed (the local store's first level), as numpy.

        A single CPU array is returned as its own storage, not copied; :meth:`push` sees
        that the caller can still write it and copies it, or sends it, before returning.
        ``waited``: the arrays' pending writes are known to be done.
        """
        if len(arrays) == 1:
            array = arrays[0]
            if not waited:
                array.wait_to_read()
            data = array.storage
            return data if isinstance(data, np.ndarray) else array.asnumpy()
        out = np.empty(entry.shape, dtype=entry.dtype)
        merge.sum_into(np, out, [transfer.host_data(array) for array in arrays])
        return out

    def _encode(self, entry: Key, part: Part, data: np.ndarray) -> Any:
        if self._compressor is None:
            return data
        flat = np.ascontiguousarray(data).reshape(-1)
        residual = self._residuals.get((entry.key, part.index))
        if residual is None and self._compressor.needs_residual:
            residual = self._residuals[(entry.key, part.index)] = np.zeros(part.size, dtype=entry.dtype)
        return tuple(np.asarray(item) for item in self._compressor.compress(np, flat, residual))

    def push(self, key: Any, value: Any, priority: int = 0) -> None:
        """Push ``value`` into ``key``: one round of this worker (a list of arrays is summed first).

        Returns at once. The request leaves with this store's next call: a pull of the
        same server rides along with it (one request instead of two, which is what a
        training loop's push-then-pull of each key gets); any other call sends it first.
        A server's error surfaces at the next pull or barrier.

        Raises
        ------
        KVStoreError
            If a key was not initialised or is of the other kind (int/str).
        ShapeError
            If a value's shape differs from the key's.
        """
        with self._lock:
            # the requests on the engine need only have left (a push reaches each server after
            # them); their answers and writes go on while this push is made
            self._overlap.wait_sent()
            self._push(key, value)

    def _push(self, key: Any, value: Any) -> None:
        planned = self._planned(key, value, "push")
        if planned is not None:
            self._push_plan(*planned)
            return
        batches = self._push_batches(self._checked(key, value, "push"))
        self._check_pushes()
        self._send_deferred()  # at most one push waits: a worker that only pushes still sends every round
        self._deferred = batches
        # MXNet's push reads the value when it is pushed: a caller may write its array before
        # the next call would send it. Small values are copied (cheap next to the round trip
        # that riding along with the pull saves); big ones leave now (their transfer outweighs it).
        if sum(_payload_bytes(payload) for _, values in batches.values() for payload in values) \
                >= DEFER_MAX_BYTES:
            self._send_deferred()
        else:
            for _, values in batches.values():
                values[:] = [np.array(payload, copy=True) if isinstance(payload, np.ndarray) else payload
                             for payload in values]

    def _push_plan(self, plan: plans.Plan, arrays: list[Any], flats: list[np.ndarray]) -> None:
        """:meth:`push` of a plan's keys (``flats``: the arrays' flat views): one batched frame
        per server, deferred (a copy) when small."""
        self._check_pushes()
        self._send_deferred()
        # (when the engine runs only this store's requests, the arrays are either idle or an
        # out array of one, and a wait on each costs least)
        transfer.wait_to_read_all(arrays, self._overlap.only_ours_pending())
        copy = plan.nbytes < DEFER_MAX_BYTES  # (see push: a small push waits for the next call, copied)
        pushes = [(share, share.gathered(flats, copy), rounds)
                  for share, rounds in zip(plan.shares, self._count_rounds(plan))]
        self._deferred_batch = (plan, pushes)
        if not copy:
            self._send_deferred()  # sent from the caller's arrays before push returns

    def _push_batches(self, checked: list[tuple[Key, list[Any]]]) -> dict[int, tuple[list[Any], list[Any]]]:
        """Per server: the ``(shard_id, round)`` of each part pushed, and the part's payload."""
        batches: dict[int, tuple[list[Any], list[Any]]] = {}
        counts, compressing, replicated = self._rounds, self._compressor is not None, self._replicated
        plain = not (compressing or replicated)
        # many single arrays (a model's keys): one wait for all of them, not one each
        waited = len(checked) >= transfer.WAIT_TOGETHER_MIN and all(len(arrays) == 1 for _, arrays in checked)
        if waited:
            transfer.wait_to_read_all([arrays[0] for _, arrays in checked])
        for entry, arrays in checked:
            grad = self._local_sum(entry, arrays, waited)
            key = entry.key
            round_index = counts.get(key, 0)
            counts[key] = round_index + 1
            if plain and entry.whole:  # the common case of a model of many small keys: no slicing
                server, shard_id, _ = entry.routes[0]
                batch = batches.get(server)
                if batch is None:
                    batch = batches[server] = ([], [])
                batch[0].append((shard_id, round_index))
                batch[1].append(grad)
                continue
            for part in entry.parts:
                data = grad if part.whole else grad.reshape(-1)[part.start:part.stop]
                batch = batches.get(part.server)
                if batch is None:
                    batch = batches[part.server] = ([], [])
                rounds, values = batch
                rounds.append(((key, part.index), round_index))
                payload = self._encode(entry, part, data) if compressing else data
                values.append(payload)
                if replicated:  # a copy: data may be the caller's array, written again later
                    kept = np.array(payload, copy=True) if isinstance(payload, np.ndarray) else payload
                    self._unconfirmed.setdefault(part.server, {}).setdefault(
                        (entry.key, part.index), []).append((round_index, kept))
        return batches

    def _pull_batches(self, checked: list[tuple[Key, list[Any]]]) -> dict[int, list[Any]]:
        """Per server: the ``(shard_id, rounds this worker pushed)`` of each part to read."""
        batches: dict[int, list[Any]] = {}
        rounds = self._rounds
        for entry, _ in checked:
            pushed = rounds.get(entry.key, 0)
            for server, shard_id, _ in entry.routes:
                items = batches.get(server)
                if items is None:
                    items = batches[server] = []
                items.append((shard_id, pushed))
        return batches

    def _shapes(self, items: list[Any]) -> list[tuple[int, ...]]:
        """The shape of each ``(shard_id, round)``'s value as a server stores it (the key's
        shape for a whole key, flat for a part of a split one)."""
        keys = self._keys
        return [keys[key].routes[index][2] for (key, index), _ in items]

    # -- pull -------------------------------------------------------------------------

    def pull(self, key: Any, out: Any = None, priority: int = 0, ignore_sparse: bool = True) -> None:
        """Copy the value of ``key`` into ``out`` (an NDArray, or one per device).

        The values are those the servers' consistency model lets this worker read
        (``dist_sync``: once every worker's push of this worker's last round is merged).
        With one CPU array per key, all of one dtype, and config ``kvstore_overlap`` on, the
        call returns at once: the pull is an engine operation that writes ``out`` (reading
        ``out`` waits for it), sent after this worker's earlier pushes (it sees them), and an
        error it meets is raised by reading ``out`` (an
        :class:`~mxkit.core.errors.EngineError` naming it) and by the store's next call.
        Otherwise the call blocks until the servers answer.

        Raises
        ------
        KVStoreError
            If ``out`` is missing, a key was not initialised, or the servers time out
            waiting for other workers (the message names their ranks).
        ShapeError
            If an ``out`` array's shape differs from the key's.
        """
        if out is None:
            raise KVStoreError("pull needs out=: the NDArray (or list of per-device NDArrays) to fill")
        with self._lock:
            planned = self._planned(key, out, "pull")
            if planned is not None and self._overlapping:
                overlap.start_plan(self, planned[0], None, *planned[1:])
                return
            self._overlap.drain()
            if planned is not None:
                self._pull_plan(*planned)
            else:
                self._pull(self._checked(key, out, "pull"))

    def _pull_plan(self, plan: plans.Plan, targets: list[Any], views: list[np.ndarray]) -> None:
        """The blocking :meth:`pull` of a plan's keys: one batched frame per server, carrying
        this plan's push that waited to ride along."""
        self._check_pushes()
        with self._sending() as outbox:
            deferred = self._deferred_batch
            if deferred is not None and deferred[0] is plan:
                self._deferred_batch = None
                pushes = {share.number: (flat, rounds) for share, flat, rounds in deferred[1]}
            else:
                self._send_deferred(outbox)
                pushes = {}
            channels, none = self._channels, (None, None)
            refs = [channels[share.server].batch(self._rank, self._epoch, share, *pushes.get(share.number, none),
                                                 pulled=pulled, timeout=self._timeout, outbox=outbox)
                    for share, pulled in zip(plan.shares, self._pulled(plan))]
        answers = self._wait_all(refs, "pull")
        self._clocks = (plan, [clocks for _, clocks in answers])
        write_plan(plan, [flat for flat, _ in answers], targets, views)

    def _pull(self, checked: list[tuple[Key, list[Any]]]) -> None:
        """The blocking :meth:`pull` of ``checked`` by key parts."""
        pull_batches = self._pull_batches(checked)
        self._check_pushes()
        with self._sending() as outbox:
            push_batches, self._deferred = self._deferred, {}
            if self._deferred_batch is not None:  # (a plan's push: sent first, in its own frames)
                self._send_deferred(outbox)
            refs = []
            for server, items in pull_batches.items():  # one request per server: its pushes ride along
                rounds, values = push_batches.pop(server, ([], []))
                refs.append(self._channels[server].pull(self._rank, self._epoch, items, self._timeout, rounds, values,
                                                        self._shapes(items), outbox=outbox))
            # servers with pushed parts but nothing to read (out names other keys)
            for server, (rounds, values) in push_batches.items():
                self._in_flight.append(self._channels[server].push(self._rank, self._epoch, rounds, values,
                                                                   outbox=outbox))
        first = [refs]

        def send() -> list[Any]:  # the pushes travel once; a retry after a server restart only pulls
            return first.pop() if first else self._pull_refs(pull_batches)

        self._receive(checked, pull_batches, self._ask(send, "pull"))

    def _pull_refs(self, batches: dict[int, list[Any]]) -> list[Any]:
        with self._sending() as outbox:
            return [self._channels[server].pull(self._rank, self._epoch, items, self._timeout,
                                                shapes=self._shapes(items), outbox=outbox)
                    for server, items in batches.items()]

    def _receive(self, checked: list[tuple[Key, list[Any]]], batches: dict[int, list[Any]],
                 answers: list[Any]) -> None:
        """Write the servers' answers (in the order of ``batches``) into the pull targets."""
        found, clocks = transfer.read_pull_answers(batches, answers)
        self._clocks = [(entry.key, *clocks[entry.key]) for entry, _ in checked]
        if self._replicated:
            recovery.confirm(self, checked)
        pulled_value = transfer.pulled_value
        transfer.write_all([(pulled_value(entry, found), outs) for entry, outs in checked])

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        """Push ``value`` then pull into ``out`` (into ``value`` itself when ``out`` is None).

        One request per server carries both (half the round trips of separate calls).
        With one CPU array per key on each side (a training loop's call) and config
        ``kvstore_overlap`` on, the call returns at once: the request runs as an engine
        operation that reads ``value`` and writes ``out`` (see :mod:`.overlap`), so
        reading ``out`` waits for it, and an error it meets is raised by the store's next
        call (reading ``out`` raises an :class:`~mxkit.core.errors.EngineError` naming it).
        Otherwise the call returns once ``out`` holds the pulled values.
        """
        with self._lock:
            if self._overlapping:
                planned = self._planned(key, value, "pushpull")
                if planned is not None:
                    planned_out = planned if out is None else self._planned(key, out, "pushpull")
                    if planned_out is not None and planned_out[0] is planned[0]:
                        plan, values, value_views = planned
                        overlap.start_plan(self, plan, values, planned_out[1], planned_out[2], value_views)
                        return
                checked = self._checked(key, value, "pushpull")
                outs = checked if out is None else self._checked(key, out, "pushpull")
                if overlap.eligible(self, checked, outs):
                    overlap.start(self, checked, outs)
                    return
            self._overlap.drain()
            if out is not None:
                self._checked(key, out, "pushpull")  # a bad out fails before anything is pushed
            self.push(key, value, priority)
            self.pull(key, out=value if out is None else out, priority=priority)

    broadcast = _serialized(KVStoreBase.broadcast)  # rank 0's value is the one stored

    # -- barrier ----------------------------------------------------------------------

    @_serialized
    def barrier(self) -> None:
        """Wait until every worker reaches this barrier; it ends an epoch.

        While a worker waits here, ``dist_sync`` rounds are completed by the workers still
        pushing (it is excused from them), so call it at the end of each epoch when
        workers may have different numbers of batches. After it, every key's round clock
        is the most advanced worker's.

        Raises
        ------
        KVStoreError
            If a push failed, or a worker does not arrive within the timeout (config
            ``kvstore_timeout``); the message names the missing ranks.
        """
        self._flush()
        self._ask(lambda: [server.end_epoch.remote(self._rank, self._epoch, dict(self._rounds))
                           for server in self._servers], "barrier")
        remote.wait(self._coordinator.barrier.remote(self._rank, self._epoch, self._timeout), "barrier",
                    self._timeout + remote.ANSWER_MARGIN)
        self._epoch += 1
        self._rounds.clear()
        self._unconfirmed.clear()  # every round of the epoch is merged and replicated

    # -- updaters, compression --------------------------------------------------------

    @_serialized
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

    @_serialized
    def set_updater(self, updater: Callable[[Any, Any, Any], None]) -> None:
        """Run ``updater(key, grad, weight)`` on the servers (needs ``allow_remote_code=True``
        here, and a job started with ``allow_remote_code=True``: the servers check too).

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
        from ray import cloudpickle

        serialized = cloudpickle.dumps(updater)  # the servers check that the job allows it before loading it
        self._flush()
        self._wait_all([server.set_updater.remote(self._rank, serialized) for server in self._servers],
                       "set_updater")

    @_serialized
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

    # -- optimizer states -------------------------------------------------------------

    @_serialized
    def save_optimizer_states(self, fname: Any, dump_optimizer: bool = False) -> None:
        """Save the servers' optimizer states to ``fname`` (``.npz`` + JSON manifest, no pickle).

        The parts of split keys are joined, so the file is the same for any number of servers.
        """
        from mxkit.kvstore.dist.states import gather_states, write_states

        self._flush()
        write_states(fname, gather_states(self._keys, self._wait_all(
            [server.states.remote() for server in self._servers], "save_optimizer_states")))

    @_serialized
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


def write_plan(plan: plans.Plan, flats: list[np.ndarray], targets: list[Any], views: list[np.ndarray]) -> None:
    """Copy each share's answer ``flats`` into the out arrays ``targets`` (``views``: their
    flat views): one engine operation that writes them all (a pull replaces their values)."""
    from mxkit.ndarray.invoke import push_raw

    def copy_all() -> None:
        for share, flat in zip(plan.shares, flats):
            share.scatter(flat, views)

    push_raw(copy_all, [], targets, targets[0].context, "kvstore.pull", overwrites=True)


__all__ = ["DistKVStore", "OBJECT_STORE_MIN_BYTES", "write_plan"]

