"""The Cython Convolution and Deconvolution kernels against the generic ``xp`` kernels (the reference),
direct loop-over-windows formulations and finite differences, over random geometries (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from cpu_kernel_harness import (
    cpu_kernel,
    direct_convolution,
    direct_convolution_gradients,
    is_plugin_kernel,
    run,
    split_into_blocks,
)
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from mxkit.core.errors import ShapeError
from mxkit_cpu import _conv

TOLERANCE = {np.float32: dict(rtol=2e-4, atol=2e-4), np.float64: dict(rtol=1e-10, atol=1e-10)}


def test_the_plugin_registers_the_convolution_kernels():
    for name in ("Convolution", "_backward_Convolution", "Deconvolution", "_backward_Deconvolution"):
        assert is_plugin_kernel(name), name


@st.composite
def geometries(draw):
    ndim = draw(st.sampled_from([1, 2]))
    depthwise = draw(st.booleans())
    groups = draw(st.sampled_from([1, 2, 3]))
    per_group = 1 if depthwise else draw(st.integers(1, 3))
    filters = groups * draw(st.integers(1, 2))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    dilate = tuple(draw(st.integers(1, 2)) for _ in range(ndim))
    pad = tuple(draw(st.integers(0, 2)) for _ in range(ndim))
    spatial = tuple(max(d * (k - 1) + 1 - 2 * p, 1) + draw(st.integers(0, 5)) for k, d, p in zip(kernel, dilate, pad))
    return dict(batch=draw(st.integers(1, 4)), channels=groups * per_group, groups=groups, filters=filters,
                kernel=kernel, stride=stride, dilate=dilate, pad=pad, spatial=spatial, no_bias=draw(st.booleans()),
                dtype=draw(st.sampled_from([np.float32, np.float64])), seed=draw(st.integers(0, 2**16)),
                split=draw(st.booleans()))


def _conv_params(case):
    return dict(kernel=case["kernel"], stride=case["stride"], dilate=case["dilate"], pad=case["pad"],
                num_filter=case["filters"], num_group=case["groups"], no_bias=case["no_bias"])


def _maybe_split(case):
    return split_into_blocks(3) if case["split"] else split_into_blocks(1)


@settings(max_examples=60, deadline=None)
@given(geometries())
def test_convolution_forward_and_gradients_match_generic_and_direct(case):
    rng = np.random.default_rng(case["seed"])
    dtype = case["dtype"]
    x = rng.standard_normal((case["batch"], case["channels"], *case["spatial"])).astype(dtype)
    w = rng.standard_normal((case["filters"], case["channels"] // case["groups"], *case["kernel"])).astype(dtype)
    b = rng.standard_normal(case["filters"]).astype(dtype)
    inputs = [x, w] if case["no_bias"] else [x, w, b]
    params = _conv_params(case)
    with _maybe_split(case):
        out = run("Convolution", inputs, **params)[0]
        out_grad = rng.standard_normal(out.shape).astype(dtype)
        grads = run("_backward_Convolution", [out_grad, x, w], **params)
    tolerance = TOLERANCE[dtype]
    np.testing.assert_allclose(out, run("Convolution", inputs, generic=True, **params)[0], **tolerance)
    np.testing.assert_allclose(out, direct_convolution(x, w, None if case["no_bias"] else b, case["stride"],
                                                       case["pad"], case["dilate"], case["groups"]), **tolerance)
    expected = run("_backward_Convolution", [out_grad, x, w], generic=True, **params)
    direct = direct_convolution_gradients(out_grad, x, w, case["stride"], case["pad"], case["dilate"], case["groups"])
    assert len(grads) == (2 if case["no_bias"] else 3)
    for got, want, exact in zip(grads, expected, direct):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, **tolerance)
        np.testing.assert_allclose(got, exact, **tolerance)


@settings(max_examples=40, deadline=None)
@given(geometries(), st.data())
def test_deconvolution_matches_generic_and_is_the_adjoint_of_convolution(case, data):
    rng = np.random.default_rng(case["seed"])
    dtype = case["dtype"]
    groups, channels, filters = case["groups"], case["channels"], case["filters"]
    params = _conv_params(case)
    adj = tuple(data.draw(st.integers(0, s - 1)) for s in case["stride"])
    assume(all(s * (size - 1) + d * (k - 1) + 1 - 2 * p + a > 0 for s, size, d, k, p, a in
               zip(case["stride"], case["spatial"], case["dilate"], case["kernel"], case["pad"], adj)))
    x = rng.standard_normal((case["batch"], channels, *case["spatial"])).astype(dtype)
    w = rng.standard_normal((channels, filters // groups, *case["kernel"])).astype(dtype)
    b = rng.standard_normal(filters).astype(dtype)
    inputs = [x, w] if case["no_bias"] else [x, w, b]
    tolerance = TOLERANCE[dtype]
    with _maybe_split(case):
        out = run("Deconvolution", inputs, adj=adj, **params)[0]
        out_grad = rng.standard_normal(out.shape).astype(dtype)
        grads = run("_backward_Deconvolution", [out_grad, x, w], adj=adj, **params)
    np.testing.assert_allclose(out, run("Deconvolution", inputs, generic=True, adj=adj, **params)[0], **tolerance)
    for got, want in zip(grads, run("_backward_Deconvolution", [out_grad, x, w], generic=True, adj=adj, **params)):
        np.testing.assert_allclose(got, want, **tolerance)
    # <deconv(x), y> == <x, conv(y)> with the same weights read as (C, F/G, *K): the transpose
    no_bias = dict(params, no_bias=True)
    transposed = run("Deconvolution", [x, w], adj=adj, **no_bias)[0].astype(np.float64)
    conv_params = dict(no_bias, num_filter=channels)
    convolved = run("Convolution", [out_grad, w], **conv_params)[0].astype(np.float64)
    np.testing.assert_allclose(np.vdot(transposed, out_grad), np.vdot(x.astype(np.float64), convolved),
                               rtol=1e-4 if dtype == np.float32 else 1e-9, atol=1e-3)


@pytest.mark.parametrize("kernel, stride, pad, dilate, groups", [
    ((3, 3), (2, 1), (1, 2), (1, 2), 2),
    ((4,), (3,), (2,), (2,), 3),
])
def test_convolution_gradients_match_finite_differences(kernel, stride, pad, dilate, groups):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 6, *(9,) * len(kernel)))
    w = rng.standard_normal((6, 6 // groups, *kernel))
    b = rng.standard_normal(6)
    params = dict(kernel=kernel, stride=stride, pad=pad, dilate=dilate, num_filter=6, num_group=groups)
    probe = rng.standard_normal(run("Convolution", [x, w, b], **params)[0].shape)

    def loss(x_, w_, b_):
        return float(np.vdot(run("Convolution", [x_, w_, b_], **params)[0], probe))

    grads = run("_backward_Convolution", [probe, x, w], **params)
    for which, array in enumerate((x, w, b)):
        for flat in rng.choice(array.size, size=6, replace=False):
            index = np.unravel_index(flat, array.shape)
            step = 1e-6
            plus, minus = [a.copy() for a in (x, w, b)], [a.copy() for a in (x, w, b)]
            plus[which][index] += step
            minus[which][index] -= step
            numeric = (loss(*plus) - loss(*minus)) / (2 * step)
            assert grads[which][index] == pytest.approx(numeric, rel=1e-6, abs=1e-6)


def test_the_data_gradient_is_skipped_when_nothing_reads_it():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((3, 4, 8, 8)), rng.standard_normal((5, 4, 3, 3))
    out_grad = rng.standard_normal((3, 5, 6, 6))
    grads = run("_backward_Convolution", [out_grad, x, w], req=["null", "write", "write"], kernel=(3, 3),
                num_filter=5)
    assert np.isnan(grads[0]).all()  # untouched
    expected = run("_backward_Convolution", [out_grad, x, w], generic=True, kernel=(3, 3), num_filter=5)
    np.testing.assert_allclose(grads[1], expected[1], rtol=1e-12)
    np.testing.assert_allclose(grads[2], expected[2], rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float16, np.int32])
def test_other_dtypes_and_3d_kernels_fall_back_to_the_generic_kernel(dtype):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((2, 2, 5, 5)) * 3).astype(dtype)
    w = (rng.standard_normal((3, 2, 2, 2)) * 3).astype(dtype)
    b = np.ones(3, dtype=dtype)
    got = run("Convolution", [x, w, b], kernel=(2, 2), num_filter=3)[0]
    want = run("Convolution", [x, w, b], generic=True, kernel=(2, 2), num_filter=3)[0]
    np.testing.assert_array_equal(got, want)
    x3 = rng.standard_normal((1, 2, 4, 4, 4))
    w3 = rng.standard_normal((2, 2, 2, 2, 2))
    np.testing.assert_allclose(run("Convolution", [x3, w3], kernel=(2, 2, 2), num_filter=2, no_bias=True)[0],
                               direct_convolution(x3, w3, None, (1,) * 3, (0,) * 3, (1,) * 3, 1), rtol=1e-10)


def test_a_non_contiguous_output_is_written_through_a_temporary():
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((2, 3, 6, 6)), rng.standard_normal((4, 3, 3, 3))
    from mxkit.ndarray.registry import get_registry

    op = get_registry().get("Convolution")
    params = op.parse_params(dict(kernel=(3, 3), num_filter=4, no_bias=True))
    storage = np.zeros((4, 2, 4, 4)).transpose(1, 0, 2, 3)  # (2, 4, 4, 4), not C-contiguous
    cpu_kernel("Convolution")(np, [x, w], [storage], params)
    np.testing.assert_allclose(storage, direct_convolution(x, w, None, (1, 1), (0, 0), (1, 1), 1), rtol=1e-10)


def test_bad_geometry_is_a_shape_error_naming_the_value():
    x, w = np.zeros((1, 3, 5, 5), np.float32), np.zeros((4, 3, 3, 3), np.float32)
    with pytest.raises(ShapeError, match=r"stride=\(0, 1\) must be positive"):
        run("Convolution", [x, w], kernel=(3, 3), stride=(0, 1), num_filter=4, no_bias=True)
    with pytest.raises(ShapeError, match="num_group=2"):
        run("Convolution", [x, np.zeros((4, 1, 3, 3), np.float32)], kernel=(3, 3), num_filter=4, num_group=2,
            no_bias=True)


def test_the_cython_loops_reject_buffers_of_the_wrong_shape():
    data = np.zeros((2, 3, 5, 5), np.float32)
    with pytest.raises(ValueError, match=r"column buffer has shape \(10, 18\); expected \(27, 18\)"):
        _conv.im2col(data, np.zeros((10, 18), np.float32), 0, 2, 3, 3, 1, 1, 0, 0, 1, 1, 3, 3)
    with pytest.raises(ValueError, match=r"stride \(0, 1\)"):
        _conv.col2im(np.zeros((27, 18), np.float32), data, 0, 2, 3, 3, 0, 1, 0, 0, 1, 1, 3, 3)
    with pytest.raises(ValueError, match="bias has 2 values, expected 4"):
        _conv.to_batch_major(np.zeros((4, 18), np.float32), np.zeros((2, 4, 9), np.float32), 0,
                             np.zeros(2, np.float32))
    with pytest.raises(ValueError, match=r"samples \[1, 3\) are outside the batch of 2"):
        _conv.rows_to_batch_major(np.zeros((1, 18, 4), np.float32), np.zeros((2, 4, 9), np.float32), 1)
    with pytest.raises(ValueError, match=r"out has shape \(4, 9\); expected \(4, 18\)"):
        _conv.to_channel_major(np.zeros((2, 4, 9), np.float32), np.zeros((4, 9), np.float32), 0, 2)


def test_the_data_gradient_reuses_the_column_buffer_of_the_weight_gradient():
    """The column matrix is read by the weight product before the column gradient is written, so one
    buffer serves both: a thread keeps one (rows x positions) matrix, not two (the largest scratch of a
    ResNet's backward pass, per thread)."""
    from mxkit_cpu import parallel

    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 4, 9, 9))
    w = rng.standard_normal((6, 4, 3, 3))
    out_grad = rng.standard_normal((2, 6, 9, 9))
    params = dict(kernel=(3, 3), pad=(1, 1), num_filter=6, no_bias=True)
    parallel.clear_scratch()
    with split_into_blocks(1):  # on this thread, whose scratch is inspected
        grads = run("_backward_Convolution", [out_grad, x, w], **params)
    columns = 4 * 9 * (2 * 9 * 9) * 8  # (C * K) x (N * L) float64
    out_grads = 6 * (2 * 9 * 9) * 8
    weight_parts = 1 * (4 * 9) * 6 * 8  # one block's weight gradient, kept as scratch of the calling thread
    assert parallel.scratch_bytes() == columns + out_grads + weight_parts
    want_dx, want_dw, _ = direct_convolution_gradients(out_grad, x, w, (1, 1), (1, 1), (1, 1), 1)
    np.testing.assert_allclose(grads[0], want_dx, **TOLERANCE[np.float64])
    np.testing.assert_allclose(grads[1], want_dw, **TOLERANCE[np.float64])
