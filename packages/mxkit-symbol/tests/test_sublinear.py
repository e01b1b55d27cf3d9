"""The memory planner ``sublinear``: choosing it makes the bind recompute forward results
(the mirror rewrite) and plan the rewritten graph; gradients stay the same."""

import numpy as np
import pytest
from _training_step import fill_and_step
from mxkit import symbol as sym
from mxkit.core import config
from mxkit.core.errors import UnknownPluginError
from mxkit.symbol.binding import training_memory

PLAIN = ["prune"]


def convnet(depth, channels=8, dropout=False):
    x = sym.Variable("data")
    for i in range(depth):
        x = sym.Convolution(x, num_filter=channels, kernel=(3, 3), pad=(1, 1), name=f"conv{i}")
        x = sym.BatchNorm(x, fix_gamma=False, name=f"bn{i}")
        x = sym.Activation(x, act_type="relu", name=f"relu{i}")
        if dropout and i == depth // 2:
            x = sym.Dropout(x, p=0.3, name="drop")
    x = sym.FullyConnected(sym.Flatten(x), num_hidden=5, name="fc")
    return sym.SoftmaxOutput(x, name="softmax")


def residual(depth, channels=8):
    """Pre-activation residual units: BN, relu, conv twice, plus the unit's input."""
    x = sym.Convolution(sym.Variable("data"), num_filter=channels, kernel=(3, 3), pad=(1, 1), name="conv0")
    for i in range(depth):
        y = x
        for j in (1, 2):
            y = sym.Activation(sym.BatchNorm(y, fix_gamma=False, name=f"u{i}_bn{j}"), act_type="relu",
                               name=f"u{i}_relu{j}")
            y = sym.Convolution(y, num_filter=channels, kernel=(3, 3), pad=(1, 1), name=f"u{i}_conv{j}")
        x = x + y
    x = sym.FullyConnected(sym.Flatten(x), num_hidden=5, name="fc")
    return sym.SoftmaxOutput(x, name="softmax")


def train_step(net, memplan=None, seed=0, **shapes):
    """Bind without fusion (so both sides run the same kernels), fill every argument
    deterministically, run forward and backward; return the executor."""
    with config.override(graph_passes=PLAIN):
        exe = net.simple_bind(None, memplan=memplan, **shapes)
    return fill_and_step(exe, seed, label_high=5)


def assert_same_results(a, b):
    assert a.grad_dict.keys() == b.grad_dict.keys()
    for name in a.grad_dict:
        np.testing.assert_array_equal(a.grad_dict[name].asnumpy(), b.grad_dict[name].asnumpy(), err_msg=name)
    for name in a.aux_dict:
        np.testing.assert_array_equal(a.aux_dict[name].asnumpy(), b.aux_dict[name].asnumpy(), err_msg=name)
    np.testing.assert_array_equal(a.outputs[0].asnumpy(), b.outputs[0].asnumpy())


def recomputing_nodes(exe):
    return [n.name for n in exe._graph.backward_nodes if id(n) in exe._graph.recomputed_ids]


@pytest.mark.parametrize("make", [convnet, residual])
def test_same_gradients_and_statistics_in_less_memory(make):
    net = make(8)
    shapes = {"data": (4, 3, 8, 8)}
    plain = train_step(net, "auto", **shapes)
    sublinear = train_step(net, "sublinear", **shapes)
    assert_same_results(plain, sublinear)
    plan = sublinear.memory_plan
    assert plan.strategy == "sublinear" and plan.details["base"] == "auto"
    plan.verify(sublinear._memory_graph)
    assert plan.recompute
    assert {name.split(":", 1)[1] for name in plan.recompute} == set(recomputing_nodes(sublinear))
    assert all("_mirror" in name for name in recomputing_nodes(sublinear))
    assert plan.total_bytes < 0.75 * plain.memory_plan.total_bytes
    assert len(sublinear._forward_steps) == len(plain._forward_steps)   # forward work is unchanged


def test_the_plan_total_drops_far_on_a_deep_network():
    net = residual(24)
    shapes = {"data": (8, 3, 16, 16)}
    auto = net.plan_memory(memplan="auto", **shapes)
    sublinear = net.plan_memory(memplan="sublinear", **shapes)
    assert sublinear.total_bytes < 0.4 * auto.total_bytes
    assert len(sublinear.recompute) > 24


def test_chosen_by_config_and_environment(monkeypatch):
    net = convnet(4)
    with config.override(memplan="sublinear"):
        assert train_step(net, data=(2, 3, 6, 6)).memory_plan.recompute
    monkeypatch.setenv("MXKIT_MEMPLAN", "sublinear")
    exe = train_step(net, data=(2, 3, 6, 6))
    assert exe.memory_plan.strategy == "sublinear" and recomputing_nodes(exe)
    # the explicit argument wins over the environment
    assert not recomputing_nodes(train_step(net, "greedy", data=(2, 3, 6, 6)))


def test_dropout_is_never_recomputed_and_gradients_still_match():
    net = convnet(6, dropout=True)
    plain = train_step(net, "auto", data=(4, 3, 8, 8))
    sublinear = train_step(net, "sublinear", data=(4, 3, 8, 8))
    assert recomputing_nodes(sublinear) and "drop_mirror" not in recomputing_nodes(sublinear)
    assert_same_results(plain, sublinear)


def test_force_mirroring_and_the_cheap_policy_apply():
    x = sym.Variable("data")
    fc = sym.FullyConnected(x, num_hidden=16, name="fc0", attr={"__force_mirroring__": "True"})
    hidden = sym.Activation(fc, act_type="tanh", name="act0")
    kept = sym.Activation(sym.FullyConnected(hidden, num_hidden=16, name="fc1"), act_type="tanh", name="act1",
                          attr={"__force_mirroring__": "False"})
    net = sym.SoftmaxOutput(sym.FullyConnected(kept, num_hidden=5, name="fc2"), name="softmax")
    with config.override(mirror_policy="cheap"):
        exe = train_step(net, "sublinear", data=(8, 16))
    names = recomputing_nodes(exe)
    assert "fc0_mirror" in names and "act0_mirror" in names      # forced, and cheap
    assert "act1_mirror" not in names and "fc1_mirror" not in names   # forced off, and expensive
    assert_same_results(train_step(net, "auto", data=(8, 16)), exe)


def test_fusion_after_recomputation_keeps_the_gradients():
    net = convnet(5)
    plain = train_step(net, "auto", data=(2, 3, 6, 6))
    with config.override(graph_passes=["prune", "fuse"]):
        fused = net.simple_bind(None, memplan="sublinear", data=(2, 3, 6, 6))
    for name, array in plain.arg_dict.items():
        fused.arg_dict[name][:] = array
    fused.forward(is_train=True)
    fused.backward()
    for name in plain.grad_dict:
        np.testing.assert_allclose(fused.grad_dict[name].asnumpy(), plain.grad_dict[name].asnumpy(), rtol=1e-5,
                                   atol=1e-6, err_msg=name)
    assert fused.memory_plan.recompute


def test_prediction_binds_and_reshape():
    net = convnet(4)
    predict = net.plan_memory(for_training=False, memplan="sublinear", data=(2, 3, 6, 6))
    assert predict.strategy == "sublinear" and predict.recompute == ()
    exe = train_step(net, "sublinear", data=(2, 3, 6, 6))
    bigger = exe.reshape(allow_up_sizing=True, data=(4, 3, 6, 6), softmax_label=(4,))
    assert bigger.memory_plan.strategy == "sublinear" and recomputing_nodes(bigger)


def test_an_unknown_planner_fails_at_bind_listing_the_choices():
    with pytest.raises(UnknownPluginError, match=r"unknown memory planner 'sublinar'.*sublinear"):
        convnet(2).simple_bind(None, memplan="sublinar", data=(2, 3, 6, 6))


def test_training_memory_counts_what_a_bind_allocates():
    net = convnet(3)
    shapes = {"data": (4, 3, 8, 8)}
    for memplan in ("auto", "sublinear"):
        exe = net.simple_bind(None, memplan=memplan, **shapes)
        report = training_memory(net, memplan=memplan, shapes=shapes)
        assert report.planned == exe.memory_plan.total_bytes
        assert report.arguments == sum(a.storage.nbytes for a in exe.arg_arrays)
        assert report.gradients == sum(g.storage.nbytes for g in exe.grad_arrays if g is not None)
        assert report.auxiliary == sum(a.storage.nbytes for a in exe.aux_arrays)
        assert report.outputs == exe.outputs[0].storage.nbytes
        assert report.total_bytes == (report.planned + report.arguments + report.gradients + report.auxiliary
                                      + report.outputs)
    # a network far larger than memory is measured without allocating it
    huge = training_memory(residual(2, channels=256), memplan="sublinear", shapes={"data": (512, 3, 224, 224)})
    assert huge.total_bytes > 2**34
