"""What a worker's store moves between NDArrays and numpy, and what it knows of its keys."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from mxkit.core.errors import KVStoreError
from mxkit.kvstore.dist.sharding import Part

#: the environment variables ``mxkit launch`` sets for each worker, by setting
ENV = {"rank": "MXKIT_RANK", "num_workers": "MXKIT_NUM_WORKERS", "namespace": "MXKIT_JOB_NAMESPACE",
       "address": "MXKIT_RAY_ADDRESS"}


class Key:
    """What a worker knows of a key: its shape, dtype and parts."""

    __slots__ = ("dtype", "key", "parts", "routes", "shape", "size", "whole")

    def __init__(self, key: Any, shape: tuple[int, ...], dtype: Any, parts: list[Part]):
        self.key, self.shape, self.dtype, self.parts = key, shape, np.dtype(dtype), parts
        self.size = int(np.prod(shape, dtype=np.int64))
        #: whether the key lives whole on one server (not split into parts)
        self.whole = len(parts) == 1 and parts[0].whole
        #: per part, ``(server, shard_id, the shape its server stores)``: worked out once, used
        #: by every push and pull (the key's shape for a whole key, flat for a part)
        self.routes = tuple((part.server, (key, part.index), shape if part.whole else (part.size,))
                            for part in parts)


def int_setting(name: str, value: Any, minimum: int) -> int:
    """``value``, or the environment variable of setting ``name``, as an int >= ``minimum``."""
    source = "argument"
    if value is None:
        value, source = os.environ.get(ENV[name]), f"${ENV[name]}"
        if value is None:
            raise KVStoreError(f"a distributed KVStore needs its {name}: run the script under 'mxkit launch' "
                               f"(which sets {ENV[name]}), or pass {name}= to mx.kv.create")
    try:
        number = int(value)
        if isinstance(value, bool) or isinstance(value, float) or number < minimum:
            raise ValueError(value)
    except (TypeError, ValueError):
        raise KVStoreError(f"{name} must be an int >= {minimum}, got {value!r} (from {source})") from None
    return number


def host_data(array: Any) -> np.ndarray:
    """The NDArray's data on the host, once its pending writes are done (CPU: its own storage)."""
    array.wait_to_read()
    data = array.storage
    return data if isinstance(data, np.ndarray) else array.asnumpy()


#: from this many arrays on, :func:`wait_to_read_all` waits for all of them through one engine operation
WAIT_TOGETHER_MIN = 8


def wait_to_read_all(arrays: list[Any], idle: bool = False) -> None:
    """Wait until the pending writes of every array are done (re-raising an error one holds).

    Many arrays (a push of every key of a model) are waited for through one engine
    operation that reads them all, instead of one wait each: an operation inherits the
    error of an array it reads, so a failed write still surfaces here. When the engine has
    no operation pending, or ``idle`` says none of them writes the arrays, each array is
    asked instead (a wait that finds nothing to wait for costs far less than an operation's
    round trip through an engine thread).
    """
    from mxkit.ndarray.invoke import engine

    if idle or len(arrays) < WAIT_TOGETHER_MIN or getattr(engine(), "pending", None) == 0:
        for array in arrays:
            array.wait_to_read()
        return
    from mxkit.core.context import cpu
    from mxkit.ndarray import NDArray
    from mxkit.ndarray.invoke import push_raw

    # the operation only orders: it runs on the host whatever device the arrays are on
    marker = NDArray.from_storage(np.zeros(1, dtype=np.uint8), cpu())
    push_raw(_nothing, arrays, [marker], marker.context, "kvstore.wait_to_read_all", overwrites=True)
    marker.wait_to_read()


def _nothing() -> None:
    pass


class SplitValue:
    """A split key's pulled value as its servers answered it, part by part: copied into a
    target part by part, never assembled into one array first (the key's bytes are copied
    once on the way to the target, not twice)."""

    __slots__ = ("dtype", "parts", "shape", "size")

    def __init__(self, entry: Key, found: dict[tuple[Any, int], np.ndarray]):
        self.shape, self.dtype, self.size = entry.shape, entry.dtype, entry.size
        #: ``(start, stop, value)`` of each part, positions in the flat key
        self.parts = [(part.start, part.stop, found[(entry.key, part.index)]) for part in entry.parts]

    def copy_into(self, data: np.ndarray) -> None:
        """Write the value into ``data`` (an array of the key's shape, any dtype)."""
        if not data.flags.c_contiguous:
            np.copyto(data, self.whole(), casting="unsafe")
            return
        flat = data.reshape(-1)  # (a view: data is contiguous)
        for start, stop, value in self.parts:
            np.copyto(flat[start:stop], value.reshape(-1), casting="unsafe")

    def whole(self) -> np.ndarray:
        """The value as one array of the key's shape and dtype."""
        flat = np.empty(self.size, dtype=self.dtype)
        for start, stop, value in self.parts:
            flat[start:stop] = value.reshape(-1)
        return flat.reshape(self.shape)


def pulled_value(entry: Key, found: dict[tuple[Any, int], np.ndarray]) -> np.ndarray | SplitValue:
    """The value of ``entry`` among the parts a pull found (:func:`read_pull_answers`)."""
    return found[(entry.key, 0)] if entry.whole else SplitValue(entry, found)


def copy_into(data: np.ndarray, value: np.ndarray | SplitValue) -> None:
    """Write a :func:`pulled_value` into ``data`` (an array of the key's shape, any dtype)."""
    if type(value) is SplitValue:
        value.copy_into(data)
    else:
        np.copyto(data, value.reshape(data.shape), casting="unsafe")


def write_all(jobs: list[tuple[np.ndarray | SplitValue, list[Any]]]) -> None:
    """Copy each value (an array or a :class:`SplitValue`) into its targets: one engine
    operation for all CPU targets."""
    from mxkit.ndarray.invoke import push_raw

    work, targets, others = [], [], []
    for value, outs in jobs:
        for target in outs:
            data = target.storage
            if isinstance(data, np.ndarray) and target.context.device_type == "cpu":
                work.append((value, data))
                targets.append(target)
            else:
                others.append((value, target))
    if targets:

        def copy_all() -> None:
            for value, data in work:
                copy_into(data, value)

        # the copy writes every element of each target (overwrites: a pull replaces the value)
        push_raw(copy_all, [], targets, targets[0].context, "kvstore.pull", overwrites=True)
    for value, target in others:
        target[:] = value.whole() if type(value) is SplitValue else value


def read_pull_answers(batches: dict[int, list[Any]], answers: list[Any],
                      ) -> tuple[dict[tuple[Any, int], np.ndarray], dict[Any, tuple[int, int]]]:
    """The parts and clocks that servers answered to pulls, as ``(part values by shard id,
    clock by key)``; ``batches`` lists each server's requested ``(shard id, ...)`` items in
    the order of ``answers``. A server that answered another number of parts is an error."""
    found: dict[tuple[Any, int], np.ndarray] = {}
    clocks: dict[Any, tuple[int, int]] = {}
    for items, (values, part_clocks) in zip(batches.values(), answers, strict=True):
        if len(values) != len(items) or len(part_clocks) != len(items):
            raise KVStoreError(f"a server answered a pull of {len(items)} parts with {len(values)} values and "
                               f"{len(part_clocks)} clocks")
        for (shard_id, _), part_value, clock in zip(items, values, part_clocks):
            found[shard_id] = part_value
            clocks[shard_id[0]] = clock
    return found, clocks


__all__ = ["ENV", "Key", "SplitValue", "WAIT_TOGETHER_MIN", "copy_into", "host_data", "int_setting",
           "pulled_value", "read_pull_answers", "wait_to_read_all", "write_all"]

