"""The planning strategies: ``planner(graph, **options) -> MemoryPlan``.

==========  ==========================================================================
none        one buffer per entry (the baseline of the MXNet paper)
inplace     the paper's in-place strategy: reference counts, in-place at the last read
            (or identity), freed buffers recycled best fit
coshare     the paper's co-share strategy: in-place and recycling only within a colour
            of the longest-path colouring, so planning removes no parallelism
mxnet       MXNet 1.x's default: in-place (same size only) plus a free list that reuses
            a block within a 16x size window and grows it
greedy      in-place chains, then offset best fit in one arena per device
auto        runs ``inplace``, ``mxnet`` and ``greedy`` and keeps the smallest plan
==========  ==========================================================================

Each is registered as a plugin in :mod:`mxkit.memplan.plugin`; :func:`mxkit.memplan.plan_memory`
chooses one by name or by the configuration key ``memplan``.
"""

from __future__ import annotations

import contextvars
import functools
import gc
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from mxkit.memplan.colouring import colour_by_longest_paths, node_predecessors
from mxkit.memplan.errors import GraphError, PlanError
from mxkit.memplan.freelists import BestFitAllocator, ColourAllocator, FreshAllocator, MXNetAllocator
from mxkit.memplan.graph import Graph
from mxkit.memplan.greedy import Block, compact, place_best_fit
from mxkit.memplan.liveness import lifetimes, lower_bound
from mxkit.memplan.plan import MemoryPlan, Pool, Storage
from mxkit.memplan.simulate import Buffers, Traversal, traverse

Planner = Callable[..., MemoryPlan]

# while ``auto`` runs its candidates: (id of the graph, match_range) -> MXNet's traversal,
# which ``mxnet`` and ``greedy`` both make; None outside ``auto`` so that each strategy's
# own timing includes all of its work
_SHARED_MXNET_TRAVERSALS: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "mxkit_memplan_shared_traversals", default=None)


def _mxnet_traversal(graph: Graph, match_range: int) -> tuple[Traversal, Buffers]:
    """MXNet's in-place rules and free list over ``graph`` (shared within one ``auto`` run)."""
    shared = _SHARED_MXNET_TRAVERSALS.get()
    key = (id(graph), match_range)
    if shared is not None and key in shared:
        return shared[key]  # type: ignore[no-any-return]
    allocator = MXNetAllocator(match_range)
    traversal = traverse(graph, allocator, same_size_only=True, output_must_be_read=True)
    if shared is not None:
        shared[key] = (traversal, allocator.buffers)
    return traversal, allocator.buffers


def _without_cyclic_gc(planner: Planner) -> Planner:
    """Pause the cyclic garbage collector while ``planner`` runs (restored after).

    Planning builds hundreds of thousands of small lists and tuples without cycles;
    the collector rescanning them took half the time on 100k-node graphs.
    """

    @functools.wraps(planner)
    def run(*args: Any, **kwargs: Any) -> MemoryPlan:
        if not gc.isenabled():
            return planner(*args, **kwargs)
        gc.disable()
        try:
            return planner(*args, **kwargs)
        finally:
            gc.enable()

    return run


def _check_graph(graph: object, strategy: str) -> Graph:
    if not isinstance(graph, Graph):
        raise GraphError(
            f"memory planner {strategy!r} needs a mxkit.memplan.Graph, got {type(graph).__name__} "
            f"{graph!r:.80}; build one with Graph(nodes, entries) or GraphBuilder"
        )
    return graph


def _check_options(strategy: str, options: Mapping[str, Any], accepted: Mapping[str, str]) -> None:
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        choices = ", ".join(f"{k} ({v})" for k, v in accepted.items()) or "none"
        raise PlanError(f"memory planner {strategy!r} got unknown options {unknown}; it accepts: {choices}")


def _plan_from_buffers(graph: Graph, strategy: str, traversal: Traversal, buffers: Buffers,
                       started: float, details: dict[str, Any] | None = None) -> MemoryPlan:
    """One pool per buffer that holds an entry, numbered in order of first use."""
    pool_of: dict[int, int] = {}
    shared: list[Storage] = []  # one Storage per pool: they are immutable and all at offset 0
    storage: dict[str, Storage] = {}
    for name, buffer in zip(entry_names(graph), traversal.buffer_of):
        if buffer < 0:
            continue
        pool = pool_of.get(buffer)
        if pool is None:
            pool = pool_of[buffer] = len(shared)
            shared.append(Storage(pool, 0))
        storage[name] = shared[pool]
    pools = tuple(Pool(pool, buffers.device[buffer], buffers.size[buffer]) for buffer, pool in pool_of.items())
    return _finish(graph, strategy, storage, pools, traversal, started, details)


def entry_names(graph: Graph) -> list[str]:
    """The names of ``graph``'s entries, by index (cached on the graph)."""
    names = graph._cache.get("names")
    if names is None:
        names = graph._cache["names"] = [entry.name for entry in graph.entries]
    return names  # type: ignore[no-any-return]


def _finish(graph: Graph, strategy: str, storage: dict[str, Storage], pools: tuple[Pool, ...],
            traversal: Traversal, started: float, details: dict[str, Any] | None) -> MemoryPlan:
    names = entry_names(graph)
    inplace = {names[t]: (names[s], identity) for t, (s, identity) in traversal.inplace.items()}
    profile, bound = lower_bound(graph)
    return MemoryPlan(strategy=strategy, storage=storage, pools=pools, inplace=inplace, live_bytes=profile,
                      lower_bound_bytes=bound, planning_seconds=time.perf_counter() - started,
                      details=details or {})


@_without_cyclic_gc
def plan_none(graph: Graph, **options: Any) -> MemoryPlan:
    """One buffer per planned entry, no sharing: the baseline (``sum`` of sizes)."""
    started = time.perf_counter()
    graph = _check_graph(graph, "none")
    _check_options("none", options, {})
    allocator = FreshAllocator()
    traversal = traverse(graph, allocator, inplace=False)
    return _plan_from_buffers(graph, "none", traversal, allocator.buffers, started)


@_without_cyclic_gc
def plan_inplace(graph: Graph, **options: Any) -> MemoryPlan:
    """The MXNet paper's in-place strategy with recycling of freed buffers.

    An output takes an input's buffer when the option is an identity or the buffer's
    reference count reaches zero at this node; other outputs take the smallest freed
    buffer that is large enough, else a new one. Buffers never grow, so the plan never
    exceeds ``none``. O(n log n).
    """
    started = time.perf_counter()
    graph = _check_graph(graph, "inplace")
    _check_options("inplace", options, {})
    allocator = BestFitAllocator()
    traversal = traverse(graph, allocator)
    return _plan_from_buffers(graph, "inplace", traversal, allocator.buffers, started)


@_without_cyclic_gc
def plan_mxnet(graph: Graph, match_range: int = MXNetAllocator.MATCH_RANGE, **options: Any) -> MemoryPlan:
    """MXNet 1.x's ``PlanMemory``: in-place for same-size, read outputs, then a free list
    keyed by size that reuses a block within a ``match_range`` size window and grows it.

    Parameters
    ----------
    match_range : int
        MXNet's ``NNVM_EXEC_MATCH_RANGE`` (16); 0 disables recycling.
    """
    started = time.perf_counter()
    graph = _check_graph(graph, "mxnet")
    _check_options("mxnet", options, {"match_range": "int, default 16"})
    if isinstance(match_range, bool) or not isinstance(match_range, int) or match_range < 0:
        raise PlanError(f"mxnet planner: match_range must be an int >= 0 (MXNet uses 16), got {match_range!r}")
    traversal, buffers = _mxnet_traversal(graph, match_range)
    return _plan_from_buffers(graph, "mxnet", traversal, buffers, started, {"match_range": match_range})


@_without_cyclic_gc
def plan_coshare(graph: Graph, max_colours: int | None = 8, **options: Any) -> MemoryPlan:
    """The MXNet paper's co-share strategy.

    Nodes are coloured by repeated longest paths (:mod:`mxkit.memplan.colouring`), which
    makes ancestry cheap to test: a freed buffer is reused, and an input overwritten in
    place, only by a node that every writer and reader of its contents already precedes
    (see :class:`~mxkit.memplan.freelists.ColourAllocator`), so planning never orders two
    nodes that could have run in parallel.

    Parameters
    ----------
    max_colours : int, optional
        Stop colouring paths after this many (default 8, about the worker threads of a
        device; each round costs O(n)); ancestry through the nodes left is only known
        for direct producers, so they share less. ``None`` colours until every node
        has a path colour (the paper's loop, O(n) per path).
    """
    started = time.perf_counter()
    graph = _check_graph(graph, "coshare")
    _check_options("coshare", options, {"max_colours": "int or None, default 8"})
    if max_colours is not None and (isinstance(max_colours, bool) or not isinstance(max_colours, int)
                                    or max_colours < 1):
        raise PlanError(f"coshare planner: max_colours must be None or an int >= 1, got {max_colours!r}")
    predecessors = node_predecessors(graph)
    colour, rounds = colour_by_longest_paths(graph, max_colours, predecessors)
    allocator = ColourAllocator(colour, predecessors, rounds)
    traversal = traverse(graph, allocator, inplace_filter=lambda step, _entry, buffer:
                         allocator.precedes(buffer, step))
    details = {"path_colours": rounds, "colours": max(colour, default=-1) + 1,
               "retired_buffers": allocator.retired}
    return _plan_from_buffers(graph, "coshare", traversal, allocator.buffers, started, details)


@_without_cyclic_gc
def plan_greedy(graph: Graph, **options: Any) -> MemoryPlan:
    """In-place chains first, then offset best fit, largest first, in one arena per device.

    Best fit by size is a heuristic and can lose to a buffer plan on some graphs, so a
    second layout is made too: MXNet's buffers stacked in the arena, then every block
    slid down to the lowest offset where it fits (never above where it was). The smaller
    arena wins; ``details["layout"]`` says which. Each block's lifetime neighbours come
    from a segment tree (O(log n)); placing it costs O(k log k) in the number k of
    blocks live beside it, which is small for dataflow graphs.
    """
    started = time.perf_counter()
    graph = _check_graph(graph, "greedy")
    _check_options("greedy", options, {})
    life = lifetimes(graph)
    # a smaller output in place would pin its input's larger size for its whole life;
    # only equal sizes make an in-place chain exactly as large as each member
    fresh = FreshAllocator()
    by_size = traverse(graph, fresh, same_size_only=True)
    blocks, block_of = _blocks(graph, life, by_size, fresh.buffers)
    arenas = {device: place_best_fit(group, graph.num_steps) for device, group in blocks.items()}
    by_buffer, mxnet_buffers = _mxnet_traversal(graph, MXNetAllocator.MATCH_RANGE)
    buffer_blocks, buffer_block_of = _blocks(graph, life, by_buffer, mxnet_buffers, stack=True)
    buffer_arenas = {device: compact(group, graph.num_steps) for device, group in buffer_blocks.items()}
    layout = "best fit by size"
    if sum(buffer_arenas.values()) < sum(arenas.values()):
        layout, blocks, block_of, arenas, by_size = (
            "mxnet buffers, compacted", buffer_blocks, buffer_block_of, buffer_arenas, by_buffer)
    pools = tuple(Pool(i, device, arenas[device]) for i, device in enumerate(arenas))
    pool_of = {device: i for i, device in enumerate(arenas)}
    names = entry_names(graph)
    shared: dict[tuple[str, int], Storage] = {}  # one Storage per block: its entries share it
    storage = {}
    for entry, where in block_of.items():
        place = shared.get(where)
        if place is None:
            place = shared[where] = Storage(pool_of[where[0]], blocks[where[0]][where[1]].offset)
        storage[names[entry]] = place
    return _finish(graph, "greedy", storage, pools, by_size, started,
                   {"layout": layout, "blocks": sum(len(b) for b in blocks.values())})


def _blocks(graph: Graph, life: Any, traversal: Traversal, buffers: Buffers, stack: bool = False,
            ) -> tuple[dict[str, list[Block]], dict[int, tuple[str, int]]]:
    """Per device, one block per in-place chain (the entries joined by decisions), with
    the largest member's size and the union of their lifetimes; and each entry's
    ``(device, block index)``. With ``stack``, blocks start at their buffer's base offset
    when the traversal's buffers are laid end to end."""
    # decisions come in execution order and each target is new when it is decided, so
    # labelling a target with its source's chain gives the chains without a union-find
    chain = list(range(len(graph.entries)))
    for target, (source, _identity) in traversal.inplace.items():
        chain[target] = chain[source]
    base: list[int] | None = None
    if stack:
        base = []
        tops: dict[str, int] = {}
        for device, size in zip(buffers.device, buffers.size):
            top = tops.get(device, 0)
            base.append(top)
            tops[device] = top + size
    entry_size, entry_device, start, end = graph.entry_size, graph.entry_device, life.start, life.end
    blocks: dict[str, list[Block]] = {}
    block_of_chain: dict[int, tuple[str, int]] = {}
    block_of: dict[int, tuple[str, int]] = {}
    for entry, buffer in enumerate(traversal.buffer_of):
        if buffer < 0:
            continue
        where = block_of_chain.get(chain[entry])
        if where is None:
            device = entry_device[entry]
            group = blocks.setdefault(device, [])
            where = block_of_chain[chain[entry]] = (device, len(group))
            group.append(Block(entry_size[entry], start[entry], end[entry], base[buffer] if base else -1))
        else:
            block = blocks[where[0]][where[1]]
            if entry_size[entry] > block.size:
                block.size = entry_size[entry]
            if start[entry] < block.start:
                block.start = start[entry]
            if end[entry] > block.end:
                block.end = end[entry]
        block_of[entry] = where
    return blocks, block_of


AUTO_CANDIDATES = ("inplace", "mxnet", "greedy")


@_without_cyclic_gc
def plan_auto(graph: Graph, candidates: Iterable[str] = AUTO_CANDIDATES, **options: Any) -> MemoryPlan:
    """Run the cheap strategies and keep the smallest plan (ties: the earlier candidate).

    Parameters
    ----------
    candidates : iterable of str
        Strategy names of this module to try (default ``inplace``, ``mxnet``, ``greedy``).
    """
    started = time.perf_counter()
    graph = _check_graph(graph, "auto")
    _check_options("auto", options, {"candidates": "strategy names"})
    names = [candidates] if isinstance(candidates, str) else list(candidates)
    unknown = [n for n in names if n not in STRATEGIES or n == "auto"]
    if not names or unknown:
        raise PlanError(
            f"auto planner: candidates {names!r} must be a non-empty list of "
            f"{', '.join(n for n in STRATEGIES if n != 'auto')}"
        )
    token = _SHARED_MXNET_TRAVERSALS.set({})
    try:
        plans = [STRATEGIES[name](graph) for name in names]
    finally:
        _SHARED_MXNET_TRAVERSALS.reset(token)
    best = min(plans, key=lambda plan: plan.total_bytes)
    details = {"chosen": best.strategy, "candidates": {p.strategy: p.total_bytes for p in plans},
               **best.details}
    return replace(best, strategy="auto", details=details, planning_seconds=time.perf_counter() - started)


STRATEGIES: dict[str, Planner] = {
    "none": plan_none,
    "inplace": plan_inplace,
    "coshare": plan_coshare,
    "mxnet": plan_mxnet,
    "greedy": plan_greedy,
    "auto": plan_auto,
}

__all__ = ["AUTO_CANDIDATES", "STRATEGIES", "plan_auto", "plan_coshare", "plan_greedy", "plan_inplace",
           "plan_mxnet", "plan_none"]
