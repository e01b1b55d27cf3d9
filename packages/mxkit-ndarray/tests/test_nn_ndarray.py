"""The nn operators end to end through NDArray (``nd.<Op>`` on the engine, with autograd),
against the registry run directly on numpy."""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures", "nn"))

import mxkit.ndarray as nd
import nn_harness as harness
from mxkit.ndarray import autograd
from mxkit.ndarray import random as nd_random


def rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def test_lenet_like_stack_forward_and_backward_match_the_kernels():
    x, w1, b1 = rand(4, 1, 12, 12), rand(6, 1, 5, 5, seed=1), rand(6, seed=2)
    w2, b2 = rand(10, 6 * 4 * 4, seed=3), rand(10, seed=4)
    label = np.array([1, 3, 0, 9], dtype=np.float32)
    arrays = [nd.array(a) for a in (x, w1, b1, w2, b2)]
    for a in arrays:
        a.attach_grad()
    with autograd.record():
        conv = nd.Convolution(arrays[0], arrays[1], arrays[2], kernel=(5, 5), num_filter=6)
        act = nd.Activation(conv, act_type="relu")
        pool = nd.Pooling(act, kernel=(2, 2), stride=(2, 2), pool_type="max")
        fc = nd.FullyConnected(pool, arrays[3], arrays[4], num_hidden=10)
        out = nd.SoftmaxOutput(fc, nd.array(label))
    out.backward()

    conv_ref = harness.run("Convolution", [x, w1, b1], kernel=(5, 5), num_filter=6)[0]
    act_ref = np.maximum(conv_ref, 0)
    pool_ref = harness.run("Pooling", [act_ref], kernel=(2, 2), stride=(2, 2))[0]
    fc_ref = harness.run("FullyConnected", [pool_ref, w2, b2], num_hidden=10)[0]
    out_ref = harness.run("SoftmaxOutput", [fc_ref, label])[0]
    np.testing.assert_allclose(out.asnumpy(), out_ref, rtol=1e-5, atol=1e-6)

    fc_grad = harness.gradients("SoftmaxOutput", [fc_ref, label], [np.ones_like(out_ref)])[0]
    pool_grad, w2_grad, b2_grad = harness.gradients("FullyConnected", [pool_ref, w2, b2], [fc_grad], num_hidden=10)
    act_grad = harness.gradients("Pooling", [act_ref], [pool_grad], kernel=(2, 2), stride=(2, 2))[0]
    conv_grad = act_grad * (conv_ref > 0)
    x_grad, w1_grad, b1_grad = harness.gradients("Convolution", [x, w1, b1], [conv_grad], kernel=(5, 5),
                                                 num_filter=6)
    for array, expected in zip(arrays, (x_grad, w1_grad, b1_grad, w2_grad, b2_grad)):
        np.testing.assert_allclose(array.grad.asnumpy(), expected, rtol=1e-4, atol=1e-5)


def test_dropout_always_is_deterministic_under_mx_random_seed():
    x = nd.ones((50, 40))
    nd_random.seed(11)
    first = nd.Dropout(x, p=0.5, mode="always").asnumpy()
    nd_random.seed(11)
    second = nd.Dropout(x, p=0.5, mode="always").asnumpy()
    np.testing.assert_array_equal(first, second)
    assert set(np.unique(first)) <= {0.0, 2.0}
    assert 0.4 < (first != 0).mean() < 0.6


def test_block_grad_stops_the_gradient_through_ndarray():
    x = nd.array(rand(3, 4))
    x.attach_grad()
    with autograd.record():
        y = nd.elemwise_add(nd.BlockGrad(x), x)
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), np.ones((3, 4)))


def test_deconvolution_and_upsampling_through_ndarray():
    x, w = rand(1, 2, 3, 3), rand(2, 3, 2, 2, seed=1)
    out = nd.Deconvolution(nd.array(x), nd.array(w), kernel=(2, 2), stride=(2, 2), num_filter=3)
    np.testing.assert_allclose(out.asnumpy(), harness.run("Deconvolution", [x, w], kernel=(2, 2), stride=(2, 2),
                                                          num_filter=3)[0], rtol=1e-6)
    up = nd.UpSampling(nd.array(x), scale=3, sample_type="nearest", num_args=1)
    assert up.shape == (1, 2, 9, 9)


def test_dropout_gradient_follows_the_mask_in_training_and_passes_through_in_prediction():
    x = nd.array(rand(20, 30) + 2)  # no zero inputs
    x.attach_grad()
    with autograd.record():
        y = nd.Dropout(x, p=0.3)
    y.backward()
    kept = y.asnumpy() != 0
    assert 0.5 < kept.mean() < 0.9
    np.testing.assert_allclose(x.grad.asnumpy(), kept / 0.7, rtol=1e-6)
    with autograd.record(train_mode=False):
        y = nd.Dropout(x, p=0.3)
    y.backward()
    np.testing.assert_array_equal(y.asnumpy(), x.asnumpy())
    np.testing.assert_allclose(x.grad.asnumpy(), np.ones((20, 30)))


def test_batchnorm_through_ndarray_updates_moving_statistics_in_training():
    data = rand(8, 3, 4, seed=3) * 2 + 1
    x = nd.array(data)
    gamma, beta, moving_mean, moving_var = nd.ones((3,)), nd.zeros((3,)), nd.zeros((3,)), nd.ones((3,))
    with autograd.record():
        nd.BatchNorm(x, gamma, beta, moving_mean, moving_var, momentum=0.5)
    np.testing.assert_allclose(moving_mean.asnumpy(), 0.5 * data.mean(axis=(0, 2)), rtol=1e-5)
    np.testing.assert_allclose(moving_var.asnumpy(), 0.5 + 0.5 * data.var(axis=(0, 2)), rtol=1e-5)
    before = moving_mean.asnumpy().copy()
    nd.BatchNorm(x, gamma, beta, moving_mean, moving_var).wait_to_read()  # prediction: no update
    np.testing.assert_array_equal(moving_mean.asnumpy(), before)


def test_inputs_by_name_for_operators_whose_inputs_depend_on_parameters():
    import inspect

    import pytest
    from mxkit.core.errors import MXKitError

    x, w, b = rand(4, 5), rand(3, 5, seed=1), rand(3, seed=2)
    expected = x @ w.T + b
    by_name = nd.FullyConnected(data=nd.array(x), weight=nd.array(w), bias=nd.array(b), num_hidden=3)
    np.testing.assert_allclose(by_name.asnumpy(), expected, rtol=1e-6)
    mixed = nd.FullyConnected(nd.array(x), weight=nd.array(w), num_hidden=3, no_bias=True)
    np.testing.assert_allclose(mixed.asnumpy(), x @ w.T, rtol=1e-6)
    gamma = np.full(5, 0.25, np.float32)
    prelu = nd.LeakyReLU(data=nd.array(x), gamma=nd.array(gamma), act_type="prelu")
    np.testing.assert_allclose(prelu.asnumpy(), np.where(x > 0, x, 0.25 * x), rtol=1e-6)
    conv = nd.Convolution(data=nd.array(rand(1, 2, 4, 4)), weight=nd.array(rand(3, 2, 3, 3, seed=3)), kernel=(3, 3),
                          num_filter=3, no_bias=True)
    assert conv.shape == (1, 3, 2, 2)
    assert list(inspect.signature(nd.FullyConnected).parameters)[:3] == ["data", "weight", "bias"]
    with pytest.raises(MXKitError, match=r"takes 3 input arrays \(data, weight, bias\), got 2"):
        nd.FullyConnected(data=nd.array(x), weight=nd.array(w), num_hidden=3)


def test_contrib_operators_are_reachable_under_their_short_names():
    # MXNet's mx.nd.contrib.X is the registered operator _contrib_X
    x = np.random.default_rng(2).uniform(-1, 1, (1, 2, 5, 4))
    resized = nd.contrib.BilinearResize2D(nd.array(x), height=3, width=7, align_corners=False).asnumpy()
    np.testing.assert_allclose(resized, harness.run("_contrib_BilinearResize2D", [x], height=3, width=7,
                                                    align_corners=False)[0], rtol=1e-6)
    pooled = nd.contrib.AdaptiveAvgPooling2D(nd.array(x), output_size=1).asnumpy()
    np.testing.assert_allclose(pooled[..., 0, 0], x.mean(axis=(2, 3)), rtol=1e-6)
    assert "BilinearResize2D" in nd.contrib.__all__
