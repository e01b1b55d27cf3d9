"""The single-machine KVStore (``local`` and ``device``), MXNet 1.x's ``KVStoreLocal``.

Every push, pull and sum is an engine operation that reads the pushed arrays and writes
the stored value (or a pull's targets), so the Python thread never waits: a push queued
behind the backward pass runs when its gradients are written, and pulls with a higher
``priority`` run first among ready work. ``local`` sums on the CPU; ``device`` sums on the
devices of the pushed values, each key's merge buffer on one of them (largest keys first,
each onto the least-loaded device).

Without an updater a push replaces the stored value with the sum of its values; with one
(``set_updater``, ``set_optimizer``), ``updater(key, sum, stored)`` merges it. The
consistency model (config ``consistency``; ``sequential`` by default) decides when pushes
are applied; with one worker it matters only to a model that batches pushes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mxkit.core.context import Context
from mxkit.core.errors import KVStoreError, ShapeError
from mxkit.kvstore import merge, ops
from mxkit.kvstore.base import KVStoreBase
from mxkit.kvstore.keys import densified, group, is_row_sparse, key_kind
from mxkit.kvstore.updater import OptimizerUpdater

#: keys up to this many bytes that one call pushes or pulls share one engine operation per device
BATCH_MAX_BYTES = 64 * 1024
_CPU0 = Context("cpu", 0)


class KVStore(KVStoreBase):
    """A key-value store of NDArrays for data-parallel training on one machine.

    Make one with :func:`mxkit.kvstore.create` (``mx.kv.create("local")``).

    Parameters
    ----------
    kvtype : {"local", "device"}
        Where sums run: on the CPU, or on the devices of the pushed values.
    consistency : str, optional
        A consistency model name (default: config ``consistency``).
    type_name : str, optional
        What :attr:`type` reports (MXNet reports the name the store was made with, such as
        ``"local_allreduce_cpu"``); ``kvtype`` by default.
    **consistency_options
        Options of the model (``tau=2`` for ``bounded_delay``).
    """

    def __init__(self, kvtype: str = "local", consistency: str | None = None, type_name: str | None = None,
                 **consistency_options: Any):
        from mxkit.kvstore.consistency import make_model

        if kvtype not in ("local", "device"):
            raise KVStoreError(f"KVStore type {kvtype!r} is not a single-machine store; use 'local' or 'device'")
        self._kind = kvtype
        self._type = type_name or kvtype
        self._model = make_model(consistency, num_workers=1, **consistency_options)
        self._entries: dict[Any, ops.Entry] = {}
        self._key_kind: type | None = None
        self._updater: Callable[[Any, Any, Any], None] | None = None
        self._compressor: Any = None
        self._placer = merge.DevicePlacer()

    # -- description (the rest is KVStoreBase's) ----------------------------------------

    def __repr__(self) -> str:
        return f"<KVStore {self._type} keys={len(self._entries)} consistency={type(self._model).__name__}>"

    # -- init -------------------------------------------------------------------------

    def init(self, key: Any, value: Any) -> None:
        """Initialise ``key`` (or each key of a list) with ``value`` (copied).

        A list of per-device values for one key is not allowed here (MXNet: duplicate init).

        Raises
        ------
        KVStoreError
            If a key is initialised twice, keys mix ints and strs, or a value is not an NDArray.
        """
        # row-sparse values are stored dense: a pull gives every row, row_sparse_pull the chosen ones
        pairs = [(k, densified(values)) for k, values in group(key, value, "init")]
        for k, values in pairs:
            self._check_kind(k, "init")
            if k in self._entries or len(values) > 1:
                raise KVStoreError(f"duplicate init of key {k!r}; each key is initialised once, with one value")
        for k, values in pairs:
            self._key_kind = key_kind(k)
            home = _CPU0 if self._kind == "local" else None
            self._entries[k] = ops.Entry(k, values[0], home)

    def _entry(self, key: Any, what: str) -> ops.Entry:
        self._check_kind(key, what)
        entry = self._entries.get(key)
        if entry is None:
            raise KVStoreError(f"{what} of key {key!r} before init; call kv.init({key!r}, value) first")
        return entry

    def _checked(self, pairs: list[tuple[Any, list[Any]]], what: str) -> list[tuple[ops.Entry, list[Any]]]:
        checked = []
        entries = self._entries
        for key, arrays in pairs:
            entry = entries.get(key)  # a key found is of the store's kind: 1 and "1" are different keys
            if entry is None:
                entry = self._entry(key, what)
            shape = entry.shape
            for array in arrays:
                if array.storage.shape != shape:
                    raise ShapeError(f"{what} of key {key!r}: an array has shape {tuple(array.shape)}, the key "
                                     f"was initialised with shape {entry.shape}")
            checked.append((entry, arrays))
        return checked

    # -- push -------------------------------------------------------------------------

    def push(self, key: Any, value: Any, priority: int = 0) -> None:
        """Push ``value`` into ``key``: a list of arrays (one per device) is summed first.

        Without an updater the sum becomes the stored value; with one,
        ``updater(key, sum, stored)`` merges it. Returns at once; the work runs on the engine.

        Parameters
        ----------
        key : int, str, or list of them
        value : NDArray, list of NDArray, or a list of those (one per key)
        priority : int
            Higher runs earlier among ready engine operations.

        Raises
        ------
        KVStoreError
            If a key was not initialised or is of the other kind (int/str).
        ShapeError
            If a value's shape differs from the key's.
        """
        pairs = [(k, densified(values)) for k, values in group(key, value, "push")]
        self._push_checked(self._checked(pairs, "push"), priority, {})

    def _push_checked(self, checked: list[tuple[ops.Entry, list[Any]]], priority: int,
                      outs_of: dict[int, list[Any]]) -> list[tuple[ops.Entry, list[Any]]]:
        """Push checked ``(entry, arrays)`` pairs; ``outs_of[id(entry)]`` are pull targets that a
        direct sum writes in the same operation. Returns the pulls still to push afterwards."""
        self._place([(entry, arrays) for entry, arrays in checked if entry.home is None])
        batches: dict[int, tuple[Context, list[ops.SumJob], list[Any]]] = {}
        applies_at_once = self._updater is None and self._model.ready_to_apply(1)
        pulls_after: list[tuple[ops.Entry, list[Any]]] = []
        for entry, arrays in checked:
            direct = applies_at_once and entry.pending == 0
            target = entry.value if direct else entry.merge_target()
            accumulate = not direct and entry.pending > 0
            outs = outs_of.get(id(entry), [])
            # a pushpull's targets are written by the sum's own operation when it can reach them
            fused = outs if direct and self._compressor is None and merge.all_readable_from(outs, target.context) \
                else []
            if outs and not fused:
                pulls_after.append((entry, outs))
            if self._compressor is not None:
                ops.push_compressed(entry, self._compressor, arrays, target, accumulate, priority)
            elif direct and entry.nbytes <= BATCH_MAX_BYTES:
                # only direct sums batch: an updater must be called after its key's sum is pushed
                home = target.context
                batch = batches.get(id(home))
                if batch is None:
                    batch = batches[id(home)] = (home, [], [])
                batch[1].append((target, ops.stage_sources(entry, arrays, priority), False, fused))
                batch[2].append(entry.key)
            else:
                job = (target, ops.stage_sources(entry, arrays, priority), accumulate, fused)
                ops.push_sum(target.context, [job], priority, ops.op_name("pushpull" if fused else "push", [entry.key]))
            if not direct:
                self._apply_if_ready(entry, priority)
        for home, jobs, keys in batches.values():
            ops.push_sum(home, jobs, priority, ops.op_name("pushpull" if outs_of else "push", keys))
        return pulls_after

    def _place(self, unplaced: list[tuple[ops.Entry, list[Any]]]) -> None:
        """Choose the merge device of ``device`` stores' keys at their first push."""
        if not unplaced:
            return
        devices = [array.context for _, arrays in unplaced for array in arrays]
        # MXNet places every key not yet placed in one sweep over the first push's devices
        waiting = {id(e): e for e in self._entries.values() if e.home is None}
        for entry, _ in unplaced:
            waiting[id(entry)] = entry
        placement = self._placer.place([(k, e.nbytes) for k, e in waiting.items()], devices)
        for entry_id, device in placement.items():
            entry = waiting[entry_id]
            entry.home = device
            if entry.value.context != device:
                moved = ops.new_array(entry.shape, entry.dtype, device)
                entry.value.copyto(moved)
                entry.value = moved

    def _apply_if_ready(self, entry: ops.Entry, priority: int) -> None:
        entry.pending += 1
        if not self._model.ready_to_apply(entry.pending):
            return
        entry.pending = 0
        if self._updater is not None:
            self._updater(entry.key, entry.merge_buffer, entry.value)
        else:
            ops.push_copies(entry, entry.merge_buffer, [entry.value], priority, "apply")

    # -- pull -------------------------------------------------------------------------

    def pull(self, key: Any, out: Any = None, priority: int = 0, ignore_sparse: bool = True) -> None:
        """Copy the value of ``key`` into ``out`` (an NDArray, or one per device).

        Parameters
        ----------
        key : int, str, or list of them
        out : NDArray, list of NDArray, or a list of those (one per key)
        priority : int
            Higher runs earlier among ready engine operations (MXNet pulls the first
            layers' weights with the highest priority).
        ignore_sparse : bool
            As in MXNet: row-sparse arrays among ``out`` are left unchanged (use
            :meth:`row_sparse_pull`); with ``False`` they receive every row.

        Raises
        ------
        KVStoreError
            If ``out`` is missing, a key was not initialised, or a model still waits for pushes.
        ShapeError
            If an ``out`` array's shape differs from the key's.
        """
        if out is None:
            raise KVStoreError("pull needs out=: the NDArray (or list of per-device NDArrays) to fill")
        pairs = group(key, out, "pull")
        if not any(is_row_sparse(o) for _, outs in pairs for o in outs):
            self._pull_checked(self._checked(pairs, "pull"), priority)
            return
        dense_pairs, sparse_outs = [], []
        for k, outs in pairs:
            self._entry(k, "pull")
            dense = [o for o in outs if not is_row_sparse(o)]
            if not ignore_sparse:
                sparse_outs += [(k, o) for o in outs if is_row_sparse(o)]
            if dense:
                dense_pairs.append((k, dense))
        if dense_pairs:
            self._pull_checked(self._checked(dense_pairs, "pull"), priority)
        for k, target in sparse_outs:
            self._pull_rows(k, target, None, priority)

    def row_sparse_pull(self, key: Any, out: Any = None, priority: int = 0, row_ids: Any = None) -> None:
        """Pull only the rows ``row_ids`` of ``key`` into row-sparse ``out`` arrays.

        Each output then stores those rows (distinct, sorted) and nothing else, as MXNet's
        ``row_sparse_pull`` does for embeddings and large linear models.

        Parameters
        ----------
        key : int, str, or list of them
        out : RowSparseNDArray, list of them (one per device), or a list of those (one per key)
        row_ids : NDArray (any shape; its values are row ids), or lists matching ``out``

        Raises
        ------
        KVStoreError
            If ``out`` or ``row_ids`` is missing, an output is not row-sparse, or the numbers
            of outputs and row-id arrays differ.
        """
        if out is None or row_ids is None:
            raise KVStoreError("row_sparse_pull needs out= (row_sparse arrays) and row_ids= (the rows to pull)")
        pairs = group(key, out, "row_sparse_pull")
        keys = [k for k, _ in pairs]
        if isinstance(key, (list, tuple)):
            if not isinstance(row_ids, (list, tuple)) or len(row_ids) != len(key):
                raise KVStoreError(f"row_sparse_pull got {len(key)} keys; give row_ids as a list with one entry "
                                   f"(row ids, or a list per device) per key")
            if len(keys) != len(key):
                raise KVStoreError(f"row_sparse_pull got the key list {list(key)!r} with repeats; name each key once")
            ids_of = dict(zip(keys, row_ids))
        else:
            ids_of = {keys[0]: row_ids}
        for k, outs in pairs:
            self._entry(k, "row_sparse_pull")
            dense = [o for o in outs if not is_row_sparse(o)]
            if dense:
                raise KVStoreError(f"row_sparse_pull of key {k!r}: the outputs must be row_sparse arrays (make them "
                                   f"with mx.nd.zeros(shape, stype='row_sparse')); got a dense NDArray, which "
                                   f"pull() fills")
            ids = ids_of[k]
            per_out = list(ids) if isinstance(ids, (list, tuple)) else [ids] * len(outs)
            if len(per_out) != len(outs):
                raise KVStoreError(f"row_sparse_pull of key {k!r}: {len(per_out)} row_ids for {len(outs)} outputs; "
                                   f"give one per output")
            for target, rows in zip(outs, per_out):
                self._pull_rows(k, target, rows, priority)

    def _pull_rows(self, key: Any, target: Any, row_ids: Any, priority: int) -> None:
        """Fill row-sparse ``target`` with rows ``row_ids`` of ``key`` (every row when None)."""
        import numpy as np
        from mxkit.ndarray import array
        from mxkit.ndarray.invoke import invoke_by_name

        entry = self._entry(key, "row_sparse_pull")
        if tuple(target.shape) != tuple(entry.shape):
            raise ShapeError(f"row_sparse_pull of key {key!r}: an output has shape {tuple(target.shape)}, the key "
                             f"was initialised with shape {entry.shape}")
        if entry.pending:
            self._check_pull_ready(entry)
        count = entry.shape[0]
        if row_ids is None:
            rows = np.arange(count, dtype=np.int64)
        else:
            host = row_ids.asnumpy() if hasattr(row_ids, "asnumpy") else np.asarray(row_ids)
            rows = np.unique(host.astype(np.int64).ravel())
            if rows.size and (rows[0] < 0 or rows[-1] >= count):
                raise KVStoreError(f"row_sparse_pull of key {key!r}: row ids {rows.tolist()[:8]} fall outside its "
                                   f"{count} rows")
        ctx = target.context
        ids = array(rows, ctx=ctx, dtype="int64")
        # the rows are gathered on the stored value's device, then copied to the output's
        home_ids = ids if entry.value.context == ctx else array(rows, ctx=entry.value.context, dtype="int64")
        taken = invoke_by_name("take", entry.value, home_ids, axis=0)
        target.assign_rows(taken if taken.context == ctx else taken.copyto(ctx), ids)

    def _pull_checked(self, checked: list[tuple[ops.Entry, list[Any]]], priority: int) -> None:
        # small keys share one operation per home device (keyed by the Context's identity:
        # hashing a Context runs Python code)
        batches: dict[int, tuple[Context, list[tuple[Any, list[Any]]], list[Any]]] = {}
        readable = merge.all_readable_from
        for entry, outs in checked:
            if entry.pending:
                self._check_pull_ready(entry)
            value = entry.value
            home = value.context
            if entry.nbytes <= BATCH_MAX_BYTES and readable(outs, home):
                batch = batches.get(id(home))
                if batch is None:
                    batch = batches[id(home)] = (home, [], [])
                batch[1].append((value, outs))
                batch[2].append(entry.key)
            else:
                ops.push_copies(entry, value, outs, priority, "pull")
        for home, jobs, keys in batches.values():
            ops.push_broadcast(home, jobs, priority, ops.op_name("pull", keys))

    def _check_pull_ready(self, entry: ops.Entry) -> None:
        pull_ready = getattr(self._model, "pull_ready", None)
        if entry.pending and pull_ready is not None and not pull_ready(1, 0):
            raise KVStoreError(f"pull of key {entry.key!r}: the consistency model {type(self._model).__name__} "
                               f"waits for more pushes before applying them, and this store has one worker; "
                               f"push again or use the 'sequential' model")

    # -- combined calls -----------------------------------------------------------------

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        """Push ``value`` then pull into ``out`` (into ``value`` itself when ``out`` is None).

        The same as :meth:`push` then :meth:`pull`, but a sum that replaces the stored value
        (no updater) writes the pull targets in its own engine operation. Raises what push
        and pull raise.
        """
        pushed = self._checked(group(key, value, "pushpull"), "pushpull")
        # one key argument for both: the pulls name exactly the pushed keys
        pulled = pushed if out is None else self._checked(group(key, out, "pushpull"), "pushpull")
        outs_of = {id(entry): outs for entry, outs in pulled}
        for entry, outs in self._push_checked(pushed, priority, outs_of):
            self._pull_checked([(entry, outs)], priority)

    # -- updaters and compression ------------------------------------------------------

    def set_updater(self, updater: Callable[[Any, Any, Any], None]) -> None:
        """Merge pushes with ``updater(key, pushed_sum, stored)`` (which updates ``stored`` in place)."""
        if not callable(updater):
            raise KVStoreError(f"set_updater needs a callable updater(key, grad, weight), got {updater!r}")
        self._updater = updater

    def set_gradient_compression(self, compression_params: dict[str, Any]) -> None:
        """Compress pushed gradients, e.g. ``{'type': '2bit', 'threshold': 0.5}``.

        Residuals start at zero for every key and device. (MXNet 1.x allowed this only on
        ``device`` and distributed stores; here ``local`` compresses too.)

        Raises
        ------
        KVStoreError
            If the argument is not a dict with a ``type``, or has bad parameters.
        UnknownPluginError
            If no plugin provides the type.
        """
        from mxkit.kvstore.compression import make_compressor

        compressor = make_compressor(compression_params)
        self._compressor = None if compressor.type == "none" else compressor
        for entry in self._entries.values():
            entry.residuals.clear()

    def _optimizer_updater(self, what: str) -> OptimizerUpdater:
        if not isinstance(self._updater, OptimizerUpdater):
            raise KVStoreError(f"{what} needs an optimizer: call kv.set_optimizer(optimizer) first")
        return self._updater

    def save_optimizer_states(self, fname: Any, dump_optimizer: bool = False) -> None:
        """Save the optimizer's states (and, with ``dump_optimizer``, its update counters) to ``fname``.

        The file is an ``.npz`` archive with a JSON manifest, never a pickle.
        """
        self._optimizer_updater("save_optimizer_states").save_states(fname, dump_optimizer)

    def load_optimizer_states(self, fname: Any) -> None:
        """Load states written by :meth:`save_optimizer_states` (onto each key's device).

        Raises
        ------
        FormatError
            If ``fname`` is not such a file.
        """
        self._optimizer_updater("load_optimizer_states").load_states(
            fname, {key: entry.value for key, entry in self._entries.items()})


__all__ = ["KVStore"]
