"""A LeNet trained on the handwritten digits on ``gpu(0)`` follows the CPU's loss curve.

Both devices start from the same weights, see the same batches and apply the same SGD step
(written with NDArray operations on the device), so their losses must agree closely; the
GPU run must also learn (its loss falls well below chance).
"""

from __future__ import annotations

import numpy as np
import pytest
from mxkit.core import cpu, gpu

pytestmark = pytest.mark.gpu
symbol = pytest.importorskip("mxkit.symbol", reason="the training test needs mxkit-symbol")
datasets = pytest.importorskip("sklearn.datasets", reason="the digits data ships with scikit-learn")


def lenet():
    data = symbol.Variable("data")
    net = symbol.Convolution(data, kernel=(3, 3), num_filter=20, pad=(1, 1), name="conv1")
    net = symbol.Activation(net, act_type="tanh")
    net = symbol.Pooling(net, kernel=(2, 2), stride=(2, 2), pool_type="max")
    net = symbol.Convolution(net, kernel=(3, 3), num_filter=50, pad=(1, 1), name="conv2")
    net = symbol.Activation(net, act_type="tanh")
    net = symbol.Pooling(net, kernel=(2, 2), stride=(2, 2), pool_type="max")
    net = symbol.FullyConnected(symbol.Flatten(net), num_hidden=100, name="fc1")
    net = symbol.Activation(net, act_type="tanh")
    net = symbol.FullyConnected(net, num_hidden=10, name="fc2")
    return symbol.SoftmaxOutput(net, name="softmax")


def train(ctx, images, labels, init, steps, batch=64, lr=0.1):
    executor = lenet().simple_bind(ctx=ctx, data=(batch, 1, 8, 8), softmax_label=(batch,))
    for name, value in init.items():
        executor.arg_dict[name][:] = value
    losses = []
    for step in range(steps):
        start = (step * batch) % (len(images) - batch)
        executor.arg_dict["data"][:] = images[start:start + batch]
        executor.arg_dict["softmax_label"][:] = labels[start:start + batch]
        executor.forward(is_train=True)
        executor.backward()
        for name, weight in executor.arg_dict.items():
            if name in init:
                weight -= executor.grad_dict[name] * (lr / batch)
        prob = executor.outputs[0].asnumpy()
        losses.append(-np.mean(np.log(prob[np.arange(batch), labels[start:start + batch].astype(int)] + 1e-12)))
    return np.array(losses)


def test_lenet_on_digits_follows_the_cpu_loss_curve():
    digits = datasets.load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]
    labels = digits.target.astype(np.float32)
    shapes, _, _ = lenet().infer_shape(data=(64, 1, 8, 8), softmax_label=(64,))
    names = lenet().list_arguments()
    rng = np.random.default_rng(0)
    init = {n: (rng.standard_normal(s) * np.sqrt(2.0 / max(1, np.prod(s[1:])))).astype(np.float32)
            for n, s in zip(names, shapes) if n not in ("data", "softmax_label")}
    cpu_losses = train(cpu(0), images, labels, init, steps=120)
    gpu_losses = train(gpu(0), images, labels, init, steps=120)
    # float32 sums run in another order on each device, and training amplifies the last-bit
    # differences step by step: the first steps agree closely, the rest within a small envelope
    np.testing.assert_allclose(gpu_losses[:40], cpu_losses[:40], rtol=2e-3, atol=2e-3)
    windows = np.abs(gpu_losses - cpu_losses).reshape(-1, 20).mean(axis=1)
    assert windows.max() < 0.05, windows
    assert gpu_losses[-20:].mean() < 1.0 < np.log(10)  # chance is log(10) = 2.3
