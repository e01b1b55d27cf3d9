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

    tracks_accesses = False  # the traversal need not report reads and overwrites

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

    tracks_accesses = False  # the traversal need not report reads and overwrites

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

    tracks_accesses = False  # the traversal need not report reads and overwrites

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
    """Best fit among the freed buffers whose every accessor precedes the requesting node.

    A colour is one dependency chain, so a node ``a`` of path colour ``c`` is an
    ancestor of ``w`` exactly when ``a`` is no later than the last node of colour ``c``
    among ``w``'s ancestors (``latest[w][c]``, one pass over the graph). Each buffer keeps,
    per colour, its latest accessor (writer or reader of its current contents); nodes
    beyond the path colours are kept by name and count as ancestors only of the nodes
    they feed directly. A buffer is reused by ``w``, or overwritten in place by ``w``,
    only if all its accessors are ancestors of ``w``, so sharing never orders two nodes
    that could have run in parallel.

    Candidates are scanned from the best fit upward, at most ``scan_limit`` of them per
    free list, which keeps a request O(log n) whatever the graph.
    """

    def __init__(self, colour: Sequence[int], predecessors: Sequence[frozenset[int]], path_colours: int,
                 scan_limit: int = 8) -> None:
        self.buffers = Buffers()
        self.colour = colour
        self.predecessors = predecessors
        self.path_colours = path_colours
        self.scan_limit = scan_limit
        self.latest = self._latest_ancestors()
        # (device, -1 or the one accessor without a path colour) -> sorted (size, id)
        self._free: dict[tuple[str, int], list[tuple[int, int]]] = {}
        self.retired = 0
        self._by_colour: list[dict[int, int]] = []  # buffer -> {colour: latest accessor}
        self._others: list[set[int]] = []  # buffer -> accessors without a path colour

    def _latest_ancestors(self) -> list[list[int]]:
        width = self.path_colours
        colour = self.colour
        no_ancestors = [-1] * width
        latest: list[list[int]] = []
        for node, preds in enumerate(self.predecessors):
            # rows are never changed once appended, so a node may share its only
            # predecessor's row unless it has a path colour of its own to record
            if not preds:
                row = no_ancestors
            elif len(preds) == 1:
                (pred,) = preds
                row = latest[pred]
            else:
                rows = [latest[pred] for pred in preds]
                row = list(map(max, *rows))
            if colour[node] < width:
                row = row.copy() if row is no_ancestors or len(preds) == 1 else row
                row[colour[node]] = node
            latest.append(row)
        return latest

    def precedes(self, buffer: int, step: int) -> bool:
        """Whether every accessor of ``buffer`` is ``step`` or an ancestor of it."""
        row, preds = self.latest[step], self.predecessors[step]
        return (all(node <= row[c] for c, node in self._by_colour[buffer].items())
                and all(node == step or node in preds for node in self._others[buffer]))

    def note_read(self, buffer: int, step: int) -> None:
        """Record ``step`` as an accessor of ``buffer``'s contents."""
        colour = self.colour[step]
        if colour < self.path_colours:
            # the traversal visits steps in order, so ``step`` is the colour's latest
            self._by_colour[buffer][colour] = step
        else:
            self._others[buffer].add(step)

    _touch = note_read

    def request(self, device: str, size: int, step: int) -> int:
        row, preds = self.latest[step], self.predecessors[step]
        by_colour, others, free_lists = self._by_colour, self._others, self._free
        scan_limit = self.scan_limit
        best_size, best_index, best_list = -1, -1, None
        for key in (-1, *preds):
            free = free_lists.get((device, key))
            if not free:
                continue
            index = bisect.bisect_left(free, (size, -1))
            for candidate in range(index, min(index + scan_limit, len(free))):
                candidate_size, buffer = free[candidate]
                if best_list is not None and candidate_size >= best_size:
                    break
                # precedes(buffer, step), inlined: this is the planner's hot loop
                if (all(node <= row[c] for c, node in by_colour[buffer].items())
                        and all(node == step or node in preds for node in others[buffer])):
                    best_size, best_index, best_list = candidate_size, candidate, free
                    break
        if best_list is not None:
            buffer = best_list.pop(best_index)[1]
            by_colour[buffer] = {}
            others[buffer] = set()
        else:
            buffer = self.buffers.new(device, size)
            by_colour.append({})
            others.append(set())
        self._touch(buffer, step)
        return buffer

    def release(self, buffer: int, step: int) -> None:
        # a buffer touched by a node without a path colour can only go to that node's
        # direct consumers; touched by two such nodes, to nobody we can vouch for
        others = self._others[buffer]
        if len(others) > 1:
            self.retired += 1
            return
        key = next(iter(others)) if others else -1
        bisect.insort(self._free.setdefault((self.buffers.device[buffer], key), []),
                      (self.buffers.size[buffer], buffer))

    def note_overwrite(self, buffer: int, step: int) -> None:
        # every accessor of the old contents precedes ``step`` (checked before the
        # overwrite), so ``step`` alone stands for all of them from now on
        self._by_colour[buffer] = {}
        self._others[buffer] = set()
        self._touch(buffer, step)


__all__ = ["BestFitAllocator", "ColourAllocator", "FreshAllocator", "MXNetAllocator"]
