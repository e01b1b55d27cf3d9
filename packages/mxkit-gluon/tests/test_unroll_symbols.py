"""Cells unrolled over Symbols without ``begin_state``, against MXNet 1.9.1
(``fixtures/unroll_symbols.json``, written by ``fixtures/make_unroll_fixtures.py``): the zero
states get their batch size from shape inference, the step nodes carry MXNet's names
(``<prefix>t<i>_out``), unrolled steps share one variable per parameter, and the variables
carry their initializers (``__init__``) for a Module bound to the graph."""

import json
import os

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import rnn
from mxkit.gluon.parameter import GluonError

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "fixtures", "unroll_symbols.json")) as f:
    EXPECTED = json.load(f)
LENGTH, STEP_SHAPE = 3, (4, 5)


def _stack():
    stack = rnn.SequentialRNNCell()
    stack.add(rnn.LSTMCell(6, i2h_bias_initializer=mx.init.LSTMBias(2.0), prefix="l0_"))
    stack.add(rnn.BidirectionalCell(rnn.GRUCell(3, prefix="l1_l_"), rnn.RNNCell(3, prefix="l1_r_"),
                                    output_prefix="l1_bi_"))
    return stack


CASES = {  # as in the fixture script
    "rnn": lambda: rnn.RNNCell(6, prefix="rnn_"),
    "rnn_relu": lambda: rnn.RNNCell(6, activation="relu", prefix="rnnrelu_"),
    "lstm": lambda: rnn.LSTMCell(6, prefix="lstm_"),
    "gru": lambda: rnn.GRUCell(6, prefix="gru_"),
    "bidirectional": lambda: rnn.BidirectionalCell(rnn.LSTMCell(6, prefix="bl_"), rnn.LSTMCell(6, prefix="br_"),
                                                   output_prefix="bi_"),
    "stack": _stack,
}


def _unrolled(name):
    inputs = [mx.sym.Variable(f"t{i}_data") for i in range(LENGTH)]
    outputs, states = CASES[name]().unroll(LENGTH, inputs)
    return mx.sym.Group(outputs + states)


@pytest.mark.parametrize("name", sorted(CASES))
def test_unrolled_graph_names_shapes_and_initializers_are_mxnets(name):
    want = EXPECTED[name]
    group = _unrolled(name)
    assert group.list_outputs() == want["outputs"]
    assert sorted(group.list_arguments()) == sorted(want["arguments"])
    _, out_shapes, _ = group.infer_shape(**{f"t{i}_data": STEP_SHAPE for i in range(LENGTH)})
    assert [list(s) for s in out_shapes] == want["output_shapes"]
    attrs = group.attr_dict()
    got_init = {arg: attrs.get(arg, {}).get("__init__") for arg in group.list_arguments()}
    assert {arg: _parsed(init) for arg, init in got_init.items()} == {arg: _parsed(init)
                                                                     for arg, init in want["init"].items()}


def _parsed(init):
    """An initializer attribute: a name ('zeros') or a dumps() JSON list, compared whatever its spacing."""
    return json.loads(init) if init is not None and init.startswith("[") else init


def test_an_unrolled_stack_binds_and_its_module_applies_the_forget_bias():
    """The unrolled graph binds (one variable per parameter) and a Module initialises the LSTM's
    i2h bias with LSTMBias(2.0) from the variable's __init__: zeros but the forget gate's quarter."""
    group = _unrolled("stack")
    module = mx.mod.Module(group, data_names=[f"t{i}_data" for i in range(LENGTH)], label_names=None)
    module.bind(data_shapes=[(f"t{i}_data", STEP_SHAPE) for i in range(LENGTH)], for_training=False)
    module.init_params(mx.init.Uniform(0.1))
    bias = module.get_params()[0]["l0_i2h_bias"].asnumpy()
    np.testing.assert_array_equal(bias, np.concatenate([np.zeros(6), np.full(6, 2.0), np.zeros(12)]))
    batch = mx.io.DataBatch([mx.nd.ones(STEP_SHAPE) for _ in range(LENGTH)])
    module.forward(batch)
    assert [o.shape for o in module.get_outputs()][:LENGTH] == [(4, 6), (4, 6), (4, 6)]


def test_a_stack_holding_a_bidirectional_cell_refuses_to_be_stepped():
    stack = _stack()
    stack.initialize()
    with pytest.raises(GluonError, match="cannot be stepped"):
        stack(mx.nd.ones(STEP_SHAPE), stack.begin_state(batch_size=4))
