"""A server's side of batched requests: many key parts pushed and pulled as one flat array.

A worker that pushes and pulls the same keys every step (a training loop) describes the
list once per connection, a *batch*: its ``(key, part)`` shards on this server, in order
(:mod:`.plans` is the worker's side). Each later request names the batch by number and
carries one int64 array of rounds and one flat array with every shard's value one after
another, as MXNet's ps-lite sends one message per server with every key's slice.

:class:`Batch` knows where each shard lies in the flat array. A push whose shards are in
step (one round for all, nothing else pending on them, no rank in a barrier, no
replication, no compression) is merged with one numpy operation on the whole array and its
round clocks are moved in one tight loop: the per-key work is a few list operations, not a
numpy call each. Every other case goes through :class:`~.rounds.ShardTable`'s per-shard
path with views of the flat array, with the same results bit for bit (each element sees
the same additions in the same order; a test compares the two). A pull of a batch answers
with one flat array, the stored array itself when the last round stored the batch's
values as views of it.
"""

from __future__ import annotations

import operator
import time
from typing import Any

import numpy as np
from mxkit.core.errors import KVStoreError
from mxkit.kvstore.dist.frames import ChannelError
from mxkit.kvstore.dist.rounds import Shard, ShardTable, most_of_its_buffer

#: batches one connection may have defined at once (numbers 0..MAX_BATCHES-1)
MAX_BATCHES = 256
#: distinct batches a server keeps for connections to share (see :func:`define`)
MAX_SHARED_BATCHES = 1024
#: rounds of a batch that may be in progress at once (older records are dropped: the
#: per-shard entries stay authoritative, the record only speeds the next push up)
MAX_OPEN_ROUNDS = 8


class Batch:
    """The shards of one batch on one server, and where each lies in its flat array."""

    __slots__ = ("cuts", "dtype", "open", "served", "shards", "total")

    def __init__(self, shards: list[Shard]):
        self.shards = shards
        self.dtype = shards[0].value.dtype
        #: per shard: its slice of the flat array, and its shape when the slice needs a reshape
        #: (None for a 1-D shard: the slice is the view; a reshape costs as much again)
        self.cuts: list[tuple[slice, tuple[int, ...] | None]] = []
        offset = 0
        for shard in shards:
            size, shape = shard.value.size, shard.value.shape
            self.cuts.append((slice(offset, offset + size), None if shape == (size,) else shape))
            offset += size
        #: elements of the flat array
        self.total = offset
        #: rounds in progress: round -> (their flat sum, each shard's pending entry)
        self.open: dict[int, tuple[np.ndarray, list[list[Any]]]] = {}
        #: ``(flat, views)`` whose views the last round stored as the shards' values
        self.served: tuple[np.ndarray, list[np.ndarray]] | None = None

    def views(self, flat: np.ndarray) -> list[np.ndarray]:
        """Each shard's value in ``flat`` (views, in the shards' shapes)."""
        return [flat[cut] if shape is None else flat[cut].reshape(shape) for cut, shape in self.cuts]


def define(table: ShardTable, pairs: Any) -> Batch:
    """The :class:`Batch` of a request's ``define``: a list of ``[key, part]``.

    Raises
    ------
    ChannelError
        If the list is malformed, longer than the shards this server holds, names a shard
        twice or mixes dtypes.
    KVStoreError
        If a shard was never initialised here.
    """
    held = len(table.shards)
    if type(pairs) is not list or not pairs:
        raise ChannelError(f"malformed request: 'define' is a non-empty list of [key, part], got {pairs!r:.100}")
    if len(pairs) > held:
        raise ChannelError(f"malformed request: a batch of {len(pairs)} key parts, but this server holds {held}")
    shards, seen = [], set()
    for pair in pairs:
        if type(pair) is not list or len(pair) != 2 or (type(pair[0]) is not int and type(pair[0]) is not str) \
                or type(pair[1]) is not int or pair[1] < 0:
            raise ChannelError(f"malformed request: an item of 'define' is [key (int or str), part >= 0], got "
                               f"{pair!r:.100}")
        shard_id = (pair[0], pair[1])
        if shard_id in seen:
            raise ChannelError(f"malformed request: a batch names part {pair[1]} of key {pair[0]!r:.50} twice")
        seen.add(shard_id)
        shard = table.shards.get(shard_id)
        if shard is None:
            raise KVStoreError(f"push of key {pair[0]!r} before init; call kv.init({pair[0]!r}, value) on every "
                               f"worker first")
        shards.append(shard)
    dtype = shards[0].value.dtype
    for shard in shards:
        if shard.value.dtype != dtype:
            raise ChannelError(f"malformed request: a batch's key parts share one dtype; key {shard.key!r:.50} is "
                               f"{shard.value.dtype}, key {shards[0].key!r:.50} {dtype}")
    return _shared(table, shards)


def _shared(table: ShardTable, shards: list[Shard]) -> Batch:
    """The one :class:`Batch` of these shards, in this order, that every connection defining
    them uses: a round's record (:attr:`Batch.open`) is begun by one worker's push and found
    by the others', so each later push of the round is one merge too (a batch per connection
    sent every push but the first down the per-shard path). A batch whose shards were
    replaced since (a key initialised again, states restored) is made afresh."""
    signature = tuple(shard.id for shard in shards)
    with table.condition:  # (connections define batches from their own threads)
        known = table.batches.get(signature)
        if known is not None and all(mine is theirs for mine, theirs in zip(known.shards, shards)):
            return known
        if len(table.batches) >= MAX_SHARED_BATCHES:
            table.batches.clear()  # (batches in use stay correct: a push just takes the per-shard path)
        batch = table.batches[signature] = Batch(shards)
        return batch


def push(table: ShardTable, rank: int, epoch: int, batch: Batch, rounds: np.ndarray, flat: np.ndarray,
         owned: bool) -> None:
    """``rank``'s push of ``flat`` (the batch's values) as rounds ``rounds`` (one per shard)."""
    with table.pushing(rank, epoch):
        if not _push_in_step(table, rank, batch, rounds, flat, owned):
            items = [(shard.id, round_index, value)
                     for shard, round_index, value in zip(batch.shards, rounds.tolist(), batch.views(flat))]
            table.push_locked(rank, epoch, items, False, owned)


def _push_in_step(table: ShardTable, rank: int, batch: Batch, rounds: np.ndarray, flat: np.ndarray,
                  owned: bool) -> bool:
    """The push of a batch whose shards are in step, as one merge; False (nothing changed)
    when they are not, for the per-shard path to take."""
    if table.decode is not None or table.replicating or table.ended or table.model is None:
        return False
    local = int(rounds[0])
    if rounds.size > 1 and not (rounds == local).all():
        return False
    shards = batch.shards
    round_index = shards[0].base + local
    ready = table.model.ready_to_apply
    record = batch.open.get(round_index)
    if record is None:
        # the round's first push: nothing pending on any shard, this rank's earlier rounds applied
        base = shards[0].base
        for shard in shards:
            if shard.pending or shard.base != base or shard.applied[rank] != round_index:
                return False
        adopt = owned and flat.flags.c_contiguous and flat.flags.writeable and most_of_its_buffer(flat)
        merged = flat if adopt else flat.copy()
        views = batch.views(merged)
        for shard in shards:
            pushed = shard.pushed
            if pushed[rank] <= round_index:
                pushed[rank] = round_index + 1
        if ready(1):  # one worker, or a model that applies each push: the round is complete
            _apply(table, batch, merged, views, [[rank] for _ in shards])
            return True
        entries = []
        for shard, view in zip(shards, views):
            entry = [view, [rank]]
            shard.pending[round_index] = entry
            entries.append(entry)
        if len(batch.open) >= MAX_OPEN_ROUNDS:
            batch.open.clear()
        batch.open[round_index] = (merged, entries)
        return True
    # a later push of a round in progress: every shard's entry is still the batch's, with the same ranks
    merged, entries = record
    first = entries[0][1]
    if rank in first:
        return False  # (the per-shard path says what is wrong)
    # whether the round, once complete, is each shard's next: nothing else pending on it and
    # every contributor's earlier rounds applied (else the per-shard rules order the rounds)
    in_order = True
    for shard, entry in zip(shards, entries):
        applied, pending = shard.applied, shard.pending
        if pending.get(round_index) is not entry or entry[1] != first or applied[rank] != round_index:
            del batch.open[round_index]
            return False
        if in_order and len(pending) != 1:
            in_order = False
        for earlier in first:
            if applied[earlier] != round_index:
                in_order = False
    np.add(merged, flat, out=merged, casting="unsafe")  # what the per-shard path adds, element for element
    for shard, entry in zip(shards, entries):
        entry[1].append(rank)
        pushed = shard.pushed
        if pushed[rank] <= round_index:
            pushed[rank] = round_index + 1
    contributors = entries[0][1]
    if not ready(len(contributors)):
        return True
    del batch.open[round_index]
    if in_order:
        for shard in shards:
            del shard.pending[round_index]
        _apply(table, batch, merged, [entry[0] for entry in entries], [entry[1] for entry in entries])
    else:  # a contributor's earlier round is pending somewhere: the per-shard rules decide
        for shard in shards:
            table._apply_ready_rounds(shard)
    return True


def _apply(table: ShardTable, batch: Batch, merged: np.ndarray, views: list[np.ndarray],
           contributors: list[list[int]]) -> None:
    """Make each shard's merged round its value (through the updater when there is one), as
    :meth:`ShardTable._apply_ready_rounds` and :meth:`ShardTable._apply_together` do."""
    shards = batch.shards
    if table.apply_many is not None and len(shards) > 1:
        table._apply_together([(shard, [view, ranks]) for shard, view, ranks in zip(shards, views, contributors)])
        batch.served = None
        return
    apply = table.apply
    for shard, view, ranks in zip(shards, views, contributors):
        shard.value = apply(shard.key, view, shard.value, ranks) if apply is not None else view
        applied = shard.applied
        for rank in ranks:
            applied[rank] += 1
        shard.version += 1  # (ShardTable._changed without replication, which this path excludes)
    table.changes += 1
    batch.served = None if apply is not None else (merged, views)


def pull(table: ShardTable, rank: int, epoch: int, batch: Batch, pulled: np.ndarray, timeout: float
         ) -> tuple[list[np.ndarray], list[tuple[int, int]]]:
    """The batch's values once ``rank`` may read them (``pulled``: the rounds it pushed to
    each shard), and the clocks (see :func:`flat_values` for the answer's array)."""
    table._check_rank(rank)
    shards = batch.shards
    locals_ = pulled.tolist()
    with table.condition:
        table._advance(rank, epoch)
        deadline = time.monotonic() + timeout
        # the common case (no replication, restart or rank in a barrier): the batch is read
        # at once or once the pushes it waits for are in, checked as a whole on each wake-up
        while not (table.replicating or table.restored or table.ended):
            clocks = _readable_clocks(table, rank, shards, locals_)
            if clocks is not None:
                return [shard.value for shard in shards], clocks  # never written in place: no copies
            remaining = deadline - time.monotonic()
            if remaining <= 0 or table.epoch != epoch:
                break  # (the per-shard path names what it waited for)
            table.condition.wait(remaining)
        return table.pull_locked(rank, epoch, [(shard.id, local) for shard, local in zip(shards, locals_)], timeout,
                                 deadline)


def _readable_clocks(table: ShardTable, rank: int, shards: list[Shard], locals_: list[int]
                     ) -> list[tuple[int, int]] | None:
    """Per shard, ``(worker_round, slowest_round)`` when ``rank`` may read every shard now
    (the rules of :meth:`ShardTable.pull_locked` without a rank in a barrier), else None."""
    pull_ready = getattr(table.model, "pull_ready", None)
    clocks: list[tuple[int, int]] = []
    # shards of a batch mostly share their clocks: one equal to the shard before it has its answer
    last_applied: list[int] | None = None
    last_base = last_local = -1
    clock = (0, 0)
    for shard, local in zip(shards, locals_):
        applied, base = shard.applied, shard.base
        if not (local == last_local and base == last_base and applied == last_applied):
            worker_round = base + local
            slowest = min(applied)
            if applied[rank] < worker_round or not (pull_ready is None or pull_ready(worker_round, slowest)):
                return None
            last_applied, last_base, last_local, clock = applied, base, local, (worker_round, slowest)
        clocks.append(clock)
    return clocks


def flat_values(batch: Batch, values: list[np.ndarray]) -> np.ndarray:
    """The answer's flat array of :func:`pull`'s values: the array a round stored them in
    when they are its views, the one value itself, or else their concatenation."""
    served = batch.served
    if served is not None and all(map(operator.is_, values, served[1])):
        return served[0]
    if len(values) == 1 and values[0].flags.c_contiguous:
        return values[0].reshape(-1).astype(batch.dtype, copy=False)
    return np.concatenate(values, axis=None).astype(batch.dtype, copy=False)


__all__ = ["Batch", "MAX_BATCHES", "MAX_OPEN_ROUNDS", "define", "flat_values", "pull", "push"]
