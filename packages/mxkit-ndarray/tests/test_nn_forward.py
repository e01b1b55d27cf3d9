"""Forward passes of the neural-network operators against direct numpy formulations.

Convolution and pooling are checked with hypothesis over random geometries against
loop-over-windows references (tiny sizes), deconvolution as the adjoint of convolution,
and the rest against their defining formulas.
"""

from __future__ import annotations

import itertools
import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures", "nn"))

import nn_harness as harness
from mxkit.ndarray.registry import get_registry

get_registry()


def direct_convolution(x, w, b, stride, pad, dilate, groups):
    """Convolution by explicit loops over output positions (the definition)."""
    n, c = x.shape[:2]
    f = w.shape[0]
    kernel = w.shape[2:]
    padded = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    out_spatial = [(s + 2 * p - d * (k - 1) - 1) // step + 1
                   for s, p, d, k, step in zip(x.shape[2:], pad, dilate, kernel, stride)]
    out = np.zeros((n, f, *out_spatial))
    per_group_in, per_group_out = c // groups, f // groups
    for position in itertools.product(*(range(o) for o in out_spatial)):
        window = tuple(slice(o * step, o * step + d * (k - 1) + 1, d)
                       for o, step, d, k in zip(position, stride, dilate, kernel))
        patch = padded[(slice(None), slice(None), *window)]
        for g in range(groups):
            block = patch[:, g * per_group_in:(g + 1) * per_group_in]
            filters = w[g * per_group_out:(g + 1) * per_group_out]
            out[(slice(None), slice(g * per_group_out, (g + 1) * per_group_out), *position)] = \
                np.tensordot(block, filters, axes=(list(range(1, block.ndim)), list(range(1, filters.ndim))))
    if b is not None:
        out += b.reshape((1, -1) + (1,) * len(kernel))
    return out


@st.composite
def conv_cases(draw):
    ndim = draw(st.sampled_from([1, 2]))
    groups = draw(st.sampled_from([1, 2, 3]))
    per_group = draw(st.integers(1, 2))
    filters = groups * draw(st.integers(1, 2))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    stride = tuple(draw(st.integers(1, 2)) for _ in range(ndim))
    dilate = tuple(draw(st.integers(1, 2)) for _ in range(ndim))
    pad = tuple(draw(st.integers(0, 2)) for _ in range(ndim))
    spatial = tuple(max(d * (k - 1) + 1 - 2 * p, 1) + draw(st.integers(0, 4))
                    for k, d, p in zip(kernel, dilate, pad))
    no_bias = draw(st.booleans())
    seed = draw(st.integers(0, 1000))
    return ndim, groups, per_group, filters, kernel, stride, dilate, pad, spatial, no_bias, seed


@settings(max_examples=40, deadline=None)
@given(conv_cases())
def test_convolution_matches_the_direct_definition(case):
    _, groups, per_group, filters, kernel, stride, dilate, pad, spatial, no_bias, seed = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, groups * per_group, *spatial))
    w = rng.standard_normal((filters, per_group, *kernel))
    b = None if no_bias else rng.standard_normal(filters)
    inputs = [x, w] if no_bias else [x, w, b]
    params = dict(kernel=kernel, stride=stride, dilate=dilate, pad=pad, num_filter=filters, num_group=groups,
                  no_bias=no_bias)
    out = harness.run("Convolution", inputs, **params)[0]
    np.testing.assert_allclose(out, direct_convolution(x, w, b, stride, pad, dilate, groups), rtol=1e-10,
                               atol=1e-10)


@settings(max_examples=25, deadline=None)
@given(conv_cases())
def test_deconvolution_is_the_adjoint_of_convolution(case):
    _, groups, per_group, filters, kernel, stride, dilate, pad, spatial, _, seed = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, groups * per_group, *spatial))
    w = rng.standard_normal((filters, per_group, *kernel))
    geometry = dict(kernel=kernel, stride=stride, dilate=dilate, pad=pad, num_group=groups)
    y = harness.run("Convolution", [x, w], num_filter=filters, no_bias=True, **geometry)[0]
    # the deconvolution of y's shape, with adj picking the conv input's size back out
    adj = tuple((s + 2 * p - d * (k - 1) - 1) % step for s, p, d, k, step in zip(spatial, pad, dilate, kernel, stride))
    probe = rng.standard_normal(y.shape)
    back = harness.run("Deconvolution", [probe, w], num_filter=groups * per_group, adj=adj, **geometry)[0]
    assert back.shape == x.shape
    # <conv(x), probe> == <x, deconv(probe)>
    np.testing.assert_allclose(np.sum(y * probe), np.sum(x * back), rtol=1e-9)


def direct_pooling(x, kernel, stride, pad, pool_type, full, include_pad):
    spatial = x.shape[2:]
    out_spatial = []
    for s, k, step, p in zip(spatial, kernel, stride, pad):
        span = s + 2 * p - k
        out_spatial.append(1 + (-(-span // step) if full else span // step))
    out = np.zeros(x.shape[:2] + tuple(out_spatial))
    for position in itertools.product(*(range(o) for o in out_spatial)):
        starts = [o * step - p for o, step, p in zip(position, stride, pad)]
        ends_padded = [min(s0 + k, size + p) for s0, k, size, p in zip(starts, kernel, spatial, pad)]
        lo = [max(s0, 0) for s0 in starts]
        hi = [min(e, size) for e, size in zip(ends_padded, spatial)]
        region = x[(slice(None), slice(None), *(slice(a, b) for a, b in zip(lo, hi)))]
        if region.size == 0:  # a window wholly past the input (full convention), as in MXNet
            value = np.finfo(x.dtype).min if pool_type == "max" else 0.0
        elif pool_type == "max":
            value = region.max(axis=tuple(range(2, x.ndim)))
        else:
            value = region.sum(axis=tuple(range(2, x.ndim)))
            if pool_type == "avg":
                count = np.prod([e - s0 for s0, e in zip(starts, ends_padded)]) if include_pad else \
                    np.prod([b - a for a, b in zip(lo, hi)])
                value = value / count
        out[(slice(None), slice(None), *position)] = value
    return out


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_pooling_matches_the_direct_definition(data):
    ndim = data.draw(st.sampled_from([1, 2]))
    kernel = tuple(data.draw(st.integers(1, 3)) for _ in range(ndim))
    stride = tuple(data.draw(st.integers(1, 3)) for _ in range(ndim))
    pad = tuple(data.draw(st.integers(0, k - 1)) for k in kernel)
    spatial = tuple(k + data.draw(st.integers(0, 4)) for k in kernel)
    pool_type = data.draw(st.sampled_from(["max", "avg", "sum"]))
    full = data.draw(st.booleans())
    include_pad = data.draw(st.booleans())
    x = np.random.default_rng(data.draw(st.integers(0, 1000))).standard_normal((2, 3, *spatial))
    out = harness.run("Pooling", [x], kernel=kernel, stride=stride, pad=pad, pool_type=pool_type,
                      pooling_convention="full" if full else "valid", count_include_pad=include_pad)[0]
    expected = direct_pooling(x, kernel, stride, pad, pool_type, full, include_pad)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)


def test_pooling_window_past_the_input_gives_mxnet_values():
    # MXNet 1.9.1 (pooling_convention=full, no padding): max -> lowest float, avg and sum -> 0
    x = np.array([[[1.0, 2.0]]], dtype=np.float32)
    kw = dict(kernel=(1,), stride=(2,), pooling_convention="full")
    np.testing.assert_array_equal(harness.run("Pooling", [x], pool_type="max", **kw)[0],
                                  [[[1.0, np.finfo(np.float32).min]]])
    np.testing.assert_array_equal(harness.run("Pooling", [x], pool_type="avg", **kw)[0], [[[1.0, 0.0]]])
    np.testing.assert_array_equal(harness.run("Pooling", [x], pool_type="sum", **kw)[0], [[[1.0, 0.0]]])


def test_fully_connected_is_a_matrix_product():
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((4, 2, 3)), rng.standard_normal((5, 6)), rng.standard_normal(5)
    out = harness.run("FullyConnected", [x, w, b], num_hidden=5)[0]
    np.testing.assert_allclose(out, x.reshape(4, 6) @ w.T + b)
    out = harness.run("FullyConnected", [x, w[:, :3]], num_hidden=5, no_bias=True, flatten=False)[0]
    np.testing.assert_allclose(out, x @ w[:, :3].T)


def test_batchnorm_training_normalises_and_updates_the_moving_statistics():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 3, 4)) * 3 + 2
    gamma, beta = rng.standard_normal(3), rng.standard_normal(3)
    moving_mean, moving_var = np.zeros(3), np.ones(3)
    out, mean, inv_std = harness.run("BatchNorm", [x, gamma, beta], aux=[moving_mean, moving_var], train=True,
                                     fix_gamma=False, momentum=0.75, eps=1e-5, output_mean_var=True)
    batch_mean, batch_var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    expected = (x - batch_mean[:, None]) / np.sqrt(batch_var[:, None] + 1e-5) * gamma[:, None] + beta[:, None]
    np.testing.assert_allclose(out, expected, rtol=1e-10)
    np.testing.assert_allclose(mean, batch_mean)
    np.testing.assert_allclose(inv_std, 1 / np.sqrt(batch_var + 1e-5))
    np.testing.assert_allclose(moving_mean, 0.25 * batch_mean)
    np.testing.assert_allclose(moving_var, 0.75 + 0.25 * batch_var)
    # prediction mode uses the moving statistics and leaves them alone
    before = moving_mean.copy(), moving_var.copy()
    out = harness.run("BatchNorm", [x, gamma, beta], aux=[moving_mean, moving_var], fix_gamma=False, eps=1e-5)[0]
    np.testing.assert_allclose(out, (x - before[0][:, None]) / np.sqrt(before[1][:, None] + 1e-5) * gamma[:, None]
                               + beta[:, None], rtol=1e-10)
    np.testing.assert_array_equal(moving_mean, before[0])


def test_dropout_keeps_the_expected_fraction_scaled_and_is_deterministic_per_generator():
    x = np.ones((200, 100))
    out = harness.run("Dropout", [x], train=True, rng=np.random.default_rng(5), p=0.3)[0]
    kept = out != 0
    assert abs(kept.mean() - 0.7) < 0.02
    np.testing.assert_allclose(out[kept], 1 / 0.7)
    again = harness.run("Dropout", [x], train=True, rng=np.random.default_rng(5), p=0.3)[0]
    np.testing.assert_array_equal(out, again)
    np.testing.assert_array_equal(harness.run("Dropout", [x], train=False, p=0.3)[0], x)
    shared = harness.run("Dropout", [x[:20, :10]], train=True, p=0.5, axes=(0,))[0]
    assert np.all(shared == shared[:1])  # one mask value per column


def test_softmax_output_rows_are_distributions():
    x = np.random.default_rng(2).standard_normal((3, 2, 4))
    out = harness.run("SoftmaxOutput", [x, np.zeros(3)])[0]
    flat = np.exp(x.reshape(3, 8))
    np.testing.assert_allclose(out, (flat / flat.sum(axis=1, keepdims=True)).reshape(3, 2, 4))
    out = harness.run("SoftmaxOutput", [x, np.zeros((3, 2))], preserve_shape=True)[0]
    np.testing.assert_allclose(out, np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True))


def test_lrn_matches_the_channel_window_formula():
    x = np.random.default_rng(3).standard_normal((2, 6, 2, 2))
    out = harness.run("LRN", [x], nsize=5, alpha=0.2, beta=0.6, knorm=1.5)[0]
    expected = np.empty_like(x)
    for c in range(6):
        window = x[:, max(c - 2, 0):c + 3]
        expected[:, c] = x[:, c] / (1.5 + 0.2 / 5 * (window ** 2).sum(axis=1)) ** 0.6
    np.testing.assert_allclose(out, expected)


def test_sequence_mask_embedding_upsampling_pad_smooth_l1():
    x = np.arange(24.0).reshape(4, 3, 2)
    out = harness.run("SequenceMask", [x, np.array([1, 4, 2])], use_sequence_length=True, value=-1.0)[0]
    expected = x.copy()
    expected[1:, 0] = -1
    expected[2:, 2] = -1
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(harness.run("SequenceMask", [x])[0], x)
    weight = np.arange(12.0).reshape(4, 3)
    np.testing.assert_array_equal(harness.run("Embedding", [np.array([3, 0, 9]), weight], input_dim=4,
                                              output_dim=3)[0], weight[[3, 0, 3]])
    image = np.arange(6.0).reshape(1, 1, 2, 3)
    np.testing.assert_array_equal(harness.run("UpSampling", [image], scale=2, sample_type="nearest", num_args=1)[0],
                                  image.repeat(2, axis=2).repeat(2, axis=3))
    np.testing.assert_array_equal(harness.run("Pad", [image], mode="reflect", pad_width=(0, 0, 0, 0, 1, 1, 2, 2))[0],
                                  np.pad(image, [(0, 0), (0, 0), (1, 1), (2, 2)], mode="reflect"))
    values = np.array([-3.0, -0.2, 0.0, 0.5, 2.0])
    out = harness.run("smooth_l1", [values], scalar=2.0)[0]
    np.testing.assert_allclose(out, np.where(np.abs(values) < 0.25, 2.0 * values ** 2, np.abs(values) - 0.125))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_outputs_keep_the_input_dtype(dtype):
    x = np.ones((1, 2, 4, 4), dtype=dtype)
    w = np.ones((3, 2, 3, 3), dtype=dtype)
    assert harness.run("Convolution", [x, w], kernel=(3, 3), num_filter=3, no_bias=True)[0].dtype == dtype
    assert harness.run("Pooling", [x], kernel=(2, 2))[0].dtype == dtype


def test_three_dimensional_convolution_matches_the_direct_definition():
    rng = np.random.default_rng(4)
    x, w, b = rng.standard_normal((2, 2, 4, 5, 4)), rng.standard_normal((3, 2, 2, 3, 2)), rng.standard_normal(3)
    params = dict(kernel=(2, 3, 2), stride=(1, 2, 1), pad=(1, 1, 0), dilate=(1, 1, 2), num_filter=3)
    out = harness.run("Convolution", [x, w, b], **params)[0]
    expected = direct_convolution(x, w, b, (1, 2, 1), (1, 1, 0), (1, 1, 2), 1)
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("size, target", [(4, 8), (4, 9), (5, 7)])
def test_deconvolution_target_shape_sets_pad_and_adj(size, target):
    x, w = np.random.default_rng(5).standard_normal((1, 2, size, size)), np.ones((2, 1, 3, 3))
    out = harness.run("Deconvolution", [x, w], kernel=(3, 3), stride=(2, 2), num_filter=1,
                      target_shape=(target, target))[0]
    assert out.shape == (1, 1, target, target)
    total = 2 * (size - 1) + 3 - target
    explicit = harness.run("Deconvolution", [x, w], kernel=(3, 3), stride=(2, 2), num_filter=1,
                           pad=((total + 1) // 2,) * 2, adj=(total % 2,) * 2)[0]
    np.testing.assert_allclose(out, explicit)


def test_lp_pooling_is_the_p_norm_of_each_window():
    x = np.random.default_rng(6).standard_normal((1, 2, 4, 6))
    out = harness.run("Pooling", [x], kernel=(2, 3), stride=(2, 3), pool_type="lp", p_value=3)[0]
    windows = np.abs(x).reshape(1, 2, 2, 2, 2, 3) ** 3
    np.testing.assert_allclose(out, windows.sum(axis=(3, 5)) ** (1 / 3))


def test_softmax_output_label_smoothing_and_out_grad():
    x = np.random.default_rng(7).standard_normal((3, 4))
    label = np.array([0.0, 3.0, 1.0])
    prob = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    target = np.full((3, 4), 0.1 / 3)
    target[np.arange(3), label.astype(int)] = 0.9
    head = np.random.default_rng(8).standard_normal((3, 4))
    grad = harness.gradients("SoftmaxOutput", [x, label], [head], smooth_alpha=0.1)[0]
    np.testing.assert_allclose(grad, prob - target)
    grad = harness.gradients("SoftmaxOutput", [x, label], [head], out_grad=True)[0]
    one_hot = np.eye(4)[label.astype(int)]
    np.testing.assert_allclose(grad, (prob - one_hot) * head)


@pytest.mark.parametrize("name, inputs, params", [
    ("FullyConnected", [np.ones((4, 5)), np.arange(15.0).reshape(3, 5), np.arange(3.0)], {"num_hidden": 3}),
    ("Convolution", [np.arange(2 * 2 * 5 * 5.0).reshape(2, 2, 5, 5), np.ones((3, 2, 3, 3)), np.arange(3.0)],
     {"kernel": (3, 3), "num_filter": 3}),
    ("Pooling", [np.arange(2 * 2 * 4 * 4.0).reshape(2, 2, 4, 4)], {"kernel": (2, 2), "stride": (2, 2)}),
    ("BatchNorm", [np.arange(24.0).reshape(4, 3, 2), np.ones(3), np.zeros(3)], {}),
])
def test_kernels_write_into_non_contiguous_outputs(name, inputs, params):
    # an executor may hand a kernel a strided view as its output
    op = harness.lookup(name)
    typed = op.parse_params(params)
    expected = harness.run(name, inputs, aux=[np.zeros(3), np.ones(3)] if name == "BatchNorm" else (), **params)[0]
    out = np.zeros(expected.shape[::-1]).T
    aux = [np.zeros(3), np.ones(3)] if name == "BatchNorm" else []
    op.kernel_for("numpy")(np, list(inputs) + aux, [out], typed)
    np.testing.assert_allclose(out, expected)


def test_per_sample_normalisations_match_their_definitions():
    rng = np.random.default_rng(3)
    x = rng.uniform(-2, 2, (2, 6, 3, 2))
    gamma6, beta6 = rng.uniform(0.5, 1.5, 6), rng.uniform(-1, 1, 6)
    per_channel = (1, 6, 1, 1)
    # InstanceNorm: every (sample, channel) over its spatial positions
    mean, var = x.mean(axis=(2, 3), keepdims=True), x.var(axis=(2, 3), keepdims=True)
    expected = (x - mean) / np.sqrt(var + 1e-3) * gamma6.reshape(per_channel) + beta6.reshape(per_channel)
    np.testing.assert_allclose(harness.run("InstanceNorm", [x, gamma6, beta6])[0], expected, rtol=1e-10)
    # LayerNorm over the channel axis, with the mean and std outputs
    mean, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
    out, got_mean, got_std = harness.run("LayerNorm", [x, gamma6, beta6], axis=1, eps=1e-4, output_mean_var=True)
    np.testing.assert_allclose(out, (x - mean) / np.sqrt(var + 1e-4) * gamma6.reshape(per_channel)
                               + beta6.reshape(per_channel), rtol=1e-10)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-12)
    np.testing.assert_allclose(got_std, np.sqrt(var + 1e-4), rtol=1e-12)
    # GroupNorm: three groups of two channels, one gamma and beta per group (MXNet 1.9.1)
    gamma3, beta3 = gamma6[:3], beta6[:3]
    groups = x.reshape(2, 3, -1)
    normalised = (groups - groups.mean(axis=2, keepdims=True)) / np.sqrt(groups.var(axis=2, keepdims=True) + 1e-5)
    expected = (normalised * gamma3.reshape(1, 3, 1) + beta3.reshape(1, 3, 1)).reshape(x.shape)
    out, got_mean, got_std = harness.run("GroupNorm", [x, gamma3, beta3], num_groups=3, output_mean_var=True)
    np.testing.assert_allclose(out, expected, rtol=1e-10)
    assert got_mean.shape == got_std.shape == (2, 3)


def test_adaptive_average_pooling_averages_mxnets_windows():
    x = np.random.default_rng(4).uniform(-1, 1, (2, 3, 7, 5))
    out = harness.run("_contrib_AdaptiveAvgPooling2D", [x], output_size=(3, 2))[0]
    expected = np.empty((2, 3, 3, 2))
    for i in range(3):
        for j in range(2):  # floor(i * size / n) to ceil((i + 1) * size / n)
            rows = slice(i * 7 // 3, -(-(i + 1) * 7 // 3))
            cols = slice(j * 5 // 2, -(-(j + 1) * 5 // 2))
            expected[:, :, i, j] = x[:, :, rows, cols].mean(axis=(2, 3))
    np.testing.assert_allclose(out, expected, rtol=1e-12)


@pytest.mark.parametrize("align_corners", [True, False])
def test_bilinear_resize_interpolates_between_the_nearest_pixels(align_corners):
    x = np.random.default_rng(5).uniform(-1, 1, (1, 2, 4, 3))
    out = harness.run("_contrib_BilinearResize2D", [x], height=6, width=5, align_corners=align_corners)[0]

    def source(i, size, n):
        if align_corners:
            return i * (size - 1) / (n - 1)
        return max((i + 0.5) * size / n - 0.5, 0.0)

    def sample(image, r, c):  # bilinear interpolation of one image at a real position
        r0, c0 = min(int(r), image.shape[0] - 1), min(int(c), image.shape[1] - 1)
        r1, c1 = min(r0 + 1, image.shape[0] - 1), min(c0 + 1, image.shape[1] - 1)
        a, b = r - r0, c - c0
        return ((1 - a) * ((1 - b) * image[r0, c0] + b * image[r0, c1])
                + a * ((1 - b) * image[r1, c0] + b * image[r1, c1]))

    for channel in range(2):
        for i in range(6):
            for j in range(5):
                expected = sample(x[0, channel], source(i, 4, 6), source(j, 3, 5))
                assert out[0, channel, i, j] == pytest.approx(expected, rel=1e-12, abs=1e-12)
    if align_corners:  # the corners are the input's corners
        np.testing.assert_allclose(out[..., [0, -1], :][..., [0, -1]], x[..., [0, -1], :][..., [0, -1]])
