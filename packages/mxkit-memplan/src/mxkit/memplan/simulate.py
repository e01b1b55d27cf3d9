"""Traversal with reference counts: the engine of ``none``, ``inplace``, ``mxnet`` and ``coshare``.

Nodes are visited in execution order with a count, per buffer, of the reads still to
come of every entry placed in it (MXNet's ``storage_ref_count``). At each node, in the
order MXNet's ``PlanMemory`` uses:

1. in-place: an output takes an input's buffer if the option is an identity, or if the
   buffer's count is 1 (this read is the last one of everything in it);
2. every other output asks the allocator for a buffer;
3. the node's reads are counted down; buffers reaching zero go back to the allocator;
4. outputs nobody reads are released at once.

The allocator decides what "recycle" means: never (``none``), best fit
(``inplace``), MXNet's size window that grows a block (``mxnet``), or best fit within a
colour (``coshare``). See :mod:`mxkit.memplan.freelists`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from mxkit.memplan.graph import Graph
from mxkit.memplan.liveness import lifetimes

#: may ``entry`` (an input of node ``step``) be overwritten by one of its outputs?
InplaceFilter = Callable[[int, int, int], bool]


class Allocator(Protocol):
    """What the traversal needs from a free list."""

    def request(self, device: str, size: int, step: int) -> int:
        """A buffer id for ``size`` bytes on ``device`` written at ``step``."""
        ...

    def release(self, buffer: int, step: int) -> None:
        """Buffer ``buffer`` is free after ``step``."""
        ...

    def note_read(self, buffer: int, step: int) -> None:
        """Node ``step`` read ``buffer`` (for allocators that track accessors)."""
        ...

    def note_overwrite(self, buffer: int, step: int) -> None:
        """Node ``step`` wrote an output over the last contents of ``buffer`` in place."""
        ...


@dataclass
class Buffers:
    """The buffers an allocator handed out: device and (grown) size per id."""

    device: list[str] = field(default_factory=list)
    size: list[int] = field(default_factory=list)

    def new(self, device: str, size: int) -> int:
        """A fresh buffer id."""
        self.device.append(device)
        self.size.append(size)
        return len(self.size) - 1


@dataclass
class Traversal:
    """What the traversal decided: a buffer per entry (-1 for external) and the
    in-place decisions ``{output: (input, identity)}``."""

    buffer_of: list[int]
    inplace: dict[int, tuple[int, bool]]


@dataclass(frozen=True)
class StepArrays:
    """Per step, what the traversal touches, derived once per graph (see :func:`step_arrays`).

    Attributes
    ----------
    reads : list of tuple of int
        Planned (non-external) entries the step reads, one per non-ignored input slot, in
        slot order (an entry read twice appears twice).
    outputs : list of tuple of int
        Planned outputs of the step, in order.
    options : list of tuple
        The in-place options that can ever apply, as ``(input_slot, source, target,
        identity, same_size, target_is_read)``: both entries planned, on one device, and
        the target no larger than the source.
    """

    reads: list[tuple[int, ...]]
    outputs: list[tuple[int, ...]]
    options: list[tuple[tuple[int, int, int, bool, bool, bool], ...]]


def step_arrays(graph: Graph) -> StepArrays:
    """The :class:`StepArrays` of ``graph`` (computed once, cached on the graph)."""
    cached = graph._cache.get("steps")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    external, size, device = graph.entry_external, graph.entry_size, graph.entry_device
    reads_count = lifetimes(graph).reads
    planned = [not e for e in external]
    is_planned = planned.__getitem__
    step_reads: list[tuple[int, ...]] = []
    step_outputs: list[tuple[int, ...]] = []
    step_options: list[tuple[tuple[int, int, int, bool, bool, bool], ...]] = []
    empty: tuple = ()
    for inputs, outputs, ignored, options in zip(graph.node_inputs, graph.node_outputs, graph.node_ignored,
                                                 graph.node_options):
        if ignored:
            step_reads.append(tuple(e for slot, e in enumerate(inputs) if slot not in ignored and planned[e]))
        else:
            step_reads.append(tuple(filter(is_planned, inputs)))
        step_outputs.append(tuple(filter(is_planned, outputs)))
        if not options:
            step_options.append(empty)
            continue
        usable = []
        for input_slot, output_slot, identity in options:
            source, target = inputs[input_slot], outputs[output_slot]
            if (planned[source] and planned[target] and device[source] == device[target]
                    and size[target] <= size[source]):
                usable.append((input_slot, source, target, identity, size[target] == size[source],
                               reads_count[target] > 0))
        step_options.append(tuple(usable))
    result = StepArrays(step_reads, step_outputs, step_options)
    graph._cache["steps"] = result
    return result


def traverse(graph: Graph, allocator: Allocator, *, inplace: bool = True, same_size_only: bool = False,
             output_must_be_read: bool = False, inplace_filter: InplaceFilter | None = None) -> Traversal:
    """Run the reference-counted traversal (see module doc).

    Parameters
    ----------
    graph : Graph
    allocator : Allocator
        Its ``note_read`` and ``note_overwrite`` are only called when it has no attribute
        ``tracks_accesses`` or that attribute is true.
    inplace : bool
        Take in-place options at all.
    same_size_only : bool
        MXNet's rule: an in-place output must be exactly as large as its input (otherwise
        it may be smaller).
    output_must_be_read : bool
        MXNet's rule: an output nobody reads is not placed in place.
    inplace_filter : callable, optional
        ``filter(step, input_entry, buffer) -> bool``, a further veto (coshare's colours).
    """
    reads = lifetimes(graph).reads
    steps = step_arrays(graph)
    size, device = graph.entry_size, graph.entry_device
    num_entries = len(graph.entries)
    buffer_of = [-1] * num_entries
    # buffer ids are dense and there are at most as many buffers as planned entries
    remaining = [0] * (num_entries + 1)  # buffer -> reads still to come
    is_free = [False] * (num_entries + 1)
    decisions: dict[int, tuple[int, bool]] = {}
    request, release = allocator.request, allocator.release
    tracks = getattr(allocator, "tracks_accesses", True)
    note_read = allocator.note_read if tracks else None
    options_of = steps.options if inplace else [()] * graph.num_steps
    for step, (step_reads, outputs, options) in enumerate(zip(steps.reads, steps.outputs, options_of)):
        if options:
            taken_slots: list[int] = []
            for input_slot, source, target, identity, same_size, target_read in options:
                if buffer_of[target] >= 0 or input_slot in taken_slots:
                    continue
                if (same_size_only and not same_size) or (output_must_be_read and not target_read):
                    continue
                buffer = buffer_of[source]
                if not identity and (remaining[buffer] != 1 or (
                        inplace_filter is not None and not inplace_filter(step, source, buffer))):
                    continue
                buffer_of[target] = buffer
                remaining[buffer] += reads[target]
                taken_slots.append(input_slot)
                decisions[target] = (source, identity)
                if not identity and tracks:
                    allocator.note_overwrite(buffer, step)
        for target in outputs:
            if buffer_of[target] < 0:
                buffer = request(device[target], size[target], step)
                is_free[buffer] = False
                buffer_of[target] = buffer
                remaining[buffer] = reads[target]
        for source in step_reads:
            buffer = buffer_of[source]
            if note_read is not None:
                note_read(buffer, step)
            left = remaining[buffer] - 1
            remaining[buffer] = left
            if left == 0:
                is_free[buffer] = True
                release(buffer, step)
        for target in outputs:
            buffer = buffer_of[target]
            if remaining[buffer] == 0 and not is_free[buffer]:
                is_free[buffer] = True
                release(buffer, step)
    return Traversal(buffer_of, decisions)


__all__ = ["Allocator", "Buffers", "InplaceFilter", "StepArrays", "Traversal", "step_arrays", "traverse"]
