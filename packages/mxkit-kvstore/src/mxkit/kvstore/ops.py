"""The engine operations of the KVStore and what it keeps per key.

Each function pushes one kind of operation: copying pushed values to the device where their
key is summed (``stage_sources``), summing (``push_sum``, several small keys in one
operation), compressing then decompressing and summing (``push_compressed``), and copying
a value to pull targets (``push_copies``, ``push_broadcast``). Each reads and writes the
engine vars of the arrays it touches, so the engine orders them with everything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mxkit.core.context import Context
from mxkit.kvstore import merge


def engine() -> Any:
    """The process engine (the one mxkit-ndarray pushes to)."""
    import mxkit.engine

    return mxkit.engine.get()


def unique_vars(arrays: Sequence[Any], exclude: Sequence[Any] = ()) -> list[Any]:
    """The engine vars of ``arrays``, each once, in order, without those in ``exclude``."""
    found = dict.fromkeys(array.var for array in arrays)  # vars hash by identity: linear, ordered
    for var in exclude:
        found.pop(var, None)
    return list(found)


def op_name(what: str, keys: Sequence[Any]) -> str:
    """``kvstore.push('a', 'b')``: the operation's name in engine errors and traces."""
    shown = ", ".join(repr(key) for key in keys[:4]) + (f", ... ({len(keys)} keys)" if len(keys) > 4 else "")
    return f"kvstore.{what}({shown})"


def new_array(shape: tuple[int, ...], dtype: Any, ctx: Context) -> Any:
    """An uninitialised NDArray (its first write is an engine operation)."""
    from mxkit.ndarray import empty

    return empty(shape, ctx=ctx, dtype=dtype)


class Entry:
    """What the store keeps for one key."""

    __slots__ = ("dtype", "home", "key", "merge_buffer", "nbytes", "payloads", "pending", "residuals", "shape",
                 "staging", "value")

    def __init__(self, key: Any, value: Any, home: Context | None):
        self.key = key
        self.shape = tuple(value.shape)
        self.dtype = value.storage.dtype
        self.nbytes = int(value.storage.nbytes)
        self.home = home  # where sums run and the value lives; None: not placed yet (device)
        self.value = new_array(self.shape, self.dtype, home or value.context)
        value.copyto(self.value)
        self.merge_buffer: Any = None
        self.pending = 0  # pushes summed into merge_buffer, not applied yet
        self.residuals: dict[tuple[int, Context], Any] = {}
        self.staging: dict[tuple[int, Context], Any] = {}
        self.payloads: dict[int, Payload] = {}  # compressed pushes in flight, by position in a push

    def merge_target(self) -> Any:
        """The merge buffer (made on first use), where pushes are summed before an updater sees them."""
        if self.merge_buffer is None:
            self.merge_buffer = new_array(self.shape, self.dtype, self.value.context)
        return self.merge_buffer

    def staging_for(self, index: int, ctx: Context) -> Any:
        """A buffer on the home device that receives the ``index``-th pushed value, from ``ctx``."""
        buffer = self.staging.get((index, ctx))
        if buffer is None:
            buffer = self.staging[(index, ctx)] = new_array(self.shape, self.dtype, self.value.context)
        return buffer


class Payload:
    """A compressed gradient in flight between its compress and its merge operation."""

    __slots__ = ("data", "var")

    def __init__(self, var: Any):
        self.var = var  # written by the compress operation, read by the merge operation
        self.data: tuple[Any, ...] = ()


def stage_sources(entry: Entry, arrays: list[Any], priority: int) -> list[Any]:
    """The pushed arrays, each copied to the home device if the sum cannot read it there."""
    home = entry.value.context
    if merge.all_readable_from(arrays, home):
        return arrays  # the common case: the sum reads every array where it is
    sources = []
    for index, array in enumerate(arrays):
        if merge.shares_memory_space(array.context, home):
            sources.append(array)
            continue
        staging = entry.staging_for(index, array.context)
        src_data, dst_data, src_ctx = array.storage, staging.storage, array.context

        def copy_in(src_data: Any = src_data, dst_data: Any = dst_data, src_ctx: Any = src_ctx) -> None:
            dst_data[...] = merge.transfer(src_data, src_ctx, home)

        engine().push(copy_in, [array.var], [staging.var], array.context, priority,
                       op_name("copy", [entry.key]), True)
        sources.append(staging)
    return sources


#: ``(target, sources, accumulate, copies)``: sum the sources into the target (adding to it
#: when ``accumulate``), then copy the target into each of ``copies``
SumJob = tuple[Any, list[Any], bool, list[Any]]


def push_sum(home: Context, jobs: list[SumJob], priority: int, name: str) -> None:
    """One operation on ``home`` that runs every job (see :data:`SumJob`)."""
    xp = home.backend.xp
    work = [(target.storage, [s.storage for s in sources], accumulate, [c.storage for c in copies])
            for target, sources, accumulate, copies in jobs]

    def run() -> None:
        for out, source_data, accumulate, copy_data in work:
            merge.sum_into(xp, out, source_data, accumulate)
            if copy_data:
                merge.copy_to_all(xp, copy_data, out)

    writes = unique_vars([target for target, _, _, _ in jobs] + [c for _, _, _, copies in jobs for c in copies])
    reads = unique_vars([s for _, sources, _, _ in jobs for s in sources], writes)
    engine().push(run, reads, writes, home, priority, name)


def push_compressed(entry: Entry, compressor: Any, sources: list[Any], target: Any, accumulate: bool,
                    priority: int) -> None:
    """Compress each source on its own device (with its residual), then decompress and sum
    the payloads into ``target`` on the target's device."""
    payloads = []
    for index, array in enumerate(sources):
        ctx = array.context
        residual = entry.residuals.get((index, ctx))
        if residual is None and compressor.needs_residual:
            from mxkit.ndarray import zeros

            residual = entry.residuals[(index, ctx)] = zeros(entry.shape, ctx=ctx, dtype=entry.dtype)
        payload = entry.payloads.get(index)
        if payload is None:
            payload = entry.payloads[index] = Payload(engine().new_var())
        xp = ctx.backend.xp
        grad_data = array.storage
        residual_data = residual.storage if residual is not None else None

        def compress(payload: Payload = payload, xp: Any = xp, grad_data: Any = grad_data,
                     residual_data: Any = residual_data) -> None:
            flat_residual = residual_data.reshape(-1) if residual_data is not None else None
            payload.data = compressor.compress(xp, grad_data.reshape(-1), flat_residual)

        writes = [payload.var] + ([residual.var] if residual is not None else [])
        engine().push(compress, [array.var], writes, ctx, priority, op_name("compress", [entry.key]))
        payloads.append((payload, ctx))
    home = target.context
    home_xp = home.backend.xp
    out_data = target.storage

    def decompress_and_sum() -> None:
        flat_out = out_data.reshape(-1)
        for position, (payload, ctx) in enumerate(payloads):
            data = tuple(merge.transfer(part, ctx, home) for part in payload.data)
            compressor.decompress(home_xp, data, flat_out, accumulate or position > 0)

    reads = list(dict.fromkeys(payload.var for payload, _ in payloads))
    engine().push(decompress_and_sum, reads, [target.var], home, priority, op_name("merge", [entry.key]))


def push_copies(entry: Entry, source: Any, outs: list[Any], priority: int, what: str) -> None:
    """Copy ``source`` into ``outs``: one operation for the targets in its memory space, one
    device copy for each other target."""
    home = source.context
    local = [o for o in outs if merge.shares_memory_space(o.context, home)]
    if local:
        push_broadcast(home, [(source, local)], priority, op_name(what, [entry.key]))
    for out in outs:
        if merge.shares_memory_space(out.context, home):
            continue
        src_data, dst_data, dst_ctx = source.storage, out.storage, out.context

        def copy_out(src_data: Any = src_data, dst_data: Any = dst_data, dst_ctx: Any = dst_ctx) -> None:
            dst_data[...] = merge.transfer(src_data, home, dst_ctx)

        engine().push(copy_out, [source.var], [out.var], out.context, priority,
                       op_name(what, [entry.key]), True)


def push_broadcast(home: Context, jobs: list[tuple[Any, list[Any]]], priority: int, name: str) -> None:
    """One operation on ``home`` that copies each ``source`` into its ``outs`` (all readable there)."""
    xp = home.backend.xp
    work = [(source.storage, [o.storage for o in outs]) for source, outs in jobs]

    def run() -> None:
        for source_data, out_data in work:
            merge.copy_to_all(xp, out_data, source_data)

    writes = unique_vars([o for _, outs in jobs for o in outs])
    reads = unique_vars([source for source, _ in jobs], writes)
    engine().push(run, reads, writes, home, priority, name)
