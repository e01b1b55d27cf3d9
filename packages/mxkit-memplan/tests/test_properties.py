"""Property tests over random DAGs: every strategy's plan is legal and obeys the bounds."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memplan_testing import graphs, reference_check, reference_lifetimes
from mxkit.memplan import plan_memory
from mxkit.memplan.liveness import lower_bound
from mxkit.memplan.strategies import STRATEGIES

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
STRATEGY_NAMES = sorted(STRATEGIES)


@SETTINGS
@given(graphs(devices=("cpu(0)", "gpu(0)")))
def test_every_strategy_passes_verify_and_the_brute_force_reference(graph):
    for name in STRATEGY_NAMES:
        plan = plan_memory(graph, name)
        plan.verify(graph)
        assert reference_check(plan, graph) == [], name


@SETTINGS
@given(graphs(devices=("cpu(0)", "gpu(0)")))
def test_bounds_between_strategies(graph):
    plans = {name: plan_memory(graph, name) for name in STRATEGY_NAMES}
    planned = sum(e.size for e in graph.entries if not e.external)
    assert plans["none"].total_bytes == planned
    for name, plan in plans.items():
        assert plan.total_bytes >= plan.lower_bound_bytes, name
        assert plan.strategy == name
    assert plans["inplace"].total_bytes <= plans["none"].total_bytes
    assert plans["mxnet"].total_bytes <= plans["none"].total_bytes
    assert plans["coshare"].total_bytes <= plans["none"].total_bytes
    assert plans["greedy"].total_bytes <= plans["mxnet"].total_bytes
    assert plans["auto"].total_bytes == min(plans[n].total_bytes for n in ("inplace", "mxnet", "greedy"))


@SETTINGS
@given(graphs())
def test_lower_bound_without_inplace_options_is_the_peak_of_live_sizes(graph):
    # with no in-place options nothing live at one step can share, so the bound must be
    # exactly the brute-force peak of the summed sizes of live entries
    from mxkit.memplan import Graph, Node

    plain = Graph([Node(n.name, n.inputs, n.outputs, (), n.ignored_inputs) for n in graph.nodes], graph.entries)
    life = reference_lifetimes(plain)
    sizes = {e.name: e.size for e in plain.entries}
    expected = [sum(sizes[name] for name, (s, e) in life.items() if s <= step <= e)
                for step in range(len(plain.nodes))]
    profile, bound = lower_bound(plain)
    assert list(profile) == expected
    assert bound == max(expected)


@SETTINGS
@given(graphs())
def test_verify_rejects_a_plan_that_moves_an_entry_onto_a_live_neighbour(graph):
    from dataclasses import replace

    from mxkit.memplan import PlanError

    plan = plan_memory(graph, "none")
    life = reference_lifetimes(graph)
    sized = [name for name in life if plan.storage[name] and next(e.size for e in graph.entries if e.name == name)]
    pairs = [(a, b) for a in sized for b in sized
             if a < b and not (life[a][1] < life[b][0] or life[b][1] < life[a][0])]
    if not pairs:
        return
    a, b = pairs[0]
    storage = dict(plan.storage)
    pool_a = next(p for p in plan.pools if p.id == storage[a].pool)
    storage[b] = storage[a]
    pools = tuple(replace(p, size=max(p.size, next(e.size for e in graph.entries if e.name == b)))
                  if p.id == pool_a.id else p for p in plan.pools)
    same_device = next(e.device for e in graph.entries if e.name == a) == next(
        e.device for e in graph.entries if e.name == b)
    bad = replace(plan, storage=storage, pools=pools)
    with pytest.raises(PlanError):
        bad.verify(graph)
    assert reference_check(bad, graph) != [] or not same_device


def _ancestors(graph):
    """Per node, the set of nodes it depends on (brute force transitive closure)."""
    made_by = {name: i for i, node in enumerate(graph.nodes) for name in node.outputs}
    result = []
    for node in graph.nodes:
        found = set()
        for name in node.inputs:
            if name in made_by:
                found.add(made_by[name])
                found |= result[made_by[name]]
        result.append(found)
    return result


@SETTINGS
@given(graphs())
def test_coshare_never_orders_nodes_that_could_run_in_parallel(graph):
    # whenever memory that held the contents of one alias group (entries joined by
    # identity decisions: one value) is written with another group, every node that
    # touched the first (writers and readers) must already be an ancestor of the writer
    plan = plan_memory(graph, "coshare", max_colours=2)
    ancestors = _ancestors(graph)
    life = reference_lifetimes(graph)
    sizes = {e.name: e.size for e in graph.entries}
    producer = {name: i for i, node in enumerate(graph.nodes) for name in node.outputs}
    group = {name: name for name in life}
    for out, (src, identity) in sorted(plan.inplace.items(), key=lambda kv: producer[kv[0]]):
        if identity:
            group[out] = group[src]
    touched, first_write = {}, {}
    for name in life:
        g = group[name]
        touched.setdefault(g, set()).add(producer[name])
        touched[g].update(i for i, node in enumerate(graph.nodes)
                          for s, n in enumerate(node.inputs) if n == name and s not in node.ignored_inputs)
        first_write[g] = min(first_write.get(g, producer[name]), producer[name])
    for x in life:
        for y in life:
            gx, gy = group[x], group[y]
            if gx == gy or plan.storage[x].pool != plan.storage[y].pool or not sizes[x] or not sizes[y]:
                continue
            if first_write[gx] > first_write[gy] or (first_write[gx] == first_write[gy] and gx > gy):
                continue
            writer = first_write[gy]
            assert touched[gx] <= ancestors[writer] | {writer}, (x, y)


@SETTINGS
@given(graphs(), st.randoms(use_true_random=False))
def test_from_unordered_recovers_an_execution_order(graph, rng):
    from mxkit.memplan import Graph

    shuffled = list(graph.nodes)
    rng.shuffle(shuffled)
    rebuilt = Graph.from_unordered(shuffled, list(graph.entries))
    position = {node.name: i for i, node in enumerate(rebuilt.nodes)}
    for node in rebuilt.nodes:
        for name in node.inputs:
            maker = next((n.name for n in rebuilt.nodes if name in n.outputs), None)
            assert maker is None or position[maker] < position[node.name]
    assert sorted(position) == sorted(n.name for n in graph.nodes)
    assert plan_memory(rebuilt, "none").total_bytes == plan_memory(graph, "none").total_bytes
    plan_memory(rebuilt, "greedy").verify(rebuilt)
