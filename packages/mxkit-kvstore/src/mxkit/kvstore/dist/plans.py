"""A worker's side of batched requests: what one call of many keys sends to each server.

A training loop pushes and pulls the same list of keys every step. The first call with a
list works out a :class:`Plan` (kept per list): for each server, the key parts it holds, in
order, where each lies in the key's value and in the server's flat array, and a batch
number that the connection defines on the server once (:mod:`.batches` is the server's
side). Every later call gathers each server's parts into one frame (no per-key header,
check or array on the wire), and scatters the answer's flat array into the out arrays.

Plans serve calls of one CPU array per distinct key, all of one dtype, without gradient
compression or replication (those keep per-part state on the worker), whose keys average at
most :data:`MAX_AVERAGE_BYTES`; others take the per-part path. Batching pays for many small
keys (one header and one round trip instead of one per key); a large key already travels as
one frame of its own, and gathering it with others and merging them as one flat array on the
server only adds copies (a 64 MiB key moved at half the rate through a batch).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
from mxkit.kvstore.dist.batches import MAX_BATCHES
from mxkit.kvstore.dist.frames import Gathered


class ServerShare:
    """One server's part of a :class:`Plan`."""

    __slots__ = ("count", "define", "dtype", "number", "scattered", "server", "slots", "total")

    def __init__(self, server: int, number: int, dtype: np.dtype):
        self.server, self.number, self.dtype = server, number, dtype
        #: per key part: ``(index of the call's key, start, stop in its flat value, offset in the flat array)``
        self.slots: list[tuple[int, int, int, int]] = []
        #: the ``[key, part]`` list that defines the batch on the server
        self.define: list[list[Any]] = []
        self.total = 0
        self.count = 0
        #: ``(targets, [(target piece, start, stop in the answer)])`` of the last :meth:`scatter`
        self.scattered: tuple[list[np.ndarray], list[tuple[np.ndarray, int, int]]] | None = None

    def add(self, index: int, key: Any, part: int, start: int, stop: int) -> None:
        self.slots.append((index, start, stop, self.total))
        self.define.append([key, part])
        self.total += stop - start
        self.count += 1

    def pieces(self, flats: list[np.ndarray]) -> list[np.ndarray]:
        """The parts of the keys' flat values ``flats`` this server holds, in order (views)."""
        return [flats[index][start:stop] for index, start, stop, _ in self.slots]

    def gathered(self, flats: list[np.ndarray], copy: bool) -> Any:
        """This server's flat array of ``flats``: one new array (``copy``), or the pieces to
        send from where they are (:class:`~.frames.Gathered`)."""
        pieces = self.pieces(flats)
        if copy:
            return np.concatenate(pieces) if len(pieces) > 1 else pieces[0].copy()
        return Gathered(pieces, self.dtype)

    def scatter(self, flat: np.ndarray, targets: list[np.ndarray]) -> None:
        """Copy this server's answer ``flat`` into the flat views ``targets`` of the out arrays.

        A loop pulls into the same arrays every step (its list of views is the same object,
        see :meth:`Plan.seen`): their pieces are cut once, and each is filled by an assignment,
        which costs a third of an ``np.copyto`` (same unsafe cast)."""
        scattered = self.scattered
        if scattered is None or scattered[0] is not targets:
            pieces = [(targets[index][start:stop], offset, offset + stop - start)
                      for index, start, stop, offset in self.slots]
            self.scattered = scattered = (targets, pieces)
        for piece, start, stop in scattered[1]:
            piece[...] = flat[start:stop]


class Plan:
    """What a call of ``keys`` sends to each server (see the module's docstring)."""

    __slots__ = ("entries", "keys", "nbytes", "recent", "shares")

    def __init__(self, entries: list[Any], numbers: Any):
        self.entries = entries
        self.keys = [entry.key for entry in entries]
        dtype = entries[0].dtype
        shares: dict[int, ServerShare] = {}
        for index, entry in enumerate(entries):
            for part in entry.parts:
                share = shares.get(part.server)
                if share is None:
                    share = shares[part.server] = ServerShare(part.server, next(numbers), dtype)
                share.add(index, entry.key, part.index, part.start, part.stop)
        self.shares = list(shares.values())
        self.nbytes = sum(entry.size for entry in entries) * dtype.itemsize
        #: the last lists of arrays checked for this plan and their flat views (a training loop
        #: passes the same gradient and weight arrays every step)
        self.recent: tuple[tuple[list[Any], list[np.ndarray]], ...] = ()

    def seen(self, arrays: list[Any]) -> list[np.ndarray] | None:
        """The flat views of ``arrays`` when they are the very arrays of a recent call (an
        NDArray's storage and shape never change: they passed the checks then)."""
        for known, flats in self.recent:
            if len(known) == len(arrays) and all(map(operator.is_, known, arrays)):
                return flats
        return None

    def remember(self, arrays: list[Any]) -> list[np.ndarray]:
        """Keep checked ``arrays`` (a copy of the list) and their flat views; the views."""
        flats = flat_views(arrays)
        self.recent = ((list(arrays), flats), *self.recent[:1])
        return flats


class Plans:
    """A worker's plans, by list of keys (at most :data:`~.batches.MAX_BATCHES` batch numbers
    in use: when they run out, every plan is forgotten and numbers are given out again; a
    connection defines a number again when another share uses it)."""

    def __init__(self) -> None:
        self._plans: dict[tuple[Any, ...], Plan] = {}
        self._next = 0

    def _numbers(self) -> Any:
        while True:
            number = self._next
            self._next += 1
            yield number

    def known(self, keys: list[Any]) -> Plan | None:
        """The plan made for the list ``keys`` before, if any."""
        return self._plans.get(tuple(keys))

    def plan(self, checked: list[tuple[Any, list[Any]]]) -> Plan | None:
        """The plan of ``checked`` (``[(Key, arrays)]``), or None when a call of them takes the
        per-part path."""
        keys = tuple(entry.key for entry, _ in checked)
        plan = self._plans.get(keys)
        if plan is not None:
            return plan
        entries = [entry for entry, _ in checked]
        dtype = entries[0].dtype
        if len(set(keys)) != len(keys) or any(entry.dtype != dtype for entry in entries):
            return None
        servers = len({part.server for entry in entries for part in entry.parts})
        if self._next + servers > MAX_BATCHES:  # out of numbers: start again (a number is defined again
            self._plans.clear()                  # on a connection when a new share uses it)
            self._next = 0
        plan = self._plans[keys] = Plan(entries, self._numbers())
        return plan


#: the largest average bytes per key of a call that travels as a batch (see the module's docstring)
MAX_AVERAGE_BYTES = 1 << 20


def single_cpu_arrays(checked: list[tuple[Any, list[Any]]]) -> bool:
    """Whether each key of ``checked`` comes with one CPU NDArray held as numpy (what a plan
    gathers from and scatters into)."""
    for _, arrays in checked:
        if len(arrays) != 1:
            return False
        array = arrays[0]
        storage = array.storage
        if type(storage) is not np.ndarray or not storage.flags.c_contiguous or array.context.device_type != "cpu":
            return False
    return True


def worth_batching(checked: list[tuple[Any, list[Any]]]) -> bool:
    """Whether a call of ``checked`` (key, arrays) should travel as a batch: one CPU array per
    key (:func:`single_cpu_arrays`) and keys small enough on average (:data:`MAX_AVERAGE_BYTES`)."""
    if not checked or not single_cpu_arrays(checked):
        return False
    return sum(arrays[0].storage.nbytes for _, arrays in checked) <= MAX_AVERAGE_BYTES * len(checked)


def flat_views(arrays: list[Any]) -> list[np.ndarray]:
    """Each NDArray's numpy storage, flat (a view: CPU storage is C-contiguous)."""
    return [array.storage.reshape(-1) for array in arrays]


__all__ = ["MAX_AVERAGE_BYTES", "Plan", "Plans", "ServerShare", "flat_views", "single_cpu_arrays", "worth_batching"]
