"""Two SGD-with-momentum steps of a convnet through Module agree with MXNet 1.9.1.

``fixtures/mxnet_convnet_step.npz`` (written by ``make_mxnet_convnet_step.py`` with MXNet
1.9.1) holds the initial values, the batches, and after each step MXNet's training
outputs, every argument gradient, the updated arguments and the updated BatchNorm moving
statistics; then MXNet's inference outputs on a third batch.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from mxkit import mx

FIXTURE = Path(__file__).parent / "fixtures" / "mxnet_convnet_step.npz"
# the network and the optimizer exactly as make_mxnet_convnet_step.py defines them
BATCH, CHANNELS, SIZE, CLASSES = 8, 3, 8, 5
OPTIMIZER_PARAMS = {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01}
TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}


def _network():
    data = mx.sym.Variable("data")
    net = mx.sym.Convolution(data, kernel=(3, 3), pad=(1, 1), num_filter=6, name="conv1")
    net = mx.sym.BatchNorm(net, fix_gamma=False, momentum=0.9, eps=1e-3, name="bn1")
    net = mx.sym.Activation(net, act_type="relu", name="relu1")
    net = mx.sym.Pooling(net, pool_type="max", kernel=(2, 2), stride=(2, 2), name="pool1")
    net = mx.sym.FullyConnected(net, num_hidden=CLASSES, name="fc1")
    return mx.sym.SoftmaxOutput(net, name="softmax")


@pytest.fixture(scope="module")
def reference():
    with np.load(FIXTURE, allow_pickle=False) as saved:
        return {key: saved[key] for key in saved.files}


def _section(reference, prefix):
    return {key[len(prefix):]: value for key, value in reference.items() if key.startswith(prefix)}


def _train(reference, contexts):
    """Run mxkit's Module through the fixture's steps on ``contexts``, recording what the fixture records."""
    module = mx.mod.Module(_network(), context=contexts)
    module.bind(data_shapes=[("data", (BATCH, CHANNELS, SIZE, SIZE))], label_shapes=[("softmax_label", (BATCH,))],
                inputs_need_grad=True)
    module.init_params(arg_params={k: mx.nd.array(v) for k, v in _section(reference, "init/arg/").items()},
                       aux_params={k: mx.nd.array(v) for k, v in _section(reference, "init/aux/").items()})
    module.init_optimizer(optimizer="sgd", optimizer_params=OPTIMIZER_PARAMS)
    record = {}
    for step in (1, 2):
        batch = mx.io.DataBatch([mx.nd.array(reference[f"batch{step - 1}/data"])],
                                [mx.nd.array(reference[f"batch{step - 1}/label"])])
        module.forward(batch, is_train=True)
        module.backward()
        record[f"step{step}/output"] = module.get_outputs()[0].asnumpy()
        if len(contexts) == 1:
            for name, grad in module._exec_group.execs[0].grad_dict.items():
                if grad is not None and name != "softmax_label":
                    record[f"step{step}/grad/{name}"] = grad.asnumpy()
        module.update()
        arg_params, aux_params = module.get_params()
        record.update({f"step{step}/arg/{k}": v.asnumpy() for k, v in arg_params.items()})
        record.update({f"step{step}/aux/{k}": v.asnumpy() for k, v in aux_params.items()})
    module.forward(mx.io.DataBatch([mx.nd.array(reference["batch2/data"])], [mx.nd.array(reference["batch2/label"])]),
                   is_train=False)
    record["predict/output"] = module.get_outputs()[0].asnumpy()
    return record


@pytest.fixture(scope="module")
def trained(reference):
    return _train(reference, [mx.cpu()])


@pytest.fixture(scope="module")
def trained_on_two_devices(reference):
    return _train(reference, [mx.cpu(0), mx.cpu(1)])


@pytest.mark.parametrize("step", [1, 2])
@pytest.mark.parametrize("kind", ["output", "grad", "arg", "aux"])
def test_each_step_matches_mxnet(reference, trained, step, kind):
    prefix = f"step{step}/{kind}"
    expected = {key: value for key, value in reference.items() if key.startswith(prefix)}
    assert expected, f"the fixture has no {prefix} entries"
    assert set(expected) == {key for key in trained if key.startswith(prefix)}
    for key, value in expected.items():
        np.testing.assert_allclose(trained[key], value, err_msg=key, **TOLERANCE)


def test_inference_after_training_uses_the_updated_statistics_like_mxnet(reference, trained):
    np.testing.assert_allclose(trained["predict/output"], reference["predict/output"], **TOLERANCE)


def test_two_devices_normalise_their_halves_and_average_the_statistics_like_mxnet(reference, trained_on_two_devices):
    # each device's BatchNorm sees half the batch, so this differs from the one-device run
    expected = _section(reference, "two_devices/")
    assert set(expected) == set(trained_on_two_devices)
    for key, value in expected.items():
        np.testing.assert_allclose(trained_on_two_devices[key], value, err_msg=key, **TOLERANCE)
    assert np.abs(expected["step1/output"] - reference["step1/output"]).max() > 1e-2
    assert np.abs(expected["step2/arg/conv1_weight"] - reference["step2/arg/conv1_weight"]).max() > 1e-2


def test_the_fixture_really_moves_every_value(reference):
    # a step that left something unchanged (or a momentum that never acted) would make the
    # comparison above vacuous for that value. The one exception is by design: the BatchNorm
    # right after conv1 cancels any shift of its output, so conv1_bias has no gradient, and
    # Module gives biases no weight decay (wd_mult 0 for names not ending in _weight/_gamma)
    for step in (1, 2):
        assert np.abs(reference[f"step{step}/grad/conv1_bias"]).max() < 1e-5
        np.testing.assert_allclose(reference[f"step{step}/arg/conv1_bias"], reference["init/arg/conv1_bias"],
                                   rtol=0, atol=1e-6)
    for kind in ("arg", "aux"):
        for name, initial in _section(reference, f"init/{kind}/").items():
            if name == "conv1_bias":
                continue
            first, second = reference[f"step1/{kind}/{name}"], reference[f"step2/{kind}/{name}"]
            assert np.abs(first - initial).max() > 1e-3, name
            assert np.abs(second - first).max() > 1e-3, name
    # momentum: the second step is not the plain SGD step from the first step's weights
    lr, wd = OPTIMIZER_PARAMS["learning_rate"], OPTIMIZER_PARAMS["wd"]
    weight, grad = reference["step1/arg/fc1_weight"], reference["step2/grad/fc1_weight"] / BATCH
    plain = weight - lr * (grad + wd * weight)
    assert np.abs(reference["step2/arg/fc1_weight"] - plain).max() > 1e-3
