"""register_op_hook: a hybridized graph's operators report their inputs and outputs under
MXNet 1.9.1's names (from its test_gluon.test_op_hook_output_names), with values checked
against numpy."""

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import GluonError, nn


def _dense_relu():
    model = nn.HybridSequential(prefix="dense_")
    with model.name_scope():
        model.add(nn.Dense(2), nn.Activation("relu"))
    model.initialize(mx.init.Uniform(1.0))
    return model


def _record(model, monitor_all, x):
    seen = []
    model.register_op_hook(lambda name, op, array: seen.append((name, op, array.asnumpy())), monitor_all)
    out = model(x)
    return seen, out


@pytest.mark.parametrize("static_alloc", [False, True])
def test_outputs_and_inputs_are_reported_with_mxnet_names_and_values(static_alloc):
    model = _dense_relu()
    model.hybridize(static_alloc=static_alloc)
    x = mx.nd.array(np.random.RandomState(0).uniform(-1, 1, (2, 3, 4)))
    seen, out = _record(model, False, x)
    assert [(n, o) for n, o, _ in seen] == [("dense_dense0_fwd_output", "FullyConnected"),
                                            ("dense_relu0_fwd_output", "Activation")]
    w, b = model[0].weight.data().asnumpy(), model[0].bias.data().asnumpy()
    dense = x.asnumpy().reshape(2, 12) @ w.T + b
    np.testing.assert_allclose(seen[0][2], dense, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(seen[1][2], np.maximum(dense, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.asnumpy(), seen[1][2])

    seen, _ = _record(model, True, x)
    # Activation registers no argument names in MXNet 1.9.1: its input is reported as input0
    assert [(n, o) for n, o, _ in seen] == [
        ("dense_dense0_fwd_data", "FullyConnected"), ("dense_dense0_fwd_weight", "FullyConnected"),
        ("dense_dense0_fwd_bias", "FullyConnected"), ("dense_dense0_fwd_output", "FullyConnected"),
        ("dense_relu0_fwd_input0", "Activation"), ("dense_relu0_fwd_output", "Activation")]
    np.testing.assert_array_equal(seen[0][2], x.asnumpy())
    np.testing.assert_array_equal(seen[1][2], w)
    np.testing.assert_allclose(seen[4][2], dense, rtol=1e-5, atol=1e-6)


def test_pooling_inputs_and_the_hook_set_on_a_parent_block():
    inner = nn.HybridSequential("pool_")
    with inner.name_scope():
        inner.add(nn.AvgPool1D())
    outer = nn.Sequential()  # a plain Block passes the hook to its hybridized children
    outer.add(inner)
    outer.initialize()
    inner.hybridize()
    x = mx.nd.array(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    seen, _ = _record(outer, True, x)
    assert [(n, o) for n, o, _ in seen] == [("pool_pool0_fwd_data", "Pooling"), ("pool_pool0_fwd_output", "Pooling")]
    np.testing.assert_allclose(seen[1][2], x.asnumpy().reshape(2, 3, 2, 2).mean(-1))


def test_removing_the_hook_and_imperative_blocks_report_nothing():
    model = _dense_relu()
    seen, _ = _record(model, False, mx.nd.ones((1, 3)))
    assert seen == []  # not hybridized: no graph, no reports (as MXNet)
    model.hybridize()
    seen, _ = _record(model, False, mx.nd.ones((1, 3)))
    assert len(seen) == 2
    model.register_op_hook(None)
    model(mx.nd.ones((1, 3)))
    assert len(seen) == 2
    with pytest.raises(GluonError, match="needs a callable"):
        model.register_op_hook("print")
