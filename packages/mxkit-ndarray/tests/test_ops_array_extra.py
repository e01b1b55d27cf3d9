"""Forward results against numpy (and scipy where installed) and gradients against central finite
differences for MXNet's array operators added for ported code: depth_to_space, space_to_depth,
diag, slice_like, split_v2, batch_take, index_copy, ravel/unravel, moments, histogram,
index_array, shape/size_array, all_finite, allclose, softmin, softmax with use_length,
softmax_cross_entropy, hard_sigmoid, quadratic, div_sqrt_dim, gamma, gammaln and erfinv."""

from __future__ import annotations

import math
import os
import sys

import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit.core.errors import MXKitError

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures", "nn"))

import nn_harness as harness


def rand(*shape, seed=0, scale=1.0):
    return np.random.default_rng(seed + sum(shape)).uniform(-1, 1, shape) * scale


GRADIENT_CASES = [
    ("depth_to_space", [rand(2, 8, 2, 3)], {"block_size": 2}),
    ("space_to_depth", [rand(1, 2, 4, 6)], {"block_size": 2}),
    ("diag", [rand(4)], {"k": -1}),
    ("diag", [rand(3, 4, 2)], {"k": 1, "axis1": 0, "axis2": 2}),
    ("slice_like", [rand(4, 5, 3), rand(2, 5, 2)], {"axes": (0, -1)}),
    ("_split_v2", [rand(3, 6)], {"indices": (0, 2, 5), "axis": 1}),
    ("batch_take", [rand(4, 5), np.array([0, 4, 2, 2])], {}),
    ("_contrib_index_copy", [rand(5, 3), np.array([0, 4, 2]), rand(3, 3, seed=1)], {}),
    ("moments", [rand(3, 4, 2)], {"axes": (0, 2), "keepdims": True}),
    ("softmin", [rand(3, 5)], {"axis": 0, "temperature": 2.0}),
    ("softmax", [rand(2, 4, 3), np.array([[1, 4, 2], [3, 3, 1]])], {"use_length": True, "axis": 1}),
    ("softmax_cross_entropy", [rand(4, 5, scale=3), np.array([0, 4, 2, 1])], {}),
    ("hard_sigmoid", [rand(4, 6, scale=3) + 0.013], {"alpha": 0.3, "beta": 0.4}),
    ("_contrib_quadratic", [rand(3, 4)], {"a": 0.7, "b": -1.3, "c": 2.0}),
    ("_contrib_div_sqrt_dim", [rand(2, 3, 4)], {}),
    ("gamma", [np.abs(rand(3, 4)) * 3 + 0.2], {}),
    ("gammaln", [np.abs(rand(3, 4)) * 5 + 0.1], {}),
    ("erfinv", [rand(3, 4) * 0.95], {}),
]


@pytest.mark.parametrize("name, inputs, params", GRADIENT_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(GRADIENT_CASES)])
def test_gradient_matches_finite_differences(name, inputs, params):
    wrt = [0] if name in ("slice_like", "batch_take", "softmax", "softmax_cross_entropy") else \
        [0, 2] if name == "_contrib_index_copy" else None
    harness.check_gradient(name, inputs, wrt=wrt, rtol=1e-5, atol=1e-6, **params)


def test_moments_variance_gradient_matches_finite_differences():
    x = rand(3, 4)
    head = rand(4, seed=3)
    grads = harness.gradients("moments", [x], [np.zeros(4), head], axes=(0,))
    numeric = harness.numeric_gradient(lambda xs: xs[0].var(axis=0), [x], 0, head)
    np.testing.assert_allclose(grads[0], numeric, rtol=1e-6, atol=1e-8)


def test_layout_and_picking_match_numpy():
    x = rand(2, 8, 2, 3)
    up = harness.run("depth_to_space", [x], block_size=2)[0]
    # out[n, c, h*b + b1, w*b + b2] = x[n, (b1*b + b2)*C' + c, h, w] with C' = 2 output channels
    np.testing.assert_array_equal(up[0, 1, 2, 5], x[0, (0 * 2 + 1) * 2 + 1, 1, 2])
    np.testing.assert_array_equal(harness.run("space_to_depth", [up], block_size=2)[0], x)
    m = rand(4, 5)
    for k in (-2, 0, 3):
        np.testing.assert_array_equal(harness.run("diag", [m], k=k)[0], np.diag(m, k))
    v = rand(3)
    np.testing.assert_array_equal(harness.run("diag", [v], k=1)[0], np.diag(v, 1))
    parts = harness.run("_split_v2", [m], indices=(0, 1, 3), axis=1)
    for got, want in zip(parts, np.split(m, [1, 3], axis=1)):
        np.testing.assert_array_equal(got, want)
    idx = np.array([[3, 0, 4], [1, 2, 0]])
    flat = harness.run("ravel_multi_index", [idx], shape=(5, 3))[0]
    np.testing.assert_array_equal(flat, np.ravel_multi_index(idx, (5, 3)))
    np.testing.assert_array_equal(harness.run("unravel_index", [flat], shape=(-1, 3))[0], idx)
    mean, var = harness.run("moments", [m], axes=(1,))
    np.testing.assert_allclose(mean, m.mean(1))
    np.testing.assert_allclose(var, m.var(1))
    got = harness.run("_contrib_index_array", [np.ones((2, 3, 4))], axes=(2, 0))[0]
    np.testing.assert_array_equal(got, np.stack(np.indices((2, 3, 4)), -1)[..., [2, 0]])


def test_histogram_matches_numpy_for_counts_and_edges():
    x = nd.array(rand(50, scale=3))
    counts, edges = nd.histogram(x, bins=7, range=(-2.5, 2.5))
    want, want_edges = np.histogram(x.asnumpy(), 7, range=(-2.5, 2.5))
    np.testing.assert_array_equal(counts.asnumpy(), want)
    np.testing.assert_allclose(edges.asnumpy(), want_edges, rtol=1e-6)
    given = nd.array([-1.0, 0.5, 2.0, 4.5], dtype="float64")
    counts, _ = nd.histogram(x, bins=given)
    np.testing.assert_array_equal(counts.asnumpy(), np.histogram(x.asnumpy(), given.asnumpy())[0])
    # without a range, numpy's (and MXNet 1.9.1's nd.histogram's): the data's extremes, or +-0.5 around
    # a constant
    counts, edges = nd.histogram(x, bins=3)
    want, want_edges = np.histogram(x.asnumpy(), 3)
    np.testing.assert_array_equal(counts.asnumpy(), want)
    np.testing.assert_allclose(edges.asnumpy(), want_edges, rtol=1e-6)
    counts, edges = nd.histogram(nd.array([2.0, 2.0, 2.0]), bins=4)
    np.testing.assert_array_equal(counts.asnumpy(), np.histogram(np.full(3, 2.0), 4)[0])
    np.testing.assert_allclose(edges.asnumpy(), [1.5, 1.75, 2.0, 2.25, 2.5])


def test_histogram_of_a_count_without_data_to_read_needs_a_range():
    # the Symbol form has no data to take the extremes of (MXNet 1.9.1's sym.histogram refuses too)
    from mxkit.ndarray.choosers import histogram_call

    with pytest.raises(MXKitError, match="needs range"):
        histogram_call(object(), 3, None, lambda v: False)


def test_predicates_and_shape_queries():
    x = nd.array([[1.0, 2.0, 3.0]])
    assert nd.shape_array(x).asnumpy().tolist() == [1, 3] and nd.shape_array(x).dtype == np.int64
    assert nd.size_array(x).asnumpy().tolist() == [3]
    assert nd.all_finite(x).asnumpy().tolist() == [1.0]
    assert nd.multi_all_finite(x, nd.array([np.inf]), num_arrays=2).asnumpy().tolist() == [0.0]
    assert nd.contrib.allclose(x, x + 1e-9).asnumpy().tolist() == [1]
    assert nd.contrib.allclose(x, x + 1e-3).asnumpy().tolist() == [0]


def test_softmax_dtype_and_length_semantics():
    x = rand(3, 5)
    half = nd.array(x, dtype="float16")
    out = nd.softmax(half, dtype="float32")
    assert out.dtype == np.float32
    e = np.exp(x.astype(np.float16).astype(np.float64))
    np.testing.assert_allclose(out.asnumpy(), e / e.sum(-1, keepdims=True), rtol=1e-6)
    masked = nd.softmax(nd.array(x), nd.array([2, 5, 1], dtype="int32"), use_length=True).asnumpy()
    assert (masked[0, 2:] == 0).all() and masked[2, 0] == pytest.approx(1.0)
    np.testing.assert_allclose(masked.sum(-1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(nd.softmin(nd.array(x)).asnumpy(), nd.softmax(nd.array(-x)).asnumpy(), rtol=1e-6)


def test_special_functions_match_the_standard_library_and_scipy():
    x = np.array([0.3, 1.0, 2.5, 7.25, 30.0, -0.5, -2.5])
    np.testing.assert_allclose(nd.gamma(nd.array(x, dtype="float64")).asnumpy(), [math.gamma(v) for v in x],
                               rtol=1e-12)
    np.testing.assert_allclose(nd.gammaln(nd.array(x, dtype="float64")).asnumpy(), [math.lgamma(v) for v in x],
                               rtol=1e-12)
    y = np.array([-0.999, -0.5, 0.0, 0.25, 0.9, 0.999999])
    back = nd.erfinv(nd.array(y, dtype="float64")).asnumpy()
    np.testing.assert_allclose([math.erf(v) for v in back], y, rtol=1e-13, atol=1e-15)
    special = pytest.importorskip("scipy.special")
    from mxkit.ndarray.ops.elementwise_extra import digamma

    np.testing.assert_allclose(digamma(x), special.psi(x), rtol=1e-12)


@pytest.mark.parametrize("call, message", [
    (lambda: nd.depth_to_space(nd.ones((1, 3, 2, 2)), block_size=2), "not divisible"),
    (lambda: nd.space_to_depth(nd.ones((1, 1, 3, 2)), block_size=2), "divisible by block_size"),
    (lambda: nd.diag(nd.ones((2, 2)), k=3), "outside"),
    (lambda: nd.slice_like(nd.ones((2, 2)), nd.ones((3, 2))), "longer than data"),
    (lambda: nd.split_v2(nd.ones((2, 5)), 2, axis=1), "equal parts"),
    (lambda: nd.batch_take(nd.ones((2, 3)), nd.ones((3,))), r"indices \(N,\)"),
    (lambda: nd.contrib.index_copy(nd.ones((3, 2)), nd.array([5]), nd.ones((1, 2))).asnumpy(), r"\[0, 3\)"),
    (lambda: nd.softmax_cross_entropy(nd.ones((2, 3)), nd.ones((3,))), r"label \(batch,\)"),
])
def test_bad_inputs_fail_with_a_clear_error(call, message):
    with pytest.raises(MXKitError, match=message):
        call()


def test_im2col_gives_convolution_columns_and_col2im_is_its_adjoint():
    rng = np.random.default_rng(5)
    x, w = rng.normal(size=(2, 3, 7, 6)), rng.normal(size=(4, 3, 3, 3))
    window = {"kernel": (3, 3), "stride": (2, 1), "dilate": (1, 2), "pad": (1, 1)}
    cols = harness.run("im2col", [x], **window)[0]
    conv = harness.run("Convolution", [x, w], num_filter=4, no_bias=True, **window)[0]
    np.testing.assert_allclose((w.reshape(4, -1) @ cols).reshape(conv.shape), conv, rtol=1e-10, atol=1e-12)
    y = rng.normal(size=cols.shape)
    back = harness.run("col2im", [y], output_size=(7, 6), **window)[0]
    # adjoint: <im2col(x), y> = <x, col2im(y)>
    assert np.sum(cols * y) == pytest.approx(np.sum(x * back), rel=1e-12)
    harness.check_gradient("im2col", [rng.normal(size=(1, 2, 4, 4))], kernel=(2, 2), pad=(1, 1))
    harness.check_gradient("col2im", [rng.normal(size=(1, 8, 25))], output_size=(4, 4), kernel=(2, 2), pad=(1, 1))
    with pytest.raises(MXKitError, match="does not fit"):
        nd.im2col(nd.ones((1, 1, 2, 2)), kernel=(3, 3))
