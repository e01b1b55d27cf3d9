"""The ``mirror`` pass (Chen et al. 2016 recomputation): the same gradients for less memory."""

import numpy as np
import pytest
from _training_step import fill_and_step
from mxkit import symbol as sym
from mxkit.core import config
from mxkit.core.errors import ConfigError
from mxkit.symbol.passes import configured_passes

PLAIN = ["prune"]
MIRROR = ["prune", "mirror"]


def mlp(depth, hidden=64):
    x = sym.Variable("data")
    for i in range(depth):
        x = sym.FullyConnected(x, num_hidden=hidden, name=f"fc{i}")
        x = sym.Activation(x, act_type="tanh", name=f"act{i}")
    return sym.SoftmaxOutput(x, name="softmax")


def convnet(depth, channels=8, dropout=False):
    x = sym.Variable("data")
    for i in range(depth):
        x = sym.Convolution(x, num_filter=channels, kernel=(3, 3), pad=(1, 1), name=f"conv{i}")
        x = sym.BatchNorm(x, fix_gamma=False, name=f"bn{i}")
        x = sym.Activation(x, act_type="relu", name=f"relu{i}")
        if dropout and i == depth // 2:
            x = sym.Dropout(x, p=0.3, name="drop")
    x = sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool")
    x = sym.FullyConnected(sym.Flatten(x), num_hidden=5, name="fc")
    return sym.SoftmaxOutput(x, name="softmax")


def train_step(net, passes, seed=0, policy="sqrt", **shapes):
    """Bind, fill every argument deterministically, run forward and backward; return the executor."""
    with config.override(graph_passes=passes, mirror_policy=policy):
        exe = net.simple_bind(None, **shapes)
    return fill_and_step(exe, seed)


def assert_same_gradients(a, b):
    assert a.grad_dict.keys() == b.grad_dict.keys()
    for name in a.grad_dict:
        np.testing.assert_array_equal(a.grad_dict[name].asnumpy(), b.grad_dict[name].asnumpy(), err_msg=name)


def recomputed(exe):
    return [n.name for n in exe._graph.backward_nodes if n.name.endswith("_mirror")]


def test_deep_mlp_same_gradients_in_far_less_memory():
    net = mlp(24)
    plain = train_step(net, PLAIN, data=(32, 64))
    mirrored = train_step(net, MIRROR, data=(32, 64))
    assert_same_gradients(plain, mirrored)
    assert mirrored.memory_plan.total_bytes < 0.5 * plain.memory_plan.total_bytes
    assert len(mirrored._forward_steps) == len(plain._forward_steps)   # forward work is unchanged
    assert recomputed(mirrored)


def test_sqrt_policy_keeps_about_sqrt_n_checkpoints():
    from mxkit.symbol import mirror

    net = mlp(32)
    exe = train_step(net, PLAIN, data=(8, 64))
    graph = exe._graph
    from mxkit.symbol.passes import PassGraph

    passes = PassGraph(graph.forward_nodes + graph.backward_nodes, graph.heads, graph.shapes, graph.dtypes,
                       {id(n) for n in graph.forward_nodes})
    kept = mirror.choose_checkpoints(passes, graph.forward_nodes, "sqrt", 0)
    n = len(graph.forward_nodes)
    # sqrt(65) ~ 8 segments, plus the loss head, which is an output
    assert 0.5 * n ** 0.5 <= len(kept) <= 2 * n ** 0.5 + 2


def test_convnet_with_batchnorm_same_gradients_and_moving_statistics_updated_once():
    net = convnet(6)
    shapes = {"data": (4, 3, 8, 8)}
    plain = train_step(net, PLAIN, **shapes)
    for policy in ("sqrt", "cheap"):
        mirrored = train_step(net, MIRROR, policy=policy, **shapes)
        assert_same_gradients(plain, mirrored)
        for name in plain.aux_dict:
            np.testing.assert_array_equal(plain.aux_dict[name].asnumpy(), mirrored.aux_dict[name].asnumpy(),
                                          err_msg=f"{policy}: {name}")
        assert mirrored.memory_plan.total_bytes < plain.memory_plan.total_bytes, policy
    cheap = train_step(net, MIRROR, policy="cheap", **shapes)
    assert not any(name.startswith("conv") for name in recomputed(cheap))   # MXNet's policy keeps them
    assert any(name.startswith("bn") for name in recomputed(cheap))


def test_dropout_is_never_recomputed():
    net = convnet(4, dropout=True)
    plain = train_step(net, PLAIN, data=(4, 3, 8, 8))
    mirrored = train_step(net, MIRROR, data=(4, 3, 8, 8))
    assert "drop_mirror" not in recomputed(mirrored)
    assert_same_gradients(plain, mirrored)


def test_force_mirroring_attribute_overrides_the_policy():
    x = sym.Variable("data")
    fc = sym.FullyConnected(x, num_hidden=16, name="fc0", attr={"__force_mirroring__": "True"})
    hidden = sym.Activation(fc, act_type="tanh", name="act0")
    kept = sym.Activation(sym.FullyConnected(hidden, num_hidden=16, name="fc1"), act_type="tanh", name="act1",
                          attr={"__force_mirroring__": "False"})
    net = sym.SoftmaxOutput(sym.FullyConnected(kept, num_hidden=4, name="fc2"), name="softmax")
    exe = train_step(net, MIRROR, policy="cheap", data=(8, 16))
    names = recomputed(exe)
    assert "fc0_mirror" in names and "act1_mirror" not in names
    assert_same_gradients(train_step(net, PLAIN, data=(8, 16)), exe)


#: ulp bounds of the two float32 tanh implementations the fused and the plain graph use:
#: the CPU plugin's (every code path, tests/test_fastmath.py in mxkit-cpu) and numpy's
#: (its SIMD paths differ between AVX2 and AVX-512 machines; a few ulp, 4 taken here)
PLUGIN_TANH_ULP, NUMPY_TANH_ULP = 3, 4
FLOAT32_UNIT = 2.0**-24  # half an ulp of 1: the unit roundoff


def gradient_tolerance(layers):
    """Bound of max|fused - plain| / max|plain| for a gradient of a ``layers``-deep tanh MLP.

    The two graphs differ only in which float32 tanh each activation uses: every activation
    differs by at most (PLUGIN_TANH_ULP + NUMPY_TANH_ULP) ulp, a relative perturbation
    delta = 7 * 2**-24. To first order a perturbation of relative size delta in one layer's
    activations moves the gradients by delta times that layer's share of them, and with
    tanh' <= 1 no layer amplifies it in the max-norm; it enters once in the forward pass and
    once (through tanh') in the backward pass of each layer: 2 * layers * delta in all.
    (Elementwise relative checks are wrong here: a gradient element that cancels to near 0
    keeps the absolute error of its larger terms, which is what made the test
    machine-dependent.)
    """
    return 2 * layers * (PLUGIN_TANH_ULP + NUMPY_TANH_ULP) * FLOAT32_UNIT


def test_mirror_then_fuse_still_gives_the_gradients():
    layers = 12
    net = mlp(layers)
    plain = train_step(net, PLAIN, data=(16, 64))
    both = train_step(net, ["prune", "mirror", "fuse"], data=(16, 64))
    tolerance = gradient_tolerance(layers)  # 1.0e-5
    for name in plain.grad_dict:
        expected = plain.grad_dict[name].asnumpy().astype(np.float64)
        got = both.grad_dict[name].asnumpy().astype(np.float64)
        scale = np.abs(expected).max()
        if scale == 0:  # (the label's gradient is zero in both)
            np.testing.assert_array_equal(got, expected, err_msg=name)
            continue
        drift = np.abs(got - expected).max() / scale
        assert drift <= tolerance, f"{name}: the gradients drift by {drift:.2e} of their size, over {tolerance:.2e}"


def test_backward_do_mirror_switch_adds_the_pass(monkeypatch):
    with config.override(graph_passes=["prune", "fuse"], backward_do_mirror=True, eliminate_common_expr=False):
        assert configured_passes() == ["prune", "mirror", "fuse"]
    with config.override(graph_passes=["prune", "fuse"], eliminate_common_expr=False):
        assert configured_passes() == ["prune", "fuse"]
    net = mlp(8)
    with config.override(graph_passes=["prune"], backward_do_mirror=True):
        exe = net.simple_bind(None, data=(4, 64))
    assert any(n.name.endswith("_mirror") for n in exe._graph.backward_nodes)


def test_prediction_binds_are_untouched():
    with config.override(graph_passes=MIRROR):
        exe = mlp(6).simple_bind(None, grad_req="null", data=(4, 64))
    assert not exe._graph.backward_nodes


def test_bad_mirror_settings_fail_listing_the_choices():
    with pytest.raises(ConfigError, match=r"mirror_policy.*'everything'.*sqrt.*cheap"), \
            config.override(mirror_policy="everything"):
        pass
    with pytest.raises(ConfigError, match=r"mirror_segment_mb"), config.override(mirror_segment_mb=-1):
        pass


def test_a_segment_longer_than_the_recursion_limit_is_recomputed():
    from mxkit.ndarray.registry import get_op
    from mxkit.symbol.graph import Entry, Node
    from mxkit.symbol.mirror import mirror
    from mxkit.symbol.passes import PassGraph

    value = Node(None, "x")
    shapes, dtypes = {(id(value), 0): (4,)}, {(id(value), 0): "float32"}
    forward = []
    for i in range(1500):   # one segment under the cheap policy: nothing expensive to keep
        value = Node(get_op("sin"), f"sin{i}", {}, [Entry(value, 0)], {})
        forward.append(value)
    reader = Node(get_op("_backward_sin"), "reader", {}, [Entry(value, 0), Entry(value, 0)], {})
    for node in [*forward, reader]:
        shapes[(id(node), 0)], dtypes[(id(node), 0)] = (4,), "float32"
    graph = PassGraph([*forward, reader], [Entry(reader, 0)], shapes, dtypes, {id(n) for n in forward})
    with config.override(mirror_policy="cheap"):
        mirror(graph)
    clones = graph.nodes[len(forward):-1]
    assert [n.name for n in clones] == [f"sin{i}_mirror" for i in range(1500)]
    assert all(c.inputs[0].node is (clones[i - 1] if i else forward[0].inputs[0].node) for i, c in enumerate(clones))
    assert reader.inputs == [Entry(clones[-1], 0)] * 2 and graph.nodes[-1] is reader
