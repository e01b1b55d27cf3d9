"""The :class:`Updater` (what a KVStore calls to apply an optimizer) and its saved states.

MXNet pickles updater states; mxkit writes them as an ``.npz`` archive whose arrays are
the states and whose ``__manifest__`` entry is JSON describing the nesting (``None``,
arrays, tuples, lists), the parameter keys, and optionally the optimizer's description and
update counts. Reading uses ``allow_pickle=False``, so a states file cannot run code.
"""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import numpy as np
from mxkit.core.errors import FormatError
from mxkit.train._registry import TrainingValueError
from mxkit.train.optimizer.base import Optimizer, loads

_FORMAT = "mxkit-updater-states"
_MANIFEST = "__manifest__"


class Updater:
    """Applies an optimizer to ``(index, grad, weight)`` triples, keeping one state per index.

    Parameters
    ----------
    optimizer : Optimizer
        The optimizer to apply.
    """

    def __init__(self, optimizer: Optimizer) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TrainingValueError(f"Updater needs an Optimizer, got {type(optimizer).__name__} {optimizer!r}")
        self.optimizer = optimizer
        self.states: dict[Any, Any] = {}
        self.states_synced: dict[Any, bool] = {}
        self.aggregate_updates = optimizer.aggregate_num > 0

    def __call__(self, index: Any, grad: Any, weight: Any) -> None:
        """Update ``weight`` from ``grad`` (or lists of them with a list of indices, as MXNet's
        ``_update_params`` passes one device's parameters: then built-in optimizers update
        up to ``optimizer.aggregate_num`` weights in one engine operation)."""
        if isinstance(index, (list, tuple)):
            indices, grads, weights = list(index), list(grad), list(weight)
        else:
            indices, grads, weights = [index], [grad], [weight]
        if weights:
            self.optimizer._set_current_context(weights[0].context.device_id)
        for i, idx in enumerate(indices):
            if isinstance(idx, bytes):
                idx = indices[i] = idx.decode()
            if idx not in self.states:
                self.states[idx] = self.optimizer.create_state_multi_precision(idx, weights[i])
                self.states_synced[idx] = True
            elif not self.states_synced[idx]:
                self.states[idx] = self.sync_state_context(self.states[idx], weights[i].context)
                self.states_synced[idx] = True
        size = self.optimizer.aggregate_num
        if size > 1 and len(indices) > 1:
            # one aggregated update (one engine operation per device) per chunk of weights
            for start in range(0, len(indices), size):
                chunk = indices[start:start + size]
                self.optimizer.update_multi_precision(chunk, weights[start:start + size], grads[start:start + size],
                                                      [self.states[idx] for idx in chunk])
            return
        for idx, w, g in zip(indices, weights, grads):
            self.optimizer.update_multi_precision(idx, w, g, self.states[idx])

    def sync_state_context(self, state: Any, context: Any) -> Any:
        """``state`` with every array moved to ``context``."""
        from mxkit.ndarray import NDArray

        if isinstance(state, NDArray):
            return state.as_in_context(context)
        if isinstance(state, (tuple, list)):
            synced = [self.sync_state_context(item, context) for item in state]
            return tuple(synced) if isinstance(state, tuple) else synced
        return state

    def get_states(self, dump_optimizer: bool = False) -> bytes:
        """The states as bytes (an ``.npz`` archive; see the module docstring).

        Parameters
        ----------
        dump_optimizer : bool, default False
            Also save the optimizer's description and update counts, so that
            :meth:`set_states` restores the optimizer too.
        """
        arrays: dict[str, np.ndarray] = {}
        entries = [[_encode_key(key), _encode_tree(state, arrays)] for key, state in self.states.items()]
        manifest: dict[str, Any] = {"format": _FORMAT, "version": 1, "states": entries}
        if dump_optimizer:
            opt = self.optimizer
            manifest["optimizer"] = opt.describe()
            manifest["num_update"] = opt.num_update
            manifest["update_counts"] = [[device, [[_encode_key(k), n] for k, n in counts.items()]]
                                         for device, counts in opt._all_index_update_counts.items()]
            manifest["runtime"] = {name: getattr(opt, name) for name in opt.runtime_attributes}
        arrays[_MANIFEST] = np.frombuffer(json.dumps(manifest).encode(), dtype=np.uint8)
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        return buffer.getvalue()

    def set_states(self, states: bytes) -> None:
        """Restore what :meth:`get_states` returned (and the optimizer, if it was saved).

        Raises
        ------
        FormatError
            When ``states`` is not an mxkit states archive (MXNet's pickled states are
            refused: unpickling can run arbitrary code).
        """
        manifest, arrays = _read_archive(states)
        self.states = {_decode_key(key): _decode_tree(tree, arrays) for key, tree in manifest["states"]}
        self.states_synced = dict.fromkeys(self.states, False)
        if "optimizer" in manifest:
            optimizer = loads(json.dumps(manifest["optimizer"]))
            optimizer.num_update = int(manifest.get("num_update", optimizer.num_update))
            for name, value in manifest.get("runtime", {}).items():
                if name in optimizer.runtime_attributes:
                    setattr(optimizer, name, value)
            counts = {int(device): {_decode_key(k): int(n) for k, n in pairs}
                      for device, pairs in manifest.get("update_counts", [])}
            if counts:
                optimizer._all_index_update_counts = counts
                optimizer._index_update_count = counts.setdefault(0, {})
            self.optimizer = optimizer


def get_updater(optimizer: Optimizer) -> Updater:
    """An :class:`Updater` applying ``optimizer`` (what ``kv.set_updater`` takes)."""
    return Updater(optimizer)


def _encode_key(key: Any) -> list[Any]:
    if isinstance(key, (bool, np.bool_)) or not isinstance(key, (int, np.integer, str)):
        raise TrainingValueError(f"updater state keys must be ints or strings to be saved, got {key!r}")
    return ["int", int(key)] if isinstance(key, (int, np.integer)) else ["str", key]


def _decode_key(encoded: Any) -> Any:
    kind, value = encoded
    return int(value) if kind == "int" else str(value)


def _encode_tree(state: Any, arrays: dict[str, np.ndarray]) -> Any:
    from mxkit.ndarray import NDArray

    if state is None:
        return None
    if isinstance(state, NDArray):
        name = f"a{len(arrays)}"
        arrays[name] = state.asnumpy()
        return {"array": name}
    if isinstance(state, (tuple, list)):
        kind = "tuple" if isinstance(state, tuple) else "list"
        return {kind: [_encode_tree(item, arrays) for item in state]}
    raise TrainingValueError(f"cannot save an optimizer state of type {type(state).__name__}; states must be "
                             f"NDArrays, None, or tuples/lists of them")


def _decode_tree(tree: Any, arrays: Any) -> Any:
    from mxkit.ndarray import array

    if tree is None:
        return None
    if "array" in tree:
        data = arrays[tree["array"]]
        return array(data, dtype=data.dtype)
    if "tuple" in tree:
        return tuple(_decode_tree(item, arrays) for item in tree["tuple"])
    return [_decode_tree(item, arrays) for item in tree["list"]]


def _read_archive(states: Any) -> tuple[dict[str, Any], Any]:
    if not isinstance(states, (bytes, bytearray, memoryview)):
        raise FormatError(f"optimizer states must be the bytes Updater.get_states returned, got "
                          f"{type(states).__name__}")
    data = bytes(states)
    if data[:1] == b"\x80":
        raise FormatError("these optimizer states are a Python pickle (as MXNet writes them); mxkit does not "
                          "unpickle states because that can run arbitrary code. Save states with mxkit's "
                          "Updater.get_states (an .npz archive)")
    try:
        archive = np.load(io.BytesIO(data), allow_pickle=False)
        manifest = json.loads(bytes(archive[_MANIFEST]).decode())
    except (ValueError, OSError, KeyError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise FormatError(f"not an mxkit optimizer states archive ({len(data)} bytes starting {data[:8]!r}): "
                          f"{type(exc).__name__}: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT:
        raise FormatError(f"not an mxkit optimizer states archive: its manifest format is "
                          f"{manifest.get('format') if isinstance(manifest, dict) else manifest!r}, "
                          f"expected {_FORMAT!r}")
    return manifest, archive


__all__ = ["Updater", "get_updater"]
