"""Module: data parallelism against one device, one SGD step against numpy, shapes and bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
from mxkit import mx
from mxkit.core.errors import ShapeError
from mxkit.train.module import ModuleError, split_input_slice

FEATURES, CLASSES = 12, 4


def _mlp():
    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=16, name="fc1")
    net = mx.sym.Activation(net, act_type="tanh")
    net = mx.sym.FullyConnected(net, num_hidden=CLASSES, name="fc2")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def _data(n=48, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(n, FEATURES).astype(np.float32)
    y = (x[:, :CLASSES] + 0.3 * rng.randn(n, CLASSES)).argmax(axis=1).astype(np.float32)
    return x, y


def _initial_params(symbol, batch):
    arg_shapes, _, _ = symbol.infer_shape(data=(batch, FEATURES))
    rng = np.random.RandomState(1)
    return {name: mx.nd.array(rng.uniform(-0.5, 0.5, shape).astype(np.float32))
            for name, shape in zip(symbol.list_arguments(), arg_shapes) if name not in ("data", "softmax_label")}


def _train(contexts, kvstore, batches, batch, work_load_list=None, steps_params=None):
    symbol = _mlp()
    module = mx.mod.Module(symbol, context=contexts, work_load_list=work_load_list)
    module.bind(data_shapes=[("data", (batch, FEATURES))], label_shapes=[("softmax_label", (batch,))])
    module.init_params(arg_params=_initial_params(symbol, batch))
    module.init_optimizer(kvstore=kvstore, optimizer="sgd",
                          optimizer_params=steps_params or {"learning_rate": 0.5, "momentum": 0.9, "wd": 1e-3})
    for x, y in batches:
        module.forward_backward(mx.io.DataBatch([mx.nd.array(x)], [mx.nd.array(y)]))
        module.update()
    arg_params, _ = module.get_params()
    return {name: value.asnumpy() for name, value in arg_params.items()}


def _batches(batch, count=5):
    x, y = _data(batch * count)
    return [(x[i * batch:(i + 1) * batch], y[i * batch:(i + 1) * batch]) for i in range(count)]


@pytest.mark.parametrize("kvstore", ["local", "device", None])
def test_two_devices_train_like_one_device_with_the_same_total_batch(kvstore):
    batches = _batches(16)
    one = _train([mx.cpu(0)], kvstore, batches, 16)
    two = _train([mx.cpu(0), mx.cpu(1)], kvstore, batches, 16)
    assert one.keys() == two.keys()
    start = _initial_params(_mlp(), 16)
    for name in one:
        assert not np.allclose(one[name], start[name].asnumpy())  # training moved it
        np.testing.assert_allclose(two[name], one[name], rtol=1e-4, atol=1e-5, err_msg=name)


def test_uneven_work_load_splits_the_batch_and_still_matches_one_device():
    batches = _batches(16)
    one = _train([mx.cpu(0)], "local", batches, 16)
    uneven = _train([mx.cpu(0), mx.cpu(1)], "local", batches, 16, work_load_list=[1, 3])
    for name in one:
        np.testing.assert_allclose(uneven[name], one[name], rtol=1e-4, atol=1e-5, err_msg=name)


def test_split_input_slice_follows_the_work_load():
    assert split_input_slice(10, [1, 1]) == [slice(0, 5), slice(5, 10)]
    assert split_input_slice(16, [1, 3]) == [slice(0, 4), slice(4, 16)]
    assert split_input_slice(7, [1, 1, 1]) == [slice(0, 2), slice(2, 4), slice(4, 7)]
    with pytest.raises(ModuleError, match="no sample"):
        split_input_slice(2, [1, 1, 1])


def test_one_sgd_step_matches_numpy_with_rescale_one_over_batch():
    # a linear softmax classifier: the gradient of the mean cross-entropy written out by hand
    batch, lr = 8, 0.3
    x, y = _data(batch)
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=CLASSES, name="fc"),
                               name="softmax")
    rng = np.random.RandomState(3)
    w = rng.randn(CLASSES, FEATURES).astype(np.float32) * 0.1
    b = rng.randn(CLASSES).astype(np.float32) * 0.1
    module = mx.mod.Module(net, context=mx.cpu())
    module.bind(data_shapes=[("data", (batch, FEATURES))], label_shapes=[("softmax_label", (batch,))])
    module.init_params(arg_params={"fc_weight": mx.nd.array(w), "fc_bias": mx.nd.array(b)})
    module.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": lr})
    module.forward_backward(mx.io.DataBatch([mx.nd.array(x)], [mx.nd.array(y)]))
    module.update()
    logits = x @ w.T + b
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    delta = p - np.eye(CLASSES, dtype=np.float32)[y.astype(int)]
    arg_params, _ = module.get_params()
    np.testing.assert_allclose(arg_params["fc_weight"].asnumpy(), w - lr * delta.T @ x / batch, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(arg_params["fc_bias"].asnumpy(), b - lr * delta.sum(axis=0) / batch, rtol=1e-5,
                               atol=1e-6)


def test_input_grads_match_the_hand_gradient_on_two_devices():
    batch = 6
    x, y = _data(batch)
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=CLASSES, name="fc"),
                               name="softmax")
    w = np.random.RandomState(4).randn(CLASSES, FEATURES).astype(np.float32)
    module = mx.mod.Module(net, context=[mx.cpu(0), mx.cpu(1)])
    module.bind(data_shapes=[("data", (batch, FEATURES))], label_shapes=[("softmax_label", (batch,))],
                inputs_need_grad=True)
    module.init_params(arg_params={"fc_weight": mx.nd.array(w), "fc_bias": mx.nd.zeros(CLASSES)})
    module.forward_backward(mx.io.DataBatch([mx.nd.array(x)], [mx.nd.array(y)]))
    logits = x @ w.T
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    expected = (p - np.eye(CLASSES)[y.astype(int)]) @ w
    np.testing.assert_allclose(module.get_input_grads()[0].asnumpy(), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(module.get_outputs()[0].asnumpy(), p, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("contexts", [[mx.cpu(0)], [mx.cpu(0), mx.cpu(1)]])
def test_input_grads_are_none_when_the_inputs_grad_req_is_null(contexts):
    # MXNet: inputs_need_grad with grad_req "null" binds, and get_input_grads() gives [None]
    module = mx.mod.Module(mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=3, name="fc"),
                           label_names=None, context=contexts)
    module.bind(data_shapes=[("data", (4, FEATURES))], inputs_need_grad=True, grad_req="null")
    module.init_params()
    module.forward(mx.io.DataBatch([mx.nd.ones((4, FEATURES))]), is_train=True)
    module.backward(out_grads=[mx.nd.ones((4, 3))])
    assert module.get_input_grads() == [None]


def test_fixed_params_do_not_move():
    symbol = _mlp()
    module = mx.mod.Module(symbol, context=mx.cpu(), fixed_param_names=["fc1_weight"])
    module.bind(data_shapes=[("data", (16, FEATURES))], label_shapes=[("softmax_label", (16,))])
    start = _initial_params(symbol, 16)
    module.init_params(arg_params=start)
    module.init_optimizer(optimizer_params={"learning_rate": 0.5})
    for x, y in _batches(16, 2):
        module.forward_backward(mx.io.DataBatch([mx.nd.array(x)], [mx.nd.array(y)]))
        module.update()
    params, _ = module.get_params()
    np.testing.assert_array_equal(params["fc1_weight"].asnumpy(), start["fc1_weight"].asnumpy())
    assert not np.allclose(params["fc2_weight"].asnumpy(), start["fc2_weight"].asnumpy())


def test_predict_drops_the_padding_and_a_smaller_batch_rebinds():
    symbol = _mlp()
    module = mx.mod.Module(symbol, context=[mx.cpu(0), mx.cpu(1)])
    x, y = _data(10)
    module.bind(data_shapes=[("data", (4, FEATURES))], label_shapes=[("softmax_label", (4,))], for_training=False)
    params = _initial_params(symbol, 4)
    module.init_params(arg_params=params)
    out = module.predict(mx.io.NDArrayIter(x, y, 4)).asnumpy()  # 3 batches, the last padded by 2
    assert out.shape == (10, CLASSES)
    hidden = np.tanh(x @ params["fc1_weight"].asnumpy().T + params["fc1_bias"].asnumpy())
    logits = hidden @ params["fc2_weight"].asnumpy().T + params["fc2_bias"].asnumpy()
    expected = np.exp(logits - logits.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, expected / expected.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
    # a batch of 2 re-binds to the new batch size and gives the same rows
    module.forward(mx.io.DataBatch([mx.nd.array(x[:2])]), is_train=False)
    np.testing.assert_allclose(module.get_outputs()[0].asnumpy(), out[:2], rtol=1e-5, atol=1e-6)
    outputs = [o[0].asnumpy() for o, _, _ in module.iter_predict(mx.io.NDArrayIter(x, y, 4))]
    assert [len(o) for o in outputs] == [4, 4, 2]


def test_wrong_data_shape_is_a_clear_error():
    module = mx.mod.Module(_mlp(), context=mx.cpu())
    module.bind(data_shapes=[("data", (4, FEATURES))], label_shapes=[("softmax_label", (4,))])
    module.init_params(mx.init.Uniform(0.1))
    # any axis may change (the module re-binds), but not so that a parameter's shape changes
    with pytest.raises(ShapeError, match=r"\(4, 7\).*bound \[\(4, 12\)\].*fc1_weight"):
        module.forward(mx.io.DataBatch([mx.nd.zeros((4, 7))], [mx.nd.zeros(4)]))


def test_unknown_input_names_and_bad_contexts_are_clear_errors():
    with pytest.raises(ModuleError, match=r"'image'.*data"):
        mx.mod.Module(_mlp(), data_names=["image"])
    with pytest.raises(ModuleError, match="work_load_list has 1 entries for 2 contexts"):
        mx.mod.Module(_mlp(), context=[mx.cpu(0), mx.cpu(1)], work_load_list=[1])
    with pytest.raises(ModuleError, match="context must be"):
        mx.mod.Module(_mlp(), context=["cpu"])
    module = mx.mod.Module(_mlp())
    with pytest.raises(ModuleError, match="data_names"):
        module.bind(data_shapes=[("pixels", (4, FEATURES))], label_shapes=[("softmax_label", (4,))])


def test_calls_out_of_order_say_what_to_call_first():
    module = mx.mod.Module(_mlp())
    with pytest.raises(ModuleError, match="call bind"):
        module.forward(mx.io.DataBatch([mx.nd.zeros((4, FEATURES))]))
    module.bind(data_shapes=[("data", (4, FEATURES))], label_shapes=[("softmax_label", (4,))])
    with pytest.raises(ModuleError, match="init_params"):
        module.get_params()
    module.init_params()
    with pytest.raises(ModuleError, match="init_optimizer"):
        module.update()
    with pytest.raises(ModuleError, match="num_epoch"):
        module.fit(mx.io.NDArrayIter(*_data(8), batch_size=4))


def test_missing_parameter_without_allow_missing_names_it():
    symbol = _mlp()
    module = mx.mod.Module(symbol)
    module.bind(data_shapes=[("data", (4, FEATURES))], label_shapes=[("softmax_label", (4,))])
    params = _initial_params(symbol, 4)
    del params["fc2_bias"]
    with pytest.raises(ModuleError, match=r"'fc2_bias' is not in the given params.*allow_missing"):
        module.init_params(arg_params=params)
    module.init_params(mx.init.Zero(), arg_params=params, allow_missing=True)
    np.testing.assert_array_equal(module.get_params()[0]["fc2_bias"].asnumpy(), np.zeros(CLASSES))


def test_fit_stops_when_early_stopping_sets_its_flag():
    x, y = _data(32)
    epochs_run = []
    stopper = mx.callback.EarlyStopping(monitor="accuracy", patience=0, baseline=1.01)  # nothing can beat it
    module = mx.mod.Module(_mlp())
    module.fit(mx.io.NDArrayIter(x, y, 8), eval_data=mx.io.NDArrayIter(x, y, 8), num_epoch=10,
               epoch_end_callback=lambda epoch, *_: epochs_run.append(epoch), eval_end_callback=stopper)
    assert stopper.stop_training and epochs_run == [0]


def test_fit_trains_for_the_epochs_asked_and_scores_like_numpy():
    x, y = _data(64)
    module = mx.mod.Module(_mlp(), context=[mx.cpu(0), mx.cpu(1)])
    epochs_run = []
    module.fit(mx.io.NDArrayIter(x, y, 16, shuffle=True), num_epoch=3, initializer=mx.init.Xavier(),
               optimizer_params={"learning_rate": 0.3, "momentum": 0.9},
               epoch_end_callback=lambda epoch, *_: epochs_run.append(epoch))
    assert epochs_run == [0, 1, 2]
    ((name, value),) = module.score(mx.io.NDArrayIter(x, y, 16), "acc")
    predicted = module.predict(mx.io.NDArrayIter(x, y, 16)).asnumpy().argmax(axis=1)
    assert name == "accuracy" and value == pytest.approx((predicted == y).mean())
    assert value > 0.8


def test_a_module_bound_with_shared_module_shares_its_parameters():
    symbol = _mlp()
    first = mx.mod.Module(symbol, context=[mx.cpu(0), mx.cpu(1)])
    first.bind(data_shapes=[("data", (8, FEATURES))], label_shapes=[("softmax_label", (8,))])
    first.init_params(arg_params=_initial_params(symbol, 8))
    first.init_optimizer(optimizer_params={"learning_rate": 0.5})
    second = mx.mod.Module(symbol, context=[mx.cpu(0), mx.cpu(1)])
    second.bind(data_shapes=[("data", (4, FEATURES))], label_shapes=[("softmax_label", (4,))],
                shared_module=first)
    assert second.optimizer_initialized
    x, y = _data(8)
    first.forward_backward(mx.io.DataBatch([mx.nd.array(x)], [mx.nd.array(y)]))
    first.update()  # moves the shared arrays: the second module sees the new weights at once
    second.forward(mx.io.DataBatch([mx.nd.array(x[:4])]), is_train=False)
    first.forward(mx.io.DataBatch([mx.nd.array(x)]), is_train=False)
    np.testing.assert_allclose(second.get_outputs()[0].asnumpy(), first.get_outputs()[0].asnumpy()[:4],
                               rtol=1e-5, atol=1e-6)


def test_reshape_keeps_parameters_and_output_shapes_follow():
    symbol = _mlp()
    module = mx.mod.Module(symbol, context=[mx.cpu(0), mx.cpu(1)])
    module.bind(data_shapes=[("data", (8, FEATURES))], label_shapes=[("softmax_label", (8,))])
    params = _initial_params(symbol, 8)
    module.init_params(arg_params=params)
    module.reshape(data_shapes=[("data", (6, FEATURES))], label_shapes=[("softmax_label", (6,))])
    assert module.output_shapes == [("softmax_output", (6, CLASSES))]
    assert module.data_shapes[0].shape == (6, FEATURES)
    for name, value in module.get_params()[0].items():
        np.testing.assert_array_equal(value.asnumpy(), params[name].asnumpy())


def test_alternating_batch_sizes_reuse_the_reshaped_executors_and_train_as_rebinding_does(monkeypatch):
    """Training at one batch size and scoring at another reshapes back and forth: after the first
    round trip the executors made for each shape are taken again (nothing planned or compiled), and
    the weights and scores equal those of a module whose group keeps none (every reshape anew)."""
    from mxkit.train.module import executor_group

    symbol = _mlp()
    x, y = _data(48)
    batches = [mx.io.DataBatch([mx.nd.array(x[i:i + 8])], [mx.nd.array(y[i:i + 8])]) for i in (0, 8, 16)]
    scoring = mx.io.DataBatch([mx.nd.array(x[:24])], [mx.nd.array(y[:24])])

    def run(keep):
        monkeypatch.setattr(executor_group, "MAX_RESHAPED", keep)
        module = mx.mod.Module(symbol, context=mx.cpu())
        module.bind(data_shapes=[("data", (8, FEATURES))], label_shapes=[("softmax_label", (8,))])
        module.init_params(arg_params=_initial_params(symbol, 8))
        module.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
        made, reshape = [], type(module._exec_group.execs[0]).reshape
        monkeypatch.setattr(type(module._exec_group.execs[0]), "reshape",
                            lambda self, **kw: made.append(1) or reshape(self, **kw))
        scores, execs = [], []
        for _ in range(4):  # epochs: train at 8, score at 24
            for batch in batches:
                module.forward(batch, is_train=True)
                module.backward()
                module.update()
            execs.append(module._exec_group.execs)
            module.forward(scoring, is_train=False)
            scores.append(module.get_outputs()[0].asnumpy().copy())
        monkeypatch.setattr(type(module._exec_group.execs[0]), "reshape", reshape)
        return module.get_params()[0], scores, len(made), execs

    kept_params, kept_scores, kept_made, kept_execs = run(executor_group.MAX_RESHAPED)
    fresh_params, fresh_scores, fresh_made, _ = run(0)
    assert kept_made == 2 and fresh_made == 7  # to 24 and back to 8 once, then taken again; vs every switch
    assert kept_execs[1] is kept_execs[2] is kept_execs[3]
    for got, want in zip(kept_scores, fresh_scores, strict=True):
        np.testing.assert_array_equal(got, want)
    for name, value in kept_params.items():
        np.testing.assert_array_equal(value.asnumpy(), fresh_params[name].asnumpy(), err_msg=name)


def test_a_monitor_installed_after_a_reshape_is_on_every_executor_used_later():
    symbol = _mlp()
    module = mx.mod.Module(symbol, context=mx.cpu())
    module.bind(data_shapes=[("data", (8, FEATURES))], label_shapes=[("softmax_label", (8,))])
    module.init_params()
    x, _ = _data(24)
    for size in (24, 8):  # both shapes reshaped to once: their executors are kept
        module.forward(mx.io.DataBatch([mx.nd.array(x[:size])]), is_train=False)
    monitor = mx.mon.Monitor(1)
    module.install_monitor(monitor)
    monitor.tic()
    module.forward(mx.io.DataBatch([mx.nd.array(x[:24])]), is_train=False)
    reported = [name for _, name, _ in monitor.toc()]
    assert any(name.endswith("_output") for name in reported), \
        f"the executor used after the monitor was installed reported no output: {reported}"


def test_a_list_of_batches_is_refused_with_the_alternative():
    module = mx.mod.Module(_mlp(), context=[mx.cpu(0), mx.cpu(1)])
    module.bind(data_shapes=[("data", (4, FEATURES))], label_shapes=[("softmax_label", (4,))])
    module.init_params()
    batch = mx.io.DataBatch([mx.nd.zeros((2, FEATURES))], [mx.nd.zeros(2)])
    with pytest.raises(ModuleError, match=r"list of 2 DataBatch.*pass one DataBatch"):
        module.forward([batch, batch])


def test_gradients_through_the_store_with_updates_on_the_devices(monkeypatch):
    # MXKIT_UPDATE_ON_KVSTORE=0: the store only sums gradients; each device runs the updater
    monkeypatch.setenv("MXKIT_UPDATE_ON_KVSTORE", "0")
    batches = _batches(16)
    one = _train([mx.cpu(0)], "local", batches, 16)
    two = _train([mx.cpu(0), mx.cpu(1)], "local", batches, 16)
    for name in one:
        np.testing.assert_allclose(two[name], one[name], rtol=1e-4, atol=1e-5, err_msg=name)


def test_the_store_runs_the_optimizer_for_several_devices():
    from mxkit.train.model import _create_kvstore

    params = {"w": mx.nd.zeros((3, 3))}
    store, update_on_kvstore = _create_kvstore("local", 2, params)
    assert store is not None and update_on_kvstore
    assert _create_kvstore("local", 1, params) == (None, False)  # one device needs no store
    with pytest.raises(mx.MXKitError, match="kvstore must be"):
        _create_kvstore(3, 2, params)


@pytest.mark.parametrize("contexts", [[mx.cpu(0)], [mx.cpu(0), mx.cpu(1)]])
def test_aggregated_updates_give_the_weights_of_one_update_per_parameter(monkeypatch, contexts):
    # each device's parameters reach the updater in one call (one engine operation per
    # aggregate_num weights); the arithmetic is that of one call per parameter, to the bit
    from mxkit.train.optimizer.updater import Updater

    calls = []
    original = Updater.__call__

    def spy(self, index, grad, weight):
        calls.append(len(index) if isinstance(index, list) else 1)
        return original(self, index, grad, weight)

    monkeypatch.setattr(Updater, "__call__", spy)
    batches = _batches(8, count=3)
    params = {"learning_rate": 0.5, "momentum": 0.9, "wd": 1e-3}
    together = _train(contexts, None, batches, 8, steps_params=params)
    assert calls == [4] * len(contexts) * 3  # fc1/fc2 weight and bias, per device and step
    calls.clear()
    monkeypatch.setattr(Updater, "aggregate_updates", property(lambda self: False, lambda self, value: None),
                        raising=False)
    one_by_one = _train(contexts, None, batches, 8, steps_params=params)
    assert calls == [1] * 4 * len(contexts) * 3
    for name in together:
        np.testing.assert_array_equal(together[name], one_by_one[name], err_msg=name)
