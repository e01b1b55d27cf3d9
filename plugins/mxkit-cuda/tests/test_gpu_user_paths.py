"""What users train with, on ``gpu(0)``: ``Module.fit`` and a hybridized Gluon network through
``Trainer``. Both bind executors, which record their phases into CUDA graphs (config
``exec_record``); each must follow the same run on the CPU.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu
datasets = pytest.importorskip("sklearn.datasets", reason="the digits data ships with scikit-learn")


def _mx():
    from mxkit import mx

    return mx


def _digits():
    digits = datasets.load_digits()
    return (digits.images / 16.0).astype(np.float32)[:, None], digits.target.astype(np.float32)


def _lenet(mx):
    data = mx.sym.Variable("data")
    net = mx.sym.Convolution(data, kernel=(3, 3), num_filter=16, pad=(1, 1), name="conv1")
    net = mx.sym.BatchNorm(net, fix_gamma=False, name="bn1")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.Pooling(net, kernel=(2, 2), stride=(2, 2), pool_type="max")
    net = mx.sym.FullyConnected(mx.sym.Flatten(net), num_hidden=64, name="fc1")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.FullyConnected(net, num_hidden=10, name="fc2")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def _fit(mx, ctx, images, labels):
    train = mx.io.NDArrayIter(images[:1400], labels[:1400], batch_size=50, shuffle=False)
    val = mx.io.NDArrayIter(images[1400:], labels[1400:], batch_size=50)
    mx.random.seed(3)
    module = mx.mod.Module(_lenet(mx), context=ctx)
    module.fit(train, optimizer="sgd", optimizer_params={"learning_rate": 0.1, "momentum": 0.9},
               initializer=mx.init.Xavier(magnitude=2.0), num_epoch=4)
    return module.score(val, "acc")[0][1]


def test_module_fit_on_the_gpu_learns_as_on_the_cpu():
    mx = _mx()
    images, labels = _digits()
    on_cpu = _fit(mx, mx.cpu(0), images, labels)
    on_gpu = _fit(mx, mx.gpu(0), images, labels)
    assert on_gpu > 0.8  # chance is 0.1
    # the same initial weights and batches; float32 sums in another order, amplified by training
    assert abs(on_gpu - on_cpu) < 0.03, (on_gpu, on_cpu)


def test_hybridized_gluon_training_on_the_gpu_follows_the_cpu(tmp_path):
    mx = _mx()
    from mxkit.gluon import Trainer, nn
    from mxkit.gluon import loss as gloss

    def network():
        net = nn.HybridSequential()
        with net.name_scope():
            net.add(nn.Conv2D(8, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"), nn.MaxPool2D(2),
                    nn.Flatten(), nn.Dense(32, activation="relu"), nn.Dense(10))
        return net

    images, labels = _digits()
    reference = network()
    mx.random.seed(0)
    reference.initialize(mx.init.Xavier(), ctx=mx.cpu(0))
    reference(mx.nd.array(images[:2]))
    reference.save_parameters(str(tmp_path / "init.params"))
    losses = {}
    for ctx in (mx.cpu(0), mx.gpu(0)):
        net = network()
        net.load_parameters(str(tmp_path / "init.params"), ctx=ctx)
        net.hybridize()
        trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
        loss_fn = gloss.SoftmaxCrossEntropyLoss()
        run = []
        for step in range(6):
            x = mx.nd.array(images[step * 32:(step + 1) * 32], ctx=ctx)
            y = mx.nd.array(labels[step * 32:(step + 1) * 32], ctx=ctx)
            with mx.autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(32)
            run.append(loss.asnumpy())
        losses[ctx.device_type] = np.array(run)
    np.testing.assert_allclose(losses["gpu"], losses["cpu"], rtol=2e-3, atol=2e-4)
