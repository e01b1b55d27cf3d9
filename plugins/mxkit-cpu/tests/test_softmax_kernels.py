"""The compiled softmax, ``SoftmaxOutput`` and relu kernels against float64 numpy and the generic kernels.

The softmax rows use ``_fastmath.h``'s polynomial exp (a few float32 ulp, see test_fastmath.py), a
sequential sum and a division: within 1e-5 of the float64 softmax relative to each value, and an
absolute 1e-37 for values below float32's normal range (differences under -87 give 0). The
``SoftmaxOutput`` gradient is the generic kernel's arithmetic in its order, so it is checked to the bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from cpu_kernel_harness import is_plugin_kernel, run
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit_cpu import _elementwise, _fastmath


def _float64_softmax(x: np.ndarray) -> np.ndarray:
    wide = x.astype(np.float64)
    e = np.exp(wide - wide.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 40), cols=st.integers(1, 70), spread=st.sampled_from([0.1, 3.0, 30.0, 300.0]),
       seed=st.integers(0, 2**31 - 1))
def test_softmax_rows_match_float64_numpy(rows, cols, spread, seed):
    x = (np.random.default_rng(seed).standard_normal((rows, cols)) * spread).astype(np.float32)
    out = np.empty_like(x)
    _fastmath.softmax_rows(x, out)
    np.testing.assert_allclose(out, _float64_softmax(x), rtol=1e-5, atol=1e-37)


def test_softmax_rows_in_place_and_non_finite_rows():
    x = np.array([[1.0, 2.0, 3.0], [np.nan, 0.0, 1.0], [np.inf, 0.0, 1.0], [-np.inf, 0.0, 0.0]], np.float32)
    expected = _float64_softmax(x[:1])
    _fastmath.softmax_rows(x, x)
    np.testing.assert_allclose(x[0], expected[0], rtol=1e-6)
    assert np.isnan(x[1]).all() and np.isnan(x[2]).all()  # as numpy's softmax of such rows
    np.testing.assert_array_equal(x[3], [0.0, 0.5, 0.5])


def test_softmax_rows_refuse_mismatched_shapes():
    with pytest.raises(ValueError, match="softmax_rows"):
        _fastmath.softmax_rows(np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32))


def test_the_softmax_kernels_are_registered():
    for name in ("softmax", "SoftmaxOutput", "_backward_SoftmaxOutput"):
        assert is_plugin_kernel(name), name


@pytest.mark.parametrize("shape, params", [
    ((8, 10), {}),
    ((4, 3, 5), {}),                      # flattened to (4, 15)
    ((4, 3, 5), {"preserve_shape": True}),  # over the last axis
    ((4, 3, 5), {"multi_output": True}),  # the generic kernel's case
])
def test_softmax_output_forward_matches_float64(shape, params):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    label_shape = (shape[0], *shape[2:]) if params.get("multi_output") else \
        shape[:-1] if params.get("preserve_shape") else (shape[0],)
    label = rng.integers(0, 3, label_shape).astype(np.float32)
    ours = run("SoftmaxOutput", [x, label], **params)[0]
    np.testing.assert_allclose(ours, run("SoftmaxOutput", [x, label], generic=True, **params)[0], rtol=1e-5,
                               atol=1e-37)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("params", [{}, {"normalization": "batch"}, {"grad_scale": 0.37},
                                    {"normalization": "batch", "grad_scale": 3.0},
                                    # the generic kernel's cases: results must still be its own
                                    {"normalization": "valid"}, {"use_ignore": True, "ignore_label": 2.0},
                                    {"smooth_alpha": 0.1}, {"out_grad": True}])
def test_softmax_output_gradient_equals_the_generic_kernel_to_the_bit(dtype, params):
    rng = np.random.default_rng(2)
    prob = rng.random((12, 10)).astype(dtype)
    # truncated toward zero as astype(int64) does; out of range and NaN mark no class
    label = np.array([3, 0, 9.7, -0.5, 10, 2, 7, 1, 9, -3, 4, 2.999], dtype)
    head = rng.standard_normal(prob.shape).astype(dtype)
    ours = run("_backward_SoftmaxOutput", [head, prob, label], **params)
    generic = run("_backward_SoftmaxOutput", [head, prob, label], generic=True, **params)
    np.testing.assert_array_equal(ours[0], generic[0])
    np.testing.assert_array_equal(ours[1], np.zeros_like(label))


def test_softmax_output_gradient_of_a_nan_label_marks_no_class():
    prob = np.full((2, 4), 0.25, np.float32)
    grad = np.empty_like(prob)
    _elementwise.softmax_output_grad(prob, np.array([np.nan, 1.0], np.float32), grad, 1.0)
    np.testing.assert_array_equal(grad, [[0.25] * 4, [0.25, -0.75, 0.25, 0.25]])


def test_softmax_output_gradient_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match="softmax_output_grad"):
        _elementwise.softmax_output_grad(np.zeros((3, 4), np.float32), np.zeros(2, np.float32),
                                         np.zeros((3, 4), np.float32), 1.0)


@pytest.mark.parametrize("axis, temperature", [(-1, None), (1, None), (0, None), (-1, 2.0)])
def test_softmax_operator_equals_the_generic_kernel(axis, temperature):
    x = (np.random.default_rng(3).standard_normal((6, 7)) * 5).astype(np.float32)
    params = {"axis": axis} if temperature is None else {"axis": axis, "temperature": temperature}
    np.testing.assert_allclose(run("softmax", [x], **params)[0], run("softmax", [x], generic=True, **params)[0],
                               rtol=1e-5, atol=1e-37)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_equals_numpys_maximum_to_the_bit(dtype):
    x = np.random.default_rng(4).standard_normal(1000).astype(dtype)
    x[:6] = [np.nan, -0.0, 0.0, np.inf, -np.inf, -1e-45]
    out = np.empty_like(x)
    _elementwise.relu(x, out)
    expected = np.maximum(x, 0)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(expected))  # -0.0 becomes 0, as in numpy
    strided = x.reshape(10, 100)[:, ::2]  # not contiguous: the operator's kernel takes numpy's maximum
    np.testing.assert_array_equal(run("relu", [strided])[0], np.maximum(strided, 0))
    np.testing.assert_array_equal(run("relu", [x.reshape(10, 100)])[0], expected.reshape(10, 100))
