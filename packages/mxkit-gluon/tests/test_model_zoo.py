"""model_zoo.vision against MXNet 1.9.1: the parameter names (full and structural) of every
model of get_model, and the outputs of one model per family with parameters set from their
names (tests/fixtures/make_model_zoo_fixtures.py), imperative and hybridized.

Tolerance: float32 networks of up to ~120 layers whose every layer sums up to a few thousand
products; summation order differs from MXNet's, a relative 1e-6 per layer, and BatchNorm keeps
activations of order 1, so outputs of order 1 agree to ~1e-4: rtol=1e-3, atol=1e-4 leaves a
margin and still catches a wrong layer (an O(1) change in the logits).
"""

import hashlib
import json
import zlib

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import GluonError
from mxkit.gluon.model_zoo import vision

NAMES = json.load(open(__import__("pathlib").Path(__file__).parent / "fixtures" / "model_zoo_names.json"))
OUTPUTS = {"resnet18_v2": 32, "vgg11_bn": 32, "alexnet": 64, "squeezenet1.1": 224, "mobilenet0.25": 32,
           "mobilenetv2_0.25": 32, "densenet121": 224, "inceptionv3": 299}
SLOW = {"densenet121", "squeezenet1.1", "inceptionv3"}


def _digest(names):
    return hashlib.sha256("\n".join(names).encode()).hexdigest()


def _fill(name, shape):  # the fixture script's fill()
    rng = np.random.RandomState(zlib.crc32(name.encode()))
    if name.endswith("running_var"):
        return rng.uniform(0.5, 1.5, shape)
    if name.endswith("gamma"):
        return rng.uniform(0.8, 1.2, shape)
    if len(shape) >= 2:
        bound = 1.0 / np.sqrt(np.prod(shape[1:]))
        return rng.uniform(-bound, bound, shape)
    return rng.uniform(-0.1, 0.1, shape)


@pytest.mark.parametrize("model", sorted(NAMES))
def test_parameter_names_match_mxnet(model):
    from mxkit.symbol.name import NameManager

    with NameManager():
        net = vision.get_model(model, classes=10)
    full = sorted(net.collect_params().keys())
    structural = sorted(net._collect_params_with_prefix().keys())
    want = NAMES[model]
    if "names" in want:  # the full lists where stored: a readable diff
        assert full == want["names"]
        assert structural == want["structural"]
    assert len(full) == want["count"]
    assert _digest(full) == want["names_sha256"]
    assert _digest(structural) == want["structural_sha256"]


@pytest.mark.parametrize("model", [pytest.param(m, marks=pytest.mark.slow) if m in SLOW else m
                                   for m in sorted(OUTPUTS)])
def test_outputs_match_mxnet(model, fixture_path):
    want = np.load(fixture_path("model_zoo_outputs.npz"))[f"{model}/out"]
    side = OUTPUTS[model]
    x = mx.nd.array(np.random.RandomState(zlib.crc32(model.encode())).uniform(-1, 1, (1, 3, side, side)))
    net = vision.get_model(model, classes=10)
    net.initialize()
    net(x)
    for key, param in net._collect_params_with_prefix().items():
        param.set_data(mx.nd.array(_fill(key, param.shape)))
    np.testing.assert_allclose(net(x).asnumpy(), want, rtol=1e-3, atol=1e-4)
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), want, rtol=1e-3, atol=1e-4)


def test_pretrained_loads_a_local_file_or_fails_clearly(tmp_path):
    with pytest.raises(GluonError, match="downloads nothing"):
        vision.get_model("mobilenet0.25", pretrained=True, root=str(tmp_path))
    source = vision.mobilenet0_25(classes=10)
    source.initialize()
    source(mx.nd.ones((1, 3, 32, 32)))
    source.save_parameters(str(tmp_path / "mobilenet0.25.params"))
    loaded = vision.get_model("mobilenet0.25", classes=10, pretrained=True, root=str(tmp_path))
    x = mx.nd.random.uniform(shape=(1, 3, 32, 32))
    np.testing.assert_array_equal(loaded(x).asnumpy(), source(x).asnumpy())


def test_bad_model_arguments_fail_clearly():
    with pytest.raises(GluonError, match="not in the model zoo"):
        vision.get_model("resnet19_v1")
    with pytest.raises(GluonError, match="version 1 or 2"):
        vision.get_resnet(3, 18)
    with pytest.raises(GluonError, match=r"choose one of \[11, 13, 16, 19\]"):
        vision.get_vgg(12)
    with pytest.raises(GluonError, match="choose one of"):
        vision.get_densenet(100)
    with pytest.raises(GluonError, match=r"'1\.0' or '1\.1'"):
        vision.get_squeezenet("2.0")
    with pytest.raises(GluonError, match="multiplier must be positive"):
        vision.get_mobilenet(0)
