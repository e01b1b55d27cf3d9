"""oneDNN's LRN and its gradient against the generic kernel in float64, mxkit-cpu's kernel (the generic kernel
in float32: mxkit-cpu has no LRN of its own) and finite differences, over hypothesis-drawn shapes, window sizes
and constants, in each layout a program may run in.

The bounds follow the arithmetic. With ``n = knorm + alpha / nsize * S`` and ``S`` the sum of ``nsize``
squares (all terms positive), oneDNN's ``n`` carries a relative error of at most gamma(nsize + 3) (the squares,
the sum, the scaling and the addition); ``n ** -beta`` turns it into ``beta`` times that, plus the error of
single-precision ``pow`` (:data:`FUNCTION_ULPS` units, as for the other elementwise functions), and the product
with ``x`` one more rounding. mxkit-cpu's float32 kernel sums the window as a difference of two running sums
over all ``C`` channels, whose error is relative to the sum over every channel, not the window's.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from mxkit.ndarray.registry import get_registry
from onednn_harness import assert_served_by_onednn, assert_within, needs_onednn, run, sum_bound

pytestmark = needs_onednn

FUNCTION_ULPS = 64

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def programs():
    from mxkit_onednn.program import PROGRAMS

    PROGRAMS.clear()
    yield PROGRAMS
    PROGRAMS.only = None
    PROGRAMS.clear()


@st.composite
def cases(draw):
    spatial = draw(st.lists(st.integers(1, 4), min_size=0, max_size=2))
    return dict(shape=(draw(st.integers(1, 3)), draw(st.integers(1, 12)), *spatial),
                params=dict(nsize=draw(st.sampled_from([1, 3, 5, 7])), alpha=draw(st.sampled_from([1e-4, 0.1, 1.0])),
                            beta=draw(st.sampled_from([0.5, 0.75, 1.0])), knorm=draw(st.sampled_from([1.0, 2.0]))),
                seed=draw(st.integers(0, 2**16)))


def _window_sum(values: np.ndarray, nsize: int) -> np.ndarray:
    """Sum over channels c - nsize // 2 .. c + nsize // 2 (clipped), directly (float64)."""
    half, out = nsize // 2, np.zeros_like(values)
    for c in range(values.shape[1]):
        out[:, c] = values[:, max(0, c - half):c + half + 1].sum(axis=1)
    return out


def _bounds(x: np.ndarray, g: np.ndarray | None, p: dict):
    """The error bounds of oneDNN's and of mxkit-cpu's float32 results (forward, or gradient when ``g``)."""
    x64 = x.astype(np.float64)
    scale = p["alpha"] / p["nsize"]
    n = p["knorm"] + scale * _window_sum(x64 * x64, p["nsize"])
    # mxkit-cpu's running sums: an error relative to the sum of squares over every channel
    everything = p["knorm"] + scale * np.sum(x64 * x64, axis=1, keepdims=True)
    relative = p["beta"] + 1 if g is not None else p["beta"]  # n ** (-beta - 1) in the gradient's second term
    if g is None:
        size = np.abs(x64) * n ** -p["beta"]
    else:
        g64 = np.abs(g.astype(np.float64))
        size = g64 * n ** -p["beta"] + 2 * p["beta"] * scale * np.abs(x64) * _window_sum(
            g64 * np.abs(x64) * n ** (-p["beta"] - 1), p["nsize"])
    ours = sum_bound(p["nsize"] + 3, relative * size) + sum_bound(FUNCTION_ULPS + 2, size)
    if g is not None:  # the gradient's own window sum of nsize terms
        ours = ours + sum_bound(p["nsize"] + 2, size)
    theirs = ours + sum_bound(x.shape[1] + 3, relative * size * everything / n)
    if g is not None:  # and the running sums of the gradient's signed second term, over every channel too
        theirs = theirs + sum_bound(x.shape[1] + 3, 2 * p["beta"] * scale * np.abs(x64) * np.sum(
            g64 * np.abs(x64) * n ** (-p["beta"] - 1), axis=1, keepdims=True))
    return ours, theirs


def test_the_plugin_replaces_the_lrn_kernels():
    for name in ("LRN", "_backward_LRN"):
        kernel = get_registry().get(name).kernel_for("numpy")
        assert kernel.__module__ == "mxkit_onednn.lrn" and kernel.replaced is get_registry().get(name).kernel, name


@pytest.mark.parametrize("layout", ["plain", "blocked8", "blocked16", "channels_last"])
@SETTINGS
@given(case=cases())
def test_lrn_matches_the_reference_and_mxkit_cpu(programs, layout, case):
    programs.clear()
    programs.only = layout
    x = np.random.default_rng(case["seed"]).standard_normal(case["shape"]).astype(np.float32) * 3
    p = case["params"]
    y = run("LRN", [x], **p)[0]
    assert_served_by_onednn("LRN")
    ours, theirs = _bounds(x, None, p)
    assert_within(y, run("LRN", [x], "reference", **p)[0], ours, "forward")
    assert_within(y, run("LRN", [x], "cpu", **p)[0], theirs, "forward vs mxkit-cpu")


@pytest.mark.parametrize("layout", ["blocked8", "blocked16", "channels_last"])
@SETTINGS
@given(case=cases())
def test_lrn_gradient_matches_the_reference_mxkit_cpu_and_finite_differences(programs, layout, case):
    # nsize 1 in channels-last layout is left out (oneDNN 3.2 crashes building it): the others serve it
    assume(not (layout == "channels_last" and case["params"]["nsize"] == 1))
    programs.clear()
    programs.only = layout
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal(case["shape"]).astype(np.float32) * 3
    g = rng.standard_normal(case["shape"]).astype(np.float32)
    p = case["params"]
    grad = run("_backward_LRN", [g, x], **p)[0]
    assert_served_by_onednn("_backward_LRN")
    ours, theirs = _bounds(x, g, p)
    assert_within(grad, run("_backward_LRN", [g, x], "reference", **p)[0], ours, "gradient")
    assert_within(grad, run("_backward_LRN", [g, x], "cpu", **p)[0], theirs, "gradient vs mxkit-cpu")

    # central differences in float64 of L(x) = <g, LRN(x)> along a random direction v: LRN is smooth, and with
    # step h its third derivative term is O(h**2) (h = 1e-4 against values of order 1: below 1e-7 relative),
    # far below the float32 bound of the gradient
    v = rng.standard_normal(case["shape"])
    h = 1e-4
    x64, g64 = x.astype(np.float64), g.astype(np.float64)

    def loss(point):
        return float(np.sum(g64 * run("LRN", [point], "reference", **p)[0]))

    numeric = (loss(x64 + h * v) - loss(x64 - h * v)) / (2 * h)
    analytic = float(np.sum(grad.astype(np.float64) * v))
    tolerance = float(np.sum(ours * np.abs(v))) + 1e-6 * float(np.sum(np.abs(grad) * np.abs(v))) + 1e-9
    assert abs(analytic - numeric) <= tolerance


def test_lrn_gradient_of_nsize_1_is_not_built_in_channels_last_layout(programs):
    p = dict(nsize=1, alpha=0.5, beta=0.75, knorm=1.0)
    x = np.random.default_rng(0).standard_normal((2, 20, 4, 4)).astype(np.float32)
    g = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    grad = run("_backward_LRN", [g, x], **p)[0]
    ours, _ = _bounds(x, g, p)
    assert_within(grad, run("_backward_LRN", [g, x], "reference", **p)[0], ours, "gradient")
    assert all("lrn" not in chosen or "nhwc" not in chosen for chosen in programs.chosen().values())


def test_lrn_of_float64_and_of_a_batch_past_the_workspace(programs):
    from mxkit_onednn import program

    p = dict(nsize=5, alpha=1e-4, beta=0.75, knorm=2.0)
    x = np.random.default_rng(0).standard_normal((4, 16, 8, 8))
    y64 = run("LRN", [x], **p)[0]
    assert y64.dtype == np.float64 and len(programs) == 0
    # a workspace bound of about one sample's reordered copies: the gradient runs in chunks of samples
    saved = program.WORKSPACE_BYTES
    program.WORKSPACE_BYTES = 16 * 8 * 8 * 4 * 5
    try:
        programs.only = "blocked16"
        g = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
        grad = run("_backward_LRN", [g, x.astype(np.float32)], **p)[0]
        ours, _ = _bounds(x.astype(np.float32), g, p)
        assert_within(grad, run("_backward_LRN", [g, x], "reference", **p)[0], ours, "chunked gradient")
        assert any(isinstance(programs.program(key), program.Chunked) for key in programs.chosen())
    finally:
        program.WORKSPACE_BYTES = saved


def test_lrn_written_over_its_own_input_goes_to_the_generic_kernel(programs):
    op = get_registry().get("LRN")
    params = op.parse_params(dict(nsize=5, alpha=0.5, beta=0.75, knorm=1.0))
    x = np.random.default_rng(0).standard_normal((2, 8, 3, 3)).astype(np.float32)
    want = run("LRN", [x.copy()], "cpu", **params)[0]
    op.kernel_for("numpy")(np, [x], [x], params)  # out= the input: oneDNN would read what it already wrote
    np.testing.assert_array_equal(x, want)
    assert len(programs) == 0
