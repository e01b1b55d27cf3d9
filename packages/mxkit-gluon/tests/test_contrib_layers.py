"""gluon.contrib.nn / rnn / data: the convolutional and projected recurrent cells against
MXNet 1.9.1's outputs and gradients (fixtures/make_contrib_fixtures.py), PixelShuffle against a
numpy reshape-transpose, hybridized equal to imperative, and the errors of bad arguments.

Tolerances: float32 convolutions of at most 3x3x2 (=18) or 3x3x3x1 terms per output through
tanh/sigmoid/relu over <= 3 steps, differing from MXNet's only in summation order; as in
test_rnn.py, rtol=1e-4, atol=1e-5 leaves a wide margin and still catches a wrong gate order,
padding or dilation (O(1) errors).
"""

import json
from pathlib import Path

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import GluonError, nn, rnn
from mxkit.gluon.contrib import data as cdata
from mxkit.gluon.contrib import nn as cnn
from mxkit.gluon.contrib import rnn as crnn

RTOL, ATOL = 1e-4, 1e-5
FIXTURES = Path(__file__).parent / "fixtures"

CELLS = {
    "conv1d_rnn": lambda: crnn.Conv1DRNNCell((2, 6), 3, 3, 3, prefix="c1r_"),
    "conv1d_lstm_pad": lambda: crnn.Conv1DLSTMCell((2, 5), 3, (3,), (3,), i2h_pad=(1,), prefix="c1l_"),
    "conv2d_gru": lambda: crnn.Conv2DGRUCell((2, 4, 5), 2, (3, 3), (3, 3), prefix="c2g_"),
    "conv2d_lstm_dilate": lambda: crnn.Conv2DLSTMCell((1, 5, 5), 2, (2, 2), (3, 3), h2h_dilate=(2, 2),
                                                      activation="relu", prefix="c2l_"),
    "conv3d_rnn": lambda: crnn.Conv3DRNNCell((1, 3, 4, 4), 2, 2, 3, prefix="c3r_"),
    "lstmp": lambda: crnn.LSTMPCell(5, 3, prefix="lp_"),
}


def _concurrent():
    block = cnn.HybridConcurrent(axis=1, prefix="hc_")
    with block.name_scope():
        block.add(nn.Dense(3, activation="tanh", in_units=4))
        block.add(cnn.Identity())
        block.add(nn.Dense(2, in_units=4))
    return block


LAYERS = {
    "syncbn": lambda: cnn.SyncBatchNorm(in_channels=3, prefix="sbn_"),
    "hybridconcurrent": _concurrent,
}


@pytest.fixture(scope="module")
def fx():
    return dict(np.load(FIXTURES / "contrib.npz"))


@pytest.fixture(scope="module")
def names():
    return json.loads((FIXTURES / "contrib_names.json").read_text())


def _set_params(block, fx, case):
    for key, param in block._collect_params_with_prefix().items():
        value = fx[f"{case}/param/{key}"]
        param.shape = value.shape
        param.initialize(init=mx.init.Constant(0), force_reinit=True)
        param.set_data(mx.nd.array(value))


def _series(fx, case, name):
    found = []
    while f"{case}/{name}{len(found)}" in fx:
        found.append(fx[f"{case}/{name}{len(found)}"])
    return found


@pytest.mark.parametrize("case", sorted(CELLS) + sorted(LAYERS))
def test_parameter_names_match_mxnet(case, names):
    block = {**CELLS, **LAYERS}[case]()
    assert sorted(block.collect_params().keys()) == names[case]


@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("case", sorted(CELLS))
def test_cell_unroll_matches_mxnet(case, hybridize, fx):
    cell = CELLS[case]()
    _set_params(cell, fx, case)
    if hybridize:
        cell.hybridize()
    x = mx.nd.array(fx[f"{case}/x"])
    begin = [mx.nd.array(s) for s in _series(fx, case, "state")]
    assert [s.shape for s in cell.begin_state(batch_size=x.shape[0])] == [s.shape for s in begin]
    x.attach_grad()
    with mx.autograd.record():
        out, states = cell.unroll(x.shape[1], x, begin, layout="NTC", merge_outputs=True)
        heads = [fx[f"{case}/head_out"], *_series(fx, case, "head_state")]
        total = sum((a * mx.nd.array(h)).sum() for a, h in zip([out, *states], heads, strict=True))
    total.backward()
    np.testing.assert_allclose(out.asnumpy(), fx[f"{case}/out"], rtol=RTOL, atol=ATOL)
    for got, want in zip(states, _series(fx, case, "new_state"), strict=True):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(x.grad.asnumpy(), fx[f"{case}/grad_x"], rtol=RTOL, atol=ATOL)
    for key, param in cell._collect_params_with_prefix().items():
        np.testing.assert_allclose(param.grad().asnumpy(), fx[f"{case}/grad/{key}"], rtol=RTOL, atol=ATOL,
                                   err_msg=key)


@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("case", sorted(LAYERS))
def test_layer_matches_mxnet(case, hybridize, fx):
    block = LAYERS[case]()
    _set_params(block, fx, case)
    if hybridize:
        block.hybridize()
    with mx.autograd.record():
        out = block(mx.nd.array(fx[f"{case}/x"]))
    np.testing.assert_allclose(out.asnumpy(), fx[f"{case}/out"], rtol=RTOL, atol=ATOL)


def test_conv_cell_infers_its_input_channels():
    cell = crnn.Conv1DGRUCell((0, 7), 4, 3, 3)
    cell.initialize()
    out, _ = cell.unroll(2, mx.nd.ones((3, 2, 5, 7)), merge_outputs=True)
    assert out.shape == (3, 2, 4, 5)
    assert cell.i2h_weight.shape == (12, 5, 3)


def test_conv_cell_symbol_unroll_infers_shapes():
    cell = crnn.Conv2DLSTMCell((3, 6, 7), 4, 3, 3, prefix="rnn_")
    outputs, _ = cell.unroll(2, [mx.sym.var(f"rnn_t{i}_data") for i in range(2)])
    group = mx.sym.Group(outputs)
    assert group.list_outputs() == ["rnn_t0_out_output", "rnn_t1_out_output"]
    _, outs, _ = group.infer_shape(rnn_t0_data=(2, 3, 6, 7), rnn_t1_data=(2, 3, 6, 7))
    assert outs == [(2, 4, 4, 5)] * 2


@pytest.mark.parametrize("make, message", [
    (lambda: crnn.Conv1DRNNCell((2, 6), 3, 3, 2), "h2h_kernel must be odd"),
    (lambda: crnn.Conv2DRNNCell((2, 6), 3, 3, 3), "input_shape is one sample's"),
    (lambda: crnn.Conv1DRNNCell((2, 6), 3, 3, 3, conv_layout="NCHW"), "conv_layout must be one of"),
    (lambda: crnn.Conv1DRNNCell((2, 2), 3, 3, 3), "leaves nothing"),
    (lambda: crnn.Conv1DRNNCell((2, 6), 0, 3, 3), "hidden_channels must be a positive int"),
    (lambda: crnn.Conv1DRNNCell((2, 6), 3, 1.5, 3), "i2h_kernel must be an int or 1"),
    (lambda: crnn.LSTMPCell(4, 0), "projection_size must be a positive int"),
    (lambda: crnn.VariationalDropoutCell(rnn.RNNCell(3), drop_inputs=1.0), "drop_inputs must be in"),
    (lambda: cnn.SyncBatchNorm(num_devices=2), "num_devices=1"),
    (lambda: cnn.PixelShuffle2D(2.5), "factor must be"),
    (lambda: cdata.IntervalSampler(3, 5), "interval 5 is larger than length 3"),
])
def test_bad_arguments_raise_clear_errors(make, message):
    with pytest.raises(GluonError, match=message):
        make()


def _pixel_shuffle_reference(x, factors):
    n, cf, *spatial = x.shape
    d = len(factors)
    c = cf // int(np.prod(factors))
    blocks = x.reshape((n, c, *factors, *spatial))
    order = [0, 1] + [axis for i in range(d) for axis in (2 + d + i, 2 + i)]
    return blocks.transpose(order).reshape((n, c, *(s * f for s, f in zip(spatial, factors, strict=True))))


@pytest.mark.parametrize("cls, shape, factor", [
    (cnn.PixelShuffle1D, (2, 6, 5), 3),
    (cnn.PixelShuffle2D, (1, 12, 2, 3), (2, 3)),
    (cnn.PixelShuffle2D, (2, 8, 3, 2), 2),
    (cnn.PixelShuffle3D, (1, 8, 2, 3, 4), (2, 1, 4)),
])
@pytest.mark.parametrize("hybridize", [False, True])
def test_pixel_shuffle_matches_numpy(cls, shape, factor, hybridize):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    layer = cls(factor)
    if hybridize:
        layer.hybridize()
    factors = (factor,) * (len(shape) - 2) if isinstance(factor, int) else factor
    np.testing.assert_array_equal(layer(mx.nd.array(x)).asnumpy(), _pixel_shuffle_reference(x, factors))


def test_concurrent_concatenates_its_children_and_identity_passes_through():
    x = mx.nd.array(np.random.RandomState(0).uniform(-1, 1, (3, 4)))
    plain = cnn.Concurrent(axis=1)
    plain.add(nn.Dense(2, in_units=4), cnn.Identity())
    plain.initialize()
    want = np.concatenate([plain[0](x).asnumpy(), x.asnumpy()], axis=1)
    np.testing.assert_allclose(plain(x).asnumpy(), want, rtol=1e-6)
    assert plain.prefix.startswith("concurrent")


def test_sparse_embedding_gradient_counts_each_row():
    layer = cnn.SparseEmbedding(6, 3)
    layer.initialize()
    with mx.autograd.record():
        y = layer(mx.nd.array([4, 1, 4, 0]))
    y.backward()
    want = np.zeros((6, 3), np.float32)
    for row in (4, 1, 4, 0):
        want[row] += 1
    np.testing.assert_array_equal(layer.weight.grad().asnumpy(), want)
    assert sorted(layer.collect_params().keys()) == [layer.prefix + "weight"]


def test_variational_dropout_shares_one_mask_across_steps():
    # an RNN cell with zero weights and a bias of 1 outputs tanh(1) everywhere: the dropped
    # output units must be the same at every step, and resampled at the next unroll
    base = rnn.RNNCell(50, i2h_bias_initializer="ones", i2h_weight_initializer="zeros",
                       h2h_weight_initializer="zeros")
    cell = crnn.VariationalDropoutCell(base, drop_outputs=0.5)
    cell.initialize()
    x = mx.nd.ones((4, 3, 2))
    with mx.autograd.record():
        first, _ = cell.unroll(3, x, merge_outputs=True)
        second, _ = cell.unroll(3, x, merge_outputs=True)
    first, second = first.asnumpy(), second.asnumpy()
    kept = first[:, 0] != 0
    for step in range(3):
        np.testing.assert_array_equal(first[:, step] != 0, kept)
    np.testing.assert_allclose(first[:, 0][kept], np.tanh(1.0) * 2, rtol=1e-6)  # kept units scaled by 1/(1-p)
    assert 0 < kept.mean() < 1
    assert not np.array_equal(second[:, 0] != 0, kept)
    # outside training no unit is dropped
    out, _ = cell.unroll(3, x, merge_outputs=True)
    np.testing.assert_allclose(out.asnumpy(), np.full((4, 3, 50), np.tanh(1.0), np.float32), rtol=1e-6)


def test_interval_sampler_order_and_length():
    assert list(cdata.IntervalSampler(10, 3)) == [0, 3, 6, 9, 1, 4, 7, 2, 5, 8]
    assert len(cdata.IntervalSampler(10, 3)) == 10
    assert list(cdata.IntervalSampler(10, 3, rollover=False)) == [0, 3, 6, 9]
    assert len(cdata.IntervalSampler(10, 3, rollover=False)) == 4
