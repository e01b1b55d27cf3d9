"""Module behaviours MXNet 1.x code relies on: non-zero batch axes over devices, states across set-ups."""


import numpy as np
import pytest
from mxkit import mx


def test_backward_splits_out_grads_along_a_tnc_batch_axis():
    sym = mx.sym.Activation(data=mx.sym.Variable("data"), act_type="relu", __layout__="TNC")
    shape = (3, 8, 7)
    mod = mx.mod.Module(sym, ("data",), None, context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[mx.io.DataDesc("data", shape, layout="TNC")], inputs_need_grad=True)
    mod.init_params()
    data = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    head = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    mod.forward(mx.io.DataBatch(data=[mx.nd.array(data)], label=None))
    mod.backward([mx.nd.array(head)])
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), np.maximum(data, 0))
    np.testing.assert_allclose(mod.get_input_grads()[0].asnumpy(), head * (data > 0))


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_optimizer_states_saved_on_several_devices_load_on_one(tmp_path):
    # the layer is named: an automatic name depends on how many layers earlier tests made
    sym = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=4, name="fc")
    mod = mx.mod.Module(sym, ("data",), None, context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[("data", (4, 3))])
    mod.init_params()
    mod.init_optimizer(optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    mod.forward(mx.io.DataBatch([mx.nd.ones((4, 3))], None))
    mod.backward([mx.nd.ones((4, 4))])
    mod.update()
    prefix = str(tmp_path / "net")
    mod.save_checkpoint(prefix, 0, save_optimizer_states=True)
    # the momentum after one step from zero: -lr * rescale_grad (1 / batch size) * grad of each weight
    single = mx.mod.Module.load(prefix, 0, load_optimizer_states=True, data_names=("data",), label_names=None)
    single.bind(data_shapes=[("data", (4, 3))])
    single.init_optimizer(optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    states = single._updater.states
    names = single._exec_group.param_names
    grads = {"fc_weight": np.full((4, 3), 4.0), "fc_bias": np.full((4,), 4.0)}
    assert sorted(states) == [0, 1]
    for index, name in enumerate(names):
        np.testing.assert_allclose(states[index].asnumpy(), -0.1 * grads[name] / 4, rtol=1e-6)


def test_lr_and_wd_mult_given_to_an_operator_reach_its_parameters():
    data = mx.sym.Variable("data")
    bias = mx.sym.Variable("fc1_bias", lr_mult=1.0)  # an explicit variable keeps its own multiplier
    fc1 = mx.sym.FullyConnected(data=data, bias=bias, name="fc1", num_hidden=4, lr_mult=0)
    fc2 = mx.sym.FullyConnected(data=fc1, name="fc2", num_hidden=4, wd_mult=0.5)
    mod = mx.mod.Module(symbol=fc2, label_names=None, context=mx.cpu())
    mod.bind(data_shapes=[("data", (5, 3))])
    mod.init_params(initializer=mx.init.Uniform(1.0))
    mod.init_optimizer(optimizer_params={"learning_rate": 1.0})
    assert mod._optimizer.lr_mult == {"fc1_bias": 1.0, "fc1_weight": 0.0}
    assert mod._optimizer.wd_mult == {"fc2_bias": 0.5, "fc2_weight": 0.5, "fc1_bias": 0.0}
    before = {k: v.asnumpy() for k, v in mod.get_params()[0].items()}
    mod.forward(mx.io.DataBatch(data=[mx.nd.ones((5, 3))], label=None), is_train=True)
    mod.backward(mod.get_outputs())
    mod.update()
    after = {k: v.asnumpy() for k, v in mod.get_params()[0].items()}
    np.testing.assert_array_equal(before["fc1_weight"], after["fc1_weight"])  # lr_mult=0: frozen
    assert not np.allclose(before["fc1_bias"], after["fc1_bias"])


def test_forward_rebinds_for_new_non_batch_shapes_and_keeps_parameters():
    # MXNet's Module.forward re-binds for any new input shape (here the image size)
    data = mx.sym.Variable("data")
    conv = mx.sym.Convolution(data=data, kernel=(3, 3), num_filter=2, name="conv")
    net = mx.sym.FullyConnected(mx.sym.sum(conv, axis=(2, 3)), num_hidden=4, name="fc")
    mod = mx.mod.Module(net, label_names=None, context=mx.cpu())
    mod.bind(data_shapes=[("data", (2, 1, 8, 8))])
    mod.init_params(initializer=mx.init.Uniform(0.5))
    weights = mod.get_params()[0]["conv_weight"].asnumpy()
    for shape in ((2, 1, 8, 8), (3, 1, 12, 10)):
        images = np.random.default_rng(0).uniform(size=shape).astype(np.float32)
        mod.forward(mx.io.DataBatch([mx.nd.array(images)]), is_train=False)
        params = mod.get_params()[0]
        features = mx.nd.sum(mx.nd.Convolution(mx.nd.array(images), params["conv_weight"], params["conv_bias"],
                                               kernel=(3, 3), num_filter=2), axis=(2, 3))
        expected = mx.nd.FullyConnected(features, params["fc_weight"], params["fc_bias"], num_hidden=4)
        np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), expected.asnumpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(mod.get_params()[0]["conv_weight"].asnumpy(), weights)
    # a shape that would change a parameter is a clear error
    fc = mx.mod.Module(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=3, name="fc"), label_names=None)
    fc.bind([("data", (4, 5))])
    fc.init_params()
    with pytest.raises(mx.base.MXNetError, match="fc_weight"):
        fc.forward(mx.io.DataBatch([mx.nd.ones((4, 6))]))


def test_set_params_raises_what_mxnet_raises():
    # MXNet: a missing parameter is a RuntimeError, an extra one a ValueError
    net = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=2, name="fc")
    mod = mx.mod.Module(net, label_names=None, context=mx.cpu())
    mod.bind(data_shapes=[("data", (1, 2))])
    full = {"fc_weight": mx.nd.ones((2, 2)), "fc_bias": mx.nd.zeros(2)}
    missing = {"fc_weight": mx.nd.ones((2, 2))}
    extra = {**full, "other_weight": mx.nd.ones(2)}
    mod.set_params(full, {})
    mod.set_params(missing, {}, allow_missing=True)
    with pytest.raises(RuntimeError, match="fc_bias"):
        mod.set_params(missing, {}, allow_missing=False)
    mod.set_params(extra, {}, allow_missing=True, allow_extra=True)
    with pytest.raises(ValueError, match="'other_weight' is not an argument"):
        mod.set_params(extra, {}, allow_missing=True, allow_extra=False)
    np.testing.assert_array_equal(mod.get_params()[0]["fc_weight"].asnumpy(), np.ones((2, 2)))


def test_forward_takes_any_object_with_data_and_new_shapes():
    from collections import namedtuple

    Batch = namedtuple("Batch", ["data"])  # MXNet code passes such light batches to forward
    mod = mx.mod.Module(symbol=mx.sym.Variable("data") * 2, label_names=None, context=mx.cpu())
    mod.bind(data_shapes=[("data", (1, 10))])
    mod.init_params()
    mod.forward(Batch([mx.nd.ones((1, 10))]))
    assert mod.get_outputs()[0].shape == (1, 10)
    mod.forward(Batch([mx.nd.ones((3, 5))]))
    np.testing.assert_array_equal(mod.get_outputs()[0].asnumpy(), np.full((3, 5), 2.0))
    with pytest.raises(mx.base.MXNetError, match="pre-sliced per device"):
        mod.forward([mx.io.DataBatch([mx.nd.ones((1, 10))])])


def test_monitor_reports_the_nodes_mxnet_reports():
    # per name prefix, the counts MXNet 1.9.1's monitor gives for this network (21 entries):
    # no entry for the constant gradient mxkit feeds a loss head
    x = mx.sym.Variable("data")
    x = mx.sym.FullyConnected(name="fc_0", data=x, num_hidden=2)
    x = mx.sym.Activation(name="act_0", data=x, act_type="sigmoid")
    x = mx.sym.FullyConnected(name="fc_1", data=x, num_hidden=2)
    x = mx.sym.Activation(name="act_1", data=x, act_type="sigmoid")
    x = mx.sym.LinearRegressionOutput(data=x, name="softmax", grad_scale=2)
    train = mx.io.NDArrayIter(mx.nd.array([[0.05, 0.10]]), mx.nd.array([[0.01, 0.99]]), batch_size=1)
    mon = mx.mon.Monitor(1, pattern=".*", sort=True)
    mod = mx.mod.Module(x, context=[mx.cpu()])
    mod.bind(train.provide_data, label_shapes=train.provide_label, for_training=True)
    mod.install_monitor(mon)
    mod.init_params()
    mon.tic()
    mod.forward_backward(next(iter(train)))
    names = [name for _, name, _ in mon.toc()]
    counts = [sum(name.startswith(prefix) for name in names)
              for prefix in ("act_0", "act_1", "data", "fc_0", "fc_1", "softmax")]
    assert len(names) == 21 and counts == [2, 2, 1, 6, 6, 4]


def test_bucket_symbols_get_the_same_automatic_names():
    def sym_gen(seq_len):
        embed = mx.sym.Embedding(data=mx.sym.Variable("data"), input_dim=10, output_dim=4)  # unnamed
        pred = mx.sym.FullyConnected(mx.sym.Reshape(embed, shape=(-1, 4)), num_hidden=10, name="pred")
        return mx.sym.SoftmaxOutput(pred, mx.sym.Reshape(mx.sym.Variable("softmax_label"), shape=(-1,)),
                                    name="softmax"), ("data",), ("softmax_label",)

    mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=6, context=[mx.cpu()])
    mod.bind([("data", (2, 6))], [("softmax_label", (2, 6))])
    mod.init_params()
    assert mod.symbol.list_arguments()[1] == "embedding0_weight"
    mod.switch_bucket(3, [("data", (2, 3))], [("softmax_label", (2, 3))])  # shares embedding0_weight
    assert mod.symbol.list_arguments()[1] == "embedding0_weight"
