"""mx.rnn's convolutional cells: names and shapes as MXNet's, one step against a numpy reference."""

import numpy as np
import pytest
from mxkit import mx
from mxkit.core.errors import ShapeError


def _conv_same(x, w, b):
    """A stride-1, 'same'-padded 2-D convolution in numpy: x (N, C, H, W), w (F, C, k, k)."""
    k = w.shape[-1]
    padded = np.pad(x, ((0, 0), (0, 0), (k // 2, k // 2), (k // 2, k // 2)))
    out = np.zeros((x.shape[0], w.shape[0], x.shape[2], x.shape[3]))
    for i in range(x.shape[2]):
        for j in range(x.shape[3]):
            out[:, :, i, j] = np.tensordot(padded[:, :, i:i + k, j:j + k], w, axes=([1, 2, 3], [1, 2, 3]))
    return out + b[None, :, None, None]


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


@pytest.mark.parametrize("cls, states", [(mx.rnn.ConvRNNCell, 1), (mx.rnn.ConvLSTMCell, 2), (mx.rnn.ConvGRUCell, 1)])
def test_unrolled_names_and_shapes(cls, states):
    cell = cls(input_shape=(1, 3, 16, 10), num_hidden=10, prefix="rnn_")
    outputs, final = cell.unroll(3, [mx.sym.Variable(f"rnn_t{i}_data") for i in range(3)])
    outputs = mx.sym.Group(outputs)
    assert sorted(cell.params._params) == ["rnn_h2h_bias", "rnn_h2h_weight", "rnn_i2h_bias", "rnn_i2h_weight"]
    assert outputs.list_outputs() == ["rnn_t0_out_output", "rnn_t1_out_output", "rnn_t2_out_output"]
    shapes = {f"rnn_t{i}_data": (1, 3, 16, 10) for i in range(3)}
    assert outputs.infer_shape(**shapes)[1] == [(1, 10, 16, 10)] * 3
    assert len(final) == states and cell.state_info[0]["shape"] == (0, 10, 16, 10)


def test_conv_lstm_step_matches_numpy():
    rng = np.random.default_rng(0)
    hidden, shape = 2, (1, 3, 5, 4)
    cell = mx.rnn.ConvLSTMCell(input_shape=shape, num_hidden=hidden, prefix="c_")
    _, (next_h, next_c) = cell(mx.sym.Variable("x"), [mx.sym.Variable("h"), mx.sym.Variable("c")])
    values = {"x": rng.normal(size=shape), "h": rng.normal(size=(1, hidden, 5, 4)),
              "c": rng.normal(size=(1, hidden, 5, 4)), "c_i2h_weight": rng.normal(size=(4 * hidden, 3, 3, 3)) * 0.3,
              "c_i2h_bias": rng.normal(size=4 * hidden),
              "c_h2h_weight": rng.normal(size=(4 * hidden, hidden, 3, 3)) * 0.3,
              "c_h2h_bias": rng.normal(size=4 * hidden)}
    got = mx.sym.Group([next_h, next_c]).eval(**{k: mx.nd.array(v) for k, v in values.items()})
    gates = (_conv_same(values["x"], values["c_i2h_weight"], values["c_i2h_bias"])
             + _conv_same(values["h"], values["c_h2h_weight"], values["c_h2h_bias"]))
    i, f, g, o = np.split(gates, 4, axis=1)
    c = _sigmoid(f) * values["c"] + _sigmoid(i) * np.tanh(g)
    h = _sigmoid(o) * np.tanh(c)
    # float32 convolutions of about 50 terms of order 1: a few ulps of the sums
    np.testing.assert_allclose(got[1].asnumpy(), c, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[0].asnumpy(), h, rtol=1e-4, atol=1e-5)


def test_even_state_kernels_are_refused():
    with pytest.raises(ShapeError, match="odd sizes"):
        mx.rnn.ConvRNNCell(input_shape=(1, 3, 8, 8), num_hidden=4, h2h_kernel=(2, 2))
