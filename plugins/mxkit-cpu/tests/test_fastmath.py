"""mxkit_cpu._fastmath: float32 tanh and sigmoid against float64 numpy (units in the last place
over every range, special values), the LSTM step kernels against the generic numpy recurrence,
and the RNN operator with them (every mode) against the generic kernel."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit.ndarray.registry import get_registry
from mxkit_cpu import _fastmath

#: the bound checked below; numpy's own float32 tanh is within 1.4 ulp here
MAX_ULP = 3.0


def _inputs() -> np.ndarray:
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal(200_000) * scale for scale in (1e-6, 0.01, 0.3, 1, 3, 10, 50)]
    parts.append(np.linspace(-1, 1, 100_001))  # across the switch between the two formulas at 0.3
    parts.append(rng.uniform(-120, 120, 50_000))
    parts.append([0.0, -0.0, 0.3, -0.3, 9.0, -9.0, 86.9, -86.9, 87.0, -87.0, 88.0, -88.0, 1e-30, -1e-30])
    return np.concatenate([np.asarray(p, dtype=np.float64) for p in parts]).astype(np.float32)


def _ulp_error(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    unit = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / unit


@pytest.mark.parametrize("name", ["tanh", "sigmoid"])
def test_float32_tanh_and_sigmoid_are_within_3_ulp_of_float64(name):
    x = _inputs()
    exact = np.tanh(x.astype(np.float64)) if name == "tanh" else 1 / (1 + np.exp(-x.astype(np.float64)))
    out = np.empty_like(x)
    getattr(_fastmath, name)(x, out)
    error = _ulp_error(out, exact)
    if name == "sigmoid":  # from -87 down the exact value is under 2e-38; 0 is returned, as numpy's float32 gives
        tiny = x <= -87
        assert (out[tiny] == 0).all()
        error = error[~tiny]
        x = x[~tiny]
    assert error.max() <= MAX_ULP, f"{name}({x[error.argmax()]!r}) is {error.max():.2f} ulp off"


@pytest.mark.parametrize("variant", ["scalar", "x86-64", "x86-64-v3"])
@pytest.mark.parametrize("name", ["tanh", "sigmoid"])
def test_every_code_path_is_within_the_bound(name, variant):
    # The dispatcher picks one code path per machine (AVX2+FMA where the CPU has it, the
    # baseline SSE2 one elsewhere); FMA contraction rounds differently, so each path is
    # checked here on its own rather than only the one this machine happens to run.
    if variant not in _fastmath.runnable_variants():
        pytest.skip(f"this CPU cannot run the {variant} code path")
    x = _inputs()
    exact = np.tanh(x.astype(np.float64)) if name == "tanh" else 1 / (1 + np.exp(-x.astype(np.float64)))
    out = np.empty_like(x)
    getattr(_fastmath, f"{name}_variant")(variant, x, out)
    error = _ulp_error(out, exact)
    if name == "sigmoid":
        tiny = x <= -87
        assert (out[tiny] == 0).all()
        error, x = error[~tiny], x[~tiny]
    assert error.max() <= MAX_ULP, f"{variant} {name}({x[error.argmax()]!r}) is {error.max():.2f} ulp off"


@pytest.mark.parametrize("name", ["tanh", "sigmoid"])
def test_the_dispatched_path_is_the_one_tested(name):
    x = _inputs()
    dispatched, chosen = np.empty_like(x), np.empty_like(x)
    getattr(_fastmath, name)(x, dispatched)
    getattr(_fastmath, f"{name}_variant")(_fastmath.dispatched_variant(), x, chosen)
    np.testing.assert_array_equal(dispatched, chosen)
    with pytest.raises(ValueError, match="unknown code path 'avx9'"):
        _fastmath.tanh_variant("avx9", x, chosen)


def test_special_values_and_signs():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 100.0, -100.0], np.float32)
    out = np.empty_like(x)
    _fastmath.tanh(x, out)
    assert np.isnan(out[0])
    np.testing.assert_array_equal(out[1:], [1, -1, 0, -0.0, 1, -1])
    assert np.signbit(out[4])  # tanh(-0) is -0
    _fastmath.sigmoid(x, out)
    assert np.isnan(out[0])
    np.testing.assert_array_equal(out[1:], [1, 0, 0.5, 0.5, 1, 0])


def test_in_place_empty_and_mismatched_arrays():
    x = np.linspace(-4, 4, 1001, dtype=np.float32)
    expected = np.empty_like(x)
    _fastmath.tanh(x, expected)
    _fastmath.tanh(x, x)
    np.testing.assert_array_equal(x, expected)
    _fastmath.sigmoid(np.empty(0, np.float32), np.empty(0, np.float32))
    with pytest.raises(ValueError, match="input of 3 elements, output of 2"):
        _fastmath.tanh(np.zeros(3, np.float32), np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="Buffer dtype mismatch"):
        _fastmath.tanh(np.zeros(3), np.zeros(3))


def _numpy_lstm_step(pre, c_prev):
    hidden = c_prev.shape[1]
    sig = 1 / (1 + np.exp(-pre.astype(np.float64)))
    i, f, o = sig[:, :hidden], sig[:, hidden:2 * hidden], sig[:, 3 * hidden:]
    g = np.tanh(pre[:, 2 * hidden:3 * hidden].astype(np.float64))
    c = f * c_prev + i * g
    return np.concatenate([i, f, g, o], axis=1), c, np.tanh(c), o * np.tanh(c)


@settings(max_examples=30, deadline=None)
@given(batch=st.integers(0, 5), hidden=st.integers(0, 37), seed=st.integers(0, 2**31 - 1))
def test_lstm_step_kernels_match_float64_numpy(batch, hidden, seed):
    rng = np.random.default_rng(seed)
    pre = (rng.standard_normal((batch, 4 * hidden)) * 3).astype(np.float32)
    c_prev = rng.standard_normal((batch, hidden)).astype(np.float32)
    gates, cells, tanh_cells, h = (np.full(shape, np.nan, np.float32)
                                   for shape in [(batch, 4 * hidden)] + [(batch, hidden)] * 3)
    _fastmath.lstm_forward(pre, c_prev, gates, cells, tanh_cells, h)
    for got, want in zip((gates, cells, tanh_cells, h), _numpy_lstm_step(pre, c_prev)):
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)

    d_h = rng.standard_normal((batch, hidden)).astype(np.float32)
    d_c = rng.standard_normal((batch, hidden)).astype(np.float32)
    i, f = gates[:, :hidden].astype(np.float64), gates[:, hidden:2 * hidden].astype(np.float64)
    g, o = gates[:, 2 * hidden:3 * hidden].astype(np.float64), gates[:, 3 * hidden:].astype(np.float64)
    t = tanh_cells.astype(np.float64)
    dc = d_c + d_h * o * (1 - t * t)
    want = np.concatenate([dc * g * i * (1 - i), dc * c_prev * f * (1 - f), dc * i * (1 - g * g),
                           d_h * t * o * (1 - o)], axis=1)
    d_pre = np.full((batch, 4 * hidden), np.nan, np.float32)
    _fastmath.lstm_backward(d_h, d_c, gates, tanh_cells, c_prev, d_pre)
    np.testing.assert_allclose(d_pre, want, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(d_c, dc * f, rtol=2e-6, atol=1e-6)


def test_lstm_step_rejects_wrong_shapes_and_overlapping_arrays():
    pre = np.zeros((2, 12), np.float32)
    state = [np.zeros((2, 3), np.float32) for _ in range(4)]
    with pytest.raises(ValueError, match=r"lstm_forward: gates has shape \(2, 8\), expected \(2, 12\)"):
        _fastmath.lstm_forward(pre, state[0], np.zeros((2, 8), np.float32), *state[1:])
    gates = np.zeros((2, 12), np.float32)
    with pytest.raises(ValueError, match=r"lstm_forward: h has shape \(3, 3\), expected \(2, 3\)"):
        _fastmath.lstm_forward(pre, state[0], gates, state[1], state[2], np.zeros((3, 3), np.float32))
    with pytest.raises(ValueError, match="not C-contiguous"):
        _fastmath.lstm_forward(pre, state[0], gates, state[1], gates[:, 3:6], state[2])
    block = np.zeros((4, 3), np.float32)
    with pytest.raises(ValueError, match="cells and tanh_cells overlap in memory"):
        _fastmath.lstm_forward(pre, state[0], gates, block[:2], block[1:3], state[1])
    with pytest.raises(ValueError, match="d_c and d_h overlap in memory"):
        _fastmath.lstm_backward(state[0], state[0], gates, state[1], state[2], np.zeros((2, 12), np.float32))


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh", "rnn_relu"])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("state_outputs", [False, True])
def test_rnn_operator_with_the_fast_cell_matches_the_generic_kernel(mode, bidirectional, state_outputs):
    from mxkit.ndarray.ops.nn_rnn import rnn_param_size

    rng = np.random.default_rng(3)
    steps, batch, features, hidden, layers = 6, 3, 5, 4, 2
    directions = 2 if bidirectional else 1
    params = dict(mode=mode, state_size=hidden, num_layers=layers, bidirectional=bidirectional,
                  state_outputs=state_outputs)
    size = rnn_param_size(mode, layers, features, hidden, bidirectional)
    states = 2 if mode == "lstm" else 1
    inputs = [rng.standard_normal((steps, batch, features)).astype(np.float32),
              (rng.standard_normal(size) * 0.5).astype(np.float32),
              *(rng.standard_normal((layers * directions, batch, hidden)).astype(np.float32) for _ in range(states))]
    fast = _run_rnn("RNN", inputs, params, generic=False)
    generic = _run_rnn("RNN", inputs, params, generic=True)
    for got, want in zip(fast, generic, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    heads = [rng.standard_normal(out.shape).astype(np.float32) for out in generic]
    fast_grads = _run_rnn("_backward_RNN", [*heads, *inputs, fast[0]], params, generic=False)
    generic_grads = _run_rnn("_backward_RNN", [*heads, *inputs, generic[0]], params, generic=True)
    for got, want in zip(fast_grads, generic_grads, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _run_rnn(name, inputs, params, generic):
    """Like the harness's ``run``, in training mode (the backward then uses the forward's trace)."""
    op = get_registry().get(name)
    typed = dict(op.parse_params(params), _is_train=True)
    shapes = op.infer_shape(typed, [x.shape for x in inputs])
    outputs = [np.full(shape, np.nan, np.float32) for shape in shapes]
    (op.kernel if generic else op.kernel_for("numpy"))(np, list(inputs), outputs, typed)
    return outputs
