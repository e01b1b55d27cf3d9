"""The ``sublinear`` strategy: checkpoint selection over a plain node list, and planning the
rewritten graph (the rewrite itself is the client's; see mxkit-symbol's mirror pass)."""

import math

import pytest
from mxkit.core import config
from mxkit.core.info import render_info
from mxkit.memplan import GraphBuilder, GraphError, PlanError, RecomputeCandidate, plan_memory, recompute_selector
from mxkit.memplan.sublinear import cut_points, select_checkpoints


def chain(n, size=100):
    return [RecomputeCandidate(f"n{i}", size, inputs=(f"n{i - 1}",) if i else ()) for i in range(n)]


def estimate(candidates, kept):
    """Chen's cost of a checkpoint set, computed independently: kept bytes plus the longest run
    of recomputed bytes."""
    run = longest = 0
    for c in candidates:
        run = 0 if c.name in kept else run + c.size
        longest = max(longest, run)
    return sum(c.size for c in candidates if c.name in kept) + longest


def test_a_fixed_budget_ends_a_segment_at_the_node_that_passes_it():
    kept = select_checkpoints(chain(10), "sqrt", segment_bytes=250)
    # 100, 200, 300 > 250: the third node of each run is kept
    assert kept == {"n2", "n5", "n8"}


@pytest.mark.parametrize("n", [16, 64, 400])
def test_the_budget_search_finds_about_sqrt_n_segments_on_a_uniform_chain(n):
    candidates = chain(n)
    kept = select_checkpoints(candidates)
    # the optimum of k*s + (n/k)*s is 2*sqrt(n)*s at k = sqrt(n)
    assert estimate(candidates, kept) <= 1.15 * 2 * math.sqrt(n) * 100
    assert 0.5 * math.sqrt(n) <= len(kept) <= 2 * math.sqrt(n)


def residual_blocks(blocks, inner=3, size=100):
    """x -> (inner nodes) -> add(last, x) per block: only the adds (and the first node) cut."""
    nodes, previous = [], None
    for b in range(blocks):
        start = previous
        for i in range(inner):
            name = f"b{b}_{i}"
            nodes.append(RecomputeCandidate(name, size, inputs=(previous,) if previous else ()))
            previous = name
        add = f"b{b}_add"
        nodes.append(RecomputeCandidate(add, size, inputs=tuple(x for x in (previous, start) if x)))
        previous = add
    return nodes


def test_cut_points_are_the_nodes_no_earlier_result_is_read_past():
    nodes = residual_blocks(2)
    assert [c.name for c, cut in zip(nodes, cut_points(nodes)) if cut] == ["b0_0", "b0_1", "b0_2", "b0_add",
                                                                           "b1_add"]
    # b1's inner nodes are crossed by the shortcut from b0_add to b1_add
    assert cut_points(chain(5)) == [True] * 5
    assert cut_points([RecomputeCandidate("a", 1), RecomputeCandidate("b", 1)]) == [True, True]


def test_checkpoints_inside_a_residual_block_are_never_chosen():
    nodes = residual_blocks(30)
    cuts = {c.name for c, cut in zip(nodes, cut_points(nodes)) if cut}
    for budget in (0, 50, 150, 1000):
        kept = select_checkpoints(nodes, "sqrt", budget)
        assert kept and kept <= cuts, budget


def test_random_nodes_outputs_and_forced_choices_override_the_policy():
    nodes = [RecomputeCandidate("conv", 100, expensive=True),
             RecomputeCandidate("dropout", 100, inputs=("conv",), recomputable=False),
             RecomputeCandidate("forced_keep", 100, inputs=("dropout",), forced=False),
             RecomputeCandidate("forced_drop", 10**9, inputs=("forced_keep",), forced=True, expensive=True),
             RecomputeCandidate("relu", 100, inputs=("forced_drop",))]
    for policy in ("sqrt", "cheap"):
        kept = select_checkpoints(nodes, policy, 1)
        assert {"dropout", "forced_keep"} <= kept and "forced_drop" not in kept, policy
    assert select_checkpoints(nodes, "cheap") == {"conv", "dropout", "forced_keep"}


def test_bad_selection_arguments_fail_with_the_choices():
    with pytest.raises(PlanError, match=r"policy 'everything' is not one of sqrt, cheap"):
        select_checkpoints(chain(3), "everything")
    with pytest.raises(PlanError, match=r"segment_bytes must be a byte count >= 0.*-1"):
        select_checkpoints(chain(3), "sqrt", -1)
    with pytest.raises(PlanError, match=r"segment_bytes.*True"):
        select_checkpoints(chain(3), "sqrt", True)


def rewritten_graph():
    """Forward a -> b -> c, backward reading a recomputed copy of b (``b_again``)."""
    g = GraphBuilder()
    g.node("a", outputs=[("a", 400)])
    g.node("b", ["a"], [("b", 400)], inplace=[(0, 0)])
    g.node("c", ["b"], [("c", 400)])
    g.node("b_again", ["a"], [("b2", 400)])
    g.node("grad", ["c", "b2"], [("g", 400)])
    g.mark_external("g")
    return g.build()


def test_the_planner_plans_like_auto_and_records_the_recomputing_nodes():
    graph = rewritten_graph()
    plan = plan_memory(graph, "sublinear", recompute=["b_again"])
    plan.verify(graph)
    auto = plan_memory(graph, "auto")
    assert plan.strategy == "sublinear" and plan.recompute == ("b_again",)
    assert plan.total_bytes == auto.total_bytes and plan.storage == auto.storage
    assert plan.details["base"] == "auto" and plan.details["recomputed_nodes"] == 1
    greedy = plan_memory(graph, "sublinear", base="greedy")
    assert greedy.recompute == () and greedy.total_bytes == plan_memory(graph, "greedy").total_bytes
    with config.override(memplan="sublinear"):
        assert plan_memory(graph).strategy == "sublinear"


def test_bad_planner_arguments_fail_clearly():
    graph = rewritten_graph()
    with pytest.raises(PlanError, match=r"recompute names \['nowhere'\] are not nodes of the graph"):
        plan_memory(graph, "sublinear", recompute=["nowhere"])
    with pytest.raises(PlanError, match=r"base 'sublinear' is itself a recomputing strategy"):
        plan_memory(graph, "sublinear", base="sublinear")
    with pytest.raises(PlanError, match=r"'greedy' got unknown options \['colours'\]"):
        plan_memory(graph, "sublinear", base="greedy", colours=3)
    from mxkit.memplan.plugin import plan_sublinear

    with pytest.raises(GraphError, match=r"'sublinear' needs a mxkit.memplan.Graph, got list"):
        plan_sublinear([])


def test_recompute_selector_tells_recomputing_planners_apart():
    assert recompute_selector("sublinear")(chain(3), "sqrt", 150) == {"n1"}
    assert recompute_selector("auto") is None and recompute_selector("greedy") is None
    with config.override(memplan="sublinear"):
        assert recompute_selector(None) is not None


def test_mxkit_info_lists_the_strategy():
    line = next(line for line in render_info().splitlines() if line.startswith("sublinear "))
    assert "mxkit-memplan" in line and "Chen" in line
