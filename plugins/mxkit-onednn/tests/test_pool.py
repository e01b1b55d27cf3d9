"""oneDNN's Pooling (max, average) and its gradient against the generic kernel in float64 and mxkit-cpu's
kernel, over hypothesis-drawn windows, strides, pads, conventions and global pooling."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mxkit.ndarray.registry import get_registry
from onednn_harness import assert_served_by_onednn, assert_within, layout, needs_onednn, run, sum_bound

pytestmark = needs_onednn
__all__ = ["layout"]  # a fixture


@st.composite
def cases(draw):
    ndim = draw(st.sampled_from([1, 2, 2]))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    pad = tuple(draw(st.integers(0, k - 1)) for k in kernel)
    stride = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    spatial = tuple(k + draw(st.integers(0, 5)) for k in kernel)
    return dict(shape=(draw(st.integers(1, 3)), draw(st.integers(1, 4)), *spatial),
                params=dict(kernel=kernel, stride=stride, pad=pad, pool_type=draw(st.sampled_from(["max", "avg"])),
                            pooling_convention=draw(st.sampled_from(["valid", "full"])),
                            count_include_pad=draw(st.booleans()), global_pool=draw(st.booleans())),
                seed=draw(st.integers(0, 2**16)))


def test_the_plugin_replaces_mxkit_cpus_pooling_kernels():
    from mxkit_cpu import pool as cpu_pool

    for name in ("Pooling", "_backward_Pooling"):
        kernel = get_registry().get(name).kernel_for("numpy")
        assert kernel.__module__.startswith("mxkit_onednn.") and kernel.replaced is cpu_pool.KERNELS[name], name


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cases())
def test_pooling_and_its_gradient_match_the_reference_and_mxkit_cpu(layout, case):
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal(case["shape"]).astype(np.float32)  # continuous values: no tied maxima
    params = case["params"]
    window = int(np.prod(x.shape[2:] if params["global_pool"] else params["kernel"]))
    y = run("Pooling", [x], **params)[0]
    # max pooling is exact, and its fill of windows wholly in the padding is the dtype's lowest value
    reference = run("Pooling", [x], "generic" if params["pool_type"] == "max" else "reference", **params)[0]
    bound = sum_bound(window, run("Pooling", [np.abs(x)], "reference", **params)[0])
    assert_within(y, reference, bound, "forward")
    assert_within(y, run("Pooling", [x], "cpu", **params)[0], 2 * bound, "forward vs mxkit-cpu")

    g = rng.standard_normal(y.shape).astype(np.float32)
    grad = run("_backward_Pooling", [g, x, y], **params)[0]
    want = run("_backward_Pooling", [g, x, reference.astype(np.float32)], "reference", **params)[0]
    # each input cell takes a share of every window that covers it: at most this many
    covering = window if params["global_pool"] else int(np.prod([-(-k // s) for k, s in zip(params["kernel"],
                                                                                             params["stride"])]))
    magnitude = run("_backward_Pooling", [np.abs(g), x, reference.astype(np.float32)], "reference", **params)[0]
    assert_within(grad, want, sum_bound(covering, np.abs(magnitude)), "gradient")
    cpu = run("_backward_Pooling", [g, x, y], "cpu", **params)[0]
    assert_within(grad, cpu, 2 * sum_bound(covering, np.abs(magnitude)), "gradient vs mxkit-cpu")


def test_sum_pooling_and_float64_go_to_mxkit_cpu(layout):
    x = np.arange(2 * 3 * 4 * 4, dtype=np.float32).reshape(2, 3, 4, 4)
    params = dict(kernel=(2, 2), stride=(2, 2), pool_type="sum")
    np.testing.assert_array_equal(run("Pooling", [x], **params)[0], run("Pooling", [x], "cpu", **params)[0])
    y64 = run("Pooling", [x.astype(np.float64)], kernel=(2, 2), pool_type="max")[0]
    assert y64.dtype == np.float64 and y64[0, 0, 0, 0] == 5.0


def test_same_convention_goes_to_the_replaced_kernel(onednn_only):
    # MXNet's "same" convention pads before and after the data; oneDNN's program would pad after only
    x = np.random.default_rng(1).random((1, 2, 7, 10)).astype(np.float32)
    params = dict(kernel=(3, 2), stride=(2, 3), pool_type="max", pooling_convention="same")
    got = run("Pooling", [x], **params)[0]
    np.testing.assert_array_equal(got, run("Pooling", [x], "generic", **params)[0])


def test_each_layout_serves_1d_and_2d_pooling_and_its_gradient(layout):
    # oneDNN's pooling takes no source of layout ``any``: the blocked programs were all refused (status 2), and the
    # replaced kernel served every call that asked for them
    rng = np.random.default_rng(3)
    for shape, params in [((2, 32, 9, 9), dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max")),
                          ((2, 20, 8, 7), dict(kernel=(2, 2), stride=(2, 2), pool_type="avg")),
                          ((3, 24, 11), dict(kernel=(3,), stride=(2,), pad=(1,), pool_type="avg",
                                             count_include_pad=False))]:
        x = rng.standard_normal(shape).astype(np.float32)
        y = run("Pooling", [x], **params)[0]
        window = int(np.prod(params["kernel"]))
        assert_within(y, run("Pooling", [x], "reference", **params)[0],
                      sum_bound(window, run("Pooling", [np.abs(x)], "reference", **params)[0]), "forward")
        g = rng.standard_normal(y.shape).astype(np.float32)
        grad = run("_backward_Pooling", [g, x, y], **params)[0]
        want = run("_backward_Pooling", [g, x, y], "reference", **params)[0]
        magnitude = run("_backward_Pooling", [np.abs(g), x, y], "reference", **params)[0]
        assert_within(grad, want, sum_bound(window, magnitude), "gradient")
    assert_served_by_onednn("Pooling")
    assert_served_by_onednn("_backward_Pooling")
