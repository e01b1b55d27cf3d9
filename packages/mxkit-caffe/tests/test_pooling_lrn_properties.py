"""Pooling's rounding and LRN's formula over random settings, converted and run against the Caffe reference."""

import os
import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # caffe_numpy_reference (importlib import mode)

import mxkit.ndarray as nd
from caffe_numpy_reference import CaffeReference
from mxkit.caffe import UnsupportedLayerError
from mxkit.caffe.convert import convert_net
from mxkit.caffe.reader import parse_prototxt


def _net(shape, layer):
    dims = " ".join(f"dim: {d}" for d in shape)
    return parse_prototxt(f'layer {{ name: "data" type: "Input" top: "data" input_param {{ shape {{ {dims} }} }} }}\n'
                          f'layer {{ name: "l" bottom: "data" top: "out" {layer} }}\n')


def _run(net, x):
    symbol = convert_net(net).symbol
    executor = symbol.bind(None, {"data": nd.array(x)}, grad_req="null")
    return executor.forward(is_train=False)[0].asnumpy()


def _caffe_pooled(size, kernel, stride, pad):
    """Caffe's PoolingLayer::Reshape, written out independently of the converter."""
    pooled = int(np.ceil((size + 2 * pad - kernel) / stride)) + 1
    if pad and (pooled - 1) * stride >= size + pad:
        pooled -= 1
    return pooled


@settings(max_examples=40, deadline=None)
@given(height=st.integers(1, 9), width=st.integers(1, 9), kernel=st.integers(1, 4), stride=st.integers(1, 4),
       pad=st.integers(0, 3), pool=st.sampled_from(["MAX", "AVE"]), seed=st.integers(0, 2**31))
def test_pooling_matches_caffe_or_is_refused(height, width, kernel, stride, pad, pool, seed):
    kernel = min(kernel, height + 2 * pad, width + 2 * pad)
    pad = min(pad, kernel - 1)  # Caffe requires pad < kernel
    net = _net((1, 2, height, width), f'type: "Pooling" pooling_param {{ pool: {pool} kernel_size: {kernel} '
                                      f'stride: {stride} pad: {pad} }}')
    x = np.random.default_rng(seed).standard_normal((1, 2, height, width)).astype(np.float32)
    full = [1 + -(-(s + 2 * pad - kernel) // stride) for s in (height, width)]  # MXNet's 'full' rounding
    caffe = [_caffe_pooled(s, kernel, stride, pad) for s in (height, width)]
    # a last window that reads no input at all: Caffe outputs -FLT_MAX or NaN there
    empty = any((n - 1) * stride - pad >= s for n, s in zip(caffe, (height, width)))
    if full != caffe or empty:
        try:
            convert_net(net)
        except UnsupportedLayerError as exc:
            assert ("Caffe pools to" if full != caffe else "lies wholly past the input") in str(exc)
            return
        raise AssertionError("a pooling Caffe computes differently was converted")
    expected = CaffeReference(net).forward({"data": x})["out"]
    np.testing.assert_allclose(_run(net, x), expected, rtol=1e-5, atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(channels=st.integers(1, 7), size=st.sampled_from([1, 3, 5, 7]), alpha=st.floats(1e-4, 2.0),
       beta=st.floats(0.1, 1.5), k=st.floats(0.5, 3.0), within=st.booleans(), seed=st.integers(0, 2**31))
def test_lrn_matches_caffe(channels, size, alpha, beta, k, within, seed):
    region = "WITHIN_CHANNEL" if within else "ACROSS_CHANNELS"
    net = _net((2, channels, 5, 4), f'type: "LRN" lrn_param {{ local_size: {size} alpha: {alpha!r} beta: {beta!r} '
                                     f'k: {k!r} norm_region: {region} }}')
    x = np.random.default_rng(seed).standard_normal((2, channels, 5, 4)).astype(np.float32)
    expected = CaffeReference(net).forward({"data": x})["out"]
    # float32 sums of at most 49 squares, then a power: a few ulp of the result
    np.testing.assert_allclose(_run(net, x), expected, rtol=1e-5, atol=1e-6)
