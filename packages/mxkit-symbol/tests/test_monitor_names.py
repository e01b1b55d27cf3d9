"""The names under which an executor's monitor (``monitor_all=True``) reports each node's inputs:
MXNet 1.9.1's, ``<node>_<argument>`` for operators that register argument names and
``<node>_input<i>`` for those that do not (fixtures/make_monitor_names.py records MXNet's)."""

import json
import pathlib

import numpy as np
from mxkit import mx
from mxkit.core import config
from mxkit.ndarray.registry import get_registry
from mxkit.symbol.monitor_names import POSITIONAL_INPUT_OPERATORS, monitor_input_names

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


def _bind_unoptimized(symbol, shapes):
    # MXNet's executor runs the graph as written: no fusion or folding renames its nodes
    with config.override(graph_passes=["prune"], fold_batchnorm=False, eliminate_common_expr=False,
                         fuse_conv=False):
        return symbol.simple_bind(mx.cpu(), grad_req="null", **shapes)


def test_monitor_all_reports_every_input_and_output_under_mxnets_names():
    fixture = json.loads((FIXTURES / "monitor_names.json").read_text())
    symbol = mx.sym.load_json(json.dumps(fixture["symbol"]))
    exe = _bind_unoptimized(symbol, {k: tuple(v) for k, v in fixture["shapes"].items()})
    names = []
    exe.set_monitor_callback(lambda name, array: names.append(name), monitor_all=True)
    exe.forward(is_train=False)
    assert names == fixture["names"]


def test_a_positionally_named_input_carries_the_inputs_value():
    data = mx.sym.var("data")
    fc = mx.sym.FullyConnected(data, num_hidden=3, name="fc")
    net = mx.sym.Activation(mx.sym.Reshape(fc, shape=(3, 2), name="reshape"), act_type="relu", name="act")
    exe = _bind_unoptimized(net, {"data": (2, 4)})
    rng = np.random.default_rng(0)
    for array in exe.arg_dict.values():
        array[:] = rng.uniform(-1, 1, array.shape)
    seen = {}
    exe.set_monitor_callback(lambda name, array: seen.__setitem__(name, array.asnumpy()), monitor_all=True)
    exe.forward(is_train=False)
    x, w, b = (exe.arg_dict[n].asnumpy() for n in ("data", "fc_weight", "fc_bias"))
    np.testing.assert_allclose(seen["reshape_input0"], x @ w.T + b, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(seen["act_input0"], seen["reshape_input0"].reshape(3, 2))
    np.testing.assert_array_equal(seen["act_output"], np.maximum(seen["act_input0"], 0))


def test_the_table_names_only_mxkit_operators_and_keeps_argument_names_elsewhere():
    registry = get_registry()
    assert POSITIONAL_INPUT_OPERATORS <= set(registry.names())
    # spot checks against MXNet 1.9.1's registrations (FListInputNames set or not)
    positional = {"Activation", "relu", "Reshape", "Flatten", "sum", "_plus_scalar", "transpose"}
    assert positional <= POSITIONAL_INPUT_OPERATORS
    assert not {"FullyConnected", "Convolution", "BatchNorm", "Concat", "broadcast_add", "softmax",
                "SliceChannel", "where"} & POSITIONAL_INPUT_OPERATORS
    batchnorm = registry.get("BatchNorm")
    assert monitor_input_names(batchnorm, {}) == ["data", "gamma", "beta", "moving_mean", "moving_var"]
    assert monitor_input_names(registry.get("elemwise_add"), {}) == ["lhs", "rhs"]
    assert monitor_input_names(registry.get("Activation"), {"act_type": "relu"}) == ["input0"]
