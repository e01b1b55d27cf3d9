"""gluon.rnn.LSTM(projection_size=P), the fused LSTMP layer, against a stack of
contrib.rnn.LSTMPCell cells stepped in Python (MXNet 1.9.1's test_gluon_rnn.test_lstmp, here
with gradients too), and its parameter names, states, files and errors.

Tolerances: float32, the same products summed in another order (the fused operator multiplies
all steps' inputs at once, the cells one step at a time): a few ulp per step over <= 3 steps
and 2 layers of saturating nonlinearities; rtol=1e-4, atol=1e-5 keeps a wide margin without
hiding a wrong weight order (an O(1) error).
"""

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import GluonError, contrib, rnn

RTOL, ATOL = 1e-4, 1e-5
HIDDEN, PROJECTION, STEPS, BATCH, FEATURES = 5, 3, 3, 2, 4


def _pair(num_layers: int, bidirectional: bool):
    fused = rnn.LSTM(HIDDEN, projection_size=PROJECTION, num_layers=num_layers, bidirectional=bidirectional,
                     prefix="lstm0_")
    stack = rnn.HybridSequentialRNNCell(prefix="lstm0_")
    with stack.name_scope():
        for i in range(num_layers):
            cells = [contrib.rnn.LSTMPCell(HIDDEN, projection_size=PROJECTION, prefix=f"{side}{i}_")
                     for side in "lr"[:1 + bidirectional]]
            stack.add(rnn.BidirectionalCell(*cells) if bidirectional else cells[0])
    x = mx.nd.array(np.random.RandomState(0).uniform(-1, 1, (STEPS, BATCH, FEATURES)))
    fused.initialize()
    stack.initialize()
    fused.infer_shape(x)
    stack_params = stack.collect_params()
    rng = np.random.RandomState(1)
    for name, param in fused.collect_params().items():
        value = mx.nd.array(rng.uniform(-0.5, 0.5, param.shape))
        param.set_data(value)
        stack_params[name].set_data(value)
    return fused, stack, x


def _run(block, x, states, fused: bool):
    x = x.copy()
    x.attach_grad()
    with mx.autograd.record():
        if fused:
            out, new_states = block(x, states)
        else:
            out, new_states = block.unroll(STEPS, x, begin_state=states, layout="TNC", merge_outputs=True)
        # hidden states weighted 2, cell states 3: the fused layer's [h, c] and the stack's
        # [r, c] per cell, alternating
        loss = (out * out).sum() + sum((s * (2 + i % 2)).sum() for i, s in enumerate(new_states))
    loss.backward()
    return out, new_states, x.grad


@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("num_layers,bidirectional", [(1, False), (2, False), (2, True)])
def test_fused_lstmp_equals_a_stack_of_lstmp_cells_with_gradients(num_layers, bidirectional, hybridize):
    fused, stack, x = _pair(num_layers, bidirectional)
    if hybridize:
        fused.hybridize()
    rng = np.random.RandomState(2)
    h0 = rng.uniform(-0.5, 0.5, (num_layers * (1 + bidirectional), BATCH, PROJECTION))
    c0 = rng.uniform(-0.5, 0.5, (num_layers * (1 + bidirectional), BATCH, HIDDEN))
    fused_states = [mx.nd.array(h0), mx.nd.array(c0)]
    # the stack's states: [r, c] per cell, layer by layer, l before r
    stack_states = []
    for index in range(h0.shape[0]):
        stack_states += [mx.nd.array(h0[index]), mx.nd.array(c0[index])]
    out, states, dx = _run(fused, x, fused_states, True)
    ref_out, ref_states, ref_dx = _run(stack, x, stack_states, False)
    assert out.shape == (STEPS, BATCH, PROJECTION * (1 + bidirectional))
    np.testing.assert_allclose(out.asnumpy(), ref_out.asnumpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(states[0].asnumpy(), np.stack([s.asnumpy() for s in ref_states[0::2]]),
                               rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(states[1].asnumpy(), np.stack([s.asnumpy() for s in ref_states[1::2]]),
                               rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(dx.asnumpy(), ref_dx.asnumpy(), rtol=RTOL, atol=ATOL)
    stack_params = stack.collect_params()
    for name, param in fused.collect_params().items():
        np.testing.assert_allclose(param.grad().asnumpy(), stack_params[name].grad().asnumpy(), rtol=RTOL,
                                   atol=ATOL, err_msg=name)


def test_lstmp_parameters_states_and_files_have_mxnets_names(tmp_path):
    layer = rnn.LSTM(HIDDEN, projection_size=PROJECTION, num_layers=2, bidirectional=True, input_size=FEATURES,
                     prefix="lstm0_")
    shapes = {name: p.shape for name, p in layer.collect_params().items()}
    assert list(shapes)[:5] == ["lstm0_l0_i2h_weight", "lstm0_l0_h2h_weight", "lstm0_l0_i2h_bias",
                                "lstm0_l0_h2h_bias", "lstm0_l0_h2r_weight"]
    assert shapes["lstm0_l0_h2h_weight"] == (4 * HIDDEN, PROJECTION)
    assert shapes["lstm0_r1_h2r_weight"] == (PROJECTION, HIDDEN)
    assert shapes["lstm0_l1_i2h_weight"] == (4 * HIDDEN, 2 * PROJECTION)
    assert [s["shape"] for s in layer.state_info(7)] == [(4, 7, PROJECTION), (4, 7, HIDDEN)]
    assert [s.shape for s in layer.begin_state(7)] == [(4, 7, PROJECTION), (4, 7, HIDDEN)]
    layer.initialize()
    out = layer(mx.nd.ones((STEPS, BATCH, FEATURES)))  # no states given: zeros of both widths
    assert out.shape == (STEPS, BATCH, 2 * PROJECTION)
    layer.save_parameters(str(tmp_path / "lstmp.params"))
    saved = mx.nd.load(str(tmp_path / "lstmp.params"))
    assert "_unfused.1.r_cell.h2r_weight" in saved and "_unfused.0.l_cell.i2h_bias" in saved
    again = rnn.LSTM(HIDDEN, projection_size=PROJECTION, num_layers=2, bidirectional=True, prefix="lstm0_")
    again.load_parameters(str(tmp_path / "lstmp.params"))
    np.testing.assert_array_equal(again(mx.nd.ones((STEPS, BATCH, FEATURES))).asnumpy(), out.asnumpy())


def test_unfused_lstmp_layer_is_a_stack_of_lstmp_cells_sharing_its_parameters():
    fused, _, x = _pair(2, True)
    stack = fused._unfuse()
    assert all(isinstance(c, contrib.rnn.LSTMPCell) for b in stack._children.values() for c in b._children.values())
    out = fused(x)
    ref, _ = stack.unroll(STEPS, x, layout="TNC", merge_outputs=True)
    np.testing.assert_allclose(out.asnumpy(), ref.asnumpy(), rtol=RTOL, atol=ATOL)


def test_lstmp_layer_trains_and_its_loss_falls():
    layer = rnn.LSTM(HIDDEN, projection_size=PROJECTION, layout="NTC")
    layer.initialize(mx.init.Xavier())
    layer.hybridize()
    trainer = mx.gluon.Trainer(layer.collect_params(), "adam", {"learning_rate": 0.05})
    x = mx.nd.array(np.random.RandomState(3).uniform(-1, 1, (BATCH, STEPS, FEATURES)))
    target = mx.nd.array(np.random.RandomState(4).uniform(-0.5, 0.5, (BATCH, STEPS, PROJECTION)))
    losses = []
    for _ in range(30):
        with mx.autograd.record():
            loss = ((layer(x) - target) ** 2).mean()
        loss.backward()
        trainer.step(1)
        losses.append(float(loss.asnumpy().ravel()[0]))
    assert losses[-1] < 0.5 * losses[0]


def test_bad_projections_fail_clearly():
    with pytest.raises(GluonError, match=r"projection_size must be an int in \[1, hidden_size=5\]"):
        rnn.LSTM(HIDDEN, projection_size=6)
    with pytest.raises(GluonError, match="projection_size must be an int"):
        rnn.LSTM(HIDDEN, projection_size=2.5)
    layer = rnn.LSTM(HIDDEN, projection_size=PROJECTION)
    layer.initialize()
    with pytest.raises(GluonError, match=r"expected \(1, 2, 3\)"):
        layer(mx.nd.ones((STEPS, BATCH, FEATURES)), [mx.nd.zeros((1, 2, HIDDEN)), mx.nd.zeros((1, 2, HIDDEN))])
    assert rnn.LSTM(HIDDEN, projection_size=0).state_info(1)[0]["shape"] == (1, 1, HIDDEN)  # 0: none, as MXNet
