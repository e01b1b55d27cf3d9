"""The ``fuse_conv`` graph pass: which Convolution -> [add ->] relu groups fuse into ``_FusedConvolution``,
that fused prediction binds compute what unfused ones do within a derived float32 bound, and that
without a backend kernel for the fused operator (mxkit-cpu alone), in training binds or with config
``fuse_conv`` off the graph is left as it was.

The bound. Each output of a convolution is a float32 sum of K products (K = channels per group
times the window) plus the bias, in any order: within (K + 1) * u times the sum of the terms'
magnitudes of the exact value (u = 2**-24). The residual addition is one more term, and relu is
1-Lipschitz, so through the network the error is at most ``sum over the convolutions of (K_l + 2)
* u`` times the output of the same network run in float64 on the magnitudes (|data|, |weights|,
|bias|). Both binds are within that of the exact result, so within twice it of each other.
"""

from math import prod

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mxkit import symbol as sym
from mxkit.core import config
from mxkit.ndarray.registry import get_registry

U32 = 2.0 ** -24


@pytest.fixture
def fused_kernel_registered(monkeypatch):
    """A kernel for ``_FusedConvolution`` on numpy: the plugin's when one registered it, else the generic one
    (so the pass runs whichever kernel plugins are installed)."""
    op = get_registry().get("_FusedConvolution")
    if "numpy" not in op.kernels:
        monkeypatch.setitem(op.kernels, "numpy", op.kernel)


def residual_net(filters, shortcut_conv, no_bias):
    """conv -> relu -> conv -> add(shortcut) -> relu -> conv -> relu, the shortcut the first relu's output or
    a 1x1 convolution of it (ResNet's downsampling branch)."""
    data = sym.Variable("data")
    a = sym.Activation(sym.Convolution(data, num_filter=filters, kernel=(3, 3), pad=(1, 1), no_bias=no_bias,
                                       name="c0"), act_type="relu", name="r0")
    body = sym.Convolution(a, num_filter=filters, kernel=(3, 3), pad=(1, 1), no_bias=no_bias, name="c1")
    shortcut = sym.Convolution(a, num_filter=filters, kernel=(1, 1), no_bias=True, name="down") if shortcut_conv \
        else a
    b = sym.Activation(sym.elemwise_add(body, shortcut, name="add"), act_type="relu", name="r1")
    return sym.Activation(sym.Convolution(b, num_filter=3, kernel=(1, 1), no_bias=no_bias, name="c2"),
                          act_type="relu", name="r2")


def bind(net, fuse=True, grad_req="null", type_dict=None, **shapes):
    with config.override(fuse_conv=fuse):
        return net.simple_bind(None, grad_req=grad_req, type_dict=type_dict, **shapes)


def fused_count(exe):
    return sum(1 for n in exe._graph.forward_nodes if n.op.name == "_FusedConvolution")


def load(exe, values):
    for name, array in exe.arg_dict.items():
        array[:] = values[name]


def error_bound(net, values, shapes):
    """Twice the first-order bound of the module docstring, per output element."""
    exe = bind(net, fuse=False, type_dict=dict.fromkeys(net.list_arguments(), "float64"), **shapes)
    load(exe, {name: np.abs(v).astype(np.float64) for name, v in values.items()})
    magnitude = exe.forward()[0].asnumpy()
    length = sum(prod(exe.arg_dict[n.inputs[1].node.name].shape[1:]) + 2
                 for n in exe._graph.forward_nodes if n.op.name == "Convolution")
    return 2 * length * U32 * magnitude + 1e-30


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(filters=st.integers(1, 6), size=st.integers(3, 7), batch=st.integers(1, 3), shortcut_conv=st.booleans(),
       no_bias=st.booleans(), seed=st.integers(0, 2**16))
def test_fused_prediction_matches_the_unfused_graph(fused_kernel_registered, filters, size, batch, shortcut_conv,
                                                    no_bias, seed):
    net = residual_net(filters, shortcut_conv, no_bias)
    shapes = dict(data=(batch, 2, size, size))
    fused, plain = bind(net, **shapes), bind(net, fuse=False, **shapes)
    # c0 + r0, {c1 or down} + add + r1, c2 + r2; with a 1x1 shortcut one of the two convolutions takes the add
    assert fused_count(fused) == 3 and fused_count(plain) == 0
    assert not any(n.op.name in ("elemwise_add", "Activation") for n in fused._graph.forward_nodes)
    rng = np.random.default_rng(seed)
    values = {name: rng.standard_normal(array.shape).astype(np.float32) for name, array in plain.arg_dict.items()}
    load(fused, values)
    load(plain, values)
    got, want = fused.forward()[0].asnumpy(), plain.forward()[0].asnumpy()
    assert got.shape == want.shape
    assert np.all(np.abs(got - want) <= error_bound(net, values, shapes))
    assert "fused: c1 (Convolution) + add (elemwise_add) + r1 (Activation)" in fused.debug_str() or \
        "fused: down (Convolution) + add (elemwise_add) + r1 (Activation)" in fused.debug_str()


def test_the_fused_node_keeps_the_last_nodes_name(fused_kernel_registered):
    net = residual_net(4, False, False)
    exe = bind(net, data=(1, 2, 5, 5))
    assert [n.name for n in exe._graph.forward_nodes if n.op.name == "_FusedConvolution"] == ["r0", "r1", "r2"]
    assert exe.output_dict.keys() == bind(net, fuse=False, data=(1, 2, 5, 5)).output_dict.keys()


def test_nothing_fuses_in_training_binds_with_the_config_off_or_without_a_kernel(fused_kernel_registered,
                                                                                  monkeypatch):
    net = residual_net(3, True, False)
    assert fused_count(bind(net, grad_req="write", data=(2, 2, 5, 5))) == 0
    assert fused_count(bind(net, fuse=False, data=(2, 2, 5, 5))) == 0
    monkeypatch.setattr(get_registry().get("_FusedConvolution"), "kernels", {})
    assert fused_count(bind(net, data=(2, 2, 5, 5))) == 0


def test_an_intermediate_read_elsewhere_or_an_output_does_not_fuse(fused_kernel_registered):
    data = sym.Variable("data")
    conv = sym.Convolution(data, num_filter=2, kernel=(1, 1), name="c")
    relu = sym.Activation(conv, act_type="relu", name="r")
    both = sym.Group([relu, conv])  # the convolution's own output is an output too
    assert fused_count(bind(both, data=(1, 2, 3, 3))) == 0
    read_twice = sym.elemwise_add(relu, sym.sigmoid(conv), name="s")
    assert fused_count(bind(read_twice, data=(1, 2, 3, 3))) == 0
    # float64 stays unfused (oneDNN's kernels are float32)
    exe = bind(relu, type_dict={"data": "float64"}, data=(1, 2, 3, 3))
    assert fused_count(exe) == 0


def test_the_generic_kernel_is_the_unfused_computation_bit_for_bit():
    op = get_registry().get("_FusedConvolution")
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 6, 6), (4, 3, 3, 3), (4,)))
    r = rng.standard_normal((2, 4, 4, 4)).astype(np.float32)
    params = op.parse_params(dict(kernel=(3, 3), num_filter=4, act_type="relu", with_sum=True))
    out = np.empty((2, 4, 4, 4), np.float32)
    op.kernel(np, [x, w, b, r], [out], params)
    conv = get_registry().get("Convolution")
    expected = np.empty_like(out)
    conv.kernel_for("numpy")(np, [x, w, b], [expected], conv.parse_params(dict(kernel=(3, 3), num_filter=4)))
    np.testing.assert_array_equal(out, np.maximum(expected + r, 0))
    assert op.infer_shape(params, [x.shape, w.shape, b.shape, r.shape]) == [(2, 4, 4, 4)]
    with pytest.raises(Exception, match="addend"):
        op.infer_shape(params, [x.shape, w.shape, b.shape, (2, 4, 4, 5)])
