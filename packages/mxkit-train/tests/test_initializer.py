"""Initializers: statistics against their formulas, MXNet's dispatch and descriptions."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from mxkit import mx
from mxkit.core.errors import ShapeError
from mxkit.train._registry import TrainingValueError, UnknownNameError

FIXTURES = Path(__file__).parent / "fixtures"


def _filled(init, name, shape, ctx=None):
    arr = mx.nd.zeros(shape, ctx=ctx) if ctx is not None else mx.nd.zeros(shape)
    init(name, arr)
    return arr.asnumpy().astype(np.float64)


def test_uniform_bounds_and_moments():
    values = _filled(mx.init.Uniform(0.2), "fc_weight", (200, 300))
    assert values.min() >= -0.2 and values.max() <= 0.2
    assert values.min() < -0.199 and values.max() > 0.199
    assert abs(values.mean()) < 0.002
    assert values.var() == pytest.approx(0.2 ** 2 / 3, rel=0.02)


def test_normal_moments():
    values = _filled(mx.init.Normal(0.3), "fc_weight", (300, 300))
    assert abs(values.mean()) < 0.003
    assert values.std() == pytest.approx(0.3, rel=0.01)


@pytest.mark.parametrize(("factor_type", "factor"), [("avg", (32 * 9 + 64 * 9) / 2), ("in", 32 * 9), ("out", 64 * 9)])
def test_xavier_uses_the_receptive_field_of_conv_weights(factor_type, factor):
    shape = (64, 32, 3, 3)
    bound = math.sqrt(2.34 / factor)
    uniform = _filled(mx.init.Xavier(rnd_type="uniform", factor_type=factor_type, magnitude=2.34), "c_weight", shape)
    assert uniform.min() >= -bound and uniform.max() <= bound
    assert uniform.max() > 0.99 * bound
    assert uniform.std() == pytest.approx(bound / math.sqrt(3), rel=0.02)
    gaussian = _filled(mx.init.Xavier(rnd_type="gaussian", factor_type=factor_type, magnitude=2.34), "c_weight",
                       shape)
    assert gaussian.std() == pytest.approx(bound, rel=0.02)
    assert mx.init.Xavier(factor_type=factor_type, magnitude=2.34).scale_for("w", shape) == pytest.approx(bound)


def test_xavier_dense_weight_and_default_magnitude():
    values = _filled(mx.init.Xavier(), "fc_weight", (100, 400))
    bound = math.sqrt(3.0 / 250)
    assert values.max() <= bound and values.max() > 0.99 * bound


def test_msraprelu_is_gaussian_with_he_magnitude():
    values = _filled(mx.init.MSRAPrelu(factor_type="in", slope=0.0), "c_weight", (128, 16, 5, 5))
    assert values.std() == pytest.approx(math.sqrt(2.0 / (16 * 25)), rel=0.02)
    assert mx.init.MSRAPrelu(slope=0.25).magnitude == pytest.approx(2 / 1.0625)


@pytest.mark.parametrize("shape", [(6, 10), (10, 6), (4, 3, 2, 2)])
def test_orthogonal_rows_or_columns_are_orthonormal(shape):
    values = _filled(mx.init.Orthogonal(scale=1.5, rand_type="normal"), "q_weight", shape)
    flat = values.reshape(shape[0], -1) / 1.5
    gram = flat @ flat.T if flat.shape[0] <= flat.shape[1] else flat.T @ flat
    np.testing.assert_allclose(gram, np.eye(gram.shape[0]), atol=1e-5)


def test_constant_zero_one_bilinear_lstm_bias():
    assert (_filled(mx.init.Constant(0.5), "w_weight", (2, 3)) == 0.5).all()
    np.testing.assert_allclose(_filled(mx.init.Constant([1.0, 2.0, 3.0]), "w_weight", (2, 3)), [[1, 2, 3]] * 2)
    assert (_filled(mx.init.Zero(), "w_weight", (3,)) == 0).all()
    assert (_filled(mx.init.One(), "w_weight", (3,)) == 1).all()
    lstm = _filled(mx.init.LSTMBias(forget_bias=2.0), "lstm_bias_weight", (8,))
    np.testing.assert_array_equal(lstm, [0, 0, 2, 2, 0, 0, 0, 0])
    shape = (2, 1, 4, 4)
    # MXNet's loop, written out
    expected = np.zeros(int(np.prod(shape)), dtype=np.float32)
    f = np.ceil(shape[3] / 2.0)
    c = (2 * f - 1 - f % 2) / (2.0 * f)
    for i in range(expected.size):
        x, y = i % shape[3], (i // shape[3]) % shape[2]
        expected[i] = (1 - abs(x / f - c)) * (1 - abs(y / f - c))
    np.testing.assert_allclose(_filled(mx.init.Bilinear(), "up_weight", shape), expected.reshape(shape))
    np.testing.assert_allclose(_filled(mx.init.Uniform(), "upsampling0", shape), expected.reshape(shape))


@pytest.mark.parametrize(("name", "value"), [
    ("fc_bias", 0.0), ("bn_gamma", 1.0), ("bn_beta", 0.0), ("bn_moving_mean", 0.0), ("bn_moving_var", 1.0),
    ("bn_moving_inv_var", 0.0), ("bn_moving_avg", 0.0), ("q_min", 0.0), ("q_max", 1.0),
])
def test_name_suffix_dispatch(name, value):
    arr = mx.nd.full((3,), 7.0)
    mx.init.Uniform(0.1)(mx.init.InitDesc(name), arr)
    assert (arr.asnumpy() == value).all()
    plain = mx.nd.full((3,), 7.0)
    mx.init.Uniform(0.1)(name, plain)  # a plain name dispatches the same way
    assert (plain.asnumpy() == value).all()


def test_weight_gets_the_initializers_distribution():
    values = _filled(mx.init.Uniform(0.1), "fc1_weight", (50, 50))
    assert values.std() > 0.05 and np.abs(values).max() <= 0.1


def test_init_attribute_overrides_the_global_initializer():
    desc = mx.init.InitDesc("fc_weight", attrs={"__init__": mx.init.Constant(0.25).dumps()})
    arr = mx.nd.zeros((2, 2))
    mx.init.Xavier()(desc, arr)
    assert (arr.asnumpy() == 0.25).all()
    assert desc.global_init is not None
    # the Symbol stores the initializer's description in the variable's attributes
    var = mx.sym.Variable("special", init=mx.init.One())
    attrs = var.attr_dict()["special"]
    other = mx.nd.zeros((3,))
    mx.init.Uniform()(mx.init.InitDesc("special", attrs=attrs), other)
    assert (other.asnumpy() == 1).all()


def test_seeded_initialization_is_reproducible():
    mx.random.seed(11)
    first = _filled(mx.init.Xavier(), "w_weight", (20, 30))
    mx.random.seed(11)
    second = _filled(mx.init.Xavier(), "w_weight", (20, 30))
    np.testing.assert_array_equal(first, second)


def test_initializes_on_the_arrays_device():
    arr = mx.nd.zeros((10, 10), ctx=mx.cpu(3))
    mx.init.Normal(1.0)("w_weight", arr)
    assert arr.context == mx.cpu(3) and arr.asnumpy().std() > 0.5


@pytest.mark.parametrize("case", json.loads((FIXTURES / "mxnet_reference.json").read_text())["initializers"],
                         ids=lambda c: c["class"] + ("-" + "-".join(map(str, c["kwargs"].values())) if c["kwargs"]
                                                     else ""))
def test_dumps_matches_mxnet(case):
    init = getattr(mx.init, case["class"])(**case["kwargs"])
    assert json.loads(init.dumps()) == json.loads(case["dumps"])
    rebuilt = mx.init.create(case["dumps"])
    assert rebuilt == init
    assert type(rebuilt) is type(init)


def test_create_forms():
    assert isinstance(mx.init.create("zeros"), mx.init.Zero)
    assert isinstance(mx.init.create("ONES"), mx.init.One)
    assert mx.init.create("xavier", magnitude=2) == mx.init.Xavier(magnitude=2)
    assert mx.init.create({"name": "normal", "sigma": 0.5}) == mx.init.Normal(0.5)
    same = mx.init.Uniform()
    assert mx.init.create(same) is same
    assert json.loads(mx.init.Constant(np.array([1.0, 2.0])).dumps()) == ["constant", {"value": [1.0, 2.0]}]
    assert mx.initializer is mx.init


def test_mixed_uses_the_first_matching_pattern():
    init = mx.init.Mixed(["fc2_.*", ".*"], [mx.init.Constant(2.0), "one"])
    second, first, bias = mx.nd.zeros((2,)), mx.nd.zeros((2,)), mx.nd.ones((2,))
    init("fc2_weight", second)
    init("fc1_weight", first)
    init("fc2_bias", bias)  # each initializer still dispatches on the suffix
    assert (second.asnumpy() == 2).all() and (first.asnumpy() == 1).all() and (bias.asnumpy() == 0).all()
    with pytest.raises(TrainingValueError, match=r"'fc_weight' matched none of the patterns \['bias'\]"):
        mx.init.Mixed(["bias"], [mx.init.Zero()])("fc_weight", first)
    with pytest.raises(TrainingValueError, match="one initializer per pattern"):
        mx.init.Mixed(["a", "b"], [mx.init.Zero()])


def test_load_from_dict_and_file(tmp_path):
    saved = {"arg:fc_weight": mx.nd.array([[1.0, 2.0]]), "aux:bn_moving_mean": mx.nd.array([3.0])}
    path = str(tmp_path / "net-0001.params")
    mx.nd.save(path, saved)
    for source in (saved, path):
        init = mx.init.Load(source, default_init=mx.init.Constant(9.0))
        weight, mean, other = mx.nd.zeros((1, 2)), mx.nd.zeros((1,)), mx.nd.zeros((2,))
        init("fc_weight", weight)
        init("bn_moving_mean", mean)
        init("new_weight", other)
        np.testing.assert_array_equal(weight.asnumpy(), [[1, 2]])
        np.testing.assert_array_equal(mean.asnumpy(), [3])
        np.testing.assert_array_equal(other.asnumpy(), [9, 9])
    with pytest.raises(ShapeError, match=r"'fc_weight'.*target has shape \(2, 2\), the loaded array \(1, 2\)"):
        mx.init.Load(saved)("fc_weight", mx.nd.zeros((2, 2)))
    with pytest.raises(TrainingValueError, match="'missing_weight': it is not in the loaded parameters"):
        mx.init.Load(saved)("missing_weight", mx.nd.zeros((2,)))
    with pytest.raises(TrainingValueError, match="file name or a dict"):
        mx.init.Load([1, 2])


def test_register_custom_initializer_with_alias():
    @mx.init.register
    @mx.init.alias("point_one")
    class PointOne(mx.init.Initializer):
        def _init_weight(self, _, arr):
            arr[:] = 0.1

    try:
        arr = mx.nd.zeros((2,))
        mx.init.create("point_one")("w_weight", arr)
        np.testing.assert_allclose(arr.asnumpy(), [0.1, 0.1])
        assert json.loads(PointOne().dumps()) == ["pointone", {}]
    finally:
        from mxkit.train.initializer.base import _INITIALIZERS

        del _INITIALIZERS["pointone"], _INITIALIZERS["point_one"]


def test_bad_inputs_are_clear_errors():
    with pytest.raises(UnknownNameError, match=r"unknown initializer 'xavir'.*did you mean xavier.*choices"):
        mx.init.create("xavir")
    with pytest.raises(TrainingValueError, match="rnd_type='normal'; expected 'uniform' or 'gaussian'"):
        mx.init.Xavier(rnd_type="normal")
    with pytest.raises(TrainingValueError, match="factor_type='mean'"):
        mx.init.Xavier(factor_type="mean")
    with pytest.raises(ShapeError, match=r"vector 'fc_weight' of shape \(5,\)"):
        mx.init.Xavier()("fc_weight", mx.nd.zeros((5,)))
    with pytest.raises(TrainingValueError, match="unknown initialization pattern for 'data'"):
        mx.init.Uniform()("data", mx.nd.zeros((2,)))
    with pytest.raises(TrainingValueError, match="fills an NDArray"):
        mx.init.Uniform()("fc_weight", np.zeros(2))
    with pytest.raises(TrainingValueError, match="scale=-1"):
        mx.init.Uniform(-1)
    with pytest.raises(TrainingValueError, match="rand_type='gaussian'"):
        mx.init.Orthogonal(rand_type="gaussian")
    with pytest.raises(TrainingValueError, match="bad initializer description"):
        mx.init.create('["xavier"]')
    with pytest.raises(TrainingValueError, match="only subclasses of Initializer"):
        mx.init.register(dict)


def test_constant_dumps_arrays_as_lists_and_keeps_that_description():
    for value in (mx.nd.ones((2, 3)), np.ones((2, 3))):
        init = mx.init.Constant(value)
        assert json.loads(init.dumps()) == ["constant", {"value": [[1.0] * 3] * 2}]
        assert init.dumps() == json.dumps(["constant", init._kwargs])  # MXNet's Constant keeps the list form
        weight = mx.nd.zeros((2, 3))
        init(mx.init.InitDesc("w_weight"), weight)
        np.testing.assert_array_equal(weight.asnumpy(), np.ones((2, 3)))
    assert mx.init.Constant(1).dumps() == '["constant", {"value": 1}]'
