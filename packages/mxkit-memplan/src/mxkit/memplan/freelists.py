"""Free lists: how a traversal recycles released buffers.

Each allocator hands out buffer ids from a :class:`~mxkit.memplan.simulate.Buffers` table
and grows a buffer's size when it reuses a smaller one (only MXNet's does).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from mxkit.memplan.simulate import Buffers


class FreshAllocator:
    """A new buffer for every request; nothing is recycled (strategy ``none``)."""

    def __init__(self) -> None:
        self.buffers = Buffers()

    def request(self, device: str, size: int, step: int) -> int:
        return self.buffers.new(device, size)

    def release(self, buffer: int, step: int) -> None:
        pass

    def note_read(self, buffer: int, step: int) -> None:
        pass

    def note_overwrite(self, buffer: int, step: int) -> None:
        pass


class BestFitAllocator:
    """Reuse the smallest free buffer at least as large as the request, else a new one.

    Buffers never grow, so the total never exceeds one buffer per entry.
    """

    def __init__(self) -> None:
        self.buffers = Buffers()
        self._free: dict[str, list[tuple[int, int]]] = {}  # device -> sorted (size, id)

    def request(self, device: str, size: int, step: int) -> int:
        free = self._free.get(device)
        if free:
            index = bisect.bisect_left(free, (size, -1))
            if index < len(free):
                return free.pop(index)[1]
        return self.buffers.new(device, size)

    def release(self, buffer: int, step: int) -> None:
        device = self.buffers.device[buffer]
        bisect.insort(self._free.setdefault(device, []), (self.buffers.size[buffer], buffer))

    def note_read(self, buffer: int, step: int) -> None:
        pass

    def note_overwrite(self, buffer: int, step: int) -> None:
        pass


class MXNetAllocator:
    """MXNet 1.x's ``GraphAllocator`` (``src/imperative/...`` / nnvm ``plan_memory.cc``).

    Free blocks sit in a multimap keyed by their size. A request of ``size`` bytes takes
    the smallest free block in ``[size, size * 16]``; failing that the largest in
    ``[size / 16, size)``, which it grows to ``size``; failing that a new block. Equal
    sizes come back in release order (``std::multimap`` inserts at the upper bound).
    """

    MATCH_RANGE = 16

    def __init__(self, match_range: int = MATCH_RANGE) -> None:
        self.buffers = Buffers()
        self.match_range = match_range
        self._free: dict[str, list[tuple[int, int, int]]] = {}  # device -> sorted (size, seq, id)
        self._seq = 0

    def request(self, device: str, size: int, step: int) -> int:
        free = self._free.get(device)
        if not free or self.match_range == 0:
            return self.buffers.new(device, size)
        mid = bisect.bisect_left(free, (size, -1, -1))
        end = bisect.bisect_right(free, (size * self.match_range, float("inf"), 0))
        if mid < end:
            _, _, buffer = free.pop(mid)
            return buffer
        begin = bisect.bisect_left(free, (size // self.match_range, -1, -1))
        if begin < mid:
            _, _, buffer = free.pop(mid - 1)
            self.buffers.size[buffer] = max(self.buffers.size[buffer], size)
            return buffer
        return self.buffers.new(device, size)

    def release(self, buffer: int, step: int) -> None:
        device = self.buffers.device[buffer]
        self._seq += 1
        bisect.insort(self._free.setdefault(device, []), (self.buffers.size[buffer], self._seq, buffer))

    def note_read(self, buffer: int, step: int) -> None:
        pass

    def note_overwrite(self, buffer: int, step: int) -> None:
        pass


class ColourAllocator:
    """Best fit within a colour: a buffer released by node ``r`` is reusable only by a
    later node of ``r``'s colour (a colour is one dependency chain, so ``r`` already
    precedes that node and sharing adds no ordering).

    Every node that read the buffer's current contents must also precede the reuser; a
    reader of another colour is accepted only if it is a direct producer of ``r``'s
    inputs. A buffer that fails this is retired, never reused. Nodes beyond the path
    colours (``colour >= path_colours``) are alone in their colour: a buffer one of them
    releases is offered to the nodes that read its outputs (its direct successors).
    """

    def __init__(self, colour: Sequence[int], predecessors: Sequence[frozenset[int]],
                 path_colours: int) -> None:
        self.buffers = Buffers()
        self.colour = colour
        self.predecessors = predecessors
        self.path_colours = path_colours
        self._free: dict[tuple[str, int], list[tuple[int, int]]] = {}  # (device, colour or -1-node)
        self._readers: dict[int, set[int]] = {}
        self.retired = 0

    def precedes_all_readers(self, buffer: int, step: int) -> bool:
        """Whether every reader of ``buffer`` so far is ``step``, of its colour, or a
        direct predecessor of it."""
        colour, preds = self.colour[step], self.predecessors[step]
        return all(r == step or self.colour[r] == colour or r in preds for r in self._readers.get(buffer, ()))

    def _key(self, step: int) -> int:
        colour = self.colour[step]
        return colour if colour < self.path_colours else -1 - step

    def request(self, device: str, size: int, step: int) -> int:
        keys = [self._key(step)]
        if self.colour[step] >= self.path_colours:
            keys += [-1 - pred for pred in self.predecessors[step]]
        best: tuple[int, int, list[tuple[int, int]]] | None = None
        for key in keys:
            free = self._free.get((device, key))
            if free:
                index = bisect.bisect_left(free, (size, -1))
                if index < len(free) and (best is None or free[index][0] < best[0]):
                    best = (free[index][0], index, free)
        if best is not None:
            buffer = best[2].pop(best[1])[1]
        else:
            buffer = self.buffers.new(device, size)
        self._readers[buffer] = set()
        return buffer

    def release(self, buffer: int, step: int) -> None:
        if not self.precedes_all_readers(buffer, step):
            self.retired += 1
            return
        key = (self.buffers.device[buffer], self._key(step))
        bisect.insort(self._free.setdefault(key, []), (self.buffers.size[buffer], buffer))

    def note_read(self, buffer: int, step: int) -> None:
        self._readers[buffer].add(step)

    def note_overwrite(self, buffer: int, step: int) -> None:
        # the readers of the old contents all precede ``step`` (checked before the
        # overwrite) and ``step`` reads them now, so ``step`` stands for all of them
        self._readers[buffer] = {step}


__all__ = ["BestFitAllocator", "ColourAllocator", "FreshAllocator", "MXNetAllocator"]
