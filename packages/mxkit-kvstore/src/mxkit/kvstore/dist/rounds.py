"""A server's shards and the rounds of pushes on them, under a consistency model.

This is :class:`mxkit.kvstore.consistency.RoundCoordinator`'s protocol on one server, with
what the network adds:

- A worker numbers its pushes to a key (its *round*) itself and sends the number along,
  because a threaded server may run two requests of one worker out of order. The ``n``-th
  push of every worker to a key belongs to round ``n``; a pull says how many rounds the
  worker has pushed, and waits until the worker's own pushes are merged (read-your-writes,
  under every model) and the model lets it read
  (``pull_ready(worker_round, slowest_applied_round)``).
- **Epochs** end at barriers. A worker that enters a barrier tells each server how many
  rounds it pushed to each key in the epoch (:meth:`ShardTable.end_epoch`) and is
  *excused* from the later rounds of that epoch: a ``dist_sync`` round is complete when
  every worker still training contributed (so workers with uneven numbers of batches do
  not deadlock, MXNet's issue #7888). When every worker has ended the epoch, every key's
  round clock jumps to the most advanced worker's, and the next epoch's rounds count from
  there.
- A pull that waits longer than its timeout fails with a :class:`KVStoreError` naming
  the ranks it waits for.

Values are numpy arrays (a big key's part is flat); ``apply(key, merged, value)`` returns
the value after a round (an optimizer), else the round's sum becomes the value; with
``apply_many``, the rounds one push request completes go to the optimizer in one call
(MXNet's aggregated update: one call instead of one per key). A stored
value is never written in place, only replaced, so a pull hands out the array itself and
Ray serialises it after the lock is released, with no copy here.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from mxkit.core.errors import KVStoreError

#: a part of a key on a server: ``(key, part_index)``
ShardId = tuple[Any, int]


class ResendRequest(KVStoreError):
    """A restarted server lacks pushes a worker made before the restart: send them again."""


class Shard:
    """One part of a key: its value and the rounds pushed to it."""

    __slots__ = ("applied", "base", "id", "key", "pending", "pushed", "replicated", "value", "version")

    def __init__(self, shard_id: ShardId, value: np.ndarray, num_workers: int):
        self.id = shard_id
        self.key = shard_id[0]
        self.value = value
        self.pending: dict[int, list[Any]] = {}  # round -> [sum, contributing ranks]
        self.pushed = [0] * num_workers  # rounds pushed per rank (the round clock)
        self.applied = [0] * num_workers  # rounds per rank merged into value
        self.base = 0  # the round at which this epoch began
        self.version = 0  # changes of value and clocks (chain replication orders copies by it)
        self.replicated = 0  # the version the backup has acknowledged


def most_of_its_buffer(value: np.ndarray) -> bool:
    """Whether ``value`` is at least half of the buffer it views: a kept view keeps its whole
    buffer alive (a frame's body, with the request's other values), so a small value of a
    large frame is copied instead; what is kept is then at most twice what is stored."""
    root = value
    while isinstance(root.base, np.ndarray):
        root = root.base
    return 2 * value.nbytes >= root.nbytes


class ShardTable:
    """The shards of one server and the rounds on them (thread-safe).

    Parameters
    ----------
    num_workers : int
        The workers of the job.
    """

    def __init__(self, num_workers: int):
        self.num_workers = num_workers
        self.model: Any = None
        #: ``apply(key, merged, value, contributors) -> new value``: the update (None: store the merged sum)
        self.apply: Callable[[Any, np.ndarray, np.ndarray, list[int]], np.ndarray] | None = None
        #: ``apply`` of several ``(keys, merged, values, contributors)`` at once (an optimizer's aggregated update)
        self.apply_many: Callable[[list[Any], list[np.ndarray], list[np.ndarray], list[list[int]]],
                                  list[np.ndarray]] | None = None
        self.decode: Callable[[Shard, Any], np.ndarray] | None = None
        self.shards: dict[ShardId, Shard] = {}
        self.epoch = 0
        self.ended: dict[int, dict[Any, int]] = {}  # rank -> rounds per key, for ranks done with the epoch
        self.condition = threading.Condition()
        #: how often what a waiting pull reads changed (a shard applied a round, an epoch began): a push
        #: that changed nothing (a sync round's early part, merged and waiting for the others) leaves every
        #: waiter as it was, so it wakes none; with 4 workers that was 3 futile wake-ups in 6 per round
        self.changes = 0
        #: chain replication: a pull waits until the value it reads is on the backup
        self.replicating = False
        self.changed: set[ShardId] = set()  # shards whose new version the backup has not been sent
        self.restored = False  # rebuilt after a restart: pushes made before it may be lost
        #: the batches connections defined, by their shards' ids (:func:`.batches.define` shares them)
        self.batches: dict[tuple[ShardId, ...], Any] = {}

    # -- set-up -----------------------------------------------------------------------

    def _check_rank(self, rank: Any) -> None:
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < self.num_workers:
            raise KVStoreError(f"rank {rank!r} is out of range; this job's workers are 0..{self.num_workers - 1}")

    def _shard(self, shard_id: ShardId, what: str) -> Shard:
        shard = self.shards.get(shard_id)
        if shard is None:
            raise KVStoreError(f"{what} of key {shard_id[0]!r} before init; call kv.init({shard_id[0]!r}, value) "
                               f"on every worker first")
        return shard

    def shape_of(self, shard_id: Any) -> tuple[int, ...]:
        """The shape of a shard's value (shards are added, never reshaped: no lock needed).

        Raises
        ------
        KVStoreError
            If there is no such shard.
        """
        shard = self.shards.get(shard_id) if type(shard_id) is tuple else None
        if shard is None:
            key = shard_id[0] if type(shard_id) is tuple and shard_id else shard_id
            raise KVStoreError(f"push of key {key!r} before init; call kv.init({key!r}, value) on every worker "
                               f"first")
        return shard.value.shape

    def init(self, items: list[tuple[ShardId, np.ndarray]]) -> None:
        """Store each ``(shard_id, value)`` (copied)."""
        with self.condition:
            for shard_id, _ in items:
                if shard_id in self.shards:
                    raise KVStoreError(f"duplicate init of key {shard_id[0]!r}; each key is initialised once")
            for shard_id, value in items:
                shard = Shard(shard_id, np.array(value, copy=True), self.num_workers)
                # a key made mid-epoch starts at the rounds its epoch has had so far (0)
                self.shards[shard_id] = shard
                self._changed(shard)

    # -- epochs -----------------------------------------------------------------------

    def _advance(self, rank: int, epoch: int) -> None:
        if epoch < self.epoch:
            raise KVStoreError(f"rank {rank} sent a request of epoch {epoch}, an epoch this server has already "
                               f"ended: every worker must call barrier() the same number of times")
        while self.epoch < epoch:
            missing = sorted(set(range(self.num_workers)) - set(self.ended))
            if missing:
                raise KVStoreError(f"rank {rank} began epoch {epoch} while ranks {missing} have not ended epoch "
                                   f"{self.epoch}; a worker passed a barrier the others did not enter")
            for shard in self.shards.values():
                if shard.pending:
                    raise KVStoreError(f"key {shard.key!r}: rounds {sorted(shard.pending)} were never completed "
                                       f"when epoch {self.epoch} ended")
                shard.base += max(counts.get(shard.key, 0) for counts in self.ended.values())
                shard.pushed = [shard.base] * self.num_workers
                shard.applied = [shard.base] * self.num_workers
                self._changed(shard)
            self.ended = {}
            self.epoch += 1
            self.changes += 1

    def advance(self, rank: int, epoch: int) -> None:
        """Begin ``epoch`` if ``rank``'s request is the first of it (see :meth:`end_epoch`)."""
        self._check_rank(rank)
        with self.condition:
            self._advance(rank, epoch)

    def end_epoch(self, rank: int, epoch: int, rounds: dict[Any, int]) -> None:
        """``rank`` pushed ``rounds[key]`` rounds to each key this epoch and waits at a barrier."""
        self._check_rank(rank)
        with self.condition:
            self._advance(rank, epoch)
            self.ended[rank] = dict(rounds)
            for shard in self.shards.values():
                self._apply_ready_rounds(shard)
            self.condition.notify_all()

    def _excused(self, shard: Shard, round_index: int) -> list[int]:
        """Ranks that ended the epoch before ``round_index`` of ``shard``."""
        return [rank for rank, counts in self.ended.items() if shard.base + counts.get(shard.key, 0) <= round_index]

    # -- push -------------------------------------------------------------------------

    def push(self, rank: int, epoch: int, items: list[tuple[ShardId, int, Any]], resend: bool = False,
             owned: bool = False) -> None:
        """Contribute each ``(shard_id, round, value)`` of ``rank`` (``round`` counts from the epoch's start).

        ``resend=True`` marks pushes sent again after this server was restarted: rounds it
        already holds (applied, or pending with this rank's part) are skipped. ``owned=True``
        says that nothing else holds the values (a data-channel frame's fresh buffer): the
        first push of a round then becomes the round's sum without a copy.
        """
        with self.pushing(rank, epoch):
            self.push_locked(rank, epoch, items, resend, owned)

    @contextlib.contextmanager
    def pushing(self, rank: int, epoch: int) -> Iterator[None]:
        """The lock held for a push of ``rank`` in ``epoch`` (checked and begun: :meth:`begin_push`); on
        leaving, waiting pulls are woken if the push changed what they read (:attr:`changes`)."""
        self._check_rank(rank)
        with self.condition:
            changes = self.changes
            try:
                self.begin_push(rank, epoch)
                yield
            finally:
                if self.changes != changes:
                    self.condition.notify_all()

    def begin_push(self, rank: int, epoch: int) -> None:
        """Begin ``epoch`` if need be and check that ``rank`` may push in it (under the lock)."""
        self._advance(rank, epoch)
        if rank in self.ended:
            raise KVStoreError(f"rank {rank} pushed after entering the barrier of epoch {epoch}")

    def push_locked(self, rank: int, epoch: int, items: list[tuple[ShardId, int, Any]], resend: bool = False,
                    owned: bool = False) -> None:
        """:meth:`push` of a caller that holds the lock and called :meth:`begin_push` (waiters
        are not notified: the caller does that)."""
        # with an aggregating updater, the rounds this request completes are applied together
        ready: list[tuple[Shard, list[Any]]] | None = [] if self.apply_many is not None and len(items) > 1 else None
        try:
            self._push_items(rank, epoch, items, resend, owned, ready)
        finally:
            if ready:
                self._apply_together(ready)

    def _push_items(self, rank: int, epoch: int, items: list[tuple[ShardId, int, Any]], resend: bool, owned: bool,
                    ready: list[tuple[Shard, list[Any]]] | None) -> None:
        """The items of :meth:`push` (called under the lock); rounds they complete are applied,
        or set aside in ``ready`` when it is a list."""
        # runs once per pushed key part: lookups hoisted, the common case (a new round of a
        # single part, no duplicate check) without calls beyond the round's own
        shards, decode = self.shards, self.decode
        check_duplicates = resend or self.replicating
        # a request's new round of a part with nothing else pending, its sender's next one,
        # no rank in a barrier: _apply_ready_rounds' only outcome is "ready if the model takes
        # one push", decided here without the call (the one-worker and asynchronous common case)
        ready_to_apply = self.model.ready_to_apply if ready is not None and not self.ended else None
        for shard_id, local_round, payload in items:
            shard = shards.get(shard_id)
            if shard is None:
                shard = self._shard(shard_id, "push")
            value = decode(shard, payload) if decode is not None else payload
            stored = shard.value
            if value.shape != stored.shape:
                raise KVStoreError(f"push of key {shard.key!r}: a value of shape {value.shape} for a part of "
                                   f"shape {stored.shape}")
            round_index = shard.base + local_round
            # with replication a push may arrive twice: sent again after a restart, and the
            # original, queued while the server restarted; the first one counts
            if check_duplicates and (round_index < shard.applied[rank] or
                                     rank in shard.pending.get(round_index, (None, ()))[1]):
                continue
            pending = shard.pending
            entry = pending.get(round_index)
            if entry is None:
                adopt = (owned and value.dtype == stored.dtype and value.flags.c_contiguous
                         and value.flags.writeable and most_of_its_buffer(value))
                merged = value if adopt else np.array(value, dtype=stored.dtype, copy=True)
                if ready_to_apply is not None and not pending and shard.applied[rank] == round_index:
                    pushed = shard.pushed
                    if pushed[rank] <= round_index:
                        pushed[rank] = round_index + 1
                    if ready_to_apply(1):
                        ready.append((shard, [merged, [rank]]))  # type: ignore[union-attr]
                    else:
                        pending[round_index] = [merged, [rank]]
                    continue
                pending[round_index] = [merged, [rank]]
            else:
                if rank in entry[1]:
                    raise KVStoreError(f"rank {rank} pushed round {local_round} of key {shard.key!r} twice")
                np.add(entry[0], value, out=entry[0], casting="unsafe")
                entry[1].append(rank)
            pushed = shard.pushed
            if pushed[rank] <= round_index:
                pushed[rank] = round_index + 1
            self._apply_ready_rounds(shard, ready)

    def _apply_together(self, ready: list[tuple[Shard, list[Any]]]) -> None:
        """Apply rounds set aside by :meth:`_apply_ready_rounds` in one ``apply_many`` call,
        then the rounds of the same shards that became ready after them."""
        results = self.apply_many([shard.key for shard, _ in ready], [entry[0] for _, entry in ready],
                                  [shard.value for shard, _ in ready], [entry[1] for _, entry in ready])
        for (shard, (_, contributors)), value in zip(ready, results, strict=True):
            shard.value = value
            for rank in contributors:
                shard.applied[rank] += 1
            self._changed(shard)
        for shard, _ in ready:
            if shard.pending:
                self._apply_ready_rounds(shard)

    def _apply_ready_rounds(self, shard: Shard, set_aside: list[tuple[Shard, list[Any]]] | None = None) -> None:
        # a worker's pushes apply in its own order (a threaded server may receive them out of
        # order): round r of a contributor waits for its rounds before r. Under a model that
        # merges every worker's push (sequential) that makes rounds apply one after another.
        # (Runs once per pushed key: the common case, one pending round and no rank in a
        # barrier, takes no sort and no scan of the ended ranks.)
        pending, applied, ready = shard.pending, shard.applied, self.model.ready_to_apply
        for round_index in sorted(pending) if len(pending) > 1 else list(pending):
            merged, contributors = pending[round_index]
            if len(contributors) == 1:
                if applied[contributors[0]] != round_index:
                    continue
            elif any(applied[rank] != round_index for rank in contributors):
                continue
            received = len(contributors)
            if self.ended:
                received += sum(1 for r in self._excused(shard, round_index) if r not in contributors)
            if not ready(received):
                continue
            del pending[round_index]
            if set_aside is not None:
                # applied later with the request's other rounds; this shard's later rounds wait for it
                set_aside.append((shard, [merged, contributors]))
                return
            # merged is this table's own array (the first push was copied into it)
            shard.value = self.apply(shard.key, merged, shard.value, contributors) if self.apply is not None else merged
            for rank in contributors:
                shard.applied[rank] += 1
            self._changed(shard)

    def _changed(self, shard: Shard) -> None:
        shard.version += 1
        self.changes += 1
        if self.replicating:
            self.changed.add(shard.id)

    # -- pull -------------------------------------------------------------------------

    def _slowest(self, shard: Shard) -> int | None:
        if not self.ended:
            return min(shard.applied)
        active = [shard.applied[rank] for rank in range(self.num_workers) if rank not in self.ended]
        return min(active) if active else None

    def _readable(self, shard: Shard, rank: int, worker_round: int, slowest: int | None) -> bool:
        if self.replicating and shard.replicated < shard.version:
            return False  # what a worker reads must survive this server (it drops its copy)
        if shard.applied[rank] < worker_round:
            # read-your-writes under every model: a worker's pushes, sent before its pull but
            # perhaps run after it here, are in what it reads (MXNet's in-order server gives that)
            return False
        pull_ready = getattr(self.model, "pull_ready", None)
        return pull_ready is None or slowest is None or bool(pull_ready(worker_round, slowest))

    def pull(self, rank: int, epoch: int, items: list[tuple[ShardId, int]], timeout: float
             ) -> tuple[list[np.ndarray], list[tuple[int, int]]]:
        """The values of ``(shard_id, rounds pushed by rank this epoch)`` once the model allows.

        Returns the values (copies) and, per item, ``(worker_round, slowest_round)`` at the
        time of reading (the clocks the staleness bound is about).

        Raises
        ------
        KVStoreError
            If ``timeout`` seconds pass first; the message names the ranks waited for.
        """
        self._check_rank(rank)
        with self.condition:
            self._advance(rank, epoch)
            return self.pull_locked(rank, epoch, items, timeout)

    def pull_locked(self, rank: int, epoch: int, items: list[tuple[ShardId, int]], timeout: float,
                    deadline: float | None = None) -> tuple[list[np.ndarray], list[tuple[int, int]]]:
        """:meth:`pull` of a caller that holds the lock and began ``epoch`` (:meth:`advance`);
        ``deadline`` (of :func:`time.monotonic`) when part of the ``timeout`` was spent waiting already."""
        if deadline is None:
            deadline = time.monotonic() + timeout
        values, clocks = [], []
        shards = self.shards
        pull_ready = getattr(self.model, "pull_ready", None)
        for shard_id, local_round in items:
            shard = shards.get(shard_id)
            if shard is None:
                shard = self._shard(shard_id, "pull")
            worker_round = shard.base + local_round
            if self.restored and shard.pushed[rank] < worker_round:
                raise ResendRequest(f"server restarted: rank {rank} pushed {worker_round} rounds of key "
                                    f"{shard.key!r}, this server has {shard.pushed[rank]}; resend them")
            # the common case inline: no rank in a barrier, no replication, nothing to wait for
            slowest = min(shard.applied) if not self.ended else self._slowest(shard)
            if (self.replicating or shard.applied[rank] < worker_round or
                    not (pull_ready is None or slowest is None or pull_ready(worker_round, slowest))):
                while not self._readable(shard, rank, worker_round, slowest):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise self._timeout_error(shard, rank, worker_round, timeout)
                    self.condition.wait(remaining)
                    if self.epoch != epoch:  # cannot happen while this rank waits here; kept honest
                        self._advance(rank, epoch)
                    slowest = self._slowest(shard)
            values.append(shard.value)  # never written in place: no copy needed
            clocks.append((worker_round, worker_round if slowest is None else slowest))
        return values, clocks

    def shapes_of(self, shard_ids: list[Any]) -> list[tuple[int, ...]]:
        """:meth:`shape_of` of each shard (one lookup each; shards are never reshaped).

        Raises
        ------
        KVStoreError
            If a shard does not exist.
        """
        shards = self.shards
        shapes = []
        for shard_id in shard_ids:
            shard = shards.get(shard_id) if type(shard_id) is tuple else None
            shapes.append(shard.value.shape if shard is not None else self.shape_of(shard_id))
        return shapes

    def _timeout_error(self, shard: Shard, rank: int, worker_round: int, timeout: float) -> KVStoreError:
        pull_ready = self.model.pull_ready
        # the fewest applied rounds that would let this pull through; the ranks that have not
        # even pushed that many are the ones to blame (the others wait on them too)
        needed = next((r for r in range(worker_round + 1) if pull_ready(worker_round, r)), worker_round)
        active = [r for r in range(self.num_workers) if r not in self.ended]
        waiting_for = [r for r in active if shard.pushed[r] < needed] or \
            [r for r in active if shard.applied[r] < needed]
        return KVStoreError(
            f"pull of key {shard.key!r} by rank {rank} timed out after {timeout} s waiting for rank(s) "
            f"{waiting_for} (rounds pushed per rank {shard.pushed}, applied {shard.applied}, this rank needs "
            f"round {worker_round}): a worker died, is stuck, or stopped pushing without calling barrier(); "
            f"raise config kvstore_timeout if it is only slow")

    # -- inspection -------------------------------------------------------------------

    # -- chain replication ------------------------------------------------------------

    def take_changes(self) -> list[dict[str, Any]]:
        """Snapshots of the shards changed since the last call (to send to the backup)."""
        with self.condition:
            changed, self.changed = self.changed, set()
            return [self._snapshot(sid) for sid in changed]

    def _snapshot(self, shard_id: ShardId) -> dict[str, Any]:
        shard = self.shards[shard_id]
        # value is never written in place, so the snapshot can share it
        return {"id": shard_id, "version": shard.version, "value": shard.value, "base": shard.base,
                "applied": list(shard.applied)}

    def snapshot_all(self) -> list[dict[str, Any]]:
        """Snapshots of every shard."""
        with self.condition:
            return [self._snapshot(sid) for sid in self.shards]

    def meta(self) -> dict[str, Any]:
        """The epoch state of the table (replicated with the shards)."""
        with self.condition:
            return {"epoch": self.epoch, "ended": {rank: dict(c) for rank, c in self.ended.items()}}

    def mark_replicated(self, versions: dict[ShardId, int]) -> None:
        """The backup holds these versions."""
        with self.condition:
            for shard_id, version in versions.items():
                shard = self.shards.get(shard_id)
                if shard is not None:
                    shard.replicated = max(shard.replicated, version)
            self.condition.notify_all()

    def restore(self, snapshots: list[dict[str, Any]], meta: dict[str, Any] | None) -> None:
        """Rebuild shards from the backup's snapshots (after a restart). Rounds pending when
        this server died are lost: the workers send them again (``push(resend=True)``)."""
        with self.condition:
            for snap in snapshots:
                shard = Shard(tuple(snap["id"]), np.array(snap["value"], copy=True), self.num_workers)
                shard.base = snap["base"]
                shard.applied = list(snap["applied"])
                shard.pushed = list(snap["applied"])
                shard.version = shard.replicated = snap["version"]
                self.shards[snap["id"]] = shard
            self.restored = True
            if meta is not None:
                self.epoch = meta["epoch"]
                self.ended = {int(rank): dict(c) for rank, c in meta["ended"].items()}
            self.condition.notify_all()

    def rounds(self, shard_id: ShardId) -> tuple[list[int], list[int]]:
        """``(pushed, applied)`` rounds per rank of a shard."""
        with self.condition:
            shard = self._shard(shard_id, "rounds")
            return list(shard.pushed), list(shard.applied)


__all__ = ["ResendRequest", "Shard", "ShardId", "ShardTable", "most_of_its_buffer"]
