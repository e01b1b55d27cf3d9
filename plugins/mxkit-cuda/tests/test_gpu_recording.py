"""Executors on a GPU record each phase into a CUDA graph and replay it (config ``exec_record``).

A recorded executor must compute what one that launches kernel by kernel computes, step for
step, with fresh data and updated weights between steps; nodes CUDA cannot capture must run
as usual between the recordings of the others, with the same results; work that other engine
threads launch while a phase is being recorded must neither be captured nor break the capture.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from mxkit.core import config, cpu, gpu

pytestmark = pytest.mark.gpu
sym = pytest.importorskip("mxkit.symbol", reason="recording is an executor feature (mxkit-symbol)")


def residual_net(relu=None):
    """Convolution, BatchNorm, pooling, a bottleneck with a residual sum, FullyConnected, softmax."""
    relu = relu or (lambda x: sym.Activation(x, act_type="relu"))
    data = sym.Variable("data")
    net = sym.Convolution(data, num_filter=8, kernel=(3, 3), pad=(1, 1), no_bias=True, name="stem")
    net = relu(sym.BatchNorm(net, fix_gamma=False, name="stem_bn"))
    net = sym.Pooling(net, kernel=(2, 2), stride=(2, 2), pool_type="max")
    branch = sym.Convolution(net, num_filter=4, kernel=(1, 1), no_bias=True, name="a")
    branch = relu(sym.BatchNorm(branch, fix_gamma=False, name="a_bn"))
    branch = sym.Convolution(branch, num_filter=8, kernel=(3, 3), pad=(1, 1), name="b")
    net = relu(sym.BatchNorm(branch, name="b_bn") + net)
    net = sym.Pooling(net, kernel=(1, 1), global_pool=True, pool_type="avg")
    net = sym.FullyConnected(sym.Flatten(net), num_hidden=5, name="fc")
    return sym.SoftmaxOutput(net, name="softmax")


SHAPE = (6, 3, 12, 12)


def bind(net, ctx, record):
    with config.override(exec_record=record):
        ex = net.simple_bind(ctx=ctx, data=SHAPE, softmax_label=(SHAPE[0],))
    rng = np.random.default_rng(0)
    for name, array in ex.arg_dict.items():
        if name not in ("data", "softmax_label"):
            array[:] = rng.standard_normal(array.shape).astype(np.float32) * 0.3
    return ex


def train(ex, steps, lr=0.05):
    """SGD on fresh data every step: each step's outputs, then every weight and moving statistic."""
    rng = np.random.default_rng(1)
    outputs = []
    for _ in range(steps):
        ex.arg_dict["data"][:] = rng.standard_normal(SHAPE).astype(np.float32)
        ex.arg_dict["softmax_label"][:] = rng.integers(0, 5, SHAPE[0]).astype(np.float32)
        outputs.append(ex.forward(is_train=True)[0].asnumpy())
        ex.backward()
        for name, grad in ex.grad_dict.items():
            if name not in ("data", "softmax_label"):
                ex.arg_dict[name][:] -= grad * lr
    return outputs, {n: a.asnumpy() for n, a in {**ex.arg_dict, **ex.aux_dict}.items()}


def assert_same_run(got, want, rtol=1e-4, atol=1e-5):
    # the two runs differ only in how kernels are launched; cuDNN's weight-gradient algorithms
    # may sum in another order from run to run, so allow float32 rounding, grown over a few steps
    for step, (g, w) in enumerate(zip(got[0], want[0])):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"outputs of step {step}")
    for name in want[1]:
        np.testing.assert_allclose(got[1][name], want[1][name], rtol=rtol, atol=atol, err_msg=name)


def test_recorded_training_equals_kernel_by_kernel_training():
    plain = bind(residual_net(), gpu(0), record=False)
    recorded = bind(residual_net(), gpu(0), record=True)
    want = train(plain, 5)
    got = train(recorded, 5)
    assert plain.recorded_phases == []
    assert recorded.recorded_phases == ["forward (training)", "backward (training)"]
    assert recorded.unrecorded_nodes == []
    assert_same_run(got, want)
    assert gpu(0).backend.memory_stats()["recorded"] > 0  # the recordings' temporaries are counted


def test_recorded_training_follows_the_cpu():
    want = train(bind(residual_net(), cpu(0), record=False), 4)
    got = train(bind(residual_net(), gpu(0), record=True), 4)
    assert_same_run(got, want, rtol=2e-3, atol=2e-4)


def test_recorded_prediction_reads_new_data_every_replay():
    reference = bind(residual_net(), cpu(0), record=False)
    ex = bind(residual_net(), gpu(0), record=True)
    rng = np.random.default_rng(5)
    for _ in range(4):
        data = rng.standard_normal(SHAPE).astype(np.float32)
        ex.arg_dict["data"][:] = data
        reference.arg_dict["data"][:] = data
        np.testing.assert_allclose(ex.forward(is_train=False)[0].asnumpy(),
                                   reference.forward(is_train=False)[0].asnumpy(), rtol=2e-3, atol=2e-5)
    assert ex.recorded_phases == ["forward (prediction)"]


def test_nodes_that_copy_to_the_host_run_between_the_recordings(monkeypatch):
    from mxkit.ndarray.kernels import get_op

    op = get_op("relu")
    kernel = op.kernel_for("cupy")
    copies = []

    def relu_reading_the_host(xp, inputs, outputs, params):
        copies.append(float(inputs[0].ravel()[0].get()))  # waits for the device: cannot be recorded
        kernel(xp, inputs, outputs, params)

    monkeypatch.setitem(op.kernels, "cupy", relu_reading_the_host)
    net = residual_net(relu=sym.relu)
    want = train(bind(net, cpu(0), record=False), 3)
    ex = bind(net, gpu(0), record=True)
    got = train(ex, 3)
    # the relu nodes run as usual between the recordings of the other nodes (relu's backward
    # is another operator, recorded with the rest of the backward)
    assert ex.recorded_phases == ["forward (training)", "backward (training)"]
    assert sorted(ex.unrecorded_nodes) == sorted(f"forward (training): {s.name} (relu)"
                                                 for s in ex._forward_steps if s.node.op.name == "relu")
    assert copies
    assert_same_run(got, want, rtol=2e-3, atol=2e-4)


def test_work_of_other_threads_during_a_recording_runs_and_is_not_recorded():
    from mxkit import ndarray as nd

    ex = bind(residual_net(), gpu(0), record=True)
    stop = threading.Event()
    failures: list[BaseException] = []

    def other_work():
        rng = np.random.default_rng(9)
        try:
            while not stop.is_set():
                a = rng.standard_normal((64, 64)).astype(np.float32)
                b = rng.standard_normal((64, 64)).astype(np.float32)
                got = nd.dot(nd.array(a, ctx=gpu(0)), nd.array(b, ctx=gpu(0))) + 1
                np.testing.assert_allclose(got.asnumpy(), a @ b + 1, rtol=2e-3, atol=2e-3)
        except BaseException as exc:  # reported below, in the test's thread
            failures.append(exc)

    thread = threading.Thread(target=other_work)
    thread.start()
    try:
        got = train(ex, 4)
    finally:
        stop.set()
        thread.join()
    assert not failures, failures[0]
    assert ex.recorded_phases == ["forward (training)", "backward (training)"]
    want = train(bind(residual_net(), gpu(0), record=False), 4)
    assert_same_run(got, want)
