"""oneDNN's FullyConnected, Activation and softmax (forward and gradients) against the generic kernel in
float64 and mxkit-cpu's kernels, over hypothesis-drawn shapes; each bound is a float32 rounding bound
of the sums involved (:func:`onednn_harness.sum_bound`)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mxkit.ndarray.registry import get_registry
from onednn_harness import UNIT, assert_served_by_onednn, assert_within, needs_onednn, run, sum_bound

pytestmark = needs_onednn

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

#: single-precision elementwise functions (oneDNN's polynomial exp, tanh, logistic, log) are accurate to a
#: few units in the last place; 64 of them is far above that and far below any wrong formula
FUNCTION_ULPS = 64


def test_the_plugin_replaces_mxkit_cpus_kernels_of_these_operators():
    from mxkit_cpu import activation, dense

    for name in ("FullyConnected", "_backward_FullyConnected"):
        kernel = get_registry().get(name).kernel_for("numpy")
        assert kernel.__module__ == "mxkit_onednn.dense" and kernel.replaced is dense.KERNELS[name], name
    for name in ("Activation", "_backward_relu", "_backward_tanh", "_backward_sigmoid"):
        kernel = get_registry().get(name).kernel_for("numpy")
        assert kernel.__module__ == "mxkit_onednn.eltwise" and kernel.replaced is activation.KERNELS.get(
            name, kernel.replaced), name
    for name in ("softmax", "_backward_softmax", "log_softmax", "_backward_log_softmax"):
        assert get_registry().get(name).kernel_for("numpy").__module__ == "mxkit_onednn.softmax", name


def _dense_case(rng, rows, features, hidden, no_bias, flatten):
    """A FullyConnected call's inputs and parameters; flatten=False keeps the leading axes and multiplies along
    the last: the same rows either way."""
    x = rng.standard_normal((rows, 2, features) if not flatten else (rows, features)).astype(np.float32)
    w = rng.standard_normal((hidden, features)).astype(np.float32)
    b = rng.standard_normal(hidden).astype(np.float32)
    return [x, w] if no_bias else [x, w, b], dict(num_hidden=hidden, no_bias=no_bias, flatten=flatten)


def _assert_forward_within_bound(y, inputs, params):
    """``y`` within the float32 bound of a sum of ``features + 1`` products of the reference's magnitudes."""
    features = inputs[1].shape[1]
    magnitude = run("FullyConnected", [np.abs(a) for a in inputs], "reference", **params)[0]
    assert_within(y, run("FullyConnected", inputs, "reference", **params)[0], sum_bound(features + 1, magnitude),
                  "forward")
    return magnitude


@SETTINGS
@given(rows=st.integers(1, 6), features=st.integers(1, 40), hidden=st.integers(1, 12), no_bias=st.booleans(),
       flatten=st.booleans(), seed=st.integers(0, 2**16))
def test_fully_connected_and_its_gradients(onednn_only, rows, features, hidden, no_bias, flatten, seed):
    rng = np.random.default_rng(seed)
    inputs, params = _dense_case(rng, rows, features, hidden, no_bias, flatten)
    x, w = inputs[:2]
    y = run("FullyConnected", inputs, **params)[0]
    magnitude = _assert_forward_within_bound(y, inputs, params)
    assert_within(y, run("FullyConnected", inputs, "cpu", **params)[0], 2 * sum_bound(features + 1, magnitude),
                  "forward vs mxkit-cpu")
    g = rng.standard_normal(y.shape).astype(np.float32)
    grads = run("_backward_FullyConnected", [g, x, w], **params)
    want = run("_backward_FullyConnected", [g, x, w], "reference", **params)
    sizes = run("_backward_FullyConnected", [np.abs(g), np.abs(x), np.abs(w)], "reference", **params)
    count = x.size // features
    for index, (got, expected, size, terms) in enumerate(zip(grads, want, sizes, (hidden, count, count))):
        assert_within(got, expected, sum_bound(terms, size), f"gradient {index}")
    assert_served_by_onednn("FullyConnected")
    assert_served_by_onednn("_backward_FullyConnected")


@SETTINGS
@given(rows=st.integers(1, 6), features=st.integers(1, 40), hidden=st.integers(1, 12), no_bias=st.booleans(),
       flatten=st.booleans(), seed=st.integers(0, 2**16))
def test_fully_connected_as_onednns_matmul(rows, features, hidden, no_bias, flatten, seed):
    from mxkit_onednn.program import PROGRAMS

    inputs, params = _dense_case(np.random.default_rng(seed), rows, features, hidden, no_bias, flatten)
    PROGRAMS.clear()
    PROGRAMS.only = "matmul"
    try:
        y = run("FullyConnected", inputs, **params)[0]
        assert_served_by_onednn("FullyConnected")  # (by the matmul: the only candidate)
    finally:
        PROGRAMS.only = None
        PROGRAMS.clear()
    _assert_forward_within_bound(y, inputs, params)


@SETTINGS
@given(shape=st.lists(st.integers(1, 7), min_size=1, max_size=4), act_type=st.sampled_from(
    ["relu", "sigmoid", "tanh"]), seed=st.integers(0, 2**16))
def test_activations_and_their_gradients(onednn_only, shape, act_type, seed):
    rng = np.random.default_rng(seed)
    x = (3 * rng.standard_normal(shape)).astype(np.float32)
    y = run("Activation", [x], act_type=act_type)[0]
    reference = run("Activation", [x], "reference", act_type=act_type)[0]
    assert_within(y, reference, FUNCTION_ULPS * 2 * UNIT * np.abs(reference) + np.finfo(np.float32).tiny, "forward")
    assert_served_by_onednn("Activation")
    g = rng.standard_normal(shape).astype(np.float32)
    name = f"_backward_{act_type}"
    grad = run(name, [g, y])[0]
    want = run(name, [g, y], "reference")[0]
    # out_grad * y * (1 - y), out_grad * (1 - y * y) or a select: at most three roundings of terms of this size
    magnitude = np.abs(g) * (1 + np.abs(y)) ** 2
    assert_within(grad, want, sum_bound(3, magnitude), "gradient")
    assert_served_by_onednn(name)


@SETTINGS
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=4), axis_seed=st.integers(0, 3),
       name=st.sampled_from(["softmax", "log_softmax"]), seed=st.integers(0, 2**16))
def test_softmax_and_log_softmax_with_their_gradients(onednn_only, shape, axis_seed, name, seed):
    rng = np.random.default_rng(seed)
    axis = axis_seed % len(shape) - (1 if axis_seed % 2 else 0) * len(shape)  # positive and negative axes
    x = (2 * rng.standard_normal(shape)).astype(np.float32)
    length = shape[axis]
    y = run(name, [x], axis=axis)[0]
    reference = run(name, [x], "reference", axis=axis)[0]
    # an exp, a sum of `length` terms, a division or a log: relative to the values and the inputs' spread
    spread = np.abs(x).max(axis=axis, keepdims=True) + 1
    assert_within(y, reference, sum_bound(length + FUNCTION_ULPS, np.abs(reference) + (spread if name ==
                                                                                        "log_softmax" else 0)),
                  "forward")
    assert_served_by_onednn(name)
    g = rng.standard_normal(shape).astype(np.float32)
    grad = run(f"_backward_{name}", [g, y], axis=axis)[0]
    want = run(f"_backward_{name}", [g, reference.astype(np.float32)], "reference", axis=axis)[0]
    probabilities = np.exp(reference) if name == "log_softmax" else reference
    total = np.abs(g).sum(axis=axis, keepdims=True)
    assert_within(grad, want, sum_bound(length + FUNCTION_ULPS, np.abs(g) + probabilities * total), "gradient")
    assert_served_by_onednn(f"_backward_{name}")


def test_what_onednn_does_not_cover_goes_to_the_replaced_kernel(onednn_only):
    x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6)
    for name, params in (("softmax", dict(temperature=2.0)), ("Activation", dict(act_type="softsign")),
                         ("Activation", dict(act_type="softrelu"))):
        np.testing.assert_array_equal(run(name, [x], **params)[0], run(name, [x], "cpu", **params)[0])
    lengths = np.array([1, 3, 6, 2], dtype=np.float32)  # softmax over the first lengths[i] of each row
    masked = run("softmax", [x, lengths], axis=-1, use_length=True)[0]
    np.testing.assert_array_equal(masked, run("softmax", [x, lengths], "cpu", axis=-1, use_length=True)[0])
    assert masked[0, 1:].sum() == 0 and abs(masked[0, 0] - 1) < 1e-6
    x64 = x.astype(np.float64)
    assert run("Activation", [x64], act_type="relu")[0].dtype == np.float64
