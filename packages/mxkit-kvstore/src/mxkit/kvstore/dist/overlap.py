"""A pushpull or pull that does not block its caller: the request runs as an engine operation.

MXNet 1.x's ``KVStoreDist`` pushes and pulls through its engine: the call returns at once,
the transfer reads the gradients when backward has written them, and the next forward
waits only for the weights it reads. :func:`start` does that for ``pushpull`` of a
training loop: the caller's thread works out the rounds and routes (the store's
bookkeeping, under its lock) and pushes **one asynchronous engine operation** that reads
the value arrays and writes the out arrays. On an engine thread the operation sends one
request per server carrying the pushes and the pulls (and the push that waited to ride
along), written to every server at once (:class:`~.channel.Outbox`), and returns; the
store's receiver thread waits for the answers (each server's as it comes), copies them
into the out arrays and completes the operation (MXNet's ``PushAsync`` with ps-lite's
callback), so no engine thread is held while the servers wait for other workers. The
caller's thread never waits for backward, for the network or for the servers: it goes on
to the next batch, and the engine runs the next forward as soon as the weights are
written. :func:`start_plan` does the same for a call a batch plan serves (:mod:`.plans`),
and for a plain ``pull`` (no values to read): a pull made while no request of the store is
on the engine is sent at once from the caller's thread, the operation then only orders the
write of the out arrays after their readers.

Order
-----
Every such operation writes the store's *sequence marker* (a one-byte NDArray), so the
engine runs them one after another in the order they were made, and they send their
frames in that order. Any other call of the store first waits for the marker
(:meth:`Overlap.drain`): the data channel's connections are only ever used by one side,
and a request made after a pushpull reaches a server after it (a server serves one
connection's frames in order, so a pull can never overtake the push it must see).

Errors
------
An operation that fails (a server's error answer, a dropped connection) keeps its
exception: the out arrays hold it (reading one raises an
:class:`~mxkit.core.errors.EngineError` naming it), and the store's next call raises the
original error itself. Later operations of the store fail with it without sending.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from mxkit.core.errors import EngineError, KVStoreError
from mxkit.kvstore.dist import channel, transfer


class Overlap:
    """The engine-side requests of one :class:`~.store.DistKVStore` and the thread that
    receives their answers."""

    def __init__(self) -> None:
        self._marker: Any = None
        self.pending = False  # an operation may still run
        self.failure: BaseException | None = None
        self._answers: queue.SimpleQueue[Callable[[], None]] | None = None
        #: set once the last engine-side request has sent its frames (None: none was made)
        self.sent: threading.Event | None = None
        #: engine-side requests pushed and not yet complete
        self.running = 0
        self._running_lock = threading.Lock()

    def push(self, fn: Callable[[Callable[..., None]], None], reads: list[Any], writes: list[Any],
             name: str) -> None:
        """Push ``fn`` as an asynchronous engine operation, counted in :attr:`running`."""
        from mxkit.core.context import cpu
        from mxkit.ndarray.invoke import engine

        def counted(on_complete: Callable[..., None]) -> None:
            def complete(*error: Any) -> None:
                with self._running_lock:
                    self.running -= 1
                on_complete(*error)

            fn(complete)

        with self._running_lock:
            self.running += 1
        try:
            engine().push_async(counted, reads, writes, cpu(), 0, name)
        except BaseException:
            with self._running_lock:
                self.running -= 1
            raise
        self.pending = True

    def only_ours_pending(self) -> bool:
        """Whether the engine runs nothing but this store's requests (which write only their
        out arrays): a wait for other arrays then finds nothing pending on them."""
        from mxkit.ndarray.invoke import engine

        pending = getattr(engine(), "pending", None)
        return pending is not None and pending <= self.running

    def sender(self, transmit: Callable[[], tuple[list[Any], list[Any]]], write: Callable[[list[Any]], None]
               ) -> Callable[[Callable[..., None]], None]:
        """The engine operation of a request that sends its frames on an engine thread.

        The operation calls ``transmit()``, which writes the request's frames and returns
        ``(requests, acks)``, the pending pulls and the pushes that travelled with them; once
        it has, the store's later frames may follow (:meth:`all_sent`), and the receiver
        thread waits for the answers, has ``write(answers)`` put them into the out arrays and
        completes the operation (:meth:`complete`). A ``transmit`` that raises fails the
        operation with its error, which the store keeps (:attr:`failure`) for its next call.
        """
        self.sent = sent = threading.Event()

        def send(on_complete: Callable[..., None]) -> None:
            try:
                requests, acks = transmit()
            except BaseException as exc:
                self.failure = exc
                sent.set()
                on_complete(exc)
                return
            sent.set()
            self.receive(lambda: self.complete(requests, acks, write, lambda: on_complete))

        return send

    def complete(self, requests: list[Any], acks: list[Any], write: Callable[[list[Any]], None],
                 completion: Callable[[], Callable[..., None]]) -> None:
        """Wait for the answers of one engine-side request (``requests``, then the pushes
        ``acks`` that travelled with it), have ``write(answers)`` put them into its out arrays,
        and complete its operation with the error one of those steps met (on the receiver
        thread). ``completion()`` gives the operation's completion once the engine lets it
        write the out arrays."""
        error: BaseException | None = None
        try:
            answers = channel.results(requests + acks)[:len(requests)]  # (each server's as it comes)
        except BaseException as exc:
            error = exc
        on_complete = completion()
        if error is None:
            try:
                write(answers)
            except BaseException as exc:
                error = exc
        if error is not None:
            self.failure = error
            on_complete(error)
            return
        on_complete()

    def check_unfailed(self) -> None:
        """Refuse to send a request after an earlier one of the store failed (its error is
        raised by the store's next call; the servers must not see later rounds first)."""
        if self.failure is not None:
            raise KVStoreError(f"not sent: an earlier request of this store failed ({self.failure})")

    def all_sent(self) -> bool:
        """Whether every engine-side request has sent its frames (later frames may follow
        them from any thread: the servers see them in the order of the calls)."""
        return self.sent is None or self.sent.is_set()

    def wait_sent(self) -> None:
        """Wait until every engine-side request has sent its frames; raise the error one met."""
        event = self.sent
        if event is not None:
            event.wait()
        if self.failure is not None:
            self.drain()

    def receive(self, finish: Callable[[], None]) -> None:
        """Run ``finish`` (wait for a request's answers, complete its operation) on this
        store's receiver thread, after those handed over before it."""
        if self._answers is None:
            self._answers = queue.SimpleQueue()
            threading.Thread(target=_receiver, args=(self._answers,), name="mxkit-kvstore-receiver",
                             daemon=True).start()
        self._answers.put(finish)

    def marker(self) -> Any:
        """The NDArray every engine-side request writes (made on first use)."""
        if self._marker is None:
            from mxkit.core.context import cpu
            from mxkit.ndarray import NDArray

            self._marker = NDArray.from_storage(np.zeros(1, dtype=np.uint8), cpu())
        return self._marker

    def drain(self) -> None:
        """Wait until the engine-side requests are done; raise the error one of them met."""
        if self.pending:
            self.pending = False
            try:
                self._marker.wait_to_read()
            except EngineError:
                if self.failure is None:
                    raise
        self.raise_failure()

    def raise_failure(self) -> None:
        """Raise (once) the error an engine-side request met."""
        failure, self.failure = self.failure, None
        if failure is not None:
            raise failure


def eligible(store: Any, checked: list[tuple[Any, list[Any]]], outs: list[tuple[Any, list[Any]]]) -> bool:
    """Whether a pushpull of ``checked`` into ``outs`` can run as one engine operation: one
    CPU array per distinct key on both sides, plain pushes (no compression, no replication:
    those keep per-push state on the caller's side)."""
    if store._compressor is not None or store._replicated or len(checked) != len(outs):
        return False
    seen = set()
    for (entry, arrays), (out_entry, targets) in zip(checked, outs):
        if entry is not out_entry or len(arrays) != 1 or len(targets) != 1 or entry.key in seen:
            return False
        seen.add(entry.key)
        for array in (arrays[0], targets[0]):
            if array.context.device_type != "cpu" or not isinstance(array.storage, np.ndarray):
                return False
    return True


def start(store: Any, checked: list[tuple[Any, list[Any]]], outs: list[tuple[Any, list[Any]]]) -> None:
    """Push one engine operation that pushes ``checked`` and pulls into ``outs`` (see the
    module's docstring); called under the store's lock, after :func:`eligible`."""
    overlap: Overlap = store._overlap
    if overlap.failure is not None:
        overlap.drain()  # raises the failure, once, and leaves the store usable
    counts = store._rounds
    # per server: [(shard_id, round, value index, start, stop)] to push and [(shard_id, pushed)] to pull
    pushes: dict[int, list[tuple[Any, int, int, int, int]]] = {}
    pulls: dict[int, list[tuple[Any, int]]] = {}
    for index, (entry, _) in enumerate(checked):
        key = entry.key
        round_index = counts.get(key, 0)
        counts[key] = round_index + 1
        for part, (server, shard_id, _) in zip(entry.parts, entry.routes):
            start_at, stop_at = (-1, -1) if part.whole else (part.start, part.stop)
            pushes.setdefault(server, []).append((shard_id, round_index, index, start_at, stop_at))
            pulls.setdefault(server, []).append((shard_id, round_index + 1))
    deferred, store._deferred = store._deferred, {}  # a push waiting to ride along (its values are copies)
    deferred_batch, store._deferred_batch = store._deferred_batch, None  # a plan's push: sent first
    values = [arrays[0] for _, arrays in checked]
    targets = [arrays[0] for _, arrays in outs]
    entries = [entry for entry, _ in outs]
    shapes = {server: store._shapes(items) for server, items in pulls.items()}
    rank, epoch, timeout, channels = store._rank, store._epoch, store._timeout, store._channels

    def transmit() -> tuple[list[Any], list[Any]]:
        overlap.check_unfailed()
        data = [array.storage for array in values]  # the engine ordered this after their writers
        with channel.Outbox() as outbox:  # (every server's frames written at once)
            acks = _send_batch_pushes(store, deferred_batch, outbox)
            requests = []
            for server, items in pulls.items():
                rounds, payloads = deferred.pop(server, ([], []))
                rounds, payloads = list(rounds), list(payloads)
                for shard_id, round_index, index, start_at, stop_at in pushes[server]:
                    rounds.append((shard_id, round_index))
                    payloads.append(data[index] if start_at < 0 else data[index].reshape(-1)[start_at:stop_at])
                requests.append(channels[server].pull(rank, epoch, items, timeout, rounds, payloads, shapes[server],
                                                      outbox=outbox))
            acks += [channels[server].push(rank, epoch, rounds, payloads, outbox=outbox)
                     for server, (rounds, payloads) in deferred.items()]
        return requests, acks

    def write(answers: list[Any]) -> None:
        found, clocks = transfer.read_pull_answers(pulls, answers)
        for entry, target in zip(entries, targets):
            transfer.copy_into(target.storage, transfer.pulled_value(entry, found))
        store._clocks = [(entry.key, *clocks[entry.key]) for entry in entries]

    # the out arrays are overwritten whole (an error one holds fails the operation: they count
    # as read too); a value that is also an out counts as written
    vars_read = [array.var for array in values] + [array.var for array in targets]
    vars_written = [array.var for array in targets] + [overlap.marker().var]
    overlap.push(overlap.sender(transmit, write), vars_read, vars_written, "kvstore.pushpull")


def _send_batch_pushes(store: Any, deferred: Any, outbox: channel.Outbox) -> list[Any]:
    """Queue a plan's push that waited (``(plan, [(share, flat, rounds)])`` or None); the requests."""
    if deferred is None:
        return []
    return [store._channels[share.server].batch(store._rank, store._epoch, share, flat, rounds, outbox=outbox)
            for share, flat, rounds in deferred[1]]


def start_plan(store: Any, plan: Any, values: list[Any] | None, targets: list[Any], target_views: list[np.ndarray],
               value_views: list[np.ndarray] | None = None) -> None:
    """Push one engine operation that pushes ``values`` (None: a pull only) and pulls into
    ``targets`` the keys of ``plan`` (a :class:`~.plans.Plan`), one batched frame per server
    (see the module's docstring); ``*_views`` are the arrays' flat views. Called under the
    store's lock, for a call :meth:`~.store.DistKVStore._planned` planned."""
    overlap: Overlap = store._overlap
    if values is None:
        # a pull follows the requests before it on the wire (and raises the error of one
        # that could not be sent); a pushpull's wait for its values is the engine's
        overlap.wait_sent()
    elif overlap.failure is not None:
        overlap.drain()  # raises the failure, once, and leaves the store usable
    rounds = store._count_rounds(plan) if values is not None else None
    pulled = store._pulled(plan)
    deferred, store._deferred = store._deferred, {}  # (only one of the two waits at a time)
    deferred_batch, store._deferred_batch = store._deferred_batch, None
    riding: dict[int, tuple[Any, np.ndarray]] = {}
    if values is None and deferred_batch is not None and deferred_batch[0] is plan:
        # a push of these keys waits (its values are copies): it rides along with the pull
        riding = {share.number: (flat, share_rounds) for share, flat, share_rounds in deferred_batch[1]}
        deferred_batch = None
    rank, epoch, timeout, channels = store._rank, store._epoch, store._timeout, store._channels

    def transmit() -> tuple[list[Any], list[Any]]:
        overlap.check_unfailed()
        with channel.Outbox() as outbox:  # (every server's frames written at once)
            acks = [channels[server].push(rank, epoch, server_rounds, payloads, outbox=outbox)
                    for server, (server_rounds, payloads) in deferred.items()]
            acks += _send_batch_pushes(store, deferred_batch, outbox)
            # the engine ordered this after the writers of values: sent from where they are
            flats = value_views
            requests = []
            for index, share in enumerate(plan.shares):
                if flats is not None:
                    flat, share_rounds = share.gathered(flats, False), rounds[index]
                else:
                    flat, share_rounds = riding.get(share.number, (None, None))
                requests.append(channels[share.server].batch(rank, epoch, share, flat, share_rounds,
                                                             pulled=pulled[index], timeout=timeout, outbox=outbox))
        return requests, acks

    def write(answers: list[Any]) -> None:
        for share, (flat, _) in zip(plan.shares, answers):
            share.scatter(flat, target_views)
        store._clocks = (plan, [clocks for _, clocks in answers])

    vars_read = ([array.var for array in values] if values is not None else []) + [array.var for array in targets]
    vars_written = [array.var for array in targets] + [overlap.marker().var]
    name = "kvstore.pushpull" if values is not None else "kvstore.pull"
    if values is None and overlap.all_sent():
        # a pull while every request of this store on the engine has been sent: it reads no
        # array, so it leaves now from the caller's thread and the receiver waits for its
        # answer at once; the operation only orders the write of the targets after their
        # readers (and after the earlier requests)
        requests, acks = transmit()  # (a failure to send is the caller's error)
        granted: queue.SimpleQueue[Callable[..., None]] = queue.SimpleQueue()
        overlap.receive(lambda: overlap.complete(requests, acks, write, granted.get))
        overlap.push(granted.put, vars_read, vars_written, name)
        return

    overlap.push(overlap.sender(transmit, write), vars_read, vars_written, name)


def _receiver(answers: queue.SimpleQueue[Callable[[], None]]) -> None:
    while True:
        finish = answers.get()
        try:
            finish()  # completes its operation, with the error it met if any
        except Exception:  # the thread must outlive one failed completion: later requests need it
            pass


__all__ = ["Overlap", "eligible", "start", "start_plan"]
