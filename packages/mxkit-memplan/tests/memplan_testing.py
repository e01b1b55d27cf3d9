"""Hypothesis strategies for random graph descriptions, and an O(n^2) reference checker
written independently of mxkit.memplan.verify."""

from __future__ import annotations

from hypothesis import strategies as st
from mxkit.memplan import Entry, Graph, Node

SIZES = st.sampled_from([0, 1, 8, 8, 16, 16, 16, 24, 64, 100, 256])


@st.composite
def graphs(draw, max_nodes: int = 24, devices: tuple[str, ...] = ("cpu(0)",)) -> Graph:
    """A random DAG in execution order with random sizes, in-place and identity options,
    ignored inputs, duplicate reads, external inputs and requested outputs."""
    entries: list[Entry] = []
    for i in range(draw(st.integers(1, 3))):
        entries.append(Entry(f"arg{i}", draw(SIZES), draw(st.sampled_from(devices)), external=True))
    nodes: list[Node] = []
    for n in range(draw(st.integers(1, max_nodes))):
        available = [e.name for e in entries]
        inputs = tuple(draw(st.lists(st.sampled_from(available), min_size=1, max_size=3)))
        device = draw(st.sampled_from(devices))
        outputs = []
        for k in range(draw(st.integers(1, 2))):
            external = draw(st.booleans()) and draw(st.booleans()) and draw(st.booleans())
            entries.append(Entry(f"n{n}_{k}", draw(SIZES), device, external=external))
            outputs.append(entries[-1].name)
        ignored = frozenset(s for s in range(len(inputs)) if draw(st.integers(0, 9)) == 0)
        options = []
        for slot in range(len(inputs)):
            if slot not in ignored and draw(st.booleans()):
                options.append((slot, draw(st.integers(0, len(outputs) - 1)), draw(st.integers(0, 4)) == 0))
        nodes.append(Node(f"node{n}", inputs, tuple(outputs), tuple(options), ignored))
    return Graph(nodes, entries)


def reference_lifetimes(graph: Graph) -> dict[str, tuple[int, int]]:
    """Steps during which each planned entry is live: producer to last non-ignored read."""
    result = {}
    for entry in graph.entries:
        if entry.external:
            continue
        start = next(i for i, n in enumerate(graph.nodes) if entry.name in n.outputs)
        end = start
        for i, node in enumerate(graph.nodes):
            if any(name == entry.name and slot not in node.ignored_inputs for slot, name in enumerate(node.inputs)):
                end = i
        result[entry.name] = (start, end)
    return result


def reference_check(plan, graph: Graph) -> list[str]:
    """Problems found by brute force over all pairs (empty list: the plan looks legal).

    Two planned entries live during a common step may overlap in memory only if they are
    connected through identity decisions, or one overwrites the other in place at the
    step where everything the other shares is read for the last time, read once.
    """
    problems = []
    life = reference_lifetimes(graph)
    sizes = {e.name: e.size for e in graph.entries}
    alias = {name: name for name in life}

    def root(name):
        while alias.get(name, name) != name:
            name = alias[name]
        return name

    for out, (src, identity) in plan.inplace.items():
        if identity:
            alias[root(out)] = root(src)
    group_end = {}
    for name, (_s, e) in life.items():
        group_end[root(name)] = max(group_end.get(root(name), -1), e)
    names = sorted(life)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            sa, sb = plan.storage[a], plan.storage[b]
            if sa.pool != sb.pool or sizes[a] == 0 or sizes[b] == 0:
                continue
            if sa.offset >= sb.offset + sizes[b] or sb.offset >= sa.offset + sizes[a]:
                continue
            (a0, a1), (b0, b1) = life[a], life[b]
            if a1 < b0 or b1 < a0:
                continue
            if root(a) == root(b):
                continue
            ok = False
            for first, second in ((a, b), (b, a)):
                # ``second`` (or its group) starts by overwriting something of first's group
                for out, (src, identity) in plan.inplace.items():
                    if identity or root(out) != root(second) or root(src) != root(first):
                        continue
                    step = next(k for k, n in enumerate(graph.nodes) if out in n.outputs)
                    node = graph.nodes[step]
                    reads = sum(1 for s, n in enumerate(node.inputs)
                                if s not in node.ignored_inputs and root(n) == root(first))
                    if group_end[root(first)] == step and reads == 1:
                        ok = True
            if not ok:
                problems.append(f"{a} {life[a]} and {b} {life[b]} overlap in pool {sa.pool}")
    return problems
