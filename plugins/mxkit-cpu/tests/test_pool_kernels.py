"""The Cython Pooling kernels against the generic ``xp`` kernel (the reference) and a direct
loop over windows, over random geometries and conventions (hypothesis), with ties, NaN and
windows wholly in the padding."""

from __future__ import annotations

import math

import numpy as np
import pytest
from cpu_kernel_harness import direct_max_pool_gradient, direct_pooling, is_plugin_kernel, run, split_into_blocks
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit.core.errors import ShapeError
from mxkit_cpu import _pool


def test_the_plugin_registers_the_pooling_kernels():
    assert is_plugin_kernel("Pooling") and is_plugin_kernel("_backward_Pooling")


@st.composite
def pool_cases(draw):
    ndim = draw(st.sampled_from([1, 2]))
    kernel = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    pad = tuple(draw(st.integers(0, k // 2 + 1)) for k in kernel)
    spatial = tuple(max(k - 2 * p, 1) + draw(st.integers(0, 5)) for k, p in zip(kernel, pad))
    return dict(
        shape=(draw(st.integers(1, 4)), draw(st.integers(1, 3)), *spatial), kernel=kernel, pad=pad,
        stride=tuple(draw(st.integers(1, 3)) for _ in range(ndim)),
        pool_type=draw(st.sampled_from(["max", "avg", "sum"])),
        convention=draw(st.sampled_from(["valid", "full"])),
        include_pad=draw(st.sampled_from([None, True, False])), global_pool=draw(st.booleans()),
        dtype=draw(st.sampled_from([np.float32, np.float64])), seed=draw(st.integers(0, 2**16)),
        ties=draw(st.booleans()), split=draw(st.booleans()))


def _params(case):
    return dict(kernel=case["kernel"], stride=case["stride"], pad=case["pad"], pool_type=case["pool_type"],
                pooling_convention=case["convention"], count_include_pad=case["include_pad"],
                global_pool=case["global_pool"])


def _geometry(case, shape):
    """kernel, stride, pad and output size as MXNet defines them (the test's own arithmetic)."""
    spatial = shape[2:]
    if case["global_pool"]:
        return spatial, (1,) * len(spatial), (0,) * len(spatial), (1,) * len(spatial)
    rounding = math.ceil if case["convention"] == "full" else math.floor
    out = tuple(1 + rounding((s + 2 * p - k) / t) for s, p, k, t in zip(spatial, case["pad"], case["kernel"],
                                                                         case["stride"]))
    return case["kernel"], case["stride"], case["pad"], out


@settings(max_examples=80, deadline=None)
@given(pool_cases())
def test_pooling_forward_and_gradient_match_generic_and_direct(case):
    rng = np.random.default_rng(case["seed"])
    dtype = case["dtype"]
    x = rng.standard_normal(case["shape"])
    if case["ties"]:  # few distinct values: max pooling must pick the first maximal cell
        x = np.round(x)
    x = x.astype(dtype)
    params = _params(case)
    with split_into_blocks(3 if case["split"] else 1):
        out = run("Pooling", [x], **params)[0]
        out_grad = rng.standard_normal(out.shape).astype(dtype)
        grad = run("_backward_Pooling", [out_grad, x, out], **params)[0]
    reference = run("Pooling", [x], generic=True, **params)[0]
    tolerance = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    if case["pool_type"] == "max":
        np.testing.assert_array_equal(out, reference)
    else:
        np.testing.assert_allclose(out, reference, **tolerance)
    kernel, stride, pad, out_spatial = _geometry(case, x.shape)
    assert out.shape[2:] == out_spatial
    include_pad = case["include_pad"] is not False
    np.testing.assert_allclose(out, direct_pooling(x, case["pool_type"], kernel, stride, pad, out_spatial,
                                                   include_pad), **tolerance)
    np.testing.assert_allclose(grad, run("_backward_Pooling", [out_grad, x, out], generic=True, **params)[0],
                               **tolerance)
    if case["pool_type"] == "max":
        np.testing.assert_allclose(grad, direct_max_pool_gradient(out_grad, x, out, kernel, stride, pad), **tolerance)


def test_max_pooling_gradient_goes_to_the_first_of_tied_cells():
    x = np.array([[[[1.0, 3.0], [3.0, 3.0]]]], dtype=np.float32)
    params = dict(kernel=(2, 2), pool_type="max")
    out = run("Pooling", [x], **params)[0]
    grad = run("_backward_Pooling", [np.ones_like(out), x, out], **params)[0]
    np.testing.assert_array_equal(grad, [[[[0, 1], [0, 0]]]])


def test_max_pooling_propagates_nan_and_keeps_minus_infinity():
    x = np.array([[[[1.0, np.nan, -np.inf, -np.inf], [2.0, 0.0, -np.inf, -np.inf]]]], dtype=np.float64)
    out = run("Pooling", [x], kernel=(2, 2), stride=(2, 2), pool_type="max")[0]
    assert np.isnan(out[0, 0, 0, 0]) and out[0, 0, 0, 1] == -np.inf
    np.testing.assert_array_equal(out, run("Pooling", [x], generic=True, kernel=(2, 2), stride=(2, 2),
                                           pool_type="max")[0])


def test_a_full_convention_window_wholly_in_the_padding_reads_the_lowest_value_and_gets_no_gradient():
    x = np.arange(1, 5, dtype=np.float32).reshape(1, 1, 2, 2)
    # windows of one cell starting at -1, 1 and 3: the first in the padding, the last past it
    params = dict(kernel=(1, 1), stride=(2, 2), pad=(1, 1), pool_type="max", pooling_convention="full")
    out = run("Pooling", [x], **params)[0]
    reference = run("Pooling", [x], generic=True, **params)[0]
    np.testing.assert_array_equal(out, reference)
    lowest = np.finfo(np.float32).min
    np.testing.assert_array_equal(out[0, 0], [[lowest, lowest, lowest], [lowest, 4, lowest],
                                              [lowest, lowest, lowest]])
    grad = run("_backward_Pooling", [np.ones_like(out), x, out], **params)[0]
    np.testing.assert_array_equal(grad[0, 0], [[0, 0], [0, 1]])
    np.testing.assert_array_equal(grad, run("_backward_Pooling", [np.ones_like(out), x, out], generic=True,
                                            **params)[0])


@pytest.mark.parametrize("params", [
    dict(kernel=(2, 2), pool_type="lp", p_value=2),
    dict(kernel=(2, 2, 2), pool_type="max"),
])
def test_lp_pooling_and_3d_windows_fall_back_to_the_generic_kernel(params):
    x = np.random.default_rng(3).standard_normal((1, 2, 4, 4, 4)[:2 + len(params["kernel"])])
    out = run("Pooling", [x], **params)[0]
    np.testing.assert_array_equal(out, run("Pooling", [x], generic=True, **params)[0])


@pytest.mark.parametrize("dtype", [np.float16, np.int32])
def test_other_dtypes_fall_back_to_the_generic_kernel(dtype):
    x = (np.random.default_rng(4).standard_normal((2, 2, 5, 5)) * 4).astype(dtype)
    for pool_type in ("max", "avg"):
        params = dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type=pool_type)
        out = run("Pooling", [x], **params)[0]
        np.testing.assert_array_equal(out, run("Pooling", [x], generic=True, **params)[0])


def test_bad_pooling_geometry_is_a_shape_error_naming_the_value():
    with pytest.raises(ShapeError, match=r"kernel=\(7, 7\) is larger than the padded input"):
        run("Pooling", [np.zeros((1, 1, 4, 4), np.float32)], kernel=(7, 7))
    with pytest.raises(ShapeError, match=r"stride=\(0, 1\) must be positive"):
        run("Pooling", [np.zeros((1, 1, 4, 4), np.float32)], kernel=(2, 2), stride=(0, 1))


def test_the_cython_pooling_rejects_a_bad_call():
    data = np.zeros((2, 1, 4, 4), np.float32)
    out = np.zeros((2, 1, 2, 2), np.float32)
    with pytest.raises(ValueError, match="pool_type='lp' is not handled here"):
        _pool.pool_forward(data, out, 0, 2, "lp", 2, 2, 2, 2, 0, 0, True)
    with pytest.raises(ValueError, match=r"samples \[0, 3\) are outside the batch of 2"):
        _pool.pool_forward(data, out, 0, 3, "max", 2, 2, 2, 2, 0, 0, True)
    with pytest.raises(ValueError, match="differ in batch or channels"):
        _pool.pool_forward(data, np.zeros((1, 1, 2, 2), np.float32), 0, 1, "max", 2, 2, 2, 2, 0, 0, True)
    with pytest.raises(ValueError, match="out_grad"):
        _pool.pool_backward(np.zeros((2, 1, 3, 3), np.float32), data, out, np.zeros_like(data), 0, 2, "max",
                            2, 2, 2, 2, 0, 0, True)
