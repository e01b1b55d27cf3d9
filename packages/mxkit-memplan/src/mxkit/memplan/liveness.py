"""Lifetimes of entries and the lower bound on the memory of any plan.

Step ``s`` is the execution of node ``s``. An entry is *live during* every step from the
one that produces it to its last (non-ignored) read, both included; an entry nobody reads
lives only during the step that writes it. Two entries live during one step need
disjoint memory, except:

- an identity pair (an output that holds its input's bytes) may alias at any time;
- an output may overwrite an input at the step that reads that input for the last time
  (an in-place option, the input read once by that step).

The lower bound assumes every such sharing that the options allow happens at once, so
no plan can use less memory at any step: its maximum over steps (summed over devices,
since devices do not share memory) bounds ``total_bytes`` of every plan from below.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from itertools import accumulate

from mxkit.memplan.graph import Graph


@dataclass(frozen=True)
class Lifetimes:
    """Integer lifetimes of a graph's entries (indexed like ``graph.entries``).

    Attributes
    ----------
    start : list of int
        Step that produces the entry (-1 for graph inputs).
    end : list of int
        Last step that reads it (``start`` when nobody reads it; ``num_steps`` for
        external entries, which outlive the graph).
    reads : list of int
        Number of non-ignored input slots that read it.
    """

    start: list[int]
    end: list[int]
    reads: list[int]


def lifetimes(graph: Graph) -> Lifetimes:
    """The :class:`Lifetimes` of ``graph`` (computed once, cached on the graph)."""
    cached = graph._cache.get("lifetimes")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    num_entries = len(graph.entries)
    start = list(graph.producer)
    end = list(start)
    reads = [0] * num_entries
    for step, (inputs, ignored) in enumerate(zip(graph.node_inputs, graph.node_ignored)):
        for slot, entry in enumerate(inputs):
            if ignored and slot in ignored:
                continue
            reads[entry] += 1
            end[entry] = step  # steps increase, so the last write wins
    for entry, external in enumerate(graph.entry_external):
        if external:
            end[entry] = graph.num_steps
    result = Lifetimes(start, end, reads)
    graph._cache["lifetimes"] = result
    return result


def identity_components(graph: Graph) -> list[int]:
    """Union-find roots grouping entries connected by any legal identity option."""
    parent = list(range(len(graph.entries)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for step, options in enumerate(graph.node_options):
        for input_slot, output_slot, identity in options:
            if not identity:
                continue
            source = graph.node_inputs[step][input_slot]
            target = graph.node_outputs[step][output_slot]
            if can_share(graph, source, target):
                parent[find(target)] = find(source)
    return [find(e) for e in range(len(graph.entries))]


def can_share(graph: Graph, source: int, target: int) -> bool:
    """Whether ``target`` may ever live in ``source``'s memory (both planned, one device,
    the target no larger)."""
    return (not graph.entry_external[source] and not graph.entry_external[target]
            and graph.entry_device[source] == graph.entry_device[target]
            and graph.entry_size[target] <= graph.entry_size[source])


def live_bytes_by_device(graph: Graph) -> dict[str, list[int]]:
    """Per device, the bytes that must be distinct during each step (see module doc)."""
    life = lifetimes(graph)
    steps = graph.num_steps
    diffs: dict[str, list[int]] = {device: [0] * (steps + 1) for device in graph.devices()}
    roots = identity_components(graph)
    size, external, device = graph.entry_size, graph.entry_external, graph.entry_device
    start, end = life.start, life.end
    # entries joined by identity options need the running maximum of their group; every
    # other entry adds its size over its lifetime (the common case, kept to a few lookups)
    joined = {root for entry, root in enumerate(roots) if root != entry}
    members: dict[int, list[int]] = {}
    for entry, root in enumerate(roots):
        if external[entry] or size[entry] == 0:
            continue
        if root == entry and entry not in joined:
            diff = diffs[device[entry]]
            diff[start[entry]] += size[entry]
            diff[end[entry] + 1] -= size[entry]
        else:
            members.setdefault(root, []).append(entry)
    for group in members.values():
        diff = diffs[device[group[0]]]
        if len(group) == 1:
            entry = group[0]
            diff[start[entry]] += size[entry]
            diff[end[entry] + 1] -= size[entry]
        else:
            _add_running_max(group, life, size, diff)
    _subtract_inplace_savings(graph, life, roots, diffs)
    return {device_name: list(accumulate(diff[:steps])) for device_name, diff in diffs.items()}


def _add_running_max(group: list[int], life: Lifetimes, size: list[int], diff: list[int]) -> None:
    """Add to ``diff`` the largest size among the group's members live at each step."""
    events = sorted(group, key=lambda e: life.start[e])
    heap: list[tuple[int, int]] = []  # (-size, end)
    current = 0
    index = 0
    step = life.start[events[0]]
    last_end = max(life.end[e] for e in group)
    while step <= last_end:
        while index < len(events) and life.start[events[index]] <= step:
            heapq.heappush(heap, (-size[events[index]], life.end[events[index]]))
            index += 1
        while heap and heap[0][1] < step:
            heapq.heappop(heap)
        value = -heap[0][0] if heap else 0
        if value != current:
            diff[step] += value - current
            current = value
        # jump to the next step where the set of live members can change
        next_step = last_end + 1
        if index < len(events):
            next_step = min(next_step, life.start[events[index]])
        if heap:
            next_step = min(next_step, heap[0][1] + 1)
        step = max(step + 1, next_step)
    diff[last_end + 1] -= current


def _subtract_inplace_savings(graph: Graph, life: Lifetimes, roots: list[int],
                              diffs: dict[str, list[int]]) -> None:
    """An output written over an input read for the last time needs no bytes of its own
    during that step; take the most optimistic choice so the bound stays a bound."""
    size, external, device = graph.entry_size, graph.entry_external, graph.entry_device
    end = life.end
    for step, options in enumerate(graph.node_options):
        if not options:
            continue
        inputs, outputs = graph.node_inputs[step], graph.node_outputs[step]
        ignored = graph.node_ignored[step]
        best: dict[int, int] | None = None  # output -> bytes it can save
        for input_slot, output_slot, _identity in options:
            source, target = inputs[input_slot], outputs[output_slot]
            if (roots[source] == roots[target] or end[source] != step or external[source] or external[target]
                    or device[source] != device[target] or size[target] > size[source]):
                continue
            # the source must be read by exactly one (non-ignored) slot of this step
            if ignored:
                reading = sum(1 for slot, entry in enumerate(inputs) if entry == source and slot not in ignored)
            else:
                reading = inputs.count(source)
            if reading != 1:
                continue
            if best is None:
                best = {}
            best[target] = max(best.get(target, 0), size[target])
        if best:
            for target, saved in best.items():
                diff = diffs[device[target]]
                diff[step] -= saved
                diff[step + 1] += saved


def lower_bound(graph: Graph) -> tuple[tuple[int, ...], int]:
    """``(live bytes per step summed over devices, lower bound in bytes)``.

    The bound is the sum over devices of each device's peak, so it is at least the peak
    of the summed profile.
    """
    cached = graph._cache.get("lower_bound")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    profiles = live_bytes_by_device(graph)
    steps = graph.num_steps
    total = [0] * steps
    bound = 0
    for profile in profiles.values():
        for step, value in enumerate(profile):
            total[step] += value
        bound += max(profile, default=0)
    result = (tuple(total), bound)
    graph._cache["lower_bound"] = result
    return result


__all__ = ["Lifetimes", "can_share", "identity_components", "lifetimes", "live_bytes_by_device",
           "lower_bound"]
