"""The checker every plan must pass (``MemoryPlan.verify``).

It shares no code with the planners beyond the graph's lifetimes, so a planner bug is
not hidden by the same bug here. Identity decisions join entries into alias groups that
occupy one range for the union of their lifetimes; an overwrite decision lets the
output's group start, at the step it is written, in the memory of the input's group,
which must end at that step and be read by that step through one input slot only. Any
other two groups live during a common step must not overlap: a sweep over steps per pool
with the live ranges kept sorted by offset checks this in O(n log n) for a valid plan.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from typing import TYPE_CHECKING

from mxkit.memplan.errors import PlanError
from mxkit.memplan.graph import Graph
from mxkit.memplan.liveness import lifetimes

if TYPE_CHECKING:
    from mxkit.memplan.plan import MemoryPlan


def verify_plan(plan: MemoryPlan, graph: Graph) -> None:
    """Raise :class:`PlanError` if ``plan`` is not legal for ``graph``."""
    if not isinstance(graph, Graph):
        raise PlanError(f"verify() needs the mxkit.memplan.Graph the plan was made for, got {graph!r}")
    pools = _check_pools(plan)
    offsets = _check_storage(plan, graph, pools)
    parent = list(range(len(graph.entries)))
    touches = _check_decisions(plan, graph, offsets, parent)
    _sweep(plan, graph, offsets, parent, touches)
    if plan.recompute:
        unknown = [name for name in plan.recompute if name not in graph.node_index]
        if unknown:
            raise PlanError(f"plan {plan.strategy!r} recomputes unknown nodes {unknown}")


def _check_pools(plan: MemoryPlan) -> dict[int, tuple[str, int]]:
    pools: dict[int, tuple[str, int]] = {}
    for pool in plan.pools:
        if pool.id in pools:
            raise PlanError(f"plan {plan.strategy!r} defines pool {pool.id} twice")
        if isinstance(pool.size, bool) or not isinstance(pool.size, int) or pool.size < 0:
            raise PlanError(f"plan {plan.strategy!r}: pool {pool.id} has size {pool.size!r}; need an int >= 0")
        pools[pool.id] = (pool.device, pool.size)
    return pools


def _check_storage(plan: MemoryPlan, graph: Graph, pools: dict[int, tuple[str, int]]) -> list[int]:
    """Per entry, its offset (-1 for external); checks fit, device and coverage."""
    offsets = [-1] * len(graph.entries)
    for name in plan.storage:
        if name not in graph.entry_index:
            raise PlanError(f"plan {plan.strategy!r} gives storage to {name!r}, which is not an entry of the graph")
    for index, entry in enumerate(graph.entries):
        storage = plan.storage.get(entry.name)
        if entry.external:
            if storage is not None:
                raise PlanError(
                    f"plan {plan.strategy!r} gives external entry {entry.name!r} storage {storage}; "
                    f"external entries live outside the plan and must have none"
                )
            continue
        if storage is None:
            raise PlanError(f"plan {plan.strategy!r} gives no storage to entry {entry.name!r}")
        if storage.pool not in pools:
            raise PlanError(f"entry {entry.name!r} is placed in pool {storage.pool}, which the plan does not define")
        device, pool_size = pools[storage.pool]
        if device != entry.device:
            raise PlanError(
                f"entry {entry.name!r} on device {entry.device!r} is placed in pool {storage.pool} "
                f"on device {device!r}; memory is only shared within one device"
            )
        if storage.offset < 0 or storage.offset + entry.size > pool_size:
            raise PlanError(
                f"entry {entry.name!r} ({entry.size} bytes at offset {storage.offset}) does not fit "
                f"pool {storage.pool} of {pool_size} bytes"
            )
        offsets[index] = storage.offset
    return offsets


def _find(parent: list[int], x: int) -> int:
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


def _check_decisions(plan: MemoryPlan, graph: Graph, offsets: list[int],
                     parent: list[int]) -> dict[int, tuple[int, int]]:
    """Check each in-place decision; join identity pairs in ``parent``; return the
    overwrite decisions as ``{output entry: (input entry, step)}``."""
    overwrites: dict[int, tuple[int, int]] = {}
    for out_name, (in_name, identity) in plan.inplace.items():
        if out_name not in graph.entry_index or in_name not in graph.entry_index:
            raise PlanError(f"plan {plan.strategy!r}: in-place decision {in_name!r} -> {out_name!r} names an "
                            f"entry that is not in the graph")
        target, source = graph.entry_index[out_name], graph.entry_index[in_name]
        step = graph.producer[target]
        node = graph.nodes[step] if step >= 0 else None
        allowed = node is not None and any(
            graph.node_inputs[step][i] == source and graph.node_outputs[step][o] == target
            and (ident or not identity)
            for i, o, ident in graph.node_options[step]
        )
        kind = "identity" if identity else "overwrite"
        if not allowed:
            raise PlanError(
                f"plan {plan.strategy!r} puts {out_name!r} in the memory of {in_name!r} ({kind}), but no "
                f"{kind}-capable in-place option of its producer allows that pair"
            )
        if graph.entry_external[source] or graph.entry_external[target]:
            raise PlanError(
                f"plan {plan.strategy!r} shares memory between {in_name!r} and {out_name!r} in place, but "
                f"external entries are never written over or aliased by the plan"
            )
        if (plan.storage[out_name] != plan.storage[in_name]
                or graph.entry_size[target] > graph.entry_size[source]):
            raise PlanError(
                f"in-place decision {in_name!r} -> {out_name!r}: the output must sit at the input's pool "
                f"and offset and be no larger ({plan.storage[out_name]} vs {plan.storage[in_name]}, "
                f"{graph.entry_size[target]} vs {graph.entry_size[source]} bytes)"
            )
        if identity:
            parent[_find(parent, target)] = _find(parent, source)
        else:
            overwrites[target] = (source, step)
    return overwrites


def _sweep(plan: MemoryPlan, graph: Graph, offsets: list[int], parent: list[int],
           overwrites: dict[int, tuple[int, int]]) -> None:
    life = lifetimes(graph)
    # group id -> [start, end, lo, hi, pool]
    groups: dict[int, list[int]] = {}
    for entry, offset in enumerate(offsets):
        if offset < 0 or graph.entry_size[entry] == 0:
            continue
        root = _find(parent, entry)
        lo, hi = offset, offset + graph.entry_size[entry]
        pool = plan.storage[graph.entries[entry].name].pool
        group = groups.get(root)
        if group is None:
            groups[root] = [life.start[entry], life.end[entry], lo, hi, pool]
        else:
            group[0] = min(group[0], life.start[entry])
            group[1] = max(group[1], life.end[entry])
            group[3] = max(group[3], hi)
    allowed: set[tuple[int, int]] = set()
    for target, (source, step) in overwrites.items():
        source_group, target_group = _find(parent, source), _find(parent, target)
        readers = sum(1 for slot, entry in enumerate(graph.node_inputs[step])
                      if slot not in graph.node_ignored[step] and _find(parent, entry) == source_group)
        if readers != 1:
            raise PlanError(
                f"plan {plan.strategy!r} writes {graph.entries[target].name!r} over "
                f"{graph.entries[source].name!r} at node {graph.nodes[step].name!r}, which reads that memory "
                f"through {readers} input slots; overwriting needs the only read"
            )
        allowed.add((source_group, target_group))
    by_pool: dict[int, list[int]] = {}
    for root, group in groups.items():
        by_pool.setdefault(group[4], []).append(root)
    for roots in by_pool.values():
        _sweep_pool(plan, graph, groups, roots, allowed)


def _sweep_pool(plan: MemoryPlan, graph: Graph, groups: dict[int, list[int]], roots: list[int],
                allowed: set[tuple[int, int]]) -> None:
    roots.sort(key=lambda r: groups[r][0])
    live_keys: list[tuple[int, int]] = []  # (lo, root), sorted; ranges disjoint at query time
    expiry: list[tuple[int, int, int]] = []  # (end, lo, root)
    index = 0
    while index < len(roots):
        step = groups[roots[index]][0]
        while expiry and expiry[0][0] < step:
            _end, lo, root = heapq.heappop(expiry)
            del live_keys[bisect.bisect_left(live_keys, (lo, root))]
        batch = []
        while index < len(roots) and groups[roots[index]][0] == step:
            batch.append(roots[index])
            index += 1
        for root in batch:
            _start, _end, lo, hi, _pool = groups[root]
            position = bisect.bisect_left(live_keys, (hi, -1))
            while position > 0:
                position -= 1
                other = live_keys[position][1]
                if groups[other][3] <= lo:
                    break
                if not (groups[other][1] == step and (other, root) in allowed):
                    _raise_overlap(plan, graph, groups, other, root)
        batch.sort(key=lambda r: groups[r][2])
        for first, second in itertools.pairwise(batch):
            if groups[first][3] > groups[second][2]:
                _raise_overlap(plan, graph, groups, first, second)
        for root in batch:
            _start, end, lo, _hi, _pool = groups[root]
            bisect.insort(live_keys, (lo, root))
            heapq.heappush(expiry, (end, lo, root))


def _raise_overlap(plan: MemoryPlan, graph: Graph, groups: dict[int, list[int]], a: int, b: int) -> None:
    def describe(root: int) -> str:
        start, end, lo, hi, _pool = groups[root]
        return f"{graph.entries[root].name!r} (live steps {start}..{end}, bytes [{lo}, {hi}))"

    raise PlanError(
        f"plan {plan.strategy!r} overlaps {describe(a)} and {describe(b)} in pool {groups[a][4]}: they are "
        f"live during a common step and no in-place decision allows them to share memory"
    )


__all__ = ["verify_plan"]
