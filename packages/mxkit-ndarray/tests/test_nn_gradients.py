"""Gradients of the neural-network operators against central finite differences in float64.

Each case runs the forward kernel, the registered gradient function (through the backward
operators, on numpy) and compares with the finite-difference gradient of
``sum(output * head)`` for a random head.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures", "nn"))

import nn_harness as harness
from mxkit.ndarray.registry import get_registry

get_registry()


def rand(*shape, seed=0, scale=1.0):
    return np.random.default_rng(seed + sum(shape)).uniform(-1, 1, shape) * scale


CASES = [
    ("FullyConnected", [rand(3, 2, 2), rand(4, 4, seed=1), rand(4, seed=2)], {"num_hidden": 4}),
    ("FullyConnected", [rand(2, 3, 5), rand(2, 5, seed=1)], {"num_hidden": 2, "no_bias": True, "flatten": False}),
    ("Convolution", [rand(2, 2, 5, 6), rand(3, 2, 3, 2, seed=1), rand(3, seed=2)],
     {"kernel": (3, 2), "num_filter": 3, "stride": (2, 1), "pad": (1, 1), "dilate": (1, 2)}),
    ("Convolution", [rand(1, 4, 5, 5), rand(4, 2, 3, 3, seed=1)],
     {"kernel": (3, 3), "num_filter": 4, "num_group": 2, "no_bias": True}),
    ("Convolution", [rand(2, 3, 6), rand(3, 1, 3, seed=1), rand(3, seed=2)],
     {"kernel": (3,), "num_filter": 3, "num_group": 3, "pad": (1,)}),
    ("Deconvolution", [rand(1, 2, 3, 3), rand(2, 3, 3, 3, seed=1), rand(3, seed=2)],
     {"kernel": (3, 3), "num_filter": 3, "stride": (2, 2), "pad": (1, 1), "adj": (1, 1), "no_bias": False}),
    ("Deconvolution", [rand(1, 4, 3), rand(4, 1, 2, seed=1)],
     {"kernel": (2,), "num_filter": 2, "num_group": 2, "stride": (2,), "dilate": (2,)}),
    ("Pooling", [rand(2, 2, 5, 5)], {"kernel": (2, 2), "stride": (2, 2), "pool_type": "max",
                                      "pooling_convention": "full"}),
    ("Pooling", [rand(1, 2, 5, 4)], {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "avg"}),
    ("Pooling", [rand(1, 2, 5, 4)], {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "avg",
                                      "count_include_pad": False, "pooling_convention": "full"}),
    ("Pooling", [rand(1, 2, 4, 5)], {"kernel": (2, 3), "pool_type": "sum"}),
    ("Pooling", [rand(1, 2, 4, 4)], {"kernel": (2, 2), "stride": (2, 2), "pool_type": "lp", "p_value": 2}),
    ("Pooling", [rand(2, 3, 7)], {"kernel": (3,), "global_pool": True, "pool_type": "max"}),
    ("LRN", [rand(2, 5, 2, 2, scale=2)], {"nsize": 3, "alpha": 0.1, "beta": 0.75, "knorm": 2.0}),
    ("UpSampling", [rand(1, 2, 2, 3)], {"scale": 2, "sample_type": "nearest", "num_args": 1}),
    ("UpSampling", [rand(1, 2, 2, 2), rand(1, 1, 4, 4, seed=1)],
     {"scale": 2, "sample_type": "nearest", "num_args": 2}),
    ("UpSampling", [rand(1, 2, 2, 2), rand(1, 2, 1, 1, seed=1)],
     {"scale": 2, "sample_type": "nearest", "num_args": 2, "multi_input_mode": "sum"}),
    ("Pad", [rand(1, 1, 3, 4)], {"mode": "edge", "pad_width": (0, 0, 0, 0, 2, 1, 1, 3)}),
    ("Pad", [rand(1, 2, 3, 4)], {"mode": "reflect", "pad_width": (0, 0, 0, 0, 2, 1, 1, 2)}),
    ("Pad", [rand(1, 1, 2, 2, 3)], {"mode": "constant", "pad_width": (0, 0, 0, 0, 1, 0, 0, 1, 1, 1),
                                     "constant_value": 3.0}),
    ("SequenceMask", [rand(4, 3, 2), np.array([1.0, 4.0, 2.0])], {"use_sequence_length": True, "value": 2.0}),
    ("smooth_l1", [rand(3, 4, scale=2)], {"scalar": 1.3}),
    ("Dropout", [rand(4, 5)], {"p": 0.4, "mode": "always"}),
    ("LayerNorm", [rand(3, 4, scale=2), rand(4, seed=1) + 1.5, rand(4, seed=2)], {}),
    ("LayerNorm", [rand(2, 3, 4, scale=2), rand(3, seed=1) + 1.5, rand(3, seed=2)], {"axis": 1, "eps": 1e-3}),
    ("InstanceNorm", [rand(2, 3, 2, 3, scale=2), rand(3, seed=1) + 1.5, rand(3, seed=2)], {}),
    ("GroupNorm", [rand(2, 4, 3, scale=2), rand(2, seed=1) + 1.5, rand(2, seed=2)], {"num_groups": 2}),
    ("_contrib_AdaptiveAvgPooling2D", [rand(1, 2, 5, 7)], {"output_size": (3, 4)}),
    ("_contrib_BilinearResize2D", [rand(1, 2, 3, 4)], {"height": 5, "width": 3}),
    ("_contrib_BilinearResize2D", [rand(1, 1, 4, 3)], {"height": 3, "width": 7, "align_corners": False}),
]


@pytest.mark.parametrize("name, inputs, params", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_gradient_matches_finite_differences(name, inputs, params):
    wrt = [0] if name == "SequenceMask" else None
    harness.check_gradient(name, inputs, wrt=wrt, **params)


@pytest.mark.parametrize("params", [
    {"fix_gamma": False},
    {"fix_gamma": True, "axis": -1},
    {"fix_gamma": False, "use_global_stats": True},
])
def test_batchnorm_gradient_matches_finite_differences(params):
    aux = [rand(3, seed=5) * 0.1, np.abs(rand(3, seed=6)) + 0.5]
    data = rand(4, 3, 2, scale=2) if params.get("axis") is None else rand(4, 2, 3, scale=2)
    harness.check_gradient("BatchNorm", [data, rand(3, seed=1) + 1.5, rand(3, seed=2)], aux=aux, **params)


def test_batchnorm_prediction_mode_gradient_matches_finite_differences():
    aux = [rand(3, seed=5) * 0.1, np.abs(rand(3, seed=6)) + 0.5]
    harness.check_gradient("BatchNorm", [rand(4, 3, 2), rand(3, seed=1) + 1.5, rand(3, seed=2)], aux=aux,
                           train=False, fix_gamma=False)


def test_block_grad_passes_values_and_stops_the_gradient():
    x = rand(2, 3)
    np.testing.assert_array_equal(harness.run("stop_gradient", [x])[0], x)
    np.testing.assert_array_equal(harness.gradients("BlockGrad", [x], [rand(2, 3, seed=1)])[0], 0)


def test_embedding_weight_gradient_matches_finite_differences():
    indices = np.array([[0, 2, 2], [1, 0, 3]], dtype=np.float64)
    harness.check_gradient("Embedding", [indices, rand(4, 3)], wrt=[1], input_dim=4, output_dim=3,
                           dtype="float64")


@pytest.mark.parametrize("act_type", ["leaky", "elu", "selu", "gelu", "prelu"])
def test_leaky_relu_gradient_matches_finite_differences(act_type):
    # values away from the kink at 0, where the one-sided derivatives differ
    data = rand(3, 4, scale=2)
    data = np.where(np.abs(data) < 0.05, 0.5, data)
    inputs = [data, rand(4, seed=1)] if act_type == "prelu" else [data]
    harness.check_gradient("LeakyReLU", inputs, act_type=act_type, slope=0.3)


def test_rrelu_gradient_uses_the_slopes_drawn_in_training():
    data = np.where(np.abs(rand(3, 4)) < 0.05, 0.5, rand(3, 4))
    harness.check_gradient("LeakyReLU", [data], act_type="rrelu")
    output, slopes = harness.run("LeakyReLU", [data], train=True, act_type="rrelu")
    assert np.all((slopes >= 0.125) & (slopes <= 0.334))
    np.testing.assert_allclose(output, np.where(data > 0, data, slopes * data))
    output, _ = harness.run("LeakyReLU", [data], train=False, act_type="rrelu")
    np.testing.assert_allclose(output, np.where(data > 0, data, (0.125 + 0.334) / 2 * data))


# ---- loss heads: the gradient is that of the loss they stand for ---------------------------------

def _cross_entropy(x, label, params):
    """The loss whose gradient SoftmaxOutput's backward is (default mode, normalization batch/valid/null)."""
    logp = x - x.max(axis=1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(axis=1, keepdims=True))
    picked = logp[np.arange(len(label)), label.astype(int)]
    keep = np.ones_like(picked) if not params.get("use_ignore") else (label != params["ignore_label"])
    scale = params.get("grad_scale", 1.0)
    norm = {"null": 1, "batch": len(label), "valid": max(keep.sum(), 1)}[params.get("normalization", "null")]
    return -(picked * keep).sum() * scale / norm


@pytest.mark.parametrize("params", [
    {},
    {"grad_scale": 0.5, "normalization": "batch"},
    {"use_ignore": True, "ignore_label": 1, "normalization": "valid"},
])
def test_softmax_output_gradient_is_the_cross_entropy_gradient(params):
    x = rand(5, 4, scale=2)
    label = np.array([0, 1, 3, 1, 2], dtype=np.float64)
    out_grad = rand(5, 4, seed=9)  # ignored, as in MXNet
    grads = harness.gradients("SoftmaxOutput", [x, label], [out_grad], **params)
    numeric = harness.numeric_gradient(lambda xs: np.array(_cross_entropy(xs[0], label, params)), [x], 0,
                                       np.array(1.0))
    np.testing.assert_allclose(grads[0], numeric, rtol=1e-6, atol=1e-8)
    np.testing.assert_array_equal(grads[1], 0)


def test_softmax_output_multi_output_is_per_position_cross_entropy():
    x = rand(2, 3, 4, scale=2)
    label = np.array([[0, 2, 1, 1], [2, 2, 0, 1]], dtype=np.float64)
    grads = harness.gradients("SoftmaxOutput", [x, label], [np.zeros_like(x)], multi_output=True)
    per_position = x.transpose(0, 2, 1).reshape(-1, 3)
    numeric = harness.numeric_gradient(
        lambda xs: np.array(_cross_entropy(xs[0], label.reshape(-1), {})), [per_position], 0, np.array(1.0))
    # MXNet averages over the 4 positions (unless normalization='valid'; fixtures/compat_ops checks it)
    expected = numeric.reshape(2, 4, 3).transpose(0, 2, 1) / 4
    np.testing.assert_allclose(grads[0], expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name, loss", [
    ("LinearRegressionOutput", lambda y, t: 0.5 * ((y - t) ** 2).sum()),
    ("MAERegressionOutput", lambda y, t: np.abs(y - t).sum()),
    ("LogisticRegressionOutput",
     lambda y, t: -(t * np.log(1 / (1 + np.exp(-y))) + (1 - t) * np.log(1 - 1 / (1 + np.exp(-y)))).sum()),
])
def test_regression_gradient_is_the_loss_gradient_per_output(name, loss):
    x, label = rand(4, 3, scale=2), (rand(4, 3, seed=3) > 0).astype(np.float64)
    grads = harness.gradients(name, [x, label], [rand(4, 3, seed=4)], grad_scale=2.0)
    numeric = harness.numeric_gradient(lambda xs: np.array(loss(xs[0], label)), [x], 0, np.array(1.0))
    np.testing.assert_allclose(grads[0], numeric * 2.0 / 3, rtol=1e-6, atol=1e-8)
