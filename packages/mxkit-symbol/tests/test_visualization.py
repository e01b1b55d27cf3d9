"""print_summary against MXNet's parameter counts; plot_network's graph structure."""

import sys
import types

import pytest
from mxkit import symbol as sym
from mxkit.core.errors import MissingComponentError
from mxkit.symbol import visualization


def _mlp():
    data = sym.Variable("data")
    fc1 = sym.FullyConnected(data, num_hidden=128, name="fc1")
    act = sym.Activation(fc1, act_type="relu", name="relu1")
    return sym.SoftmaxOutput(sym.FullyConnected(act, num_hidden=10, name="fc2"), name="softmax")


def test_print_summary_counts_parameters_like_mxnet(require_ops, capsys):
    require_ops("FullyConnected", "Activation", "SoftmaxOutput")
    text = visualization.print_summary(_mlp(), {"data": (1, 784)})
    assert capsys.readouterr().out.strip() == text.strip()
    lines = text.splitlines()
    assert "Total params: " + str(784 * 128 + 128 + 128 * 10 + 10) in lines
    fc1 = next(line for line in lines if line.startswith("fc1(FullyConnected)"))
    assert fc1.split()[1:] == ["128", str(784 * 128 + 128), "data"]
    assert any(line.startswith("relu1(Activation)") and line.split()[-1] == "fc1" for line in lines)


def test_print_summary_leaves_out_auxiliary_states(require_ops, fixture_path):
    require_ops("Convolution", "BatchNorm")
    net = sym.load(fixture_path("bn-symbol.json"))
    text = visualization.print_summary(net, {"data": (2, 3, 5, 5)})
    # conv: 4 filters of 3x3x3 plus 4 biases; BatchNorm: gamma and beta only
    assert f"Total params: {4 * 27 + 4 + 2 * 4}" in text


class _FakeDigraph:
    def __init__(self, name, format):
        self.name, self.format = name, format
        self.nodes, self.edges = {}, []

    def node(self, name, label, **attrs):
        self.nodes[name] = (label, attrs)

    def edge(self, tail_name, head_name, **attrs):
        self.edges.append((tail_name, head_name, attrs))


@pytest.fixture
def fake_graphviz(monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", types.SimpleNamespace(Digraph=_FakeDigraph))


def test_plot_network_draws_layers_and_shapes(fake_graphviz):
    data = sym.Variable("data")
    net = sym.softmax(sym.relu(sym.dot(data, sym.Variable("fc_weight"), name="fc"), name="act"), name="prob")
    dot = visualization.plot_network(net, shape={"data": (2, 3), "fc_weight": (3, 5)}, node_attrs={"shape": "oval"})
    labels = {label for label, _ in dot.nodes.values()}
    assert labels == {"data", "dot", "relu", "softmax"}  # the weight is hidden
    by_label = {label: name for name, (label, _) in dot.nodes.items()}
    edge_labels = {(t, h): a.get("label") for t, h, a in dot.edges}
    assert edge_labels[(by_label["dot"], by_label["data"])] == "3"
    assert edge_labels[(by_label["relu"], by_label["dot"])] == "5"
    shown = visualization.plot_network(net, hide_weights=False)
    assert "fc_weight" in {label for label, _ in shown.nodes.values()}


def test_plot_network_without_graphviz_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)
    with pytest.raises(MissingComponentError, match="pip install graphviz"):
        visualization.plot_network(sym.Variable("x"))


def test_plot_network_labels_fused_nodes_with_their_expression(fake_graphviz):
    data, weight = sym.Variable("data"), sym.Variable("fc_weight")
    hidden = sym.Activation(sym.dot(data, weight, name="fc") * 2 + 1, act_type="tanh", name="act")
    net = sym.softmax(hidden, name="prob")
    shapes = {"data": (2, 3), "fc_weight": (3, 5)}
    dot = visualization.plot_network(net.optimize(**shapes), shape=shapes)
    labels = sorted(label for label, _ in dot.nodes.values())
    # the three elementwise nodes became one, labelled with its C expression over the dot product's output
    assert labels == ["_FusedElemwise\ntanh(((fc_output * 2.0f) + 1.0f))", "data", "dot", "softmax"]
    fused = next(name for name, (label, _) in dot.nodes.items() if label.startswith("_FusedElemwise"))
    assert dot.nodes[fused][1]["fixedsize"] == "false"
    by_label = {label: name for name, (label, _) in dot.nodes.items()}
    edges = {(t, h): a.get("label") for t, h, a in dot.edges}
    assert edges[(fused, by_label["dot"])] == "5" and edges[(by_label["softmax"], fused)] == "5"
    unfused = visualization.plot_network(net, shape=shapes)
    assert not any("_FusedElemwise" in label for label, _ in unfused.nodes.values())


def _deep_mlp():
    net = sym.Variable("data")
    for i, hidden in enumerate((128, 64)):
        net = sym.Activation(sym.FullyConnected(net, num_hidden=hidden, name=f"fc{i}"), act_type="relu",
                             name=f"relu{i}")
    return sym.SoftmaxOutput(sym.FullyConnected(net, num_hidden=10, name="fc2"), name="softmax")


def _operators(dot):
    """(label, fill, style) of each operator box, in drawing (topological) order."""
    return [(label, attrs["fillcolor"], attrs["style"]) for label, attrs in dot.nodes.values()
            if attrs.get("shape") != "oval"]


def test_plot_network_colours_operators_by_their_memory_plan_buffer(fake_graphviz, require_ops):
    require_ops("FullyConnected", "Activation", "SoftmaxOutput")
    net, shapes = _deep_mlp(), {"data": (4, 784)}
    fc0, relu0, fc1, relu1, fc2, softmax = _operators(visualization.plot_network(net, shape=shapes, memplan="mxnet"))
    # by hand: each relu runs in place on its FullyConnected output, and fc2 reuses fc0's block once relu0 died
    assert [box[0].split("\n")[-1] for box in (fc0, relu0, fc1, relu1, fc2)] == [
        "buffer 0", "buffer 0", "buffer 1", "buffer 1", "buffer 0"]
    assert fc0[1] == relu0[1] == fc2[1] != fc1[1] == relu1[1]
    # the network's output is the caller's memory, outside the plan
    assert softmax == ("SoftmaxOutput\nnot planned", "white", "filled,dashed")
    # without sharing every output has its own buffer and colour
    alone = _operators(visualization.plot_network(net, shape=shapes, memplan="none"))
    assert len({fill for _, fill, _ in alone[:-1]}) == 5


def test_plot_network_takes_a_plan_and_numbers_buffers_as_the_plan_places_them(fake_graphviz, require_ops):
    require_ops("FullyConnected", "Activation", "SoftmaxOutput")
    net = _deep_mlp()
    plan = net.plan_memory(for_training=True, memplan="greedy", data=(4, 784))
    boxes = _operators(visualization.plot_network(net, memplan=plan))
    # the reference: the plan's own (pool, offset) of each forward output, read from its entry names
    where = {name.partition(":")[2]: (s.pool, s.offset) for name, s in reversed(list(plan.storage.items()))}
    outputs = ["fc0_output", "relu0_output", "fc1_output", "relu1_output", "fc2_output"]
    assert all(name in where for name in outputs) and len({where[name] for name in outputs}) > 1
    same_buffer = [[where.get(a) == where.get(b) for b in outputs] for a in outputs]
    shown = [[boxes[i][0].split("\n")[-1] == boxes[j][0].split("\n")[-1] for j in range(5)] for i in range(5)]
    assert shown == same_buffer


@pytest.mark.parametrize("memplan, shape, message", [
    ("mxnet", None, "needs the input shapes"),
    (42, {"data": (1, 4)}, "takes a strategy name"),
])
def test_plot_network_memplan_bad_input(fake_graphviz, memplan, shape, message):
    from mxkit.core.errors import ShapeError

    with pytest.raises(ShapeError, match=message):
        visualization.plot_network(_deep_mlp(), shape=shape, memplan=memplan)


def test_plot_network_boxes_grow_to_fit_long_labels(fake_graphviz, require_ops):
    # MXNet's fixed 1.3-inch boxes clipped "FullyConnected" and "softmax_label"; here that size
    # is a minimum, and a caller can still ask for fixed boxes
    require_ops("FullyConnected", "Activation", "SoftmaxOutput")
    dot = visualization.plot_network(_mlp())
    labels = {label.split("\n")[0] for label, _ in dot.nodes.values()}
    assert {"FullyConnected", "softmax_label"} <= labels
    for label, attrs in dot.nodes.values():
        assert (attrs["fixedsize"], attrs["width"], attrs["height"]) == ("false", "1.3", "0.8034"), label
    fixed = visualization.plot_network(_mlp(), node_attrs={"fixedsize": "true"})
    assert {attrs["fixedsize"] for _, attrs in fixed.nodes.values()} == {"true"}
