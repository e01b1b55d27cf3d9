"""Executor forward/backward against independent references: finite differences, numpy,
and arrays computed by MXNet 1.9.1 on the same graphs."""

import json

import numpy as np
import pytest
from mxkit import ndarray as nd
from mxkit import symbol as sym


def _composite():
    data, w1, b1 = sym.Variable("data"), sym.Variable("w1"), sym.Variable("b1")
    hidden = sym.tanh(sym.broadcast_add(sym.dot(data, w1), b1), name="hidden")
    parts = sym.split(hidden, num_outputs=2, axis=1, name="parts")
    mixed = sym.Concat(sym.sigmoid(parts[0]), parts[1] * parts[1], dim=1, name="mixed")
    cube = sym.transpose(sym.Reshape(mixed, shape=(0, 2, 4)), axes=(0, 2, 1))
    # hidden is used three times: its gradient is a sum
    return sym.Group([sym.sum(cube, axis=1) * 3, sym.softmax(hidden * hidden + 1 / (hidden + 2), axis=-1)])


def _bind_with_values(symbol, values, grad_req="write"):
    exe = symbol.simple_bind(None, grad_req=grad_req, type_dict={k: "float64" for k in values},
                             **{k: v.shape for k, v in values.items()})
    for name, value in values.items():
        exe.arg_dict[name][:] = value
    return exe


def _numeric_gradient(symbol, values, out_grads, name, eps=1e-6):
    """Central differences of sum_i <out_i, out_grad_i> with respect to argument ``name``."""
    exe = _bind_with_values(symbol, values, grad_req="null")

    def objective(array):
        exe.arg_dict[name][:] = array
        outs = exe.forward()
        return sum(float((o.asnumpy() * g).sum()) for o, g in zip(outs, out_grads))

    base = values[name].copy()
    grad = np.zeros_like(base)
    for index in np.ndindex(base.shape):
        plus, minus = base.copy(), base.copy()
        plus[index] += eps
        minus[index] -= eps
        grad[index] = (objective(plus) - objective(minus)) / (2 * eps)
    return grad


def test_composite_gradients_match_finite_differences():
    rng = np.random.default_rng(1)
    values = {"data": rng.standard_normal((3, 5)), "w1": rng.standard_normal((5, 8)) * 0.5,
              "b1": rng.standard_normal(8)}
    net = _composite()
    exe = _bind_with_values(net, values)
    outs = exe.forward(is_train=True)
    out_grads = [rng.standard_normal(o.shape) for o in outs]
    exe.backward([nd.array(g, dtype="float64") for g in out_grads])
    for name in values:
        numeric = _numeric_gradient(net, values, out_grads, name)
        np.testing.assert_allclose(exe.grad_dict[name].asnumpy(), numeric, rtol=1e-5, atol=1e-7, err_msg=name)


def test_mxnet_composite_fixture_forward_and_gradients(fixture_path):
    net = sym.load(fixture_path("composite-symbol.json"))
    with np.load(fixture_path("expected.npz")) as stored:
        ref = {k.split("/", 1)[1]: stored[k] for k in stored.files if k.startswith("composite/")}
    exe = net.simple_bind(None, data=(4, 6), w1=(6, 8), b1=(8,))
    outs = exe.forward(is_train=True, data=ref["data"], w1=ref["w1"], b1=ref["b1"])
    for name, out in zip(net.list_outputs(), outs):
        np.testing.assert_allclose(out.asnumpy(), ref[name], rtol=1e-5, atol=1e-6, err_msg=name)
    exe.backward([nd.ones(o.shape) for o in outs])
    for name in ("data", "w1", "b1"):
        np.testing.assert_allclose(exe.grad_dict[name].asnumpy(), ref[f"grad_{name}"], rtol=1e-4, atol=1e-5,
                                   err_msg=name)


def test_gluon_exported_block_runs_like_mxnet(fixture_path):
    from mxkit.ndarray.serialization import load_arrays

    net = sym.load(fixture_path("gluon_block-symbol.json"))
    params = {k.split(":", 1)[1]: v for k, v in load_arrays(fixture_path("gluon_block-0000.params")).items()}
    with np.load(fixture_path("expected.npz")) as stored:
        x = stored["gluon_block/data"]
        expected = stored[f"gluon_block/{net.list_outputs()[0]}"]
    exe = net.simple_bind(None, grad_req="null", data=x.shape)
    exe.copy_params_from(params)
    out = exe.forward(data=x)[0].asnumpy()
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_mxnet_module_checkpoint_trains_like_mxnet(fixture_path, require_ops):
    require_ops("FullyConnected", "Activation", "SoftmaxOutput")
    from mxkit.ndarray.serialization import load_arrays

    net = sym.load(fixture_path("mlp-symbol.json"))
    params = {k.split(":", 1)[1]: v for k, v in load_arrays(fixture_path("mlp-0000.params")).items()}
    with np.load(fixture_path("expected.npz")) as stored:
        ref = {k.split("/", 1)[1]: stored[k] for k in stored.files if k.startswith("mlp/")}
    reqs = {n: ("write" if n in params else "null") for n in net.list_arguments()}
    exe = net.simple_bind(None, grad_req=reqs, data=ref["data"].shape, softmax_label=ref["softmax_label"].shape)
    exe.copy_params_from(params)
    out = exe.forward(is_train=True, data=ref["data"], softmax_label=ref["softmax_label"])[0]
    np.testing.assert_allclose(out.asnumpy(), ref["softmax_output"], rtol=1e-5, atol=1e-6)
    exe.backward()  # SoftmaxOutput supplies its own head gradient
    for name in params:
        np.testing.assert_allclose(exe.grad_dict[name].asnumpy(), ref[f"grad_{name}"], rtol=1e-4, atol=1e-5,
                                   err_msg=name)


def test_executor_reuse_with_changing_inputs_matches_numpy():
    data, weight = sym.Variable("data"), sym.Variable("weight")
    out = sym.sum(sym.relu(sym.dot(data, weight)) * 2, axis=1)
    exe = out.simple_bind(None, data=(6, 4), weight=(4, 3))
    rng = np.random.default_rng(2)
    w = rng.standard_normal((4, 3)).astype("float32")
    exe.arg_dict["weight"][:] = w
    for _ in range(25):
        x = rng.standard_normal((6, 4)).astype("float32")
        got = exe.forward(is_train=True, data=x)[0].asnumpy()
        pre = x @ w
        np.testing.assert_allclose(got, 2 * np.maximum(pre, 0).sum(1), rtol=1e-5, atol=1e-6)
        og = rng.standard_normal(6).astype("float32")
        exe.backward(nd.array(og))
        expected_w = x.T @ (2 * (pre > 0) * og[:, None])
        np.testing.assert_allclose(exe.grad_dict["weight"].asnumpy(), expected_w, rtol=1e-4, atol=1e-5)


def test_grad_req_add_accumulates_and_null_leaves_no_gradient():
    data, weight = sym.Variable("data"), sym.Variable("weight")
    out = sym.dot(data, weight)
    exe = out.simple_bind(None, grad_req={"data": "null", "weight": "add"}, data=(2, 3), weight=(3, 4))
    assert "data" not in exe.grad_dict and exe.grad_arrays[0] is None
    x = np.arange(6, dtype="float32").reshape(2, 3)
    exe.forward(is_train=True, data=x)
    og = np.ones((2, 4), dtype="float32")
    exe.backward(nd.array(og))
    exe.backward(nd.array(og))
    exe.backward(nd.array(og * 2))
    np.testing.assert_allclose(exe.grad_dict["weight"].asnumpy(), 4 * (x.T @ og))


def test_block_grad_stops_the_gradient(require_ops):
    require_ops("BlockGrad")
    x = sym.Variable("x")
    out = x * sym.BlockGrad(x * 3)
    exe = out.simple_bind(None, x=(4,))
    value = np.arange(4, dtype="float32")
    exe.forward(is_train=True, x=value)
    exe.backward(nd.ones((4,)))
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), 3 * value)


def test_unused_argument_gets_a_zero_gradient():
    x, unused = sym.Variable("x"), sym.Variable("unused")
    out = sym.Group([x * 2, unused])
    exe = out.simple_bind(None, grad_req={"x": "write", "unused": "null"}, x=(3,), unused=(2,))
    exe.forward(is_train=True, x=np.ones(3, dtype="float32"))
    exe.backward([nd.ones((3,)), nd.ones((2,))])
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), 2 * np.ones(3))


def test_expected_fixture_names_match_ours(fixture_path):
    with open(fixture_path("expected.json"), encoding="utf-8") as handle:
        expected = json.load(handle)["composite"]
    net = sym.load(fixture_path("composite-symbol.json"))
    assert net.list_arguments() == expected["arguments"]
    assert net.list_outputs() == expected["outputs"]
    with pytest.raises(Exception, match="is not an input"):
        net.infer_shape(nope=(1,))


def test_a_first_layer_skips_the_data_gradient_nobody_reads_and_keeps_the_others(monkeypatch):
    from mxkit.ndarray.ops import nn_conv

    col2im_calls = []
    real_col2im = nn_conv.col2im
    monkeypatch.setattr(nn_conv, "col2im", lambda *a, **k: col2im_calls.append(1) or real_col2im(*a, **k))
    try:  # the CPU plugin's Cython convolution has its own col2im
        from mxkit_cpu import _conv as cpu_conv
    except ImportError:
        pass
    else:
        real_cpu_col2im = cpu_conv.col2im
        monkeypatch.setattr(cpu_conv, "col2im", lambda *a, **k: col2im_calls.append(1) or real_cpu_col2im(*a, **k))
    net = sym.FullyConnected(sym.Flatten(sym.Convolution(sym.Variable("data"), kernel=(3, 3), num_filter=4,
                                                         name="conv")), num_hidden=3, name="fc")
    rng = np.random.default_rng(0)
    values = {"data": rng.standard_normal((2, 2, 5, 5)), "conv_weight": rng.standard_normal((4, 2, 3, 3)),
              "conv_bias": rng.standard_normal(4), "fc_weight": rng.standard_normal((3, 36)),
              "fc_bias": rng.standard_normal(3)}
    head = rng.standard_normal((2, 3))
    grads = {}
    for data_req in ("write", "null"):
        req = {name: "write" for name in values}
        req["data"] = data_req
        exe = _bind_with_values(net, values, grad_req=req)
        col2im_calls.clear()
        exe.forward(is_train=True)
        exe.backward(nd.array(head, dtype="float64"))
        grads[data_req] = {n: g.asnumpy() for n, g in exe.grad_dict.items()}
        assert bool(col2im_calls) == (data_req == "write")  # the convolution's data gradient is col2im
    assert "data" not in grads["null"]
    for name in ("conv_weight", "conv_bias", "fc_weight", "fc_bias"):
        np.testing.assert_allclose(grads["null"][name], grads["write"][name], rtol=1e-12)
