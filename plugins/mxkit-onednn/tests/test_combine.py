"""oneDNN's add_n (ElementWiseSum) and Concat against numpy and the generic kernels they replace, over
hypothesis-drawn shapes, input counts and axes. A concatenation copies (exact); a sum of ``n`` float32
inputs is within the float32 bound of a sum of ``n`` terms (:func:`onednn_harness.sum_bound`)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mxkit.ndarray.registry import get_registry
from onednn_harness import assert_served_by_onednn, assert_within, needs_onednn, run, sum_bound

pytestmark = needs_onednn

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_the_plugin_replaces_the_generic_sum_and_concat_kernels():
    for name in ("add_n", "ElementWiseSum", "Concat", "concat"):
        op = get_registry().get(name)
        kernel = op.kernel_for("numpy")
        assert kernel.__module__ == "mxkit_onednn.combine" and kernel.replaced is op.kernel, name


@SETTINGS
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=5), count=st.integers(1, 5),
       seed=st.integers(0, 2**16))
def test_add_n_matches_the_sum_of_its_inputs(onednn_only, shape, count, seed):
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(count)]
    got = run("add_n", xs, num_args=count)[0]
    assert_served_by_onednn("add_n")
    exact = np.sum([x.astype(np.float64) for x in xs], axis=0)
    bound = sum_bound(count, np.sum([np.abs(x.astype(np.float64)) for x in xs], axis=0))
    assert_within(got, exact, bound, "sum")
    assert_within(got, run("add_n", xs, "cpu", num_args=count)[0], 2 * bound, "sum vs the generic kernel")


@st.composite
def concat_cases(draw):
    ndim = draw(st.integers(1, 5))
    shape = [draw(st.integers(1, 4)) for _ in range(ndim)]
    axis = draw(st.integers(-ndim, ndim - 1))
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    shapes = [tuple(size if i == axis % ndim else d for i, d in enumerate(shape)) for size in sizes]
    return shapes, axis, draw(st.integers(0, 2**16))


@SETTINGS
@given(case=concat_cases())
def test_concat_matches_numpy(onednn_only, case):
    shapes, axis, seed = case
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    got = run("Concat", xs, num_args=len(xs), dim=axis)[0]
    assert_served_by_onednn("Concat")
    np.testing.assert_array_equal(got, np.concatenate(xs, axis=axis))


def test_float64_and_broadcast_sums_go_to_the_generic_kernels(onednn_only):
    from mxkit_onednn.program import PROGRAMS

    xs = [np.arange(6, dtype=np.float64).reshape(2, 3)] * 2
    np.testing.assert_array_equal(run("add_n", xs, num_args=2)[0], 2 * xs[0])
    np.testing.assert_array_equal(run("Concat", xs, num_args=2, dim=0)[0], np.concatenate(xs))
    assert len(PROGRAMS) == 0


def test_an_output_overlapping_an_input_is_summed_and_joined_as_if_apart(onednn_only):
    from mxkit_onednn.program import PROGRAMS

    op = get_registry().get("add_n")
    kernel, params = op.kernel_for("numpy"), op.parse_params(dict(num_args=3))
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal((4, 5)).astype(np.float32) for _ in range(3))
    want = (a + b) + c
    for index in range(3):  # out= the first input (oneDNN's in-place sum), then another one (the generic kernel)
        xs = [a.copy(), b.copy(), c.copy()]
        kernel(np, xs, [xs[index]], params)
        np.testing.assert_array_equal(xs[index], want)
    assert len(PROGRAMS) == 1  # the in-place call of the first input only
    joined = np.zeros((2, 5), np.float32)
    parts = [joined[:1], rng.standard_normal((1, 5)).astype(np.float32)]
    first = parts[0].copy()
    op = get_registry().get("Concat")
    op.kernel_for("numpy")(np, parts, [joined], op.parse_params(dict(num_args=2, dim=0)))
    np.testing.assert_array_equal(joined, np.concatenate([first, parts[1]]))
