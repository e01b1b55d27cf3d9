"""Checkpoints in MXNet's format (both ways with MXNet 1.9.1) and FeedForward."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest
from mxkit import mx
from mxkit.train.model import CheckpointError

FIXTURES = Path(__file__).parent / "fixtures"
MXNET_PYTHON = os.environ.get("MXKIT_MXNET_PYTHON")


def _convnet():
    data = mx.sym.Variable("data")
    net = mx.sym.Convolution(data, kernel=(3, 3), pad=(1, 1), num_filter=4, name="conv1")
    net = mx.sym.BatchNorm(net, fix_gamma=False, name="bn1")
    net = mx.sym.Activation(net, act_type="relu", name="relu1")
    net = mx.sym.Pooling(net, pool_type="max", kernel=(2, 2), stride=(2, 2), name="pool1")
    net = mx.sym.FullyConnected(mx.sym.Flatten(net), num_hidden=10, name="fc1")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def _images(n, seed=0):
    rng = np.random.RandomState(seed)
    return rng.rand(n, 1, 8, 8).astype(np.float32), rng.randint(0, 10, n).astype(np.float32)


def _trained_module(epochs=2):
    x, y = _images(32)
    mx.random.seed(0)
    module = mx.mod.Module(_convnet(), context=mx.cpu())
    module.fit(mx.io.NDArrayIter(x, y, 8), num_epoch=epochs, initializer=mx.init.Xavier(),
               optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    return module


def _predict(module_or_prefix, data, epoch=None):
    module = module_or_prefix
    if epoch is not None:
        module = mx.mod.Module.load(module_or_prefix, epoch, context=mx.cpu())
        module.bind(data_shapes=[("data", (8, *data.shape[1:]))], for_training=False)
    return module.predict(mx.io.NDArrayIter(data, np.zeros(len(data), np.float32), 8)).asnumpy()


def test_checkpoint_round_trip_is_exact(tmp_path):
    module = _trained_module()
    prefix = str(tmp_path / "net")
    module.save_checkpoint(prefix, 2)
    assert sorted(os.listdir(tmp_path)) == ["net-0002.params", "net-symbol.json"]
    saved = mx.nd.load(prefix + "-0002.params")
    assert set(saved) == {f"arg:{n}" for n in module.get_params()[0]} | {f"aux:{n}" for n in module.get_params()[1]}
    assert "aux:bn1_moving_mean" in saved and "aux:bn1_moving_var" in saved
    symbol, arg_params, aux_params = mx.model.load_checkpoint(prefix, 2)
    assert symbol.tojson() == module.symbol.tojson()
    for mine, theirs in ((module.get_params()[0], arg_params), (module.get_params()[1], aux_params)):
        assert mine.keys() == theirs.keys()
        for name in mine:
            np.testing.assert_array_equal(mine[name].asnumpy(), theirs[name].asnumpy())
    test, _ = _images(20, seed=5)
    np.testing.assert_allclose(_predict(prefix, test, epoch=2), _predict(module, test), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("contexts", [[mx.cpu(0)], [mx.cpu(0), mx.cpu(1)]], ids=["updater", "kvstore"])
def test_resuming_from_a_checkpoint_with_optimizer_states_replays_training(tmp_path, contexts):
    # one device keeps momentum in the module's updater; two keep it in the local KVStore
    x, y = _images(32)

    def fit(module, begin, end):
        module.fit(mx.io.NDArrayIter(x, y, 8), num_epoch=end, begin_epoch=begin, initializer=mx.init.Xavier(),
                   optimizer_params={"learning_rate": 0.1, "momentum": 0.9})

    mx.random.seed(0)
    straight = mx.mod.Module(_convnet(), context=contexts)
    fit(straight, 0, 3)
    mx.random.seed(0)
    first = mx.mod.Module(_convnet(), context=contexts)
    fit(first, 0, 2)
    first.save_checkpoint(str(tmp_path / "run"), 2, save_optimizer_states=True)
    resumed = mx.mod.Module.load(str(tmp_path / "run"), 2, load_optimizer_states=True, context=contexts)
    with pytest.warns(UserWarning, match="already initialized"):
        fit(resumed, 2, 3)
    for name, value in straight.get_params()[0].items():
        np.testing.assert_allclose(resumed.get_params()[0][name].asnumpy(), value.asnumpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=name)


def test_missing_checkpoint_names_the_epochs_that_exist(tmp_path):
    module = _trained_module(1)
    prefix = str(tmp_path / "net")
    module.save_checkpoint(prefix, 1)
    module.save_checkpoint(prefix, 3)
    with pytest.raises(CheckpointError, match=r"net-0002.params' does not exist; the epochs saved .* are: 1, 3"):
        mx.model.load_checkpoint(prefix, 2)
    with pytest.raises(CheckpointError, match=r"symbol file .*other-symbol.json"):
        mx.mod.Module.load(str(tmp_path / "other"), 1)


def test_a_params_file_without_arg_aux_names_is_rejected(tmp_path):
    mx.nd.save(str(tmp_path / "odd-0001.params"), {"weight": mx.nd.ones(3)})
    with pytest.raises(CheckpointError, match="'weight'; a checkpoint's keys are 'arg:<name>'"):
        mx.model.load_params(str(tmp_path / "odd"), 1)


def test_a_checkpoint_written_by_mxnet_predicts_the_same():
    io = np.load(FIXTURES / "mxnet_convnet_io.npz", allow_pickle=False)
    prefix = str(FIXTURES / "mxnet_convnet")
    symbol, arg_params, aux_params = mx.model.load_checkpoint(prefix, 2)
    assert "conv1_weight" in arg_params and "bn1_gamma" in arg_params
    assert symbol.list_auxiliary_states() == ["bn1_moving_mean", "bn1_moving_var"]
    assert set(aux_params) == {"bn1_moving_mean", "bn1_moving_var"}
    assert not np.allclose(aux_params["bn1_moving_var"].asnumpy(), 1)  # MXNet's training moved the statistics
    np.testing.assert_allclose(_predict(prefix, io["data"], epoch=2), io["prob"], rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(not MXNET_PYTHON, reason="set MXKIT_MXNET_PYTHON to an MXNet 1.9.1 interpreter")
def test_a_checkpoint_written_by_mxkit_predicts_the_same_in_mxnet(tmp_path):
    module = _trained_module()
    prefix = str(tmp_path / "ours")
    module.save_checkpoint(prefix, 2)
    test, _ = _images(16, seed=9)
    np.save(tmp_path / "data.npy", test)
    script = textwrap.dedent(f"""
        import mxnet as mx, numpy as np
        data = np.load({str(tmp_path / "data.npy")!r})
        module = mx.mod.Module.load({prefix!r}, 2, context=mx.cpu())
        module.bind(data_shapes=[("data", (8, 1, 8, 8))], for_training=False)
        out = module.predict(mx.io.NDArrayIter(data, np.zeros(len(data), "float32"), 8)).asnumpy()
        np.save({str(tmp_path / "mxnet_prob.npy")!r}, out)
    """)
    subprocess.run([MXNET_PYTHON, "-c", script], check=True, capture_output=True, timeout=300)
    np.testing.assert_allclose(np.load(tmp_path / "mxnet_prob.npy"), _predict(module, test), rtol=1e-4, atol=1e-5)


# -- FeedForward ----------------------------------------------------------------------------

def _mlp():
    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=32, name="fc1")
    net = mx.sym.Activation(net, act_type="relu")
    return mx.sym.SoftmaxOutput(mx.sym.FullyConnected(net, num_hidden=3, name="fc2"), name="softmax")


def _blobs(n=300, seed=0):
    rng = np.random.RandomState(seed)
    centres = np.array([[2, 0], [-2, 0], [0, 2.5]], dtype=np.float32)
    y = rng.randint(0, 3, n)
    return (centres[y] + 0.5 * rng.randn(n, 2)).astype(np.float32), y.astype(np.float32)


def test_feedforward_with_the_seed_signature_learns_and_checkpoints(tmp_path):
    x, y = _blobs()
    train = mx.io.NDArrayIter(x[:240], y[:240], 20, shuffle=True)
    val = mx.io.NDArrayIter(x[240:], y[240:], 20)
    mx.random.seed(0)
    model = mx.model.FeedForward(ctx=[mx.cpu(0), mx.cpu(1)], symbol=_mlp(), num_epoch=4, learning_rate=0.01,
                                 momentum=0.9, wd=0.00001,
                                 initializer=mx.init.Xavier(factor_type="in", magnitude=2.34))
    saved = []
    model.fit(X=train, eval_data=val, kvstore="local",
              epoch_end_callback=lambda epoch, sym, arg, aux: saved.append(epoch) or
              mx.model.save_checkpoint(str(tmp_path / "model_"), epoch + 1, sym, arg, aux))
    assert saved == [0, 1, 2, 3]
    assert model.score(val) > 0.95
    probabilities = model.predict(x[240:])
    assert probabilities.shape == (60, 3)
    assert (probabilities.argmax(axis=1) == y[240:]).mean() > 0.95
    loaded = mx.model.FeedForward.load(str(tmp_path / "model_"), 4)
    np.testing.assert_allclose(loaded.predict(x[240:]), probabilities, rtol=1e-5, atol=1e-6)


def test_feedforward_takes_numpy_arrays_and_create_fits(tmp_path):
    x, y = _blobs(200, seed=1)
    mx.random.seed(1)
    model = mx.model.FeedForward.create(_mlp(), X=x, y=y, num_epoch=5, numpy_batch_size=25, learning_rate=0.1,
                                        momentum=0.9, initializer=mx.init.Xavier())
    assert model.score(mx.io.NDArrayIter(x, y, 25)) > 0.95
    outputs, data, label = model.predict(mx.io.NDArrayIter(x[:30], y[:30], 25), return_data=True)
    assert outputs.shape == (30, 3) and data.shape == (30, 2)
    np.testing.assert_array_equal(label, y[:30])
    model.save(str(tmp_path / "ff"))
    assert (tmp_path / "ff-0005.params").exists()


def test_feedforward_bad_inputs_are_clear_errors():
    model = mx.model.FeedForward(_mlp(), num_epoch=1)
    with pytest.raises(mx.MXKitError, match="y must be given"):
        model.fit(np.zeros((4, 2), np.float32))
    with pytest.raises(mx.MXKitError, match="4 samples but y has 3"):
        model.fit(np.zeros((4, 2), np.float32), np.zeros(3, np.float32))
    with pytest.raises(mx.MXKitError, match="no parameters yet"):
        model.predict(np.zeros((4, 2), np.float32))
    with pytest.raises(mx.MXKitError, match="X must be a DataIter"):
        model.fit([[0.0, 1.0]], [0])



def test_feedforward_epoch_size_sets_the_batches_per_epoch():
    x, y = _blobs(200, seed=2)
    seen = []
    model = mx.model.FeedForward(_mlp(), num_epoch=2, epoch_size=3, learning_rate=0.1)
    model.fit(mx.io.NDArrayIter(x, y, 20), batch_end_callback=lambda p: seen.append((p.epoch, p.nbatch)))
    assert seen == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
