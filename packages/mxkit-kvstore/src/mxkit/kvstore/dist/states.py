"""Optimizer states of a distributed store: gathered from the servers into one file, and back.

A key split across servers has one state per part (the optimizers are elementwise); the
file holds each key's whole state, so it can be loaded into a job with another number of
servers, or into a local store. The format is :mod:`mxkit.kvstore.updater`'s (``.npz``
with a JSON manifest, read with ``allow_pickle=False``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mxkit.kvstore.updater import OptimizerUpdater


def _join(parts: list[Any], shape: tuple[int, ...]) -> Any:
    first = parts[0]
    if isinstance(first, (tuple, list)):
        return type(first)(_join([part[i] for part in parts], shape) for i in range(len(first)))
    if isinstance(first, np.ndarray):
        return np.concatenate([part.reshape(-1) for part in parts]).reshape(shape)
    return first


def _cut(state: Any, start: int, stop: int) -> Any:
    if isinstance(state, (tuple, list)):
        return type(state)(_cut(item, start, stop) for item in state)
    if isinstance(state, np.ndarray):
        return np.ascontiguousarray(state.reshape(-1)[start:stop])
    return state


def gather_states(keys: dict[Any, Any], per_server: list[dict[Any, Any]]) -> dict[Any, Any]:
    """Each key's whole state from the servers' states (``per_server[i]`` is server ``i``'s)."""
    states = {}
    for key, entry in keys.items():
        parts = [per_server[part.server].get(key) for part in entry.parts]
        if any(part is None for part in parts):
            continue  # never updated: no state yet
        states[key] = parts[0] if entry.parts[0].whole else _join(parts, entry.shape)
    return states


def split_states(keys: dict[Any, Any], states: dict[Any, Any], num_servers: int) -> list[dict[Any, Any]]:
    """The states each server keeps (the inverse of :func:`gather_states`)."""
    per_server: list[dict[Any, Any]] = [{} for _ in range(num_servers)]
    for key, state in states.items():
        entry = keys.get(key)
        if entry is None:
            continue
        for part in entry.parts:
            per_server[part.server][key] = state if part.whole else _cut(state, part.start, part.stop)
    return per_server


def write_states(fname: Any, states: dict[Any, Any]) -> None:
    """Write ``states`` (numpy, nested tuples/lists) to ``fname``."""
    holder = OptimizerUpdater.__new__(OptimizerUpdater)
    holder.states = states
    holder.optimizer = None
    holder.save_states(fname, dump_optimizer=False)


def read_states(fname: Any) -> dict[Any, Any]:
    """The states in ``fname`` as numpy (raises ``FormatError`` for another file)."""
    holder = OptimizerUpdater.__new__(OptimizerUpdater)
    holder.optimizer = None
    holder.load_states(fname, {}, per_worker=True)
    return {key: _numpy(state) for key, state in holder.states.items()}


def _numpy(state: Any) -> Any:
    if isinstance(state, (tuple, list)):
        return type(state)(_numpy(item) for item in state)
    return state.asnumpy() if hasattr(state, "asnumpy") else state


__all__ = ["gather_states", "read_states", "split_states", "write_states"]
