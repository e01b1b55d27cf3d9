"""verify() rejects illegal plans, each with a message naming the problem."""

from dataclasses import replace

import pytest
from mxkit.memplan import GraphBuilder, MemoryPlan, PlanError, Pool, Storage, plan_memory


def small_graph():
    g = GraphBuilder()
    g.external("w", 64)
    g.node("make", ["w"], [("x", 64)])
    g.node("relu", ["x"], [("y", 64)], inplace=[(0, 0)])
    g.node("use", ["y", "x"], [("z", 64)])
    g.mark_external("z")
    return g.build()


def plan_with(storage, pools, inplace=None):
    return MemoryPlan("hand", storage, tuple(pools), inplace or {}, (), 0)


def test_a_legal_hand_plan_passes():
    graph = small_graph()
    plan_with({"x": Storage(0, 0), "y": Storage(0, 64)}, [Pool(0, "cpu(0)", 128)]).verify(graph)


def test_overlap_of_live_entries():
    graph = small_graph()
    plan = plan_with({"x": Storage(0, 0), "y": Storage(0, 32)}, [Pool(0, "cpu(0)", 96)])
    with pytest.raises(PlanError, match=r"overlaps 'x' \(live steps 0..2, bytes \[0, 64\)\) and 'y'"):
        plan.verify(graph)


def test_overwrite_while_the_input_is_still_read():
    graph = small_graph()
    plan = plan_with({"x": Storage(0, 0), "y": Storage(0, 0)}, [Pool(0, "cpu(0)", 64)], {"y": ("x", False)})
    with pytest.raises(PlanError, match=r"overlaps"):
        plan.verify(graph)


def test_inplace_decision_without_an_option():
    graph = small_graph()
    plan = plan_with({"x": Storage(0, 0), "y": Storage(0, 64)}, [Pool(0, "cpu(0)", 128)], {"y": ("x", True)})
    with pytest.raises(PlanError, match=r"no identity-capable in-place option"):
        plan.verify(graph)


def test_external_with_storage_and_missing_storage():
    graph = small_graph()
    pools = [Pool(0, "cpu(0)", 256)]
    with pytest.raises(PlanError, match=r"external entry 'w' storage"):
        plan_with({"x": Storage(0, 0), "y": Storage(0, 64), "w": Storage(0, 128)}, pools).verify(graph)
    with pytest.raises(PlanError, match=r"gives no storage to entry 'y'"):
        plan_with({"x": Storage(0, 0)}, pools).verify(graph)
    with pytest.raises(PlanError, match=r"'ghost', which is not an entry"):
        plan_with({"x": Storage(0, 0), "y": Storage(0, 64), "ghost": Storage(0, 0)}, pools).verify(graph)


def test_pool_fit_and_device():
    graph = small_graph()
    with pytest.raises(PlanError, match=r"'y' \(64 bytes at offset 64\) does not fit pool 0 of 100 bytes"):
        plan_with({"x": Storage(0, 0), "y": Storage(0, 64)}, [Pool(0, "cpu(0)", 100)]).verify(graph)
    with pytest.raises(PlanError, match=r"on device 'cpu\(0\)' is placed in pool 1 on device 'gpu\(0\)'"):
        plan_with({"x": Storage(0, 0), "y": Storage(1, 0)},
                  [Pool(0, "cpu(0)", 64), Pool(1, "gpu(0)", 64)]).verify(graph)
    with pytest.raises(PlanError, match=r"pool 7, which the plan does not define"):
        plan_with({"x": Storage(0, 0), "y": Storage(7, 0)}, [Pool(0, "cpu(0)", 64)]).verify(graph)


def test_overwrite_of_an_input_read_through_two_slots():
    g = GraphBuilder()
    g.node("make", outputs=[("x", 8)])
    g.node("square", ["x", "x"], [("y", 8)], inplace=[(0, 0)])
    graph = g.build()
    plan = plan_with({"x": Storage(0, 0), "y": Storage(0, 0)}, [Pool(0, "cpu(0)", 8)], {"y": ("x", False)})
    with pytest.raises(PlanError, match=r"through 2 input slots"):
        plan.verify(graph)


def test_every_strategy_plan_of_this_graph_passes_and_a_corrupted_one_fails():
    graph = small_graph()
    for strategy in ("none", "inplace", "coshare", "mxnet", "greedy", "auto"):
        plan = plan_memory(graph, strategy)
        plan.verify(graph)
        squeezed = replace(plan, storage={**plan.storage, "y": plan.storage["x"]},
                           pools=tuple(replace(p, size=max(p.size, 64)) for p in plan.pools))
        with pytest.raises(PlanError):
            squeezed.verify(graph)
