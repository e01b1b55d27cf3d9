"""oneDNN's Deconvolution forward, data gradient and weight gradient against the generic kernel in float64
(within the error bound of float32 sums), mxkit-cpu's kernels and finite differences, over hypothesis-drawn
shapes, strides, pads, adj, target shapes, dilations and groups."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from mxkit.core.errors import MXKitError
from mxkit.ndarray.registry import get_registry
from onednn_harness import assert_served_by_onednn, assert_within, layout, needs_onednn, run, sum_bound

pytestmark = needs_onednn
__all__ = ["layout"]  # a fixture


@st.composite
def geometries(draw):
    ndim = draw(st.sampled_from([1, 2, 2]))
    groups = draw(st.sampled_from([1, 2, 3]))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    dilate = tuple(draw(st.integers(1, 2)) for _ in range(ndim))
    pad = tuple(draw(st.integers(0, 2)) for _ in range(ndim))
    # oneDNN pads pad - adj after each axis: adj up to pad (past it, see the test of the replaced kernel)
    adj = tuple(draw(st.integers(0, min(s - 1, p))) for s, p in zip(stride, pad))
    spatial = tuple(draw(st.integers(1, 5)) for _ in range(ndim))
    target = ()
    if draw(st.booleans()):  # the output size asked for instead: pad and adj follow from it
        full = [s * (i - 1) + d * (k - 1) + 1 for s, i, d, k in zip(stride, spatial, dilate, kernel)]
        target = tuple(max(1, f - draw(st.integers(0, 3))) for f in full)
    return dict(batch=draw(st.integers(1, 3)), channels=groups * draw(st.integers(1, 3)), groups=groups,
                filters=groups * draw(st.integers(1, 3)), kernel=kernel, stride=stride, dilate=dilate, pad=pad,
                adj=adj, target_shape=target, spatial=spatial, no_bias=draw(st.booleans()),
                seed=draw(st.integers(0, 2**16)))


def _params(case):
    return dict(kernel=case["kernel"], stride=case["stride"], dilate=case["dilate"], pad=case["pad"], adj=case["adj"],
                target_shape=case["target_shape"], num_filter=case["filters"], num_group=case["groups"],
                no_bias=case["no_bias"])


def _arrays(case):
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal((case["batch"], case["channels"], *case["spatial"])).astype(np.float32)
    w = rng.standard_normal((case["channels"], case["filters"] // case["groups"], *case["kernel"])).astype(np.float32)
    b = rng.standard_normal(case["filters"]).astype(np.float32)
    return x, w, b


def _valid(case) -> bool:
    x, w, b = _arrays(case)
    op = get_registry().get("Deconvolution")
    try:
        op.infer_shape(op.parse_params(_params(case)), [x.shape, w.shape, b.shape])
    except MXKitError:
        return False
    return True


def test_the_plugin_replaces_mxkit_cpus_deconvolution_kernels():
    from mxkit_cpu import conv as cpu_conv

    for name in ("Deconvolution", "_backward_Deconvolution"):
        kernel = get_registry().get(name).kernel_for("numpy")
        assert kernel.__module__ == "mxkit_onednn.deconv", name
        assert kernel.replaced is cpu_conv.KERNELS[name], name


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(geometries())
def test_deconvolution_and_its_gradients_match_the_reference_and_mxkit_cpu(layout, case):
    assume(_valid(case))
    x, w, b = _arrays(case)
    params = _params(case)
    inputs = [x, w] if case["no_bias"] else [x, w, b]
    magnitude = run("Deconvolution", [np.abs(a) for a in inputs], "reference", **params)[0]
    # an output sums at most C/G * K products (each input channel of its group, each window position) and a bias
    terms = w[:, 0].size // case["groups"] + 1
    y = run("Deconvolution", inputs, **params)[0]
    assert_served_by_onednn("Deconvolution")
    assert_within(y, run("Deconvolution", inputs, "reference", **params)[0], sum_bound(terms, magnitude), "forward")
    assert_within(y, run("Deconvolution", inputs, "cpu", **params)[0], 2 * sum_bound(terms, magnitude),
                  "vs mxkit-cpu")

    g = np.random.default_rng(case["seed"] + 1).standard_normal(y.shape).astype(np.float32)
    grads = run("_backward_Deconvolution", [g, x, w], **params)
    assert_served_by_onednn("_backward_Deconvolution")
    reference = run("_backward_Deconvolution", [g, x, w], "reference", **params)
    magnitudes = run("_backward_Deconvolution", [np.abs(g), np.abs(x), np.abs(w)], "reference", **params)
    cpu = run("_backward_Deconvolution", [g, x, w], "cpu", **params)
    # a data gradient sums F/G * K products, a weight gradient N * input positions, a bias gradient N * output
    # positions
    counts = [w[0].size, x.size // x.shape[1], g.size // g.shape[1]]
    for name, got, want, size, other, count in zip(("data", "weight", "bias"), grads, reference, magnitudes, cpu,
                                                    counts):
        assert_within(got, want, sum_bound(count, size), f"{name} gradient")
        assert_within(got, other, 2 * sum_bound(count, size), f"{name} gradient vs mxkit-cpu")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(geometries())
def test_deconvolution_gradients_match_finite_differences_of_the_onednn_forward(layout, case):
    """Central differences of L(x, w) = <g, deconv(x, w)> along random directions; deconv is linear in each of x
    and w, so a step of 1 carries no truncation error and only float32 rounding remains."""
    assume(_valid(case))
    x, w, _ = _arrays(case)
    params = dict(_params(case), no_bias=True)
    rng = np.random.default_rng(case["seed"] + 2)
    y = run("Deconvolution", [x, w], **params)[0]
    g = rng.standard_normal(y.shape).astype(np.float32)
    data_grad, weight_grad = run("_backward_Deconvolution", [g, x, w], **params)[:2]

    def loss(xx, ww):
        return float(np.dot(g.ravel().astype(np.float64), run("Deconvolution", [xx, ww], **params)[0].ravel()))

    for direction_of, grad in (("x", data_grad), ("w", weight_grad)):
        v = rng.standard_normal(x.shape if direction_of == "x" else w.shape).astype(np.float32)
        if direction_of == "x":
            numeric = (loss(x + v, w) - loss(x - v, w)) / 2
            magnitude = np.abs(g).ravel() @ run("Deconvolution", [np.abs(x) + np.abs(v), np.abs(w)],
                                                **params)[0].ravel()
        else:
            numeric = (loss(x, w + v) - loss(x, w - v)) / 2
            magnitude = np.abs(g).ravel() @ run("Deconvolution", [np.abs(x), np.abs(w) + np.abs(v)],
                                                **params)[0].ravel()
        analytic = float(np.dot(grad.ravel().astype(np.float64), v.ravel()))
        # every output of the forward and of the gradients is a float32 sum of at most this many products
        terms = max(w[:, 0].size, w[0].size, x.size // x.shape[1], g.size // g.shape[1]) + 1
        assert abs(analytic - numeric) <= 4 * float(sum_bound(terms, magnitude)), direction_of


def test_adj_past_pad_and_float64_go_to_mxkit_cpu(onednn_only):
    # pad 0, adj 1: an output row past the full deconvolution, which oneDNN's padding cannot express
    case = dict(batch=2, channels=4, groups=2, filters=4, kernel=(3, 3), stride=(2, 2), dilate=(1, 1), pad=(0, 0),
                adj=(1, 1), target_shape=(), spatial=(3, 4), no_bias=False, seed=5)
    x, w, b = _arrays(case)
    from mxkit_onednn.program import PROGRAMS

    y = run("Deconvolution", [x, w, b], **_params(case))[0]
    assert y.shape == (2, 4, 8, 10) and len(PROGRAMS) == 0
    np.testing.assert_array_equal(y, run("Deconvolution", [x, w, b], "cpu", **_params(case))[0])
    np.testing.assert_array_equal(y[:, :, -1, :], np.broadcast_to(b[None, :, None], (2, 4, 10)))  # the bias alone
    y64 = run("Deconvolution", [x.astype(np.float64), w.astype(np.float64)], **dict(_params(case), no_bias=True))[0]
    assert y64.dtype == np.float64 and len(PROGRAMS) == 0


def test_unwanted_data_gradient_is_left_alone(onednn_only):
    case = dict(batch=2, channels=4, groups=2, filters=4, kernel=(3, 3), stride=(2, 2), dilate=(1, 1), pad=(1, 1),
                adj=(1, 0), target_shape=(), spatial=(3, 4), no_bias=False, seed=3)
    x, w, _ = _arrays(case)
    g = np.ones((2, 4, 6, 7), np.float32)
    grads = run("_backward_Deconvolution", [g, x, w], req=["null", "write", "write"], **_params(case))
    assert_served_by_onednn("_backward_Deconvolution")
    assert np.isnan(grads[0]).all()
    np.testing.assert_allclose(grads[2], np.full(4, 84.0))
