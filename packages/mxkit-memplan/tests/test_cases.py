"""Hand-built graphs whose right plan is known."""

import pytest
from mxkit.memplan import GraphBuilder, plan_memory
from mxkit.memplan.strategies import STRATEGIES

SHARING = ("inplace", "mxnet", "greedy", "coshare", "auto")


def paper_example(requested_d: bool = False):
    """a = ones; b = a * 2; c = b * a; d = c + 1 (the MXNet paper's example)."""
    g = GraphBuilder()
    g.node("ones", outputs=[("a", 400)])
    g.node("mul2", inputs=["a"], outputs=[("b", 400)], inplace=[(0, 0)])
    g.node("mul", inputs=["b", "a"], outputs=[("c", 400)], inplace=[(0, 0), (1, 0)])
    g.node("add1", inputs=["c"], outputs=[("d", 400)], inplace=[(0, 0)])
    if requested_d:
        g.mark_external("d")
    else:
        # d is used (MXNet only writes in place an output that something reads)
        g.node("sum", inputs=["d"], outputs=[("loss", 4)])
        g.mark_external("loss")
    return g.build()


@pytest.mark.parametrize("strategy", SHARING)
def test_paper_example_shares_c_and_d(strategy):
    graph = paper_example()
    plan = plan_memory(graph, strategy)
    plan.verify(graph)
    assert plan.storage["c"] == plan.storage["d"]
    # a is read by mul, which writes c: a cannot be overwritten before then, and b is
    # still read there too, so two buffers are needed and enough
    assert plan.storage["a"] != plan.storage["b"]
    assert plan.total_bytes == plan.lower_bound_bytes == 800


def test_paper_example_baseline_and_requested_output():
    graph = paper_example(requested_d=True)
    assert plan_memory(graph, "none").total_bytes == 1200
    plan = plan_memory(graph, "inplace")
    assert "d" not in plan.storage  # requested outputs live outside the plan
    assert plan.inplace == {"c": ("b", False)}
    assert plan.total_bytes == 800


def chain_graph(n=10, size=1000, inplace=()):
    g = GraphBuilder()
    g.external("x", size)
    previous = "x"
    for i in range(n):
        previous = g.node(f"f{i}", [previous], [(f"y{i}", size)], inplace=inplace)[0]
    g.mark_external(previous)  # the requested output
    return g.build()


@pytest.mark.parametrize("strategy", SHARING)
def test_chain_without_inplace_fits_in_two_buffers(strategy):
    graph = chain_graph()
    plan = plan_memory(graph, strategy)
    plan.verify(graph)
    assert plan.total_bytes == 2000 == plan.lower_bound_bytes
    if strategy != "greedy":
        assert len(plan.pools) == 2


@pytest.mark.parametrize("strategy", SHARING)
def test_chain_with_inplace_fits_in_one_buffer(strategy):
    graph = chain_graph(inplace=[(0, 0)])
    plan = plan_memory(graph, strategy)
    plan.verify(graph)
    assert plan.total_bytes == 1000
    assert len(plan.inplace) == 8  # y0 cannot overwrite x, nor y9 (requested) y8


def diamond():
    """a feeds two parallel branches b1 -> b2 and c1 -> c2 that join in d."""
    g = GraphBuilder()
    g.node("ones", outputs=[("a", 100)])
    g.node("fb1", ["a"], [("b1", 100)])
    g.node("fb2", ["b1"], [("b2", 100)])
    g.node("fc1", ["a"], [("c1", 100)])
    g.node("fc2", ["c1"], [("c2", 100)])
    g.node("add", ["b2", "c2"], [("d", 100)], inplace=[(0, 0), (1, 0)])
    return g.build()


def _pools(plan, names):
    return {plan.storage[n].pool for n in names}


def test_inplace_shares_across_the_parallel_branches():
    # the serial order frees b1 before c1 is written: a planner that ignores
    # parallelism reuses it, which is what coshare must not do
    plan = plan_memory(diamond(), "inplace")
    assert _pools(plan, ["b1", "b2"]) & _pools(plan, ["c1", "c2"])


def test_coshare_does_not_share_the_parallel_branches():
    graph = diamond()
    plan = plan_memory(graph, "coshare")
    plan.verify(graph)
    assert not _pools(plan, ["b1", "b2"]) & _pools(plan, ["c1", "c2"])
    assert plan.details["path_colours"] == 2
    assert plan.total_bytes <= plan_memory(graph, "none").total_bytes


def test_identity_option_aliases_an_input_that_is_still_read():
    g = GraphBuilder()
    g.node("make", outputs=[("x", 64)])
    g.node("reshape", ["x"], [("y", 64)], inplace=[(0, 0, True)])
    g.node("use_y", ["y"], [("z", 64)])
    g.node("use_x", ["x", "z"], [("w", 64)])
    graph = g.build()
    for strategy in SHARING:
        plan = plan_memory(graph, strategy)
        plan.verify(graph)
        assert plan.storage["x"] == plan.storage["y"], strategy
        assert plan.inplace["y"] == ("x", True)


def test_overwrite_needs_the_last_read():
    g = GraphBuilder()
    g.node("make", outputs=[("x", 64)])
    g.node("relu", ["x"], [("y", 64)], inplace=[(0, 0)])  # x is read again later
    g.node("add", ["x", "y"], [("z", 64)])
    graph = g.build()
    for strategy in SHARING:
        plan = plan_memory(graph, strategy)
        assert "y" not in plan.inplace
        assert plan.storage["x"] != plan.storage["y"]


def test_an_input_read_twice_by_one_node_is_not_overwritten():
    g = GraphBuilder()
    g.node("make", outputs=[("x", 64)])
    g.node("square", ["x", "x"], [("y", 64)], inplace=[(0, 0)])
    graph = g.build()
    for strategy in SHARING:
        assert plan_memory(graph, strategy).inplace == {}


def test_external_inputs_are_never_written_in_place():
    g = GraphBuilder()
    g.external("weight", 64)
    g.node("scale", ["weight"], [("y", 64)], inplace=[(0, 0)])
    g.node("out", ["y"], [("z", 64)], inplace=[(0, 0)])
    graph = g.build()
    for strategy in STRATEGIES:
        plan = plan_memory(graph, strategy)
        assert "weight" not in plan.storage
        assert "y" not in plan.inplace


def test_ignored_input_does_not_keep_an_entry_alive():
    g = GraphBuilder()
    g.node("make", outputs=[("x", 1000)])
    g.node("f", ["x"], [("y", 1000)])
    g.node("g", ["y", "x"], [("z", 1000)], ignored_inputs=[1])
    graph = g.build()
    # x is last read by f, so z can reuse x's buffer
    assert plan_memory(graph, "inplace").total_bytes == 2000
    assert plan_memory(graph, "inplace").storage["z"] == plan_memory(graph, "inplace").storage["x"]


def test_devices_never_share_memory():
    from mxkit.memplan import Entry, Graph, Node

    entries = [Entry("x", 64, "cpu(0)"), Entry("y", 64, "gpu(0)"), Entry("z", 64, "cpu(0)")]
    nodes = [Node("a", (), ("x",)), Node("copy", ("x",), ("y",), ((0, 0),)), Node("b", ("y",), ("z",))]
    graph = Graph(nodes, entries)
    for strategy in STRATEGIES:
        plan = plan_memory(graph, strategy)
        plan.verify(graph)
        assert plan.inplace == {}
        assert plan.bytes_by_device()["gpu(0)"] == 64
        assert plan.bytes_by_device()["cpu(0)"] in (64, 128)
    assert plan_memory(graph, "inplace").bytes_by_device()["cpu(0)"] == 64


def _reuse_graph(first, second):
    """x (first bytes) is freed before y (second bytes) is written."""
    g = GraphBuilder()
    g.node("n0", outputs=[("x", first)])
    g.node("n1", ["x"], [("t", 1)])
    g.node("n2", ["t"], [("y", second)])
    return g.build()


@pytest.mark.parametrize(("first", "second", "expected"), [
    (1600, 100, 1601),   # a block up to 16x larger is reused
    (1700, 100, 1801),   # beyond 16x: a new block
    (100, 1000, 1001),   # a smaller block within 16x is reused and grown
    (100, 1700, 1801),   # smaller than 1/16: a new block
])
def test_mxnet_free_list_uses_a_16x_size_window(first, second, expected):
    plan = plan_memory(_reuse_graph(first, second), "mxnet")
    assert plan.total_bytes == expected


def test_mxnet_match_range_zero_disables_recycling():
    graph = _reuse_graph(100, 100)
    assert plan_memory(graph, "mxnet").total_bytes == 101
    assert plan_memory(graph, "mxnet", match_range=0).total_bytes == 201


def test_inplace_recycles_best_fit_without_growing():
    assert plan_memory(_reuse_graph(100, 1000), "inplace").total_bytes == 1101
    assert plan_memory(_reuse_graph(1000, 100), "inplace").total_bytes == 1001


def test_zero_size_entries_take_no_memory():
    graph = chain_graph(n=5, size=0)
    for strategy in STRATEGIES:
        plan = plan_memory(graph, strategy)
        plan.verify(graph)
        assert plan.total_bytes == 0 == plan.lower_bound_bytes


def test_auto_keeps_the_smallest_candidate_and_says_which():
    from mxkit.memplan import synthetic

    graph = synthetic.with_backward(synthetic.inception(3, size=4096))
    plan = plan_memory(graph, "auto")
    sizes = {name: plan_memory(graph, name).total_bytes for name in ("inplace", "mxnet", "greedy")}
    assert plan.total_bytes == min(sizes.values())
    assert plan.details["candidates"] == sizes
    assert sizes[plan.details["chosen"]] == plan.total_bytes
    assert plan.strategy == "auto"
    only = plan_memory(graph, "auto", candidates=["mxnet"])
    assert only.total_bytes == sizes["mxnet"]


def test_planning_restores_the_garbage_collector_state():
    import gc

    graph = chain_graph()
    assert gc.isenabled()
    plan_memory(graph, "greedy")
    assert gc.isenabled()
    gc.disable()
    try:
        plan_memory(graph, "inplace")
        assert not gc.isenabled()
    finally:
        gc.enable()
