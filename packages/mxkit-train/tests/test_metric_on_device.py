"""Accuracy on NDArrays counts on the engine and is read only when a sum is read.

The reference is the same metric fed numpy copies of the same batches (the host path):
every sum and count must be equal, through local resets and full resets.
"""

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit import mx
from mxkit.core.errors import ShapeError
from mxkit.ndarray.invoke import push_raw


def batches(seed, count, shape_kind):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        batch = int(rng.integers(1, 9))
        if shape_kind == "scores":
            pred = rng.standard_normal((batch, 4)).astype("float32")
            label = rng.integers(0, 4, batch).astype("float32")
        elif shape_kind == "classes":  # predictions shaped like the labels hold class indices
            pred = rng.integers(0, 3, (batch, 2)).astype("float32")
            label = rng.integers(0, 3, (batch, 2)).astype("float32")
        else:  # scores along axis 0, labels with a trailing axis: compared flat
            pred = rng.standard_normal((3, batch)).astype("float32")
            label = rng.integers(0, 3, (batch, 1)).astype("float32")
        out.append((label, pred))
    return out


def sums(metric):
    return (metric.sum_metric, metric.num_inst, metric.global_sum_metric, metric.global_num_inst,
            metric.get(), metric.get_global())


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31), count=st.integers(1, 6), shape_kind=st.sampled_from(["scores", "classes", "axis0"]),
       reset_at=st.integers(0, 6))
def test_accuracy_on_ndarrays_equals_the_host_path(seed, count, shape_kind, reset_at):
    axis = 0 if shape_kind == "axis0" else 1
    on_device, on_host = mx.metric.Accuracy(axis=axis), mx.metric.Accuracy(axis=axis)
    for step, (label, pred) in enumerate(batches(seed, count, shape_kind)):
        if step == reset_at:
            on_device.reset_local()
            on_host.reset_local()
        on_device.update([mx.nd.array(label)], [mx.nd.array(pred)])
        on_host.update([label], [pred])
    assert sums(on_device) == sums(on_host)
    on_device.reset()
    on_host.reset()
    assert sums(on_device)[:4] == sums(on_host)[:4] == (0.0, 0, 0.0, 0)


def test_update_does_not_wait_for_the_predictions():
    pred = mx.nd.zeros((4, 3))
    label = mx.nd.array([0, 1, 2, 1])
    release, waited_out = threading.Event(), []

    def slow_write(storage=pred.storage):
        # holds the write of pred until the test releases it (an update that waited for pred
        # would block here until the timeout, and the assertion below would fail)
        if not release.wait(20):
            waited_out.append(True)
        storage[...] = np.eye(4, 3, dtype="float32")

    push_raw(slow_write, [], [pred], pred.context, "slow_write", overwrites=True)
    metric = mx.metric.Accuracy()
    metric.update([label], [pred])  # returns at once: the count waits on the engine
    assert not waited_out and metric.num_inst == 4
    release.set()
    # rows of eye(4, 3): argmax 0, 1, 2, 0 against labels 0, 1, 2, 1
    assert metric.get() == ("accuracy", 0.75)
    assert not waited_out


def test_a_shape_mismatch_raises_at_update_as_on_the_host():
    metric = mx.metric.Accuracy()
    pred, label = np.zeros((4, 3), "float32"), np.zeros(5, "float32")
    with pytest.raises(ShapeError) as on_host:
        metric.update([label], [pred])
    with pytest.raises(ShapeError) as on_device:
        metric.update([mx.nd.array(label)], [mx.nd.array(pred)])
    assert str(on_device.value) == str(on_host.value)
    assert "5 labels but 4 predicted classes" in str(on_device.value)
    assert metric.num_inst == 0


def test_ndarrays_on_two_devices_fall_back_to_the_host_path():
    metric = mx.metric.Accuracy()
    label = mx.nd.array([0, 1], ctx=mx.cpu(1))
    metric.update([label], [mx.nd.array([[1, 0], [1, 0]], ctx=mx.cpu(0))])
    assert metric.get() == ("accuracy", 0.5)


def _fit_and_record(monkeypatch, on_engine):
    import mxkit.train.metric.classification as classification

    counted = []
    if on_engine:  # count the batches counted on the engine: both devices' (fit's step program gives each
        # device's metric update that device's bound label input)
        real = classification.count_on_device
        monkeypatch.setattr(classification, "count_on_device",
                            lambda *args: counted.append(1) or real(*args))
    else:
        monkeypatch.setattr(classification, "on_one_device", lambda arrays: False)
    rng = np.random.RandomState(0)
    x = rng.randn(60, 12).astype("float32")  # 60 = 3 batches of 16 and a last one padded by 4
    y = (x[:, :4] + 0.3 * rng.randn(60, 4)).argmax(axis=1).astype("float32")
    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=16, name="fc1")
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.Activation(net, act_type="tanh"), num_hidden=4,
                                                     name="fc2"), name="softmax")
    module = mx.mod.Module(net, context=[mx.cpu(0), mx.cpu(1)])
    seen = []
    module.fit(mx.io.NDArrayIter(x, y, 16), num_epoch=2, initializer=mx.init.Xavier(rnd_type="uniform"),
               optimizer_params={"learning_rate": 0.3, "momentum": 0.9},
               batch_end_callback=lambda param: seen.append(
                   (param.epoch, param.nbatch, param.eval_metric.get(), param.eval_metric.num_inst)))
    arg_params, _ = module.get_params()
    assert len(counted) == (2 * 8 if on_engine else 0)
    return seen, {name: value.asnumpy() for name, value in arg_params.items()}


def test_module_fit_on_two_devices_gives_the_metric_and_weights_of_the_host_path(monkeypatch):
    mx.random.seed(3)
    on_engine, weights_engine = _fit_and_record(monkeypatch, True)
    monkeypatch.undo()
    mx.random.seed(3)
    on_host, weights_host = _fit_and_record(monkeypatch, False)
    assert on_engine == on_host and len(on_engine) == 8
    assert weights_engine.keys() == weights_host.keys()
    for name in weights_engine:
        np.testing.assert_array_equal(weights_engine[name], weights_host[name])


def test_a_bad_axis_fails_on_ndarrays_as_on_numpy_arrays():
    pred, label = np.zeros((4, 3), "float32"), np.zeros(4, "float32")
    with pytest.raises(Exception) as on_host:
        mx.metric.Accuracy(axis=5).update([label], [pred])
    with pytest.raises(Exception) as on_device:
        mx.metric.Accuracy(axis=5).update([mx.nd.array(label)], [mx.nd.array(pred)])
    assert type(on_device.value) is type(on_host.value) and str(on_device.value) == str(on_host.value)
