"""The KVStore with values on the GPU: ``local`` and ``device`` sums of per-device gradients,
pulls into GPU and CPU arrays, and an optimizer updating GPU weights, against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from mxkit.core import cpu, gpu
from mxkit.ndarray import array, zeros

pytestmark = pytest.mark.gpu
kvstore = pytest.importorskip("mxkit.kvstore", reason="needs mxkit-kvstore")


@pytest.mark.parametrize("kind", ["local", "device"])
def test_push_of_gpu_and_cpu_gradients_sums_and_pulls_to_both(kind):
    rng = np.random.default_rng(0)
    shape = (257, 33)
    start = rng.standard_normal(shape).astype(np.float32)
    grads = [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]
    kv = kvstore.create(kind)
    kv.init(3, array(start, ctx=gpu(0)))
    kv.push(3, [array(grads[0], ctx=gpu(0)), array(grads[1], ctx=gpu(0)), array(grads[2], ctx=cpu(0))])
    on_gpu, on_cpu = zeros(shape, ctx=gpu(0)), zeros(shape, ctx=cpu(0))
    kv.pull(3, out=[on_gpu, on_cpu])
    want = grads[0] + grads[1] + grads[2]  # without an updater a push replaces the value with the sum
    np.testing.assert_allclose(on_gpu.asnumpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(on_cpu.asnumpy(), want, rtol=1e-5, atol=1e-5)


def test_an_optimizer_on_the_store_updates_gpu_weights_like_numpy():
    optimizer = pytest.importorskip("mxkit.train.optimizer", reason="needs mxkit-train")
    rng = np.random.default_rng(1)
    weight = rng.standard_normal((64, 16)).astype(np.float32)
    kv = kvstore.create("device")
    kv.set_optimizer(optimizer.create("sgd", learning_rate=0.1, momentum=0.9, wd=0.0, rescale_grad=0.5))
    kv.init(0, array(weight, ctx=gpu(0)))
    expected, momentum = weight.copy(), np.zeros_like(weight)
    out = zeros(weight.shape, ctx=gpu(0))
    for _ in range(4):
        grads = [rng.standard_normal(weight.shape).astype(np.float32) for _ in range(2)]
        kv.push(0, [array(g, ctx=gpu(0)) for g in grads])
        kv.pull(0, out=out)
        momentum = 0.9 * momentum - 0.1 * (0.5 * (grads[0] + grads[1]))
        expected = expected + momentum
    np.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-5, atol=1e-5)
