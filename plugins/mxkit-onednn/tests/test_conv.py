"""oneDNN's Convolution forward, data gradient and weight gradient against the generic kernel in float64
(within the error bound of float32 sums), mxkit-cpu's kernels and finite differences, over
hypothesis-drawn shapes, strides, pads, dilations and groups."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mxkit.ndarray.registry import get_registry
from onednn_harness import assert_served_by_onednn, assert_within, layout, needs_onednn, run, sum_bound

pytestmark = needs_onednn
__all__ = ["layout"]  # a fixture


@st.composite
def geometries(draw):
    ndim = draw(st.sampled_from([1, 2, 2]))
    groups = draw(st.sampled_from([1, 2, 3]))
    per_group = draw(st.integers(1, 3))
    filters = groups * draw(st.integers(1, 3))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    dilate = tuple(draw(st.integers(1, 2)) for _ in range(ndim))
    pad = tuple(draw(st.integers(0, 2)) for _ in range(ndim))
    spatial = tuple(max(d * (k - 1) + 1 - 2 * p, 1) + draw(st.integers(0, 5)) for k, d, p in zip(kernel, dilate, pad))
    return dict(batch=draw(st.integers(1, 3)), channels=groups * per_group, groups=groups, filters=filters,
                kernel=kernel, stride=stride, dilate=dilate, pad=pad, spatial=spatial, no_bias=draw(st.booleans()),
                seed=draw(st.integers(0, 2**16)))


def _params(case):
    return dict(kernel=case["kernel"], stride=case["stride"], dilate=case["dilate"], pad=case["pad"],
                num_filter=case["filters"], num_group=case["groups"], no_bias=case["no_bias"])


def _arrays(case):
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal((case["batch"], case["channels"], *case["spatial"])).astype(np.float32)
    w = rng.standard_normal((case["filters"], case["channels"] // case["groups"], *case["kernel"])).astype(np.float32)
    b = rng.standard_normal(case["filters"]).astype(np.float32)
    return x, w, b


def test_the_plugin_replaces_mxkit_cpus_convolution_kernels():
    from mxkit_cpu import conv as cpu_conv

    for name in ("Convolution", "_backward_Convolution"):
        kernel = get_registry().get(name).kernel_for("numpy")
        assert kernel.__module__.startswith("mxkit_onednn."), name
        assert kernel.replaced is cpu_conv.KERNELS[name], name


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(geometries())
def test_convolution_and_its_gradients_match_the_reference_and_mxkit_cpu(layout, case):
    x, w, b = _arrays(case)
    params = _params(case)
    inputs = [x, w] if case["no_bias"] else [x, w, b]
    magnitude = run("Convolution", [np.abs(a) for a in inputs], "reference", **params)[0]
    terms = w[0].size + 1
    y = run("Convolution", inputs, **params)[0]
    assert_served_by_onednn("Convolution")
    assert_within(y, run("Convolution", inputs, "reference", **params)[0], sum_bound(terms, magnitude), "forward")
    assert_within(y, run("Convolution", inputs, "cpu", **params)[0], 2 * sum_bound(terms, magnitude), "vs mxkit-cpu")

    g = np.random.default_rng(case["seed"] + 1).standard_normal(y.shape).astype(np.float32)
    grads = run("_backward_Convolution", [g, x, w], **params)
    assert_served_by_onednn("_backward_Convolution")
    reference = run("_backward_Convolution", [g, x, w], "reference", **params)
    magnitudes = run("_backward_Convolution", [np.abs(g), np.abs(x), np.abs(w)], "reference", **params)
    cpu = run("_backward_Convolution", [g, x, w], "cpu", **params)
    # a data gradient sums F/G * K products, a filter gradient N * output positions, a bias gradient N * positions
    counts = [case["filters"] * w[0, 0].size, g.size // g.shape[1], g.size // g.shape[1]]
    for name, got, want, size, other, count in zip(("data", "weight", "bias"), grads, reference, magnitudes, cpu,
                                                    counts):
        assert_within(got, want, sum_bound(count, size), f"{name} gradient")
        assert_within(got, other, 2 * sum_bound(count, size), f"{name} gradient vs mxkit-cpu")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(geometries())
def test_convolution_gradients_match_finite_differences_of_the_onednn_forward(layout, case):
    """Central differences of L(x, w) = <g, conv(x, w)> along random directions; conv is linear in each of x
    and w, so a step of 1 carries no truncation error and only float32 rounding remains."""
    x, w, _ = _arrays(case)
    params = dict(_params(case), no_bias=True)
    rng = np.random.default_rng(case["seed"] + 2)
    y = run("Convolution", [x, w], **params)[0]
    g = rng.standard_normal(y.shape).astype(np.float32)
    data_grad, weight_grad = run("_backward_Convolution", [g, x, w], **params)[:2]

    def loss(xx, ww):
        return float(np.dot(g.ravel().astype(np.float64), run("Convolution", [xx, ww], **params)[0].ravel()))

    for direction_of, grad in (("x", data_grad), ("w", weight_grad)):
        v = rng.standard_normal(x.shape if direction_of == "x" else w.shape).astype(np.float32)
        if direction_of == "x":
            numeric = (loss(x + v, w) - loss(x - v, w)) / 2
            magnitude = np.abs(g).ravel() @ run("Convolution", [np.abs(x) + np.abs(v), np.abs(w)], **params)[0].ravel()
        else:
            numeric = (loss(x, w + v) - loss(x, w - v)) / 2
            magnitude = np.abs(g).ravel() @ run("Convolution", [np.abs(x), np.abs(w) + np.abs(v)], **params)[0].ravel()
        analytic = float(np.dot(grad.ravel().astype(np.float64), v.ravel()))
        # every output of the forward and of the gradient is a float32 sum of at most this many products
        terms = max(w[0].size, case["filters"] * w[0, 0].size, g.size // g.shape[1]) + 1
        assert abs(analytic - numeric) <= 4 * float(sum_bound(terms, magnitude)), direction_of


def test_unwanted_data_gradient_is_left_alone_and_float64_goes_to_mxkit_cpu(layout):
    case = dict(batch=2, channels=4, groups=2, filters=4, kernel=(3, 3), stride=(1, 1), dilate=(1, 1), pad=(1, 1),
                spatial=(5, 6), no_bias=False, seed=3)
    x, w, b = _arrays(case)
    g = np.ones((2, 4, 5, 6), np.float32)
    grads = run("_backward_Convolution", [g, x, w], req=["null", "write", "write"], **_params(case))
    assert np.isnan(grads[0]).all()
    np.testing.assert_allclose(grads[2], np.full(4, 60.0))
    y64 = run("Convolution", [x.astype(np.float64), w.astype(np.float64), b.astype(np.float64)], **_params(case))[0]
    assert y64.dtype == np.float64
    np.testing.assert_allclose(y64, run("Convolution", [x, w, b], "reference", **_params(case))[0], rtol=1e-12,
                               atol=1e-12)
