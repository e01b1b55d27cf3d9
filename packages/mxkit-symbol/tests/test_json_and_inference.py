"""MXNet JSON both ways, and shape/dtype inference, against files and facts from MXNet 1.9.1."""

import json
import os
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit import symbol as sym
from mxkit.core.errors import FormatError, ShapeError
from mxkit.ndarray.registry import UnknownOperatorError

FIXTURE_NAMES = ("composite", "gluon_block", "mlp", "bn")
NEEDS = {"mlp": ("FullyConnected", "Activation", "SoftmaxOutput"), "bn": ("Convolution", "BatchNorm")}


def _expected(fixture_path):
    with open(fixture_path("expected.json"), encoding="utf-8") as handle:
        return json.load(handle)


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_mxnet_files_load_with_mxnet_names_and_shapes(name, fixture_path, require_ops):
    require_ops(*NEEDS.get(name, ()))
    facts = _expected(fixture_path)[name]
    net = sym.load(fixture_path(f"{name}-symbol.json"))
    assert net.list_arguments() == facts["arguments"]
    assert net.list_outputs() == facts["outputs"]
    assert net.list_auxiliary_states() == facts["auxiliary_states"]
    arg_shapes, out_shapes, aux_shapes = net.infer_shape(**facts["input_shapes"])
    assert [list(s) for s in arg_shapes] == facts["arg_shapes"]
    assert [list(s) for s in out_shapes] == facts["out_shapes"]
    assert [list(s) for s in aux_shapes] == facts["aux_shapes"]


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_json_round_trip_is_stable(name, fixture_path, require_ops):
    require_ops(*NEEDS.get(name, ()))
    net = sym.load(fixture_path(f"{name}-symbol.json"))
    text = net.tojson()
    again = sym.load_json(text)
    assert again.tojson() == text
    with open(fixture_path(f"{name}-symbol.json"), encoding="utf-8") as handle:
        original = json.load(handle)
    ours = json.loads(text)
    assert [(n["op"], n["name"], n["inputs"]) for n in ours["nodes"]] == \
        [(n["op"], n["name"], n["inputs"]) for n in original["nodes"]]
    assert ours["arg_nodes"] == original["arg_nodes"]
    if name != "bn":  # MXNet's BatchNorm has two hidden outputs (mean, var) that mxkit's does not expose
        assert ours["node_row_ptr"] == original["node_row_ptr"]
    assert ours["heads"] == original["heads"]
    assert ours["attrs"]["mxnet_version"] == ["int", 10901]


def test_save_and_load_file(tmp_path):
    net = sym.Group([sym.relu(sym.Variable("x", shape=(2, 3)), name="r"), sym.Variable("y")])
    path = str(tmp_path / "net-symbol.json")
    net.save(path)
    loaded = sym.load(path)
    assert loaded.list_outputs() == ["r_output", "y"]
    assert loaded.get_internals()["x"].attr("__shape__") == "(2, 3)"
    assert loaded.infer_shape(y=(4,))[1] == [(2, 3), (4,)]


def test_mxnet_0x_format_loads():
    legacy = {"nodes": [{"op": "null", "name": "data", "param": {}, "inputs": [], "backward_source_id": -1},
                        {"op": "Activation", "name": "act", "param": {"act_type": "relu"},
                         "attr": {"ctx_group": "g"}, "inputs": [[0, 0]], "backward_source_id": -1}],
              "arg_nodes": [0], "heads": [[1, 0]]}
    net = sym.load_json(json.dumps(legacy))
    assert net.list_outputs() == ["act_output"] and net.attr("act_type") == "relu"
    assert net.attr("ctx_group") == "g"


def test_unknown_operators_are_named():
    text = json.dumps({"nodes": [{"op": "null", "name": "x", "inputs": []},
                                 {"op": "FancyOp", "name": "f1", "inputs": [[0, 0, 0]]},
                                 {"op": "OtherOp", "name": "f2", "inputs": [[1, 0, 0]]}],
                       "arg_nodes": [0], "heads": [[2, 0, 0]]})
    with pytest.raises(UnknownOperatorError, match=r"FancyOp \(node 'f1'\), OtherOp \(node 'f2'\)"):
        sym.load_json(text)


def test_malformed_json_is_a_format_error(tmp_path):
    with pytest.raises(FormatError, match="does not parse"):
        sym.load_json("{nodes")
    with pytest.raises(FormatError, match="'nodes' and 'heads'"):
        sym.load_json('{"arg_nodes": []}')
    bad_entry = {"nodes": [{"op": "null", "name": "x", "inputs": []}], "heads": [[3, 0, 0]]}
    with pytest.raises(FormatError, match=r"refers to node 3"):
        sym.load_json(json.dumps(bad_entry))
    bad_param = {"nodes": [{"op": "null", "name": "x", "inputs": []},
                           {"op": "Activation", "name": "a", "attrs": {"act_type": "bogus"}, "inputs": [[0, 0, 0]]}],
                 "heads": [[1, 0, 0]]}
    with pytest.raises(FormatError, match=r"node 'a' \(operator Activation\).*bogus"):
        sym.load_json(json.dumps(bad_param))
    with pytest.raises(FormatError, match="cannot read symbol file"):
        sym.load(str(tmp_path / "missing.json"))


def test_inference_runs_backward_to_parameters(require_ops):
    require_ops("FullyConnected")
    data = sym.Variable("data")
    net = sym.FullyConnected(sym.FullyConnected(data, num_hidden=7, name="fc1"), num_hidden=3, name="fc2")
    arg_shapes, out_shapes, _ = net.infer_shape(data=(5, 2, 4))
    assert dict(zip(net.list_arguments(), arg_shapes)) == {
        "data": (5, 2, 4), "fc1_weight": (7, 8), "fc1_bias": (7,), "fc2_weight": (3, 7), "fc2_bias": (3,)}
    assert out_shapes == [(5, 3)]
    assert net.infer_shape() == (None, None, None)
    partial = net.infer_shape_partial()
    assert partial[0] == [(), (), (), (), ()]


def test_inference_fills_elementwise_inputs_from_each_other():
    a, b = sym.Variable("a"), sym.Variable("b")
    out = sym.relu(a) * b
    assert out.infer_shape(b=(2, 5)) == ([(2, 5), (2, 5)], [(2, 5)], [])
    assert out.infer_shape(a=(2, 5))[0] == [(2, 5), (2, 5)]


def test_variable_shape_and_dtype_attributes_feed_inference():
    x = sym.Variable("x", shape=(3, 4), dtype="float64")
    out = sym.sum(x * 2, axis=0)
    assert out.infer_shape() == ([(3, 4)], [(4,)], [])
    arg_types, out_types, _ = out.infer_type()
    assert arg_types == [np.float64] and out_types == [np.float64]
    with pytest.raises(ShapeError, match=r"node '_plus\d+'.*elemwise_add.*\(3, 4\), \(3, 5\)"):
        (sym.Variable("x", shape=(3, 4)) + sym.Variable("z", shape=(3, 5))).infer_shape()


def test_type_inference_propagates_and_reports_unknown():
    x, w = sym.Variable("x"), sym.Variable("w")
    out = sym.dot(x, w)
    assert out.infer_type() == (None, None, None)
    assert out.infer_type(x="float16") == ([np.float16, np.float16], [np.float16], [])
    with pytest.raises(Exception, match="not an input"):
        out.infer_type(y="float32")


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.integers(0, 3))
def test_broadcast_and_reduce_inference_matches_numpy(shape, axis_seed):
    shape = tuple(shape)
    axis = axis_seed % len(shape)
    x, y = sym.Variable("x"), sym.Variable("y")
    other = tuple(1 if i == axis else d for i, d in enumerate(shape))
    out = sym.sum(sym.broadcast_mul(x, y), axis=axis, keepdims=True)
    _, (out_shape,), _ = out.infer_shape(x=shape, y=other)
    assert out_shape == np.sum(np.ones(shape) * np.ones(other), axis=axis, keepdims=True).shape


def _mxnet_python():
    interpreter = os.environ.get("MXKIT_MXNET_PYTHON")
    if not interpreter:
        pytest.skip("set MXKIT_MXNET_PYTHON to the interpreter of an MXNet 1.9.1 environment to run this check")
    return interpreter


def test_our_json_loads_in_mxnet(tmp_path, fixture_path, require_ops):
    interpreter = _mxnet_python()
    require_ops("FullyConnected", "Activation", "SoftmaxOutput")
    data = sym.Variable("data")
    hidden = sym.Activation(sym.FullyConnected(data, num_hidden=6, name="fc1"), act_type="tanh", name="act")
    parts = sym.split(hidden, num_outputs=2, axis=1, name="parts")
    mixed = sym.Concat(parts[1], parts[0] * 2 + 1, dim=1, name="mixed")
    net = sym.Group([sym.SoftmaxOutput(mixed, name="softmax"), sym.sum(hidden, axis=1, name="total")])
    path = str(tmp_path / "ours-symbol.json")
    net.save(path)
    rng = np.random.default_rng(8)
    shapes = {"data": (3, 4), "softmax_label": (3,)}
    arg_shapes, _, _ = net.infer_shape(**shapes)
    values = {n: rng.standard_normal(s).astype("float32") for n, s in zip(net.list_arguments(), arg_shapes)}
    np.savez(str(tmp_path / "inputs.npz"), **values)
    script = fixture_path("make_mxnet_fixtures.py")
    report = json.loads(subprocess.run(
        [interpreter, script, "check", path, json.dumps(shapes), str(tmp_path / "inputs.npz")],
        capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1])
    assert report["arguments"] == net.list_arguments()
    assert report["outputs"] == net.list_outputs()
    ours = net.infer_shape(**shapes)
    assert report["arg_shapes"] == [list(s) for s in ours[0]]
    exe = net.simple_bind(None, grad_req="null", **{n: v.shape for n, v in values.items()})
    outs = exe.forward(**values)
    for theirs, mine in zip(report["forward"], outs):
        np.testing.assert_allclose(np.array(theirs), mine.asnumpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("make, message", [
    (lambda d: sym.Convolution(d, kernel=(3, 3), num_filter=0, name="conv1"),
     r"conv1.*num_filter=0 must be a positive"),
    (lambda d: sym.Deconvolution(d, kernel=(3, 3), num_filter=0, name="up"), r"up.*num_filter=0 must be a positive"),
    (lambda d: sym.FullyConnected(d, num_hidden=0, name="fc"), r"fc.*num_hidden=0 must be a positive"),
])
def test_a_zero_sized_layer_is_named_at_inference(make, message):
    with pytest.raises(ShapeError, match=message):
        make(sym.Variable("data")).infer_shape(data=(2, 3, 8, 8))


def test_a_given_prelu_slope_shape_stands_and_an_unknown_one_is_per_channel():
    # Gluon's PReLU exports one slope shared by every channel, with __shape__ (1,)
    data = sym.Variable("data")
    shared = sym.LeakyReLU(data, sym.Variable("alpha", shape=(1,)), act_type="prelu")
    arg_shapes, out_shapes, _ = shared.infer_shape(data=(2, 8, 4, 4))
    assert dict(zip(shared.list_arguments(), arg_shapes))["alpha"] == (1,)
    assert out_shapes == [(2, 8, 4, 4)]
    per_channel = sym.LeakyReLU(data, sym.Variable("alpha"), act_type="prelu")
    arg_shapes, _, _ = per_channel.infer_shape(data=(2, 8, 4, 4))
    assert dict(zip(per_channel.list_arguments(), arg_shapes))["alpha"] == (8,)


def test_group_norm_infers_one_gamma_and_beta_per_group():
    net = sym.GroupNorm(sym.Variable("data"), num_groups=3, name="gn")
    arg_shapes, out_shapes, _ = net.infer_shape(data=(2, 6, 5))
    assert dict(zip(net.list_arguments(), arg_shapes)) == {"data": (2, 6, 5), "gn_gamma": (3,), "gn_beta": (3,)}
    assert out_shapes == [(2, 6, 5)]
