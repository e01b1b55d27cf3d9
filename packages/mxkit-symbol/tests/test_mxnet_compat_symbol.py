"""MXNet 1.x calling conventions of mx.sym: namespaces, positional parameters, one-input variadic ops."""

import numpy as np
import pytest
from mxkit import mx
from mxkit.core.errors import MXKitError
from mxkit.symbol import SymbolError


def _run(sym, grad=True, **inputs):
    exe = sym.simple_bind(mx.cpu(), grad_req="write" if grad else "null", **{k: v.shape for k, v in inputs.items()})
    for k, v in inputs.items():
        exe.arg_dict[k][:] = v
    exe.forward(is_train=grad)
    return exe


@pytest.mark.parametrize("make, expected_grad", [
    (lambda x: mx.sym.Concat(x, dim=1), lambda g: g),
    (lambda x: mx.sym.stack(x, axis=0), lambda g: g[0]),
    # nearest upsampling by 2: each input cell feeds a 2x2 block
    (lambda x: mx.sym.UpSampling(x, scale=2, sample_type="nearest", num_args=1),
     lambda g: g.reshape(1, 2, 2, 2, 2, 2).sum(axis=(3, 5))),
])
def test_backward_of_one_input_variadic_operators(make, expected_grad):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 2, 2)).astype(np.float32)
    exe = _run(make(mx.sym.var("x")), x=x)
    head = rng.standard_normal(exe.outputs[0].shape).astype(np.float32)
    exe.backward(mx.nd.array(head))
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), expected_grad(head), rtol=1e-6)


def test_positional_parameters_follow_the_schema():
    x = mx.sym.var("x")
    assert mx.sym.reshape(x, (0, -1)).infer_shape(x=(2, 3, 4))[1] == [(2, 12)]
    assert mx.sym.transpose(x, (1, 0)).infer_shape(x=(2, 3))[1] == [(3, 2)]
    with pytest.raises(SymbolError, match="input symbols come first"):
        mx.sym.reshape(x, (0, -1), x)
    with pytest.raises(SymbolError, match="at most"):
        mx.sym.relu(x, 1, 2)


def test_module_level_binary_functions():
    x, y = mx.sym.var("x"), mx.sym.var("y")
    a = np.array([[1.0, -2.0, 3.0]], np.float32)
    b = np.array([[0.0], [2.5]], np.float32)
    for fn, ref in [(mx.sym.maximum, np.maximum), (mx.sym.minimum, np.minimum), (mx.sym.hypot, np.hypot),
                    (mx.sym.power, np.power)]:
        out = _run(fn(x, y), grad=False, x=np.abs(a) if fn is mx.sym.power else a, y=b).outputs[0].asnumpy()
        np.testing.assert_allclose(out, ref(np.abs(a) if fn is mx.sym.power else a, b), rtol=1e-6)
        out = _run(fn(x, 2.0), grad=False, x=np.abs(a)).outputs[0].asnumpy()
        np.testing.assert_allclose(out, ref(np.abs(a), 2.0), rtol=1e-6)
    np.testing.assert_allclose(_run(mx.sym.power(2.0, x), grad=False, x=a).outputs[0].asnumpy(), 2.0 ** a)
    assert mx.sym.maximum(2, 3) == 3 and mx.sym.minimum(2, 3) == 2
    with pytest.raises(SymbolError, match="symbols or numbers"):
        mx.sym.maximum("a", x)


def test_random_linalg_and_internal_namespaces():
    sample = _run(mx.sym.random.uniform(low=2.0, high=3.0, shape=(50,)), grad=False).outputs[0].asnumpy()
    assert sample.shape == (50,) and sample.dtype == np.float32 and (sample >= 2).all() and (sample < 3).all()
    normal = _run(mx.sym.random.normal(shape=(2, 3), ctx=mx.cpu()), grad=False).outputs[0]
    assert normal.shape == (2, 3)
    x, y = mx.sym.var("x"), mx.sym.var("y")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(_run(mx.sym.linalg.gemm2(x, y), grad=False, x=a, y=b).outputs[0].asnumpy(), a @ b)
    out = _run(mx.sym._internal._plus_scalar(x, scalar=1.5), grad=False, x=a).outputs[0].asnumpy()
    np.testing.assert_allclose(out, a + 1.5)
    with pytest.raises(AttributeError, match="_linalg_nope"):
        mx.sym.linalg.nope  # noqa: B018
    with pytest.raises(AttributeError, match="no operator"):
        mx.sym._internal._nope  # noqa: B018


# Partial shapes (0 = unknown) complete backward through the graph as in MXNet 1.9.1's
# infer_shape; the expected shapes follow from each operator's shape rule by hand.
def test_infer_shape_completes_concat_inputs_from_the_output():
    a = mx.sym.Variable("a", shape=(0, 10))
    b = mx.sym.Variable("b", shape=(0, 5))
    d = mx.sym.Variable("d", shape=(2, 0)) + mx.sym.Concat(a, b, num_args=2, dim=1)
    args, outs, _ = d.infer_shape()
    assert dict(zip(d.list_arguments(), args)) == {"d": (2, 15), "a": (2, 10), "b": (2, 5)}
    assert outs == [(2, 15)]
    x, y = mx.sym.var("x"), mx.sym.var("y")
    # the one unknown size along dim is what is left of the output's
    e = mx.sym.Concat(x, y, dim=0) + mx.sym.var("z")
    assert e.infer_shape(x=(2, 3), z=(5, 3))[0] == [(2, 3), (3, 3), (5, 3)]
    # an unknown part leaves the output's size along dim unknown, not the sum of the known ones
    assert mx.sym.Concat(x, y, dim=0).infer_shape_partial(x=(2, 3))[1] == [(0, 3)]


def test_infer_shape_completes_slice_channel_and_convolution_data():
    a = mx.sym.Variable("a", shape=(0, 10))
    d = mx.sym.SliceChannel(data=a, num_outputs=10, axis=1, squeeze_axis=True)[1] + mx.sym.Variable("c", shape=(5,))
    assert d.infer_shape()[0] == [(5, 10), (5,)]
    a = mx.sym.Variable("a", shape=(0, 10, 0, 0))
    conv = mx.sym.Convolution(data=a, num_filter=21, kernel=(3, 3), dilate=(1, 1), pad=(1, 1))
    d = conv + mx.sym.Variable("c", shape=(5, 21, 32, 32))
    assert d.infer_shape()[0] == [(5, 10, 32, 32), (21, 10, 3, 3), (21,), (5, 21, 32, 32)]


def test_symbol_comparison_is_elementwise_and_truth_is_an_error():
    x, y = mx.sym.var("x"), mx.sym.var("y")
    a, b = np.array([1.0, 2.0, 3.0], np.float32), np.array([1.0, 5.0, 3.0], np.float32)
    np.testing.assert_array_equal(_run(x == y, grad=False, x=a, y=b).outputs[0].asnumpy(), (a == b))
    np.testing.assert_array_equal(_run(x != y, grad=False, x=a, y=b).outputs[0].asnumpy(), (a != b))
    np.testing.assert_array_equal(_run(x == 2, grad=False, x=a).outputs[0].asnumpy(), (a == 2))
    assert {x: 1, y: 2}[y] == 2  # still hashable, by identity
    with pytest.raises(mx.base.NotImplementedForSymbol, match="not implemented for Symbol"):
        bool(x == y)


def test_hidden_keys_among_operator_kwargs_are_attributes():
    op = mx.sym.Convolution(data=mx.sym.var("data"), name="conv", kernel=(1, 1), num_filter=1, lr_mult=2,
                            ctx_group="dev1")
    attrs = op.list_attr()
    assert attrs["__lr_mult__"] == "2" and attrs["__ctx_group__"] == "dev1" and "lr_mult" not in op.list_arguments()


def test_operators_give_composed_variables_mxnets_initializers():
    import json
    from pathlib import Path

    # written by fixtures/compose_init/make_fixture.py with MXNet 1.9.1
    expected = json.loads((Path(__file__).parent / "fixtures" / "compose_init" / "compose_init.json").read_text())
    data = mx.sym.var("data")
    nets = {
        "prelu": mx.sym.LeakyReLU(data, act_type="prelu", name="act"),
        "batchnorm": mx.sym.BatchNorm(data, name="bn"),
        "batchnorm_own_init": mx.sym.BatchNorm(data, moving_var=mx.sym.var("mv", init=mx.init.Constant(2.0)),
                                               name="bn"),
    }
    for name, net in nets.items():
        nodes = {n["name"]: n.get("attrs", {}) for n in json.loads(net.tojson())["nodes"] if n["op"] == "null"}
        got = {k: json.loads(v["__init__"]) for k, v in nodes.items() if "__init__" in v}
        want = {k: json.loads(v["__init__"]) for k, v in expected[name].items() if "__init__" in v}
        assert got == want, name


def test_engine_bulk_sets_the_segment_size_of_executors_bound_in_it():
    x = mx.sym.var("x")
    net = x
    for _ in range(6):
        net = mx.sym.relu(net * 2)
    data = np.array([1.0, -1.0, 0.5], np.float32)
    with mx.engine.bulk(1):
        one_by_one = net.simple_bind(mx.cpu(), grad_req="null", x=(3,))
        assert mx.engine.set_bulk_size(1) == 1  # set inside the block: it reports the block's size
    whole = net.simple_bind(mx.cpu(), grad_req="null", x=(3,))
    # bound in the block: each node its own engine push; outside: the configured segments
    assert len(one_by_one._forward_segments) > len(whole._forward_segments)
    for exe in (one_by_one, whole):
        exe.arg_dict["x"][:] = data
        np.testing.assert_allclose(exe.forward()[0].asnumpy(), np.maximum(data * 64, 0))
    assert mx.engine.set_bulk_size(None) == 0  # back to the configuration outside the block
    with pytest.raises(ValueError, match="non-negative int"):
        mx.engine.set_bulk_size(-1)


def test_symbol_pickles_as_its_json():
    import pickle

    s = mx.sym.FullyConnected(mx.sym.var("x"), num_hidden=3, name="fc", attr={"mood": "calm"})
    t = pickle.loads(pickle.dumps(s))
    assert t.tojson() == s.tojson()
    assert t.list_arguments() == ["x", "fc_weight", "fc_bias"]
    assert t.attr("mood") == s.attr("mood")


def test_symbolic_add_n_gradient_and_partial_shapes():
    x, y = mx.sym.var("x"), mx.sym.var("y")
    exe = _run(mx.sym.add_n(x, y, x), x=np.ones(2, np.float32), y=np.full(2, 2.0, np.float32))
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), [4.0, 4.0])
    exe.backward(mx.nd.ones(2))
    np.testing.assert_array_equal(exe.grad_dict["x"].asnumpy(), [2.0, 2.0])
    np.testing.assert_array_equal(exe.grad_dict["y"].asnumpy(), [1.0, 1.0])
    assert mx.sym.ElementWiseSum(x, y).infer_shape_partial(x=(0, 3), y=(2, 0))[0] == [(2, 3), (2, 3)]


def test_infer_type_partial_and_abs():
    # results as MXNet 1.9.1 gives them for these graphs
    x, y = mx.sym.var("x"), mx.sym.var("y")
    assert (x + 1).infer_type_partial() == ([None], [None], [])
    assert (x + y).infer_type_partial(x="float16") == ([np.float16, np.float16], [np.float16], [])
    assert (x + 1).infer_type() == (None, None, None)
    np.testing.assert_array_equal(_run(abs(x), grad=False, x=np.array([-1.5, 2.0], np.float32)).outputs[0].asnumpy(),
                                  [1.5, 2.0])


def test_an_explicit_none_is_written_where_the_parameter_accepts_it():
    # MXNet 1.9.1 writes slice_axis(end=None) as "end": "None" and refuses a file without "end"
    import json

    from mxkit import mx

    x = mx.sym.Variable("x")
    y = mx.sym.slice_axis(x, axis=0, begin=1, end=None)
    assert json.loads(y.tojson())["nodes"][1]["attrs"] == {"axis": "0", "begin": "1", "end": "None"}
    loaded = mx.sym.load_json(y.tojson())
    executor = loaded.simple_bind(mx.cpu(), x=(5,))
    executor.arg_dict["x"][:] = mx.nd.arange(5)
    assert executor.forward()[0].asnumpy().tolist() == [1, 2, 3, 4]
    # where None is not a value of the parameter, it still means "not given"
    assert "kernel" not in json.loads(mx.sym.Pooling(x, kernel=None, global_pool=True).tojson())["nodes"][1]["attrs"]


def test_attributes_are_stored_and_listed_as_mxnet_does():
    # hidden keys (lr_mult, wd_mult, ctx_group...) are stored dunder and listed under both
    # names; a variable's other attributes are stored as given
    data = mx.sym.Variable("data", attr={"mood": "angry"})
    conv = mx.sym.Convolution(data=data, name="conv", kernel=(1, 1), num_filter=1,
                              attr={"__mood__": "so so", "wd_mult": "x"}, lr_mult=1)
    listed = conv.list_attr()
    assert listed["__wd_mult__"] == listed["wd_mult"] == "x" and listed["__mood__"] == "so so"
    assert listed["__lr_mult__"] == listed["lr_mult"] == "1"
    everything = conv.attr_dict()
    assert everything["data"] == {"mood": "angry"}
    # the weight and bias made for the operator carry its attributes (MXNet copies them)
    for name in ("conv_weight", "conv_bias"):
        assert everything[name]["__mood__"] == "so so" and everything[name]["lr_mult"] == "1"
    assert conv.attr("wd_mult") == "x" and data.attr("mood") == "angry"
    assert mx.sym.load_json(conv.tojson()).attr_dict() == everything


def test_children_of_a_multi_output_node_are_listed_once():
    data = mx.sym.Variable("data")
    sliced = mx.sym.SliceChannel(data, num_outputs=3, name="slice")
    assert sliced.get_children().list_outputs() == ["data"]
    concat = mx.sym.Concat(*list(sliced))
    assert concat.get_children().list_outputs() == ["slice_output0", "slice_output1", "slice_output2"]
    net = mx.sym.FullyConnected(mx.sym.FullyConnected(data, name="fc1", num_hidden=4), name="fc2", num_hidden=2)
    assert net.get_children().list_outputs() == ["fc1_output", "fc2_weight", "fc2_bias"]


def test_partial_type_inference_passes_through_a_cast():
    data = mx.sym.Variable("data")
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.Cast(data, dtype="float32"), num_hidden=3, name="fc"),
                               name="softmax")
    arg, out, aux = net.infer_type_partial()
    # the cast fixes everything after it; its own input stays unknown
    assert arg == [None, np.float32, np.float32, np.float32] and out == [np.float32] and aux == []
    assert net.infer_type() == (None, None, None)
    arg, out, _ = net.infer_type(data=np.float16)
    assert arg == [np.float16, np.float32, np.float32, np.float32] and out == [np.float32]


@pytest.mark.parametrize("method, kwargs, shape", [
    ("shape_array", {}, (2, 3)),
    ("size_array", {}, (2, 3)),
    ("softmin", {"axis": 1}, (2, 3)),
    ("squeeze", {"axis": 1}, (2, 1, 3)),
    ("diag", {}, (3, 3)),
    ("depth_to_space", {"block_size": 2}, (1, 4, 1, 2)),
    ("space_to_depth", {"block_size": 2}, (1, 1, 2, 4)),
    ("pad", {"mode": "constant", "pad_width": (0, 0, 0, 0, 1, 2, 0, 1)}, (1, 1, 2, 3)),
])
def test_fluent_methods_match_the_functions(method, kwargs, shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    data = mx.sym.var("data")
    fluent = getattr(data, method)(**kwargs)
    regular = getattr(mx.sym, method)(data, **kwargs)
    assert fluent.list_outputs()[0].startswith(method.lower())
    got = _run(fluent, grad=False, data=x).outputs[0].asnumpy()
    want = _run(regular, grad=False, data=x).outputs[0].asnumpy()
    np.testing.assert_array_equal(got, want)
    # the reference for one of them: numpy itself
    if method == "shape_array":
        np.testing.assert_array_equal(got, shape)


def test_fluent_split_v2_and_node_names_follow_the_method():
    data = mx.sym.var("data")
    parts = data.split_v2(2, axis=1)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    exe = _run(parts, grad=False, data=x)
    np.testing.assert_array_equal(exe.outputs[1].asnumpy(), x[:, 2:])
    with mx.name.NameManager():
        assert data.flip(axis=0).list_outputs() == ["flip0_output"]


def test_json_records_numpy_shape_mode():
    import json

    net = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=3)
    assert "is_np_shape" not in json.loads(net.tojson())["attrs"]
    with mx.np_shape(True):
        assert json.loads(net.tojson())["attrs"]["is_np_shape"] == ["int", 1]
    assert "is_np_shape" not in json.loads(net.tojson())["attrs"]


def test_gen_atomic_symbol_keeps_operator_and_parameters_with_fresh_inputs():
    s = mx.sym.RNN(mx.sym.var("data"), mx.sym.var("param"), mx.sym.var("h0"), mx.sym.var("h1"), state_size=10,
                   num_layers=2, bidirectional=True, state_outputs=True, mode="lstm", name="rnn")
    atomic = s._gen_atomic_symbol()
    assert atomic.list_outputs() == s.list_outputs()
    assert "data" not in atomic.list_arguments() and len(atomic.list_arguments()) == 4
    node = json_nodes(atomic)[-1]
    assert node["op"] == "RNN" and node["attrs"]["mode"] == "lstm" and node["attrs"]["state_size"] == "10"
    with pytest.raises(SymbolError, match="is a variable"):
        mx.sym.var("x")._gen_atomic_symbol()


def json_nodes(sym):
    import json

    return json.loads(sym.tojson())["nodes"]


def test_identity_with_attr_like_rhs_lets_shapes_flow_back_and_passes_the_gradient():
    w, wshift = mx.sym.var("weight"), mx.sym.var("wshift", shape=(1,))
    wt = mx.sym._internal._identity_with_attr_like_rhs(mx.sym.broadcast_add(w, wshift), w)
    net = mx.sym.FullyConnected(data=mx.sym.var("data"), weight=wt, num_hidden=11, no_bias=True)
    arg_shapes, _, _ = net.infer_shape(data=(7, 100))
    assert dict(zip(net.list_arguments(), arg_shapes))["weight"] == (11, 100)
    a, b = mx.sym.var("a"), mx.sym.var("b")
    out = mx.sym._internal._identity_with_attr_like_rhs(a * 2, b)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    exe = _run(out, a=x, b=np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), 2 * x)
    exe.backward(mx.nd.ones((2, 3)))
    np.testing.assert_array_equal(exe.grad_dict["a"].asnumpy(), np.full((2, 3), 2.0))
    np.testing.assert_array_equal(exe.grad_dict["b"].asnumpy(), np.zeros((2, 3)))
    with pytest.raises(MXKitError, match="shape"):
        out.infer_shape(a=(2, 3), b=(3, 2))


def test_partial_shapes_in_numpy_shape_mode_use_none_and_minus_one():
    z = mx.sym.batch_dot(mx.sym.var("x"), mx.sym.var("y"))
    assert z.infer_shape_partial(x=(0, 3, 4), y=(0, 4, 5))[1] == [(0, 3, 5)]
    assert mx.sym.sin(mx.sym.var("d")).infer_shape_partial()[1] == [()]
    with mx.np_shape(True):
        assert z.infer_shape_partial(x=(-1, 3, 4), y=(-1, 4, 5))[1] == [(-1, 3, 5)]
        args, outs, _ = mx.sym.sin(mx.sym.var("d")).infer_shape_partial()
        assert args == [None] and outs == [None]
