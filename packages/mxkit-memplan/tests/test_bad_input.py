"""Malformed graphs and calls fail with clear mxkit errors."""

import pytest
from mxkit.core.errors import MXKitError
from mxkit.memplan import Entry, Graph, GraphBuilder, GraphError, Node, PlanError, plan_memory


def test_cycle_is_named():
    entries = [Entry("x", 4), Entry("y", 4)]
    nodes = [Node("f", ("y",), ("x",)), Node("g", ("x",), ("y",))]
    with pytest.raises(GraphError, match=r"cycle: .*(f -> g|g -> f)"):
        Graph(nodes, entries)
    with pytest.raises(GraphError, match="cycle"):
        Graph.from_unordered(nodes, entries)


def test_self_loop_is_a_cycle():
    with pytest.raises(GraphError, match=r"cycle: f -> f"):
        Graph([Node("f", ("x",), ("x",))], [Entry("x", 4)])


def test_entry_consumed_before_it_is_produced():
    entries = [Entry("x", 4), Entry("y", 4)]
    nodes = [Node("use", ("x",), ("y",)), Node("make", (), ("x",))]
    with pytest.raises(GraphError, match=r"'x' is consumed by node 'use' \(step 0\) before it is produced by node "
                                         r"'make' \(step 1\)"):
        Graph(nodes, entries)
    # the same nodes in any order sort into a valid graph
    graph = Graph.from_unordered(nodes, entries)
    assert [n.name for n in graph.nodes] == ["make", "use"]


def test_from_unordered_keeps_a_valid_order():
    g = GraphBuilder()
    g.node("a", outputs=[("x", 4)])
    g.node("b", outputs=[("y", 4)])
    g.node("c", ["x", "y"], [("z", 4)])
    graph = g.build()
    assert [n.name for n in Graph.from_unordered(graph.nodes, graph.entries).nodes] == ["a", "b", "c"]


@pytest.mark.parametrize(("size", "match"), [
    (-1, r"negative size -1"),
    (2.5, r"size 2.5 of type float"),
    (True, r"size True of type bool"),
    ("8", r"size '8' of type str"),
])
def test_bad_sizes(size, match):
    with pytest.raises(GraphError, match=match):
        Entry("x", size)


def test_unknown_entry_name():
    with pytest.raises(GraphError, match=r"node 'f' names input entry 'nope'"):
        Graph([Node("f", ("nope",), ())], [])


def test_duplicate_names_and_two_producers():
    with pytest.raises(GraphError, match=r"entry name 'x' is used twice"):
        Graph([], [Entry("x", 1), Entry("x", 2)])
    with pytest.raises(GraphError, match=r"node name 'f' is used twice"):
        Graph([Node("f"), Node("f")], [])
    with pytest.raises(GraphError, match=r"'x' is produced by node 'f' and again by node 'g'"):
        Graph([Node("f", (), ("x",)), Node("g", (), ("x",))], [Entry("x", 1)])


def test_planned_entry_without_producer():
    with pytest.raises(GraphError, match=r"'w' is not external but no node produces it; mark it external=True"):
        Graph([Node("f", ("w",), ())], [Entry("w", 4)])


@pytest.mark.parametrize(("option", "match"), [
    ((1, 0), r"input index 1; the node has 1 inputs"),
    ((0, 3), r"output index 3; the node has 1 outputs"),
    ((0, 0, "yes"), r"identity must be a bool"),
    ("00", r"must be \(input_index, output_index\)"),
])
def test_bad_inplace_options(option, match):
    with pytest.raises(GraphError, match=match):
        Node("f", ("x",), ("y",), (option,))


def test_inplace_on_an_ignored_input_and_bad_ignored_index():
    with pytest.raises(GraphError, match=r"names input 0, which the node ignores"):
        Node("f", ("x",), ("y",), ((0, 0),), frozenset({0}))
    with pytest.raises(GraphError, match=r"ignored input index 2 is out of range"):
        Node("f", ("x",), ("y",), (), frozenset({2}))


def test_node_fields_must_be_names():
    with pytest.raises(GraphError, match=r"inputs must be a sequence of entry names, got 'x'"):
        Node("f", "x", ())
    with pytest.raises(GraphError, match=r"lists an output twice"):
        Node("f", (), ("y", "y"))


def test_errors_are_mxkit_errors_and_value_errors():
    with pytest.raises(MXKitError):
        Entry("x", -5)
    with pytest.raises(ValueError):
        Entry("x", -5)


def test_plan_memory_needs_a_graph():
    with pytest.raises(GraphError, match=r"plan_memory needs a mxkit.memplan.Graph, got list"):
        plan_memory([Node("f")], "none")
    from mxkit.memplan.strategies import plan_inplace

    with pytest.raises(GraphError, match=r"planner 'inplace' needs a mxkit.memplan.Graph, got dict"):
        plan_inplace({})


def test_unknown_options_are_listed():
    graph = Graph([Node("f", (), ("x",))], [Entry("x", 4)])
    with pytest.raises(PlanError, match=r"'greedy' got unknown options \['colours'\]; it accepts: none"):
        plan_memory(graph, "greedy", colours=3)
    with pytest.raises(PlanError, match=r"accepts: match_range"):
        plan_memory(graph, "mxnet", window=3)
    with pytest.raises(PlanError, match=r"match_range must be an int >= 0 \(MXNet uses 16\), got -1"):
        plan_memory(graph, "mxnet", match_range=-1)
    with pytest.raises(PlanError, match=r"max_colours must be None or an int >= 1, got 0"):
        plan_memory(graph, "coshare", max_colours=0)
    with pytest.raises(PlanError, match=r"candidates \['nope'\] must be"):
        plan_memory(graph, "auto", candidates=["nope"])


def test_builder_errors():
    g = GraphBuilder()
    g.node("f", outputs=[("x", 4)])
    with pytest.raises(GraphError, match=r"entry name 'x' is declared twice"):
        g.node("g", outputs=[("x", 4)])
    with pytest.raises(GraphError, match=r"cannot mark 'nope' external: no such entry"):
        g.mark_external("nope")
