"""Data-parallel training through the store equals full-batch training done in numpy."""

import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit.core import cpu
from mxkit.kvstore import create

DEVICES = [cpu(i) for i in range(4)]


def shard_gradients(weights, data, labels):
    """Per device: X_d^T (X_d w - y_d), computed with NDArray operations on that device."""
    grads = []
    for w, x, y in zip(weights, data, labels):
        residual = nd.dot(x, w) - y
        grads.append(nd.dot(x.T, residual))
    return grads


@pytest.mark.parametrize("kvtype", ["local", "device"])
@pytest.mark.parametrize("update_on_kvstore", [True, False])
def test_sgd_over_four_devices_matches_full_batch_numpy(kvtype, update_on_kvstore, momentum_sgd):
    rng = np.random.default_rng(7)
    x_all = rng.normal(size=(64, 5)).astype(np.float32)
    y_all = (x_all @ np.arange(1, 6, dtype=np.float32)).reshape(64, 1)
    lr = 0.01
    data = [nd.array(x_all[i::4], ctx=d) for i, d in enumerate(DEVICES)]
    labels = [nd.array(y_all[i::4], ctx=d) for i, d in enumerate(DEVICES)]
    weights = [nd.zeros((5, 1), ctx=d) for d in DEVICES]

    kv = create(kvtype)
    kv.init("w", nd.zeros((5, 1)))
    if update_on_kvstore:
        kv.set_optimizer(momentum_sgd(learning_rate=lr, momentum=0.0))
    for _ in range(20):
        grads = shard_gradients(weights, data, labels)
        if update_on_kvstore:  # MXNet's Module: the store runs the optimizer, workers pull weights
            kv.push("w", grads, priority=0)
            kv.pull("w", out=weights, priority=0)
        else:  # the store only sums; every device applies the update itself
            kv.push("w", grads)
            kv.pull("w", out=grads)
            for w, g in zip(weights, grads):
                w[:] = w - g * lr

    w_numpy = np.zeros((5, 1), np.float32)
    for _ in range(20):
        w_numpy = w_numpy - lr * (x_all.T @ (x_all @ w_numpy - y_all))
    for w in weights:
        np.testing.assert_allclose(w.asnumpy(), w_numpy, rtol=1e-4, atol=1e-4)
    assert np.abs(w_numpy.ravel() - np.arange(1, 6)).max() < 0.1  # it did learn
