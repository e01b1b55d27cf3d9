"""Trainer over a KVStore: every store / update_on_kvstore combination against a serial replay
of the same SGD-with-momentum steps in numpy, states saved and resumed, and the refusals.

The replay is exact up to float32 rounding of a few additions per step (the store sums two
gradients; numpy sums them in float64 then rounds): rtol=1e-5 is two orders above that.
"""

import numpy as np
import pytest
from mxkit import mx
from mxkit.core.errors import FormatError
from mxkit.gluon import GluonError, Trainer, nn

LR, MOMENTUM, WD = 0.1, 0.9, 0.01
CONTEXTS = [mx.cpu(0), mx.cpu(1)]
DATA = np.random.RandomState(0).uniform(-1, 1, (4, 2, 3)).astype(np.float32)  # 4 steps, 2 devices, 3 features


def _net(contexts):
    net = nn.Dense(2, in_units=3)
    net.initialize(mx.init.Constant(0.2), ctx=contexts)
    net.bias.set_data(mx.nd.array([0.1, -0.1]))
    return net


def _step(net, trainer, step, contexts):
    with mx.autograd.record():
        losses = [(net(mx.nd.array(DATA[step, k:k + 1], ctx=ctx)) ** 2).sum() for k, ctx in enumerate(contexts)]
    for loss in losses:
        loss.backward()
    trainer.step(2)


def _replay(steps):
    """SGD with momentum and wd on the summed gradient of (w x + b)^2 over both samples."""
    w = np.full((2, 3), 0.2)
    b = np.array([0.1, -0.1])
    mw, mb = np.zeros_like(w), np.zeros_like(b)
    for step in range(steps):
        x = DATA[step].astype(np.float64)
        out = x @ w.T + b
        gw = (2 * out).T @ x / 2
        gb = (2 * out).sum(0) / 2
        mw = MOMENTUM * mw - LR * (gw + WD * w)
        mb = MOMENTUM * mb - LR * (gb + WD * b)
        w, b = w + mw, b + mb
    return w, b


@pytest.mark.parametrize("kvstore, update_on_kvstore", [
    ("device", None), ("device", False), ("local", True), ("local", False), (None, None),
])
def test_trainer_on_two_devices_matches_serial_replay(kvstore, update_on_kvstore):
    net = _net(CONTEXTS)
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": LR, "momentum": MOMENTUM, "wd": WD},
                      kvstore=kvstore, update_on_kvstore=update_on_kvstore)
    for step in range(3):
        _step(net, trainer, step, CONTEXTS)
    if kvstore is None:
        assert trainer._kvstore is None
    else:
        assert trainer._kvstore.type == kvstore
        assert trainer._update_on_kvstore == (True if update_on_kvstore is None else update_on_kvstore)
    w, b = _replay(3)
    for weight, bias in zip(net.weight.list_data(), net.bias.list_data()):
        np.testing.assert_allclose(weight.asnumpy(), w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(bias.asnumpy(), b, rtol=1e-5, atol=1e-6)


def test_trainer_over_mxnets_teststore_allreduces_and_updates_per_device():
    # 'teststore' only broadcasts and sums (it cannot run an optimizer): each device's
    # updater applies the summed gradient, as MXNet's test_trainer_with_teststore checks
    net = _net(CONTEXTS)
    store = mx.kv.create("teststore")
    assert store.type == "teststore" and not store.is_capable("optimizer")
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": LR, "momentum": MOMENTUM, "wd": WD},
                      kvstore=store)
    for step in range(3):
        _step(net, trainer, step, CONTEXTS)
    assert trainer._kvstore is store and trainer._update_on_kvstore is False
    w, b = _replay(3)
    for weight, bias in zip(net.weight.list_data(), net.bias.list_data()):
        np.testing.assert_allclose(weight.asnumpy(), w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(bias.asnumpy(), b, rtol=1e-5, atol=1e-6)
    refused = Trainer(net.collect_params(), "sgd", kvstore=store, update_on_kvstore=True)
    with pytest.raises(ValueError, match="'teststore' cannot run an optimizer; set update_on_kvstore=False"):
        refused._init_kvstore()


def test_allreduce_then_update_with_clipping_between():
    net = _net(CONTEXTS)
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 1.0}, kvstore="device", update_on_kvstore=False)
    with mx.autograd.record():
        losses = [net(mx.nd.array(DATA[0, k:k + 1], ctx=ctx)).sum() for k, ctx in enumerate(CONTEXTS)]
    for loss in losses:
        loss.backward()
    trainer.allreduce_grads()
    summed = DATA[0].sum(0)  # d(sum of outputs)/dw: each row is the summed input
    for grad in net.weight.list_grad():
        np.testing.assert_allclose(grad.asnumpy(), np.stack([summed, summed]), rtol=1e-6)
        grad[:] = mx.nd.clip(grad, -0.5, 0.5)
    trainer.update(2)
    want = 0.2 - np.clip(np.stack([summed, summed]), -0.5, 0.5) / 2
    for weight in net.weight.list_data():
        np.testing.assert_allclose(weight.asnumpy(), want, rtol=1e-6)


@pytest.mark.parametrize("update_on_kvstore", [True, False])
def test_states_saved_and_resumed_equal_an_uninterrupted_run(tmp_path, update_on_kvstore):
    def trainer_for(net):
        return Trainer(net.collect_params(), "sgd", {"learning_rate": LR, "momentum": MOMENTUM, "wd": WD},
                       kvstore="device", update_on_kvstore=update_on_kvstore)

    net = _net(CONTEXTS)
    trainer = trainer_for(net)
    for step in range(2):
        _step(net, trainer, step, CONTEXTS)
    trainer.save_states(str(tmp_path / "states"))
    net.save_parameters(str(tmp_path / "params"))

    resumed = _net(CONTEXTS)
    resumed.load_parameters(str(tmp_path / "params"), ctx=CONTEXTS)
    trainer = trainer_for(resumed)
    trainer.load_states(str(tmp_path / "states"))
    for step in range(2, 4):
        _step(resumed, trainer, step, CONTEXTS)
    w, _ = _replay(4)
    np.testing.assert_allclose(resumed.weight.data(CONTEXTS[1]).asnumpy(), w, rtol=1e-5, atol=1e-6)


def test_load_states_refuses_a_pickle(tmp_path):
    import pickle

    net = _net([mx.cpu(0)])
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": LR, "momentum": MOMENTUM})
    (tmp_path / "evil").write_bytes(pickle.dumps({"states": 1}))
    with pytest.raises(FormatError, match="pickle"):
        trainer.load_states(str(tmp_path / "evil"))


def test_refusals_are_clear():
    net = _net(CONTEXTS)
    with pytest.raises(GluonError, match="store type"):
        Trainer(net.collect_params(), "sgd", kvstore=3)
    with pytest.raises(GluonError, match="update_on_kvstore must be"):
        Trainer(net.collect_params(), "sgd", update_on_kvstore="yes")
    trainer = Trainer(net.collect_params(), "sgd", kvstore="device", update_on_kvstore=True)
    with pytest.raises(GluonError, match="update_on_kvstore=False"):
        trainer.allreduce_grads()
    with pytest.raises(GluonError, match="update_on_kvstore=False"):
        trainer.update(2)
    with pytest.raises(GluonError, match="batch_size must be positive"):
        trainer.step(0)
    single = _net([mx.cpu(0)])
    with pytest.raises(GluonError, match="needs a store"):
        Trainer(single.collect_params(), "sgd", kvstore=None, update_on_kvstore=True).step(1)


class _AsyncStore:
    """Just enough of a dist_async store for Trainer's choices (no server behind it)."""

    type = "dist_async"

    def __init__(self):
        self.optimizer = None
        self.calls = []

    def is_capable(self, capability):
        return capability == "optimizer"

    def set_optimizer(self, optimizer):
        self.optimizer = optimizer

    def init(self, key, value):
        self.calls.append(("init", key))

    def broadcast(self, key, value, out, priority=0):
        self.calls.append(("broadcast", key))

    def push(self, key, value, priority=0):
        self.calls.append(("push", key))

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        self.calls.append(("pull", key))

    def pushpull(self, key, value, out=None, priority=0):
        self.calls.append(("pushpull", key))


def test_an_asynchronous_store_runs_the_optimizer():
    net = _net([mx.cpu(0)])
    store = _AsyncStore()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": LR}, kvstore=store, update_on_kvstore=None)
    _step(net, trainer, 0, [mx.cpu(0)])
    assert store.optimizer is trainer.optimizer  # the servers got the optimizer
    assert [c for c in store.calls if c[0] == "pushpull"] == [("pushpull", 0), ("pushpull", 1)]
    refused = Trainer(net.collect_params(), "sgd", kvstore=_AsyncStore(), update_on_kvstore=False)
    with pytest.raises(GluonError, match="asynchronous store"):
        refused.step(1)
