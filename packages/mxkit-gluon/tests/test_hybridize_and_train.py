"""hybridize(), export/SymbolBlock, and Trainer against MXNet 1.9.1 and against imperative runs."""

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import GluonError, SymbolBlock, Trainer, nn
from mxkit.gluon import loss as gloss


def _mlp():
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Dense(8, activation="relu"), nn.Dense(3))
    return net


def test_trainer_steps_match_mxnet(fixture_path):
    """Three SGD steps (momentum 0.9, wd 0.01) through Trainer, hybridized and not.

    Tolerance: each step's weights move by lr * (grad + wd * w) with float32 gradients that
    differ from MXNet's by summation order only (~1e-7 relative); three steps with momentum
    amplify that by at most (1 + 0.9 + 0.81) * lr / batch terms, far below 1e-5.
    """
    ref = np.load(fixture_path("trainer.npz"))
    for hybridize in (False, True):
        net = _mlp()
        net.initialize()
        x, y = mx.nd.array(ref["x"]), mx.nd.array(ref["y"])
        net(x)
        for key, param in net._collect_params_with_prefix().items():
            param.set_data(mx.nd.array(ref[f"init/{key}"]))
        if hybridize:
            net.hybridize()
        loss_fn = gloss.SoftmaxCrossEntropyLoss()
        trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5, "momentum": 0.9, "wd": 0.01})
        for step in range(3):
            with mx.autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(6)
            np.testing.assert_allclose(loss.asnumpy(), ref["losses"][step], rtol=1e-5, atol=1e-6)
        for key, param in net._collect_params_with_prefix().items():
            np.testing.assert_allclose(param.data().asnumpy(), ref[f"final/{key}"], rtol=1e-5, atol=1e-6,
                                       err_msg=f"{key} (hybridize={hybridize})")


def test_trainer_states_round_trip(tmp_path):
    def run(steps, states_in=None, states_out=None):
        mx.random.seed(0)
        net = nn.Dense(2, in_units=3)
        net.initialize(mx.init.Constant(0.1))
        trainer = Trainer(net.collect_params(), "adam", {"learning_rate": 0.1})
        x = mx.nd.array(np.arange(6, dtype=np.float32).reshape(2, 3))
        if states_in:
            trainer.load_states(states_in)
            net.weight.set_data(mx.nd.array(np.load(str(tmp_path / "w.npy"))))
        for _ in range(steps):
            with mx.autograd.record():
                out = net(x)
            out.backward()
            trainer.step(2)
        if states_out:
            trainer.save_states(states_out)
            np.save(str(tmp_path / "w.npy"), net.weight.data().asnumpy())
        return net.weight.data().asnumpy()

    straight = run(4)
    run(2, states_out=str(tmp_path / "t.states"))
    resumed = run(2, states_in=str(tmp_path / "t.states"))
    np.testing.assert_allclose(resumed, straight, rtol=1e-6)


def test_trainer_reduces_gradients_over_contexts():
    net = nn.Dense(1, in_units=2, use_bias=False)
    net.initialize(mx.init.Zero(), ctx=[mx.cpu(0), mx.cpu(1)])
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 1.0})
    data = [mx.nd.array([[1.0, 2.0]], ctx=mx.cpu(0)), mx.nd.array([[3.0, 4.0]], ctx=mx.cpu(1))]
    with mx.autograd.record():
        outs = [net(x) for x in data]
    for out in outs:
        out.backward()
    trainer.step(2)
    for weight in net.weight.list_data():  # w = -(1/2) * ([1, 2] + [3, 4])
        np.testing.assert_allclose(weight.asnumpy(), [[-2.0, -3.0]])


def test_trainer_refuses_what_it_cannot_do():
    net = nn.Dense(1, in_units=2)
    net.initialize()
    trainer = Trainer(net.collect_params(), "sgd")
    with pytest.raises(GluonError, match="batch_size must be positive"):
        trainer.step(0)


def test_hybridized_gradient_of_inputs_and_a_block_called_twice():
    """A block applied twice in one record (weights shared) gets the sum of both gradients;
    the second call finds the first one's executor held and binds another."""
    ref = nn.Dense(3, in_units=4)
    ref.initialize(mx.init.Xavier())
    hyb = nn.Dense(3, in_units=4)
    hyb.initialize()
    hyb.weight.set_data(ref.weight.data())
    hyb.hybridize()
    a = mx.nd.array(np.random.RandomState(0).rand(2, 4).astype(np.float32))
    b = mx.nd.array(np.random.RandomState(1).rand(2, 4).astype(np.float32))
    grads = []
    for block in (ref, hyb):
        a.attach_grad()
        with mx.autograd.record():
            out = (block(a) * block(b)).sum()
        out.backward()
        grads.append((block.weight.grad().asnumpy(), a.grad.asnumpy()))
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-5)
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-5)


def _count(net):
    return sum(len(pool) for pool in net._cached_runner.bindings.values())


def test_two_dropout_calls_in_one_record_differentiate_their_own_masks():
    mx.random.seed(7)
    block = nn.Dropout(0.5)
    block.hybridize()
    x = mx.nd.ones((4, 6))
    x.attach_grad()
    with mx.autograd.record():
        first, second = block(x), block(x)
        total = first * 3 + second
    total.backward()
    assert _count(block) == 2
    # d total / dx = 3 * mask1 + mask2, each mask being its output (x is ones)
    expected = 3 * first.asnumpy() + second.asnumpy()
    np.testing.assert_allclose(x.grad.asnumpy(), expected, rtol=1e-6)
    assert not np.array_equal(first.asnumpy(), second.asnumpy())


def test_a_node_differentiated_again_after_its_executor_ran_another_call_replays_it():
    net = nn.Dense(2, in_units=3, activation="tanh")
    net.initialize(mx.init.Xavier())
    net.hybridize()
    a = mx.nd.array(np.random.RandomState(0).rand(2, 3).astype(np.float32))
    with mx.autograd.record():
        y = net(a).sum()
    y.backward(retain_graph=True)
    expected = net.weight.grad().asnumpy().copy()
    with mx.autograd.record():
        net(a * 5).sum().backward()  # released executor, reused for another input
    y.backward()
    assert _count(net) == 1
    np.testing.assert_allclose(net.weight.grad().asnumpy(), expected, rtol=1e-6)


def test_hybridized_block_binds_once_per_signature_and_reports_its_plan():
    net = _mlp()
    net.initialize()
    assert net.memory_plan() is None
    net.hybridize()
    net(mx.nd.ones((4, 5)))
    net(mx.nd.ones((4, 5)))
    assert _count(net) == 1
    net(mx.nd.ones((2, 5)))
    assert _count(net) == 2
    with mx.autograd.record():  # training needs the gradient executor: a third binding
        net(mx.nd.ones((2, 5))).backward()
    assert _count(net) == 2  # the (2, 5) one already computes parameter gradients
    x = mx.nd.ones((2, 5))
    x.attach_grad()
    with mx.autograd.record():
        net(x).backward()
    assert _count(net) == 3  # a data gradient: bound with one more gradient
    net(mx.nd.ones((2, 5)))
    assert _count(net) == 3  # inference reuses any executor of its shape
    plan = net.memory_plan()
    assert plan.pools and plan.lower_bound_bytes > 0


def test_summary_prints_shapes_and_refuses_hybridized_networks(capsys):
    net = _mlp()
    net.initialize()
    net.summary(mx.nd.ones((2, 5)))
    out = capsys.readouterr().out
    assert "(2, 8)" in out and "Total params: 75" in out  # 5*8+8 + 8*3+3
    net.hybridize()
    with pytest.raises(GluonError, match=r"cannot be called on a hybridized network"):
        net.summary(mx.nd.ones((2, 5)))
    with pytest.raises(AssertionError):  # the class MXNet raises there
        net.summary(mx.nd.ones((2, 5)))


def test_hybridize_needs_hybrid_children_and_ndarray_inputs():
    net = nn.HybridSequential()
    with pytest.raises(GluonError, match="children of a HybridBlock must be HybridBlocks"):
        net.add(nn.Lambda(lambda x: x))
    dense = nn.Dense(2, in_units=2)
    dense.initialize()
    dense.hybridize()
    with pytest.raises(GluonError, match=r"takes \(nested lists of\) NDArrays and None, got int"):
        dense(mx.nd.ones((1, 2)), 3)


def test_export_is_loadable_by_module_and_symbol_block(tmp_path):
    net = _mlp()
    net.initialize(mx.init.Xavier())
    with pytest.raises(GluonError, match="call hybridize"):
        net.export(str(tmp_path / "net"))
    net.hybridize()
    x = mx.nd.array(np.random.RandomState(0).rand(4, 5).astype(np.float32))
    expected = net(x).asnumpy()
    symbol_file, params_file = net.export(str(tmp_path / "net"), epoch=3)
    assert params_file.endswith("net-0003.params")
    sym, arg_params, aux_params = mx.model.load_checkpoint(str(tmp_path / "net"), 3)
    mod = mx.mod.Module(sym, data_names=["data"], label_names=None)
    mod.bind(data_shapes=[("data", (4, 5))], for_training=False)
    mod.set_params(arg_params, aux_params)
    mod.forward(mx.io.DataBatch([x]), is_train=False)
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), expected, rtol=1e-6)
    block = SymbolBlock.imports(symbol_file, "data", params_file)
    np.testing.assert_allclose(block(x).asnumpy(), expected, rtol=1e-6)


def test_symbol_block_imports_mxnet_export(fixture_path):
    block = SymbolBlock.imports(fixture_path("small_net-symbol.json"), ["data"], fixture_path("small_net-0000.params"))
    reference = np.load(fixture_path("small_net.npz"))
    out = block(mx.nd.array(reference["x"]))
    np.testing.assert_allclose(out.asnumpy(), reference["out"], rtol=1e-5, atol=1e-6)
    # trainable: the imported parameters get gradients
    x = mx.nd.array(reference["x"])
    with mx.autograd.record():
        loss = block(x).sum()
    loss.backward()
    weights = [p for name, p in block.collect_params().items() if name.endswith("weight")]
    assert weights and all(np.abs(p.grad().asnumpy()).sum() > 0 for p in weights)


def test_symbol_block_needs_variables_the_graph_uses():
    data = mx.sym.var("data")
    out = mx.sym.FullyConnected(data, num_hidden=2, name="fc")
    with pytest.raises(GluonError, match=r"inputs \['other'\] are not used"):
        SymbolBlock(out, mx.sym.var("other"))
    block = SymbolBlock(out, data)
    assert sorted(block.collect_params().keys()) == ["fc_bias", "fc_weight"]
    block.initialize()
    assert block(mx.nd.ones((3, 4))).shape == (3, 2)
    assert block.collect_params()["fc_weight"].shape == (2, 4)


def test_hybridized_batchnorm_predict_mode_uses_running_statistics():
    bn = nn.BatchNorm(in_channels=2)
    bn.initialize()
    bn.running_mean.set_data(mx.nd.array([1.0, -1.0]))
    bn.running_var.set_data(mx.nd.array([4.0, 0.25]))
    bn.hybridize()
    x = mx.nd.array(np.array([[[3.0]], [[0.0]]], dtype=np.float32).reshape(1, 2, 1, 1))
    out = bn(x).asnumpy().ravel()  # not recording: inference mode
    np.testing.assert_allclose(out, [(3 - 1) / np.sqrt(4 + 1e-5), (0 + 1) / np.sqrt(0.25 + 1e-5)], rtol=1e-5)
