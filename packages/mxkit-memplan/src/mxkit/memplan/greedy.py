"""Offset-based best fit in one arena per device (the TFLite / XLA heap-simulator family).

In-place decisions come first (the reference-counted traversal, without recycling):
each chain of entries that share memory in place becomes one *block* with the largest
member's size and the union of their lifetimes. Blocks are then placed largest first;
each goes into the smallest gap, among the blocks already placed whose lifetimes overlap
its own, that fits it, or above all of them when no gap does. The blocks overlapping a
lifetime are found with a segment tree over steps, so the work per block is the number of
blocks live beside it, not the number of blocks in the graph.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Block:
    """Memory one or more entries share in place: ``size`` bytes over steps ``start..end``."""

    size: int
    start: int
    end: int
    offset: int = -1


class LifetimeIndex:
    """The blocks placed so far, queried by the steps they are live during."""

    def __init__(self, num_steps: int) -> None:
        width = 1
        while width < max(num_steps, 1):
            width *= 2
        self._width = width
        self._full: list[list[int]] = [[] for _ in range(2 * width)]  # block covers the node's range
        self._partial: list[list[int]] = [[] for _ in range(2 * width)]  # block covers part of it

    def _canonical(self, first: int, last: int) -> list[int]:
        nodes = []
        low, high = first + self._width, last + self._width + 1
        while low < high:
            if low & 1:
                nodes.append(low)
                low += 1
            if high & 1:
                high -= 1
                nodes.append(high)
            low >>= 1
            high >>= 1
        return nodes

    def add(self, block_id: int, first: int, last: int) -> None:
        """Record that block ``block_id`` is live during steps ``first..last``."""
        ancestors: set[int] = set()
        for node in self._canonical(first, last):
            self._full[node].append(block_id)
            node >>= 1
            while node and node not in ancestors:
                ancestors.add(node)
                node >>= 1
        for node in ancestors:
            self._partial[node].append(block_id)

    def overlapping(self, first: int, last: int) -> set[int]:
        """Ids of the blocks live during at least one of steps ``first..last``."""
        found: set[int] = set()
        seen: set[int] = set()
        for node in self._canonical(first, last):
            found.update(self._full[node])
            found.update(self._partial[node])
            node >>= 1
            while node and node not in seen:
                seen.add(node)
                found.update(self._full[node])
                node >>= 1
        return found


def place_best_fit(blocks: list[Block], num_steps: int) -> int:
    """Give every block an offset (largest first, best-fitting gap); return the arena size.

    Ties in size go to the longer-lived block first, then the earlier one, so the result
    does not depend on the input order.
    """
    order = sorted(range(len(blocks)),
                   key=lambda b: (-blocks[b].size, blocks[b].start - blocks[b].end, blocks[b].start))
    return _place(blocks, order, num_steps, best_fit=True)


def compact(blocks: list[Block], num_steps: int) -> int:
    """Slide every placed block down to the lowest offset where it fits (first fit, in
    order of its current offset); return the arena size.

    No block moves up: a block placed earlier had a lower offset, so after moving it
    still ends below the current block's offset wherever their lifetimes meet.
    """
    order = sorted(range(len(blocks)), key=lambda b: (blocks[b].offset, blocks[b].start))
    return _place(blocks, order, num_steps, best_fit=False)


def _place(blocks: list[Block], order: list[int], num_steps: int, best_fit: bool) -> int:
    index = LifetimeIndex(num_steps)
    placed: list[tuple[int, int]] = [(0, 0)] * len(blocks)  # (offset, end) once placed
    arena = 0
    for block_id in order:
        block = blocks[block_id]
        size = block.size
        if size == 0:
            block.offset = 0
            continue
        # the hot loop of the planner: C-level gather and sort, plain compares after
        best_offset, best_gap, top = -1, -1, 0
        for low, high in sorted(map(placed.__getitem__, index.overlapping(block.start, block.end))):
            gap = low - top
            if gap >= size and (best_gap < 0 or gap < best_gap):
                best_offset, best_gap = top, gap
                if not best_fit:
                    break
            if high > top:
                top = high
        block.offset = best_offset if best_offset >= 0 else top
        placed[block_id] = (block.offset, block.offset + size)
        if block.offset + size > arena:
            arena = block.offset + size
        index.add(block_id, block.start, block.end)
    return arena


__all__ = ["Block", "LifetimeIndex", "compact", "place_best_fit"]
