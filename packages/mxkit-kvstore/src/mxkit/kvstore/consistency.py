"""Consistency models of the KVStore and the coordinator that enforces them across workers.

A consistency model is a plugin (hook ``mxkit_consistency_models``) that decides, per key,
when the contributions of the workers are applied to the stored value and when a pull may
be answered. Its protocol (``ConsistencySpec(model=cls)``, made as
``cls(num_workers=N, **options)``):

``ready_to_apply(pushes_received) -> bool``
    Called with the number of workers that contributed to the oldest pending round of a
    key; ``True`` applies that round's sum (through the updater, or as the new value).
``pull_ready(worker_round, slowest_round) -> bool`` (optional; missing means always)
    Whether a pull of a worker that has pushed ``worker_round`` times to the key may be
    answered when every worker has at least ``slowest_round`` pushes applied.

A worker's n-th push to a key belongs to round n, so rounds never mix pushes of one worker.
:class:`RoundCoordinator` runs this protocol for any number of workers (threads here; the
distributed store's servers run it across machines).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from mxkit.core.errors import KVStoreError


def _check_workers(num_workers: Any) -> int:
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise KVStoreError(f"a consistency model needs num_workers >= 1, got {num_workers!r}")
    return num_workers


def _no_options(name: str, options: dict[str, Any], allowed: tuple[str, ...] = ()) -> None:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise KVStoreError(f"consistency model {name!r} got unknown options {unknown}; it takes "
                           f"{['num_workers', *allowed]}")


class SequentialConsistency:
    """Every contribution of a round is merged before the update; pulls see the updated value.

    A pull after a worker's round ``r`` waits until round ``r`` is applied, and sees exactly
    the value after round ``r`` (MXNet's ``dist_sync``).
    """

    name = "sequential"

    def __init__(self, num_workers: int = 1, **options: Any):
        _no_options(self.name, options)
        self.num_workers = _check_workers(num_workers)

    def ready_to_apply(self, pushes_received: int) -> bool:
        """Apply a round once every worker contributed."""
        return pushes_received >= self.num_workers

    def pull_ready(self, worker_round: int, slowest_round: int) -> bool:
        """Answer once the worker's own last round is applied."""
        return slowest_round >= worker_round


class EventualConsistency:
    """Each push is applied on arrival; pulls return whatever is stored (MXNet's ``dist_async``)."""

    name = "eventual"

    def __init__(self, num_workers: int = 1, **options: Any):
        _no_options(self.name, options)
        self.num_workers = _check_workers(num_workers)

    def ready_to_apply(self, pushes_received: int) -> bool:
        """Apply every contribution at once."""
        return pushes_received >= 1

    def pull_ready(self, worker_round: int, slowest_round: int) -> bool:
        """Never wait."""
        return True


class BoundedDelayConsistency:
    """Pushes are applied on arrival, but no worker reads a value more than ``tau`` rounds stale.

    A pull of a worker at round ``r`` waits until every worker has ``r - tau`` pushes
    applied (stale synchronous parallel; ``tau = 0`` makes every pull see every worker's
    contribution up to the puller's own round).

    Parameters
    ----------
    tau : int
        The staleness bound, ``>= 0`` (default 1).
    """

    name = "bounded_delay"

    def __init__(self, num_workers: int = 1, tau: Any = 1, **options: Any):
        _no_options(self.name, options, ("tau",))
        self.num_workers = _check_workers(num_workers)
        if isinstance(tau, bool) or not isinstance(tau, int) or tau < 0:
            raise KVStoreError(f"consistency model 'bounded_delay' needs an int tau >= 0, got {tau!r}")
        self.tau = tau

    def ready_to_apply(self, pushes_received: int) -> bool:
        """Apply every contribution at once."""
        return pushes_received >= 1

    def pull_ready(self, worker_round: int, slowest_round: int) -> bool:
        """Answer once the slowest worker is at most ``tau`` rounds behind."""
        return worker_round - slowest_round <= self.tau


BUILTIN_MODELS = {
    "sequential": SequentialConsistency,
    "eventual": EventualConsistency,
    "bounded_delay": BoundedDelayConsistency,
}


def make_model(name: str | None = None, num_workers: int = 1, **options: Any) -> Any:
    """Instantiate the consistency model ``name`` (default: config ``consistency``).

    Raises
    ------
    UnknownPluginError
        If no plugin provides ``name``; the message lists the available models.
    """
    from mxkit.core.plugins import get_consistency_model

    spec = get_consistency_model(name)
    return spec.model(num_workers=num_workers, **options)


class _KeyState:
    __slots__ = ("applied", "condition", "pending", "pushed", "value")

    def __init__(self, value: Any, num_workers: int, lock: threading.Lock):
        self.value = value
        self.pushed = [0] * num_workers  # pushes per worker (its current round)
        self.applied = [0] * num_workers  # pushes per worker included in value
        self.pending: dict[int, tuple[Any, list[int]]] = {}  # round -> (sum, contributors)
        self.condition = threading.Condition(lock)


class RoundCoordinator:
    """Applies the pushes of ``num_workers`` workers to stored values as a model says.

    Values are arrays that support ``copy()``, ``+=`` and ``[...] =`` (numpy arrays,
    NDArrays). Thread-safe: each worker calls :meth:`push` and :meth:`pull` from its own
    thread; a pull blocks while the model's ``pull_ready`` says no.

    Parameters
    ----------
    model : consistency model
        An instance following the protocol of this module.
    num_workers : int
        The workers that push.
    updater : callable, optional
        ``updater(key, merged, stored)`` merges a round into the stored value in place;
        without one the round's sum replaces the value.
    """

    def __init__(self, model: Any, num_workers: int,
                 updater: Callable[[Any, Any, Any], None] | None = None):
        self.model = model
        self.num_workers = _check_workers(num_workers)
        self.updater = updater
        self._lock = threading.Lock()
        self._keys: dict[Any, _KeyState] = {}

    def init(self, key: Any, value: Any) -> None:
        """Store ``value`` (copied) under ``key``."""
        with self._lock:
            if key in self._keys:
                raise KVStoreError(f"key {key!r} is already initialised; init each key once")
            self._keys[key] = _KeyState(value.copy(), self.num_workers, self._lock)

    def _state(self, key: Any, what: str) -> _KeyState:
        state = self._keys.get(key)
        if state is None:
            raise KVStoreError(f"{what} of key {key!r} before init; call init({key!r}, value) first")
        return state

    def _check_worker(self, worker: int) -> None:
        if not 0 <= worker < self.num_workers:
            raise KVStoreError(f"worker {worker!r} is out of range; workers are 0..{self.num_workers - 1}")

    def push(self, key: Any, worker: int, value: Any) -> None:
        """Contribute ``value`` to ``key`` for ``worker``'s next round."""
        self._check_worker(worker)
        with self._lock:
            state = self._state(key, "push")
            round_index = state.pushed[worker]
            state.pushed[worker] += 1
            entry = state.pending.get(round_index)
            if entry is None:
                state.pending[round_index] = (value.copy(), [worker])
            else:
                merged = entry[0]
                merged += value  # in place for numpy arrays and NDArrays alike
                entry[1].append(worker)
            self._apply_ready_rounds(key, state)
            state.condition.notify_all()

    def _apply_ready_rounds(self, key: Any, state: _KeyState) -> None:
        # rounds apply oldest first, so a later round never overtakes an earlier one
        while state.pending:
            oldest = min(state.pending)
            merged, contributors = state.pending[oldest]
            if not self.model.ready_to_apply(len(contributors)):
                return
            del state.pending[oldest]
            if self.updater is not None:
                self.updater(key, merged, state.value)
            else:
                state.value[...] = merged
            for worker in contributors:
                state.applied[worker] += 1

    def pull(self, key: Any, worker: int, timeout: float | None = None) -> Any:
        """A copy of ``key``'s value once the model lets ``worker`` read it.

        Raises
        ------
        KVStoreError
            If ``timeout`` seconds pass first (the message shows every worker's rounds).
        """
        self._check_worker(worker)
        pull_ready = getattr(self.model, "pull_ready", None)
        with self._lock:
            state = self._state(key, "pull")

            def ready() -> bool:
                return pull_ready is None or bool(pull_ready(state.pushed[worker], min(state.applied)))

            if not state.condition.wait_for(ready, timeout):
                raise KVStoreError(f"pull of key {key!r} by worker {worker} timed out after {timeout} s: "
                                   f"pushed rounds {state.pushed}, applied {state.applied}")
            return state.value.copy()

    def rounds(self, key: Any) -> tuple[list[int], list[int]]:
        """``(pushed, applied)`` rounds per worker of ``key``."""
        with self._lock:
            state = self._state(key, "rounds")
            return list(state.pushed), list(state.applied)


__all__ = [
    "BUILTIN_MODELS",
    "BoundedDelayConsistency",
    "EventualConsistency",
    "RoundCoordinator",
    "SequentialConsistency",
    "make_model",
]
