"""gluon.rnn: fused layers and cells against MXNet 1.9.1's outputs and gradients, and a numpy
LSTM/GRU step.

Tolerances: float32 results of sums of at most ~30 products of terms of order 1 through
saturating nonlinearities (tanh, sigmoid: derivative <= 1), differing from MXNet's only in
summation order (a few ulp per step, growing at most linearly over <= 4 steps and 2 layers);
rtol=1e-4, atol=1e-5 keeps a wide margin without hiding a wrong gate order (an O(1) error).
"""

import json

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import GluonError, rnn

RTOL, ATOL = 1e-4, 1e-5

LAYERS = {
    "rnn_relu": lambda: rnn.RNN(4, num_layers=2, activation="relu"),
    "rnn_tanh_ntc": lambda: rnn.RNN(3, activation="tanh", layout="NTC"),
    "lstm_bi": lambda: rnn.LSTM(4, num_layers=2, bidirectional=True),
    "gru": lambda: rnn.GRU(3, num_layers=2),
    "gru_bi_ntc": lambda: rnn.GRU(3, bidirectional=True, layout="NTC"),
}


def _sequential():
    cell = rnn.SequentialRNNCell()
    with cell.name_scope():
        cell.add(rnn.LSTMCell(4))
        cell.add(rnn.GRUCell(3))
    return cell


def _hybrid_sequential():
    cell = rnn.HybridSequentialRNNCell()
    with cell.name_scope():
        cell.add(rnn.RNNCell(4, activation="relu"))
        cell.add(rnn.ResidualCell(rnn.LSTMCell(4)))
    return cell


CELLS = {
    "rnncell": lambda: rnn.RNNCell(4),
    "lstmcell": lambda: rnn.LSTMCell(4),
    "grucell": lambda: rnn.GRUCell(4),
    "sequential": _sequential,
    "hybrid_sequential_residual": _hybrid_sequential,
    "bidirectional": lambda: rnn.BidirectionalCell(rnn.LSTMCell(3), rnn.GRUCell(2)),
}


@pytest.fixture(scope="module")
def fx():
    from pathlib import Path

    return dict(np.load(Path(__file__).parent / "fixtures" / "rnn.npz"))


def _set_params(block, fx, case):
    for key, param in block._collect_params_with_prefix().items():
        value = fx[f"{case}/param/{key}"]
        param.shape = value.shape
        param.initialize(init=mx.init.Constant(0), force_reinit=True)
        param.set_data(mx.nd.array(value))


def _states(fx, case, name):
    found = []
    while f"{case}/{name}{len(found)}" in fx:
        found.append(fx[f"{case}/{name}{len(found)}"])
    return found


def _check_grads(block, fx, case):
    for key, param in block._collect_params_with_prefix().items():
        np.testing.assert_allclose(param.grad().asnumpy(), fx[f"{case}/grad/{key}"], rtol=RTOL, atol=ATOL,
                                   err_msg=f"{case}: gradient of {key}")


def test_parameter_names_match_mxnet(fresh_names, fixture_path):
    names = json.load(open(fixture_path("rnn_names.json")))
    # built in the fixture script's order, so the name counters agree
    blocks = {case: make() for case, make in LAYERS.items()}
    blocks.update({case: make() for case, make in CELLS.items()})
    for case, block in blocks.items():
        assert sorted(block.collect_params().keys()) == names[case]["collect_params"], case
        assert sorted(block._collect_params_with_prefix().keys()) == names[case]["structural"], case


@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("case", sorted(LAYERS))
def test_layer_matches_mxnet(case, hybridize, fx):
    layer = LAYERS[case]()
    _set_params(layer, fx, case)
    if hybridize:
        layer.hybridize()
    x = mx.nd.array(fx[f"{case}/x"])
    states = [mx.nd.array(s) for s in _states(fx, case, "state")]
    x.attach_grad()
    for s in states:
        s.attach_grad()
    with mx.autograd.record():
        out, new_states = layer(x, states)
        heads = [fx[f"{case}/head_out"], *_states(fx, case, "head_state")]
        total = sum((a * mx.nd.array(h)).sum() for a, h in zip([out, *new_states], heads))
    total.backward()
    np.testing.assert_allclose(out.asnumpy(), fx[f"{case}/out"], rtol=RTOL, atol=ATOL)
    for got, want in zip(new_states, _states(fx, case, "new_state")):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(x.grad.asnumpy(), fx[f"{case}/grad_x"], rtol=RTOL, atol=ATOL)
    for got, want in zip(states, _states(fx, case, "grad_state")):
        np.testing.assert_allclose(got.grad.asnumpy(), want, rtol=RTOL, atol=ATOL)
    _check_grads(layer, fx, case)


@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("case", sorted(CELLS))
def test_cell_unroll_matches_mxnet(case, hybridize, fx):
    cell = CELLS[case]()
    _set_params(cell, fx, case)
    if hybridize:
        cell.hybridize()
    x = mx.nd.array(fx[f"{case}/x"])
    begin = [mx.nd.array(s) for s in _states(fx, case, "state")]
    x.attach_grad()
    with mx.autograd.record():
        out, states = cell.unroll(x.shape[1], x, begin, layout="NTC", merge_outputs=True)
        heads = [fx[f"{case}/head_out"], *_states(fx, case, "head_state")]
        total = sum((a * mx.nd.array(h)).sum() for a, h in zip([out, *states], heads))
    total.backward()
    np.testing.assert_allclose(out.asnumpy(), fx[f"{case}/out"], rtol=RTOL, atol=ATOL)
    for got, want in zip(states, _states(fx, case, "new_state")):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(x.grad.asnumpy(), fx[f"{case}/grad_x"], rtol=RTOL, atol=ATOL)
    _check_grads(cell, fx, case)


def test_load_mxnet_saved_lstm(fixture_path, fx):
    layer = rnn.LSTM(4, num_layers=2, bidirectional=True)
    layer.load_parameters(fixture_path("lstm_bi.params"))
    x = mx.nd.array(fx["lstm_bi/x"])
    states = [mx.nd.array(s) for s in _states(fx, "lstm_bi", "state")]
    out, _ = layer(x, states)
    np.testing.assert_allclose(out.asnumpy(), fx["lstm_bi/out"], rtol=RTOL, atol=ATOL)


def test_save_load_round_trip(tmp_path):
    layer = rnn.GRU(3, num_layers=2, bidirectional=True)
    layer.initialize()
    x = mx.nd.random.uniform(shape=(4, 2, 5))
    want = layer(x).asnumpy()
    layer.save_parameters(str(tmp_path / "gru.params"))
    other = rnn.GRU(3, num_layers=2, bidirectional=True)
    other.load_parameters(str(tmp_path / "gru.params"))
    np.testing.assert_allclose(other(x).asnumpy(), want, rtol=0, atol=0)


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def test_lstm_and_gru_against_numpy():
    """One layer, no states given: zeros begin; the numpy step uses MXNet's gate orders."""
    rng = np.random.RandomState(3)
    x = rng.uniform(-1, 1, (3, 2, 5)).astype(np.float32)
    for layer, step in [(rnn.LSTM(4), "lstm"), (rnn.GRU(4), "gru")]:
        layer.initialize(mx.init.Uniform(0.5))
        out = layer(mx.nd.array(x)).asnumpy()
        w_i, w_h = layer.l0_i2h_weight.data().asnumpy(), layer.l0_h2h_weight.data().asnumpy()
        b_i, b_h = layer.l0_i2h_bias.data().asnumpy(), layer.l0_h2h_bias.data().asnumpy()
        h = np.zeros((2, 4), np.float32)
        c = np.zeros((2, 4), np.float32)
        for t in range(3):
            gi = x[t] @ w_i.T + b_i
            gh = h @ w_h.T + b_h
            if step == "lstm":
                i, f, g, o = np.split(gi + gh, 4, axis=1)
                c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
                h = _sigmoid(o) * np.tanh(c)
            else:
                ir, iz, inn = np.split(gi, 3, axis=1)
                hr, hz, hn = np.split(gh, 3, axis=1)
                r, z = _sigmoid(ir + hr), _sigmoid(iz + hz)
                h = (1 - z) * np.tanh(inn + r * hn) + z * h
            np.testing.assert_allclose(out[t], h, rtol=RTOL, atol=ATOL, err_msg=f"{step} step {t}")


def test_layer_inside_hybridized_network_infers_shapes():
    from mxkit.gluon import nn

    net = nn.HybridSequential()
    with net.name_scope():
        net.add(rnn.LSTM(5, layout="NTC"))
        net.add(nn.Dense(2, flatten=False))
    net.initialize()
    x = mx.nd.random.uniform(shape=(3, 4, 6))
    net.hybridize()  # before the first call: the graph alone cannot tell the LSTM's input width
    hybridized = net(x).asnumpy()
    assert net[0].l0_i2h_weight.shape == (20, 6)
    net.hybridize(False)
    np.testing.assert_allclose(net(x).asnumpy(), hybridized, rtol=RTOL, atol=ATOL)


def test_cell_step_and_begin_state():
    cell = rnn.LSTMCell(3, input_size=2)
    cell.initialize()
    states = cell.begin_state(batch_size=4)
    assert [s.shape for s in states] == [(4, 3), (4, 3)]
    out, new = cell(mx.nd.ones((4, 2)), states)
    assert out.shape == (4, 3) and len(new) == 2
    outs, _ = cell.unroll(3, mx.nd.ones((4, 3, 2)), merge_outputs=False)
    assert isinstance(outs, list) and len(outs) == 3


def test_dropout_cell_and_valid_length():
    cell = rnn.SequentialRNNCell()
    cell.add(rnn.GRUCell(3))
    cell.add(rnn.DropoutCell(0.5))
    cell.initialize()
    x = mx.nd.random.uniform(shape=(2, 4, 3))
    out, states = cell.unroll(4, x, merge_outputs=True, valid_length=mx.nd.array([2, 4]))
    got = out.asnumpy()
    assert np.all(got[0, 2:] == 0) and np.any(got[1, 2:] != 0)  # past its length, sample 0 is masked
    full, _ = cell[0].unroll(2, x[0:1, :2], merge_outputs=True)
    np.testing.assert_allclose(states[0].asnumpy()[0], full.asnumpy()[0, -1], rtol=RTOL, atol=ATOL)


def test_bad_inputs_fail_clearly():
    with pytest.raises(GluonError, match="layout"):
        rnn.LSTM(3, layout="CTN")
    with pytest.raises(GluonError, match="hidden_size"):
        rnn.GRU(0)
    with pytest.raises(GluonError, match="activation"):
        rnn.RNN(3, activation="sigmoid")
    with pytest.raises(GluonError, match="projection_size must be an int in"):
        rnn.LSTM(3, projection_size=4)  # larger than the hidden state it projects
    with pytest.raises(GluonError, match="state clipping"):
        rnn.LSTM(3, state_clip_min=-1, state_clip_max=1)
    layer = rnn.LSTM(3)
    layer.initialize()
    with pytest.raises(GluonError, match="3 axes"):
        layer(mx.nd.ones((2, 3)))
    with pytest.raises(GluonError, match="state array"):
        layer(mx.nd.ones((2, 2, 3)), [mx.nd.zeros((1, 2, 3))])
    with pytest.raises(GluonError, match="expected"):
        layer(mx.nd.ones((2, 2, 3)), [mx.nd.zeros((1, 5, 3)), mx.nd.zeros((1, 5, 3))])
    with pytest.raises(GluonError, match="cannot be stepped"):
        rnn.BidirectionalCell(rnn.GRUCell(2), rnn.GRUCell(2))(mx.nd.ones((1, 2)), [])
    cell = rnn.GRUCell(2)
    rnn.ResidualCell(cell)
    with pytest.raises(GluonError, match="modifier"):
        cell.begin_state(batch_size=1)
    with pytest.raises(GluonError, match="layout"):
        rnn.GRUCell(2).unroll(2, mx.nd.ones((1, 2, 2)), layout="CNT")


@pytest.mark.parametrize("cell_type", ["RNNCell", "LSTMCell", "GRUCell"])
def test_symbolic_unroll_without_begin_state_matches_the_imperative_one(cell_type):
    # MXNet's cells start a Symbol unroll from zeros of unknown batch size, which shape
    # inference completes; the parameters appear once in the graph, the outputs are t<i>_out
    from mxkit import mx

    cell = getattr(mx.gluon.rnn, cell_type)(6, prefix="rnn_")
    cell.initialize(mx.init.Uniform(0.5))
    rng = np.random.default_rng(2)
    steps = [rng.standard_normal((4, 5)).astype(np.float32) for _ in range(3)]
    want, _ = cell.unroll(3, [mx.nd.array(s) for s in steps])  # also completes the deferred initialization
    outputs, _ = cell.unroll(3, [mx.sym.var(f"rnn_t{i}_data") for i in range(3)])
    group = mx.sym.Group(outputs)
    assert group.list_outputs() == ["rnn_t0_out_output", "rnn_t1_out_output", "rnn_t2_out_output"]
    params = {p.name: p.data() for p in cell.collect_params().values()}
    assert sorted(group.list_arguments()) == sorted([*params, "rnn_t0_data", "rnn_t1_data", "rnn_t2_data"])
    got = group.eval(**params, **{f"rnn_t{i}_data": mx.nd.array(s) for i, s in enumerate(steps)})
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.asnumpy(), w.asnumpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("make", [lambda: rnn.LSTM(3, num_layers=2, bidirectional=True),
                                  lambda: rnn.GRU(4, num_layers=2, input_size=5),
                                  lambda: rnn.RNN(3, activation="tanh", bidirectional=True)])
def test_unfused_cells_share_the_layers_parameters_and_compute_the_same(make):
    layer = make()
    cells = layer._unfuse()
    layer.initialize(mx.init.Uniform(0.5))
    x = mx.nd.array(np.random.RandomState(4).uniform(-1, 1, (4, 2, 5)))
    fused = layer(x).asnumpy()
    unrolled, _ = cells.unroll(4, x, layout="TNC", merge_outputs=True)
    np.testing.assert_allclose(unrolled.asnumpy(), fused, rtol=RTOL, atol=ATOL)
    assert sorted(cells.collect_params().keys()) == sorted(layer.collect_params().keys())
    for name, param in cells.collect_params().items():
        assert param is layer.collect_params()[name]
