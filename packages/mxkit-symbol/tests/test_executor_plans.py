"""Executor structure: pruning, memory plans, bulk segments, reshape, monitor, errors."""

import types

import numpy as np
import pytest
from mxkit import ndarray as nd
from mxkit import symbol as sym
from mxkit.core import Context, config, hookimpl
from mxkit.core.errors import MXKitError, ShapeError
from mxkit.core.specs import BackendSpec
from mxkit.symbol.executor import ExecutorError

CALLS: list[str] = []


class CountingBackend:
    """numpy, under another name, so the kernels registered for it can count calls."""

    name = "counting"
    device_type = "counting"
    xp = np

    def __init__(self, device_id):
        self.device_id = device_id

    def empty(self, shape, dtype):
        return np.empty(shape, dtype=dtype)

    def from_host(self, array):
        return np.array(array)

    def to_host(self, array):
        return array


def _counting(name, kernel):
    def counted(xp, inputs, outputs, params):
        CALLS.append(name)
        kernel(xp, inputs, outputs, params)

    return counted


@hookimpl
def _backends():
    yield BackendSpec(name="counting", device_type="counting", factory=CountingBackend)


@hookimpl
def _kernels(registry):
    for name in registry.names():
        op = registry.get(name)
        if op.kernel is not None:
            registry.register_kernel(name, backend="counting", kernel=_counting(name, op.kernel))


@pytest.fixture
def counting_ctx():
    from mxkit.core import plugins
    from mxkit.ndarray.registry import reload_kernels

    plugin = types.SimpleNamespace(mxkit_backends=_backends, mxkit_kernels=_kernels)
    plugins.register_plugin(plugin, name="counting-test-backend")
    reload_kernels()
    CALLS.clear()
    yield Context("counting", 0)
    plugins.get_plugin_manager().unregister(plugin)
    plugins.reset_plugin_manager()
    reload_kernels()


def _three_layers():
    data = sym.Variable("data")
    h1 = sym.relu(sym.dot(data, sym.Variable("w1"), name="layer1"), name="act1")
    h2 = sym.tanh(sym.dot(h1, sym.Variable("w2"), name="layer2"), name="act2")
    return sym.sum(sym.dot(h2, sym.Variable("w3"), name="layer3"), name="total")


def test_feature_extraction_runs_only_the_layers_it_needs(counting_ctx):
    net = _three_layers()
    feature = net.get_internals()["act1_output"]
    exe = feature.simple_bind(counting_ctx, grad_req="null", data=(2, 3), w1=(3, 4))
    x = np.arange(6, dtype="float32").reshape(2, 3)
    w = np.ones((3, 4), dtype="float32")
    exe.arg_dict["w1"][:] = w
    CALLS.clear()
    out = exe.forward(data=x)[0].asnumpy()
    assert CALLS == ["dot", "relu"]  # no later layer, no backward
    np.testing.assert_allclose(out, np.maximum(x @ w, 0))


def test_prediction_builds_and_runs_no_backward(counting_ctx):
    exe = _three_layers().simple_bind(counting_ctx, grad_req="null", data=(2, 3), w1=(3, 4), w2=(4, 4), w3=(4, 2))
    assert exe._graph.backward_nodes == []
    CALLS.clear()
    exe.forward()
    exe.outputs[0].wait_to_read()
    assert CALLS == ["dot", "relu", "dot", "tanh", "dot", "sum"]
    CALLS.clear()
    exe.backward()  # nothing to differentiate: a no-op, as in MXNet
    assert CALLS == []


def test_training_runs_forward_then_backward_kernels(counting_ctx):
    exe = _three_layers().simple_bind(counting_ctx, data=(2, 3), w1=(3, 4), w2=(4, 4), w3=(4, 2))
    CALLS.clear()
    exe.forward(is_train=True)
    exe.outputs[0].wait_to_read()
    assert len(CALLS) == 6
    exe.backward()
    exe.grad_dict["w1"].wait_to_read()
    assert all(name.startswith("_backward") or name in ("elemwise_add", "identity") for name in CALLS[6:])
    assert "_backward_dot" in CALLS[6:]


@pytest.mark.parametrize("strategy", ["none", "inplace", "mxnet", "greedy", "coshare", "auto"])
def test_every_memory_plan_gives_the_same_results(strategy):
    net = _three_layers()
    rng = np.random.default_rng(3)
    values = {"data": rng.standard_normal((4, 3)), "w1": rng.standard_normal((3, 5)),
              "w2": rng.standard_normal((5, 5)), "w3": rng.standard_normal((5, 2))}
    results = {}
    for name in ("none", strategy):
        exe = net.simple_bind(None, memplan=name, **{k: v.shape for k, v in values.items()})
        assert exe.memory_plan.strategy == name or name == "auto"
        exe.forward(is_train=True, **values)
        exe.backward()
        results[name] = [exe.outputs[0].asnumpy()] + [exe.grad_dict[k].asnumpy() for k in values]
    for ref, got in zip(results["none"], results[strategy]):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_plan_memory_allocates_nothing_and_matches_bind():
    net = _three_layers()
    shapes = {"data": (64, 300), "w1": (300, 512), "w2": (512, 512), "w3": (512, 10)}
    plan = net.plan_memory(memplan="greedy", **shapes)
    exe = net.simple_bind(None, memplan="greedy", **shapes)
    assert plan.total_bytes == exe.memory_plan.total_bytes > 0
    planned_predict = net.plan_memory(for_training=False, memplan="greedy", **shapes)
    assert planned_predict.total_bytes < plan.total_bytes
    # a model far larger than memory can still be planned
    huge = net.plan_memory(memplan="greedy", data=(1 << 16, 1 << 14), w1=(1 << 14, 1 << 14), w2=(1 << 14, 1 << 14),
                           w3=(1 << 14, 10))
    assert huge.total_bytes > 1 << 32


def test_debug_str_ends_with_the_pool_size_in_mb():
    net = _three_layers()
    exe = net.simple_bind(None, data=(1024, 256), w1=(256, 1024), w2=(1024, 1024), w3=(1024, 4))
    text = exe.debug_str()
    assert "Op:dot, Name=layer1" in text and "Op:_backward_dot" in text
    total = exe.memory_plan.total_bytes + exe.outputs[0].storage.nbytes
    assert text.splitlines()[-1] == f"Total {total >> 20} MB allocated"
    assert total >> 20 >= 4  # the (1024, 1024) intermediates alone


class _CountingEngine:
    """Wraps the naive engine and counts pushes."""

    def __init__(self):
        from mxkit.engine.naive import NaiveEngine

        self.inner = NaiveEngine()
        self.pushes = 0
        self.name = "naive"

    def push(self, *args, **kwargs):
        self.pushes += 1
        return self.inner.push(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.fixture
def counting_engine():
    import mxkit.engine as engine

    counter = _CountingEngine()
    previous = engine.set_engine(counter)
    yield counter
    if previous is not None:
        engine.set_engine(previous)
    else:
        engine.reset()


def test_a_training_step_is_a_handful_of_pushes(counting_engine):
    net = _three_layers()
    shapes = {"data": (2, 3), "w1": (3, 4), "w2": (4, 4), "w3": (4, 2)}
    exe = net.simple_bind(None, **shapes)
    nodes = len(exe._forward_steps) + len(exe._backward_steps)
    assert nodes >= 12
    forward, backward = len(exe._forward_steps), len(exe._backward_steps)
    for bulk, expected in ((100, 2), (1, nodes), (4, -(-forward // 4) - (-backward // 4))):
        with config.override(exec_bulk_size=bulk):
            exe = net.simple_bind(None, **shapes)  # the segment size is read at bind
            counting_engine.pushes = 0
            exe.forward(is_train=True)
            exe.backward()
            assert counting_engine.pushes == expected, bulk


def test_bulk_size_does_not_change_results():
    net = _three_layers()
    rng = np.random.default_rng(4)
    values = {"data": rng.standard_normal((4, 3)), "w1": rng.standard_normal((3, 5)),
              "w2": rng.standard_normal((5, 5)), "w3": rng.standard_normal((5, 2))}
    grads = []
    for bulk in (1, 3, 1000):
        with config.override(exec_bulk_size=bulk):
            exe = net.simple_bind(None, **{k: v.shape for k, v in values.items()})
            exe.forward(is_train=True, **values)
            exe.backward()
            grads.append(exe.grad_dict["w1"].asnumpy())
    np.testing.assert_allclose(grads[0], grads[1])
    np.testing.assert_allclose(grads[0], grads[2])


def test_reshape_shares_memory_and_computes_the_new_batch():
    net = _three_layers()
    exe = net.simple_bind(None, data=(8, 3), w1=(3, 4), w2=(4, 4), w3=(4, 2))
    rng = np.random.default_rng(5)
    for name in ("w1", "w2", "w3"):
        exe.arg_dict[name][:] = rng.standard_normal(exe.arg_dict[name].shape)
    smaller = exe.reshape(data=(3, 3))
    assert smaller.arg_dict["w1"] is exe.arg_dict["w1"]
    assert np.shares_memory(smaller.arg_dict["data"].storage, exe.arg_dict["data"].storage)
    x = rng.standard_normal((3, 3)).astype("float32")
    got = smaller.forward(data=x)[0].asnumpy()
    w1, w2, w3 = (exe.arg_dict[n].asnumpy() for n in ("w1", "w2", "w3"))
    np.testing.assert_allclose(got, (np.tanh(np.maximum(x @ w1, 0) @ w2) @ w3).sum(), rtol=1e-5)
    with pytest.raises(ShapeError, match="allow_up_sizing"):
        exe.reshape(data=(16, 3))
    bigger = exe.reshape(allow_up_sizing=True, data=(16, 3))
    assert bigger.arg_dict["data"].shape == (16, 3)


def test_reshape_writes_outputs_into_the_original_executors_memory():
    # MXNet's reshaped executor writes its (smaller) outputs into the memory of the one it came from
    y = sym.FullyConnected(sym.var("x"), num_hidden=4, name="fc")
    exe = y.simple_bind(None, x=(5, 4), grad_req="null")
    rng = np.random.default_rng(3)
    weight = rng.standard_normal((4, 4)).astype("float32")
    exe.arg_dict["fc_weight"][:] = weight
    exe.arg_dict["fc_bias"][:] = 0
    exe.outputs[0][:] = -7
    smaller = exe.reshape(x=(3, 4))
    x = rng.standard_normal((3, 4)).astype("float32")
    got = smaller.forward(is_train=False, x=x)[0].asnumpy()
    np.testing.assert_allclose(got, x @ weight.T, rtol=1e-5)
    old = exe.outputs[0].asnumpy()
    np.testing.assert_allclose(old[:3].reshape(-1), got.reshape(-1), rtol=1e-6)
    assert (old.reshape(-1)[12:] == -7).all()
    bigger = exe.reshape(allow_up_sizing=True, x=(6, 4))
    assert not np.shares_memory(bigger.outputs[0].storage, exe.outputs[0].storage)
    assert bigger.arg_dict["fc_weight"] is exe.arg_dict["fc_weight"]


def test_shared_exec_reuses_pools():
    net = _three_layers()
    big = net.simple_bind(None, data=(32, 3), w1=(3, 64), w2=(64, 64), w3=(64, 2))
    small = net.simple_bind(None, shared_exec=big, data=(8, 3), w1=(3, 64), w2=(64, 64), w3=(64, 2))
    big_pools = {id(p) for p in big._pools}
    assert any(id(p) in big_pools for p in small._pools)


def test_executors_sharing_pools_never_run_at_once():
    # both write the same pool memory: pushed back to back, their runs must be ordered
    net = _three_layers().get_internals()["layer3_output"]
    shapes = dict(w1=(3, 256), w2=(256, 256), w3=(256, 2))  # big enough that the runs would overlap
    big = net.simple_bind(None, grad_req="null", data=(512, 3), **shapes)
    small = net.simple_bind(None, grad_req="null", shared_exec=big, data=(256, 3), **shapes)
    assert small._internal_var is big._internal_var
    rng = np.random.default_rng(0)
    for name, shape in shapes.items():
        big.arg_dict[name][:] = small.arg_dict[name][:] = rng.standard_normal(shape).astype("float32")
    x = rng.standard_normal((512, 3)).astype("float32")
    expected_small = None
    for _ in range(20):
        small.forward(data=x[:256])
        big.forward(data=x)
        got_small, got_big = small.outputs[0].asnumpy(), big.outputs[0].asnumpy()
        np.testing.assert_allclose(got_small, got_big[:256], rtol=1e-5, atol=1e-5)
        if expected_small is not None:
            np.testing.assert_array_equal(got_small, expected_small)
        expected_small = got_small


def test_monitor_sees_every_node_output():
    seen = {}
    net = _three_layers()
    exe = net.simple_bind(None, grad_req="null", data=(2, 3), w1=(3, 4), w2=(4, 4), w3=(4, 2))
    exe.set_monitor_callback(lambda name, array: seen.setdefault(name, array.asnumpy()))
    x = np.ones((2, 3), dtype="float32")
    exe.forward(data=x)
    assert list(seen) == ["layer1_output", "act1_output", "layer2_output", "act2_output", "layer3_output",
                          "total_output"]
    np.testing.assert_allclose(seen["total_output"], exe.outputs[0].asnumpy())


def test_batchnorm_aux_states_update_in_training(fixture_path, require_ops):
    require_ops("Convolution", "BatchNorm")
    net = sym.load(fixture_path("bn-symbol.json"))
    assert net.list_auxiliary_states() == ["bn_moving_mean", "bn_moving_var"]
    exe = net.simple_bind(None, data=(2, 3, 5, 5))
    assert [a.shape for a in exe.aux_arrays] == [(4,), (4,)]
    exe.aux_dict["bn_moving_var"][:] = 1
    rng = np.random.default_rng(6)
    exe.arg_dict["conv_weight"][:] = rng.standard_normal((4, 3, 3, 3))
    exe.arg_dict["bn_gamma"][:] = 1
    exe.forward(is_train=True, data=rng.standard_normal((2, 3, 5, 5)) + 3)
    assert np.abs(exe.aux_dict["bn_moving_mean"].asnumpy()).sum() > 0
    before = exe.aux_dict["bn_moving_mean"].asnumpy().copy()
    exe.forward(is_train=False, data=rng.standard_normal((2, 3, 5, 5)))
    np.testing.assert_array_equal(exe.aux_dict["bn_moving_mean"].asnumpy(), before)
    exe.backward([nd.ones((2, 4, 5, 5))])


# -- bad input ---------------------------------------------------------------------------------

def test_missing_shapes_name_the_arguments():
    net = _three_layers()
    with pytest.raises(ShapeError, match=r"cannot infer the shapes of w2, w3.*w2=\(\.\.\.\)"):
        net.simple_bind(None, data=(2, 3), w1=(3, 4))


def test_inconsistent_shapes_name_the_node_operator_and_shapes():
    data = sym.Variable("data")
    out = sym.elemwise_add(sym.relu(data, name="left"), sym.Variable("other"), name="join")
    with pytest.raises(ShapeError, match=r"node 'join'.*elemwise_add.*\(2, 3\).*\(2, 4\)"):
        out.infer_shape(data=(2, 3), other=(2, 4))
    with pytest.raises(ShapeError, match=r"node 'mm'.*dot"):
        sym.dot(data, sym.Variable("w"), name="mm").infer_shape(data=(2, 3), w=(4, 5))


def test_bind_rejects_wrong_arrays():
    x = sym.Variable("x")
    out = sym.relu(x) + sym.Variable("y")
    with pytest.raises(ShapeError, match=r"node '_plus\d+'.*elemwise_add.*\(2,\), \(3,\)"):
        out.bind(None, {"x": nd.zeros((2,)), "y": nd.zeros((3,))})
    with pytest.raises(ExecutorError, match="args has no array for y"):
        out.bind(None, {"x": nd.zeros((2,))})
    with pytest.raises(ExecutorError, match="'x' is ndarray, expected an NDArray"):
        out.bind(None, {"x": np.zeros(2), "y": nd.zeros((2,))})
    with pytest.raises(ShapeError, match=r"gradient of 'x' has shape \(5,\)"):
        out.bind(None, {"x": nd.zeros((2,)), "y": nd.zeros((2,))}, args_grad={"x": nd.zeros((5,))})
    with pytest.raises(MXKitError, match="grad_req of 'x' is 'sometimes'"):
        out.simple_bind(None, grad_req="sometimes", x=(2,), y=(2,))
    # a name that is not an argument is ignored, as MXNet does, with a warning
    with pytest.warns(UserWarning, match="grad_req names 'z', which are not arguments"):
        exe = out.simple_bind(None, grad_req={"z": "write", "x": "write"}, x=(2,), y=(2,))
    assert set(exe.grad_dict) == {"x"}


def test_forward_rejects_wrong_inputs():
    x = sym.Variable("x")
    exe = (x * 2).simple_bind(None, x=(2, 2))
    with pytest.raises(ShapeError, match=r"'x' has shape \(3,\).*bound with \(2, 2\).*reshape"):
        exe.forward(x=np.zeros(3))
    with pytest.raises(ExecutorError, match="'nope', which is not an argument; the arguments are: x"):
        exe.forward(nope=np.zeros(3))
    with pytest.raises(ExecutorError, match="got 0 out_grads"):
        exe.backward([])


def test_bind_with_given_arrays_and_gradients():
    x, w = sym.Variable("x"), sym.Variable("w")
    out = sym.dot(x, w)
    xv, wv = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    args = {"x": nd.array(xv, dtype="float64"), "w": nd.array(wv, dtype="float64")}
    grads = {"w": nd.zeros((3, 4), dtype="float64")}
    exe = out.bind(None, args, args_grad=grads)
    assert exe.grad_dict["w"] is grads["w"] and "x" not in exe.grad_dict
    np.testing.assert_allclose(exe.forward(is_train=True)[0].asnumpy(), xv @ wv)
    exe.backward(nd.ones((2, 4), dtype="float64"))
    np.testing.assert_allclose(grads["w"].asnumpy(), xv.T @ np.ones((2, 4)))
    np.testing.assert_allclose(out.eval(x=args["x"], w=args["w"])[0].asnumpy(), xv @ wv)


def test_copy_params_from_checks_names():
    x = sym.Variable("x")
    exe = (x * sym.Variable("w")).simple_bind(None, x=(2,), w=(2,))
    exe.copy_params_from({"w": nd.array([1.0, 2.0])})
    np.testing.assert_allclose(exe.arg_dict["w"].asnumpy(), [1, 2])
    with pytest.raises(ExecutorError, match=r"'v' is not an argument.*x, w"):
        exe.copy_params_from({"v": nd.zeros((2,))})
    exe.copy_params_from({"v": nd.zeros((2,))}, allow_extra_params=True)


def test_kernels_learn_which_outputs_nobody_reads():
    """params["_req"] marks unread outputs "null" (MXNet's OpReqType) so kernels may skip them."""
    data, weight = sym.Variable("data"), sym.Variable("weight")
    exe = sym.dot(data, weight).simple_bind(None, grad_req={"data": "null", "weight": "write"}, data=(2, 3),
                                            weight=(3, 4))
    (backward,) = [s for s in exe._backward_steps if s.node.op.name == "_backward_dot"]
    assert backward.params["_req"] == ("null", "write")
    both = sym.dot(data, weight).simple_bind(None, data=(2, 3), weight=(3, 4))
    assert all("_req" not in s.params for s in both._backward_steps)


@pytest.mark.parametrize("mode", ["training", "prediction"])
def test_debug_str_total_matches_mxnet_for_the_same_network(mode, fixture_path, require_ops):
    """MXNet 1.9.1 reports the totals in expected.json for this MLP; its own planner strategy
    ("mxnet") must report the same, and the default ("auto") no more."""
    import json

    require_ops("FullyConnected", "Activation", "SoftmaxOutput")
    with open(fixture_path("expected.json"), encoding="utf-8") as handle:
        facts = json.load(handle)["memory"]
    data = sym.Variable("data")
    net = sym.FullyConnected(data, num_hidden=1024, name="fc1")
    net = sym.Activation(net, act_type="relu", name="relu1")
    net = sym.FullyConnected(net, num_hidden=1024, name="fc2")
    net = sym.Activation(net, act_type="relu", name="relu2")
    net = sym.SoftmaxOutput(sym.FullyConnected(net, num_hidden=10, name="fc3"), name="softmax")
    shapes = {k: tuple(v) for k, v in facts["input_shapes"].items()}
    req = "write" if mode == "training" else "null"
    reqs = {n: ("null" if n in shapes else req) for n in net.list_arguments()}
    mxnet_mb = int(facts[mode].split()[1])
    exe = net.simple_bind(None, grad_req=reqs, memplan="mxnet", **shapes)
    assert exe.debug_str().splitlines()[-1] == facts[mode]
    auto = net.simple_bind(None, grad_req=reqs, memplan="auto", **shapes)
    assert int(auto.debug_str().splitlines()[-1].split()[1]) <= mxnet_mb


def test_passes_come_from_config_and_a_registered_pass_runs():
    from mxkit.symbol import passes

    seen = []

    def record(roots, nodes):
        seen.append([n.name for n in nodes])
        return nodes

    passes.register_pass("test_record", record)
    net = _three_layers()
    with config.override(graph_passes=["prune", "test_record"]):
        exe = net.simple_bind(None, grad_req={"data": "null", "w1": "null", "w2": "null", "w3": "write"},
                              data=(2, 3), w1=(3, 4), w2=(4, 4), w3=(4, 2))
    assert seen and seen[0][:6] == ["layer1", "act1", "layer2", "act2", "layer3", "total"]
    assert len(seen[0]) == len(exe._forward_steps) + len(exe._backward_steps)
    with config.override(graph_passes=["prune", "nonsense"]), \
            pytest.raises(MXKitError, match=r"'nonsense', which is not a graph pass; registered passes: .*prune"):
        net.simple_bind(None, data=(2, 3), w1=(3, 4), w2=(4, 4), w3=(4, 2))
