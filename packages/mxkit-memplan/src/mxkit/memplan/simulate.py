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


def traverse(graph: Graph, allocator: Allocator, *, inplace: bool = True, same_size_only: bool = False,
             output_must_be_read: bool = False, inplace_filter: InplaceFilter | None = None) -> Traversal:
    """Run the reference-counted traversal (see module doc).

    Parameters
    ----------
    graph : Graph
    allocator : Allocator
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
    life = lifetimes(graph)
    reads = life.reads
    size = graph.entry_size
    external = graph.entry_external
    device = graph.entry_device
    buffer_of = [-1] * len(graph.entries)
    remaining: dict[int, int] = {}  # buffer -> reads still to come
    free: set[int] = set()
    decisions: dict[int, tuple[int, bool]] = {}
    for step, outputs in enumerate(graph.node_outputs):
        inputs = graph.node_inputs[step]
        ignored = graph.node_ignored[step]
        options = graph.node_options[step] if inplace else ()
        taken_slots: set[int] = set()
        for input_slot, output_slot, identity in options:
            source, target = inputs[input_slot], outputs[output_slot]
            if buffer_of[target] >= 0 or input_slot in taken_slots:
                continue
            if external[source] or external[target] or device[source] != device[target]:
                continue
            if size[target] > size[source] or (same_size_only and size[target] != size[source]):
                continue
            if output_must_be_read and reads[target] == 0:
                continue
            buffer = buffer_of[source]
            if not identity and remaining[buffer] != 1:
                continue
            if inplace_filter is not None and not identity and not inplace_filter(step, source, buffer):
                continue
            buffer_of[target] = buffer
            remaining[buffer] += reads[target]
            taken_slots.add(input_slot)
            decisions[target] = (source, identity)
            if not identity:
                allocator.note_overwrite(buffer, step)
        for target in outputs:
            if external[target] or buffer_of[target] >= 0:
                continue
            buffer = allocator.request(device[target], size[target], step)
            free.discard(buffer)
            buffer_of[target] = buffer
            remaining[buffer] = reads[target]
        for slot, source in enumerate(inputs):
            if slot in ignored or external[source]:
                continue
            buffer = buffer_of[source]
            allocator.note_read(buffer, step)
            remaining[buffer] -= 1
            if remaining[buffer] == 0:
                free.add(buffer)
                allocator.release(buffer, step)
        for target in outputs:
            if external[target]:
                continue
            buffer = buffer_of[target]
            if remaining[buffer] == 0 and buffer not in free:
                free.add(buffer)
                allocator.release(buffer, step)
    return Traversal(buffer_of, decisions)


__all__ = ["Allocator", "Buffers", "InplaceFilter", "Traversal", "traverse"]
