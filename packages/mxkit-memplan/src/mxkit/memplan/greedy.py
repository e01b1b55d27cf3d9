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
    """The blocks placed so far, queried by the steps they are live during.

    A block live during ``first..last`` overlaps a query ``a..b`` exactly when it is live
    at step ``a`` or starts in ``a+1..b``. The first set is a stabbing query on a segment
    tree (the block is filed under the O(log n) canonical nodes of its interval and the
    query walks one leaf-to-root path); the second a range query on a second tree whose
    nodes list the blocks starting in their range. Each overlapping block is found once,
    in O(log n) plus the answer's size.
    """

    def __init__(self, num_steps: int) -> None:
        width = 1
        while width < max(num_steps, 1):
            width *= 2
        self._width = width
        # flat arrays over the tree's nodes, a list created on first use (None before):
        # blocks covering a node's whole range, and blocks starting in its range
        self._full: list[list[int] | None] = [None] * (2 * width)
        self._starting: list[list[int] | None] = [None] * (2 * width)

    def add(self, block_id: int, first: int, last: int) -> None:
        """Record that block ``block_id`` is live during steps ``first..last``."""
        low, high = first + self._width, last + self._width + 1
        full = self._full
        while low < high:
            if low & 1:
                blocks = full[low]
                if blocks is None:
                    full[low] = [block_id]
                else:
                    blocks.append(block_id)
                low += 1
            if high & 1:
                high -= 1
                blocks = full[high]
                if blocks is None:
                    full[high] = [block_id]
                else:
                    blocks.append(block_id)
            low >>= 1
            high >>= 1
        node = first + self._width
        starting = self._starting
        while node:
            blocks = starting[node]
            if blocks is None:
                starting[node] = [block_id]
            else:
                blocks.append(block_id)
            node >>= 1

    def overlapping(self, first: int, last: int) -> list[int]:
        """Ids of the blocks live during at least one of steps ``first..last`` (no repeats)."""
        found: list[int] = []
        node = first + self._width
        full = self._full
        while node:
            blocks = full[node]
            if blocks:
                found += blocks
            node >>= 1
        starting = self._starting
        low, high = first + 1 + self._width, last + self._width + 1
        while low < high:
            if low & 1:
                blocks = starting[low]
                if blocks:
                    found += blocks
                low += 1
            if high & 1:
                high -= 1
                blocks = starting[high]
                if blocks:
                    found += blocks
            low >>= 1
            high >>= 1
        return found


class ShortLifetimeIndex:
    """What :class:`LifetimeIndex` answers, for blocks that each live a few steps: per step,
    the blocks live during it and the blocks starting at it.

    Adding a block costs one append per step of its life, a query one lookup per step of
    the queried range; with lifetimes under :data:`SHORT_LIFETIME` steps that beats the
    trees' two walks of ``log2(steps)`` levels.
    """

    def __init__(self, num_steps: int) -> None:
        self._live: list[list[int] | None] = [None] * (num_steps + 1)
        self._starting: list[list[int] | None] = [None] * (num_steps + 1)

    def add(self, block_id: int, first: int, last: int) -> None:
        """Record that block ``block_id`` is live during steps ``first..last``."""
        live = self._live
        for step in range(first, last + 1):
            blocks = live[step]
            if blocks is None:
                live[step] = [block_id]
            else:
                blocks.append(block_id)
        blocks = self._starting[first]
        if blocks is None:
            self._starting[first] = [block_id]
        else:
            blocks.append(block_id)

    def overlapping(self, first: int, last: int) -> list[int]:
        """Ids of the blocks live during at least one of steps ``first..last`` (no repeats)."""
        found = list(self._live[first] or ())
        starting = self._starting
        for step in range(first + 1, last + 1):
            blocks = starting[step]
            if blocks:
                found += blocks
        return found


class MostlyShortLifetimeIndex:
    """Short-lived blocks in a :class:`ShortLifetimeIndex`, the few long-lived ones in a
    list that every query scans (a residual network's in-place chain through all blocks).

    A long block's own query walks the steps of its life once; each query also tests
    every long block, so this is for at most :data:`FEW_LONG_BLOCKS` of them.
    """

    def __init__(self, num_steps: int) -> None:
        self._short = ShortLifetimeIndex(num_steps)
        self._long: list[tuple[int, int, int]] = []  # (block, first, last)

    def add(self, block_id: int, first: int, last: int) -> None:
        """Record that block ``block_id`` is live during steps ``first..last``."""
        if last - first <= SHORT_LIFETIME:
            self._short.add(block_id, first, last)
        else:
            self._long.append((block_id, first, last))

    def overlapping(self, first: int, last: int) -> list[int]:
        """Ids of the blocks live during at least one of steps ``first..last`` (no repeats)."""
        found = self._short.overlapping(first, last)
        for block_id, block_first, block_last in self._long:
            if block_first <= last and block_last >= first:
                found.append(block_id)
        return found


#: the longest lifetime (in steps, end - start) that :class:`ShortLifetimeIndex` holds
SHORT_LIFETIME = 32
#: the most long-lived blocks :class:`MostlyShortLifetimeIndex` scans at every query
FEW_LONG_BLOCKS = 4


def lifetime_index(blocks: list[Block], num_steps: int,
                   ) -> LifetimeIndex | ShortLifetimeIndex | MostlyShortLifetimeIndex:
    """The fastest exact index for these blocks' lifetimes."""
    long_blocks = sum(1 for block in blocks if block.end - block.start > SHORT_LIFETIME)
    if long_blocks == 0:
        return ShortLifetimeIndex(num_steps)
    if long_blocks <= FEW_LONG_BLOCKS:
        return MostlyShortLifetimeIndex(num_steps)
    return LifetimeIndex(num_steps)


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


def _gap_by_loop(neighbours: list[tuple[int, int]], size: int, best_fit: bool) -> int:
    """The offset for ``size`` bytes among ``neighbours`` (``(low, high)``, sorted): the
    smallest gap that fits (the first one with ``best_fit`` false), else above them all."""
    best_offset, best_gap, top = -1, -1, 0
    for low, high in neighbours:
        gap = low - top
        if gap >= size and (best_gap < 0 or gap < best_gap):
            best_offset, best_gap = top, gap
            # first fit stops at the first gap; best fit at an exact one, which no
            # later gap can beat (ties keep the first)
            if not best_fit or gap == size:
                break
        if high > top:
            top = high
    return best_offset if best_offset >= 0 else top


def _place(blocks: list[Block], order: list[int], num_steps: int, best_fit: bool) -> int:
    index = lifetime_index(blocks, num_steps)
    placed: list[tuple[int, int]] = [(0, 0)] * len(blocks)  # (offset, end) once placed
    arena = 0
    for block_id in order:
        block = blocks[block_id]
        size = block.size
        if size == 0:
            block.offset = 0
            continue
        neighbours = sorted(map(placed.__getitem__, index.overlapping(block.start, block.end)))
        block.offset = _gap_by_loop(neighbours, size, best_fit)
        placed[block_id] = (block.offset, block.offset + size)
        if block.offset + size > arena:
            arena = block.offset + size
        index.add(block_id, block.start, block.end)
    return arena


__all__ = ["Block", "LifetimeIndex", "MostlyShortLifetimeIndex", "ShortLifetimeIndex", "compact", "lifetime_index",
           "place_best_fit"]
