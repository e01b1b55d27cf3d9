"""Hypothesis strategies for random graph descriptions, and an O(n^2) reference checker
written independently of mxkit.memplan.verify."""

from __future__ import annotations

from hypothesis import strategies as st
from mxkit.memplan import Entry, Graph, Node

SIZE_CHOICES = (0, 1, 8, 8, 16, 16, 16, 24, 64, 100, 256)
SIZES = st.sampled_from(SIZE_CHOICES)


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


def seeded_graph(seed: int, max_nodes: int = 40, devices: tuple[str, ...] = ("cpu(0)", "gpu(0)")) -> Graph:
    """A reproducible random graph (``random.Random(seed)``) of the same family as
    :func:`graphs`: many equal sizes, so the planners' tie-breaking is exercised."""
    import random

    rng = random.Random(seed)
    sizes = SIZE_CHOICES
    entries = [Entry(f"arg{i}", rng.choice(sizes), rng.choice(devices), external=True)
               for i in range(rng.randint(1, 3))]
    nodes = []
    for n in range(rng.randint(1, max_nodes)):
        available = [e.name for e in entries]
        inputs = tuple(rng.choice(available) for _ in range(rng.randint(1, 3)))
        device = rng.choice(devices)
        outputs = []
        for k in range(rng.randint(1, 2)):
            entries.append(Entry(f"n{n}_{k}", rng.choice(sizes), device, external=rng.random() < 0.125))
            outputs.append(entries[-1].name)
        ignored = frozenset(s for s in range(len(inputs)) if rng.randint(0, 9) == 0)
        options = [(slot, rng.randint(0, len(outputs) - 1), rng.randint(0, 4) == 0)
                   for slot in range(len(inputs)) if slot not in ignored and rng.random() < 0.5]
        nodes.append(Node(f"node{n}", inputs, tuple(outputs), tuple(options), ignored))
    return Graph(nodes, entries)


#: the strategies (and options) whose plans the fingerprint fixture records
FINGERPRINTED = (("none", {}), ("inplace", {}), ("coshare", {}), ("coshare", {"max_colours": None}),
                 ("mxnet", {}), ("greedy", {}), ("auto", {}))


def plan_digest(plan) -> str:
    """A short hash of everything a plan decides: each entry's pool and offset, the pools,
    the in-place decisions, the live-bytes profile, the lower bound and the details."""
    import hashlib
    import json

    decided = {
        "storage": sorted((name, s.pool, s.offset) for name, s in plan.storage.items()),
        "pools": [(p.id, p.device, p.size) for p in plan.pools],
        "inplace": sorted((out, src, identity) for out, (src, identity) in plan.inplace.items()),
        "live": list(plan.live_bytes),
        "bound": plan.lower_bound_bytes,
        "details": plan.details,
    }
    text = json.dumps(decided, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def fingerprint_graphs(large: bool = False) -> list[tuple[str, object]]:
    """``(name, factory)`` of the graphs the fixture records: the benchmark suite and seeded
    random graphs of one and two devices, forward only and with a backward pass."""
    from mxkit.memplan import synthetic

    cases = list(synthetic.benchmark_suite(large))
    for seed in range(120):
        cases.append((f"seeded {seed}", lambda seed=seed: seeded_graph(seed)))
    for seed in range(40):
        cases.append((f"seeded train {seed}",
                      lambda seed=seed: synthetic.with_backward(seeded_graph(seed, 15, ("cpu(0)",)))))
        cases.append((f"random DAG 150 seed {seed}", lambda seed=seed: synthetic.random_dag(
            150, seed=seed, window=8, inplace_probability=0.8, identity_probability=0.3,
            external_probability=0.1, size_range=(1, 64))))
    return cases


def strategy_label(strategy: str, options: dict) -> str:
    return strategy + "".join(f" {k}={v}" for k, v in options.items())
