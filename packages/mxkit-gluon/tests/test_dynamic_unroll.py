"""contrib.rnn.rnn_cell.dynamic_unroll (a foreach loop) against the cell's own unroll (a
Python loop over the steps, tested against MXNet elsewhere): outputs, final states and
gradients, imperative and hybridized, both layouts, with and without valid lengths (after
MXNet 1.9.1's test_gluon_contrib.test_contrib_unroll, at smaller sizes)."""

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import HybridBlock, rnn
from mxkit.gluon.contrib.rnn.rnn_cell import dynamic_unroll

BATCH, FEATURES, HIDDEN, STEPS = 3, 4, 5, 6


class Unrolled(HybridBlock):
    def __init__(self, cell_type, layout):
        super().__init__()
        self.layout = layout
        with self.name_scope():
            self.cell = cell_type(HIDDEN, prefix="rnn_")

    def hybrid_forward(self, F, inputs, states, valid_length):
        # (as in MXNet's test: an empty list stands for no lengths, a hybridized block takes no None)
        return dynamic_unroll(self.cell, inputs, states, layout=self.layout,
                              valid_length=None if isinstance(valid_length, list) else valid_length)


@pytest.mark.parametrize("cell_type, num_states", [(rnn.RNNCell, 1), (rnn.LSTMCell, 2), (rnn.GRUCell, 1)])
@pytest.mark.parametrize("layout", ["TNC", "NTC"])
@pytest.mark.parametrize("hybridize", [False, True])
def test_dynamic_unroll_equals_the_cells_unroll(cell_type, num_states, layout, hybridize):
    rng = np.random.RandomState(1)
    shape = (STEPS, BATCH, FEATURES) if layout == "TNC" else (BATCH, STEPS, FEATURES)
    data = mx.nd.array(rng.randn(*shape))
    lengths = mx.nd.array([6, 2, 4])
    states = [mx.nd.array(rng.randn(BATCH, HIDDEN)) for _ in range(num_states)]
    for with_lengths in (True, False):
        net = Unrolled(cell_type, layout)
        net.initialize(mx.init.Uniform(0.5))
        if hybridize:
            net.hybridize()
        with mx.autograd.record():
            out, last = net(data, states, lengths if with_lengths else [])
            (out * out).sum().backward()
        got = [p.grad().asnumpy().copy() for p in net.collect_params().values()]
        with mx.autograd.record():
            want_out, want_last = net.cell.unroll(STEPS, data, states, layout=layout, merge_outputs=True,
                                                  valid_length=lengths if with_lengths else None)
            (want_out * want_out).sum().backward()
        np.testing.assert_allclose(out.asnumpy(), want_out.asnumpy(), rtol=1e-5, atol=1e-6)
        assert len(last) == num_states
        for a, b in zip(last, want_last):
            np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-5, atol=1e-6)
        for a, p in zip(got, net.collect_params().values()):
            np.testing.assert_allclose(a, p.grad().asnumpy(), rtol=1e-4, atol=1e-6)
        if with_lengths:  # sample 1 has 2 valid steps: its later outputs are 0
            padded = out.asnumpy()[2:, 1] if layout == "TNC" else out.asnumpy()[1, 2:]
            assert padded.shape == (STEPS - 2, HIDDEN) and not padded.any()
        if hybridize:
            assert net.memory_plan() is not None
