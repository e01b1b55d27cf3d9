"""Block.save / Block.load (MXNet 1.9.1's whole-model files): a model written by MXNet 1.9.1
(``fixtures/block_save-*``, from ``fixtures/make_block_save_fixtures.py``) loads into a second
build with other automatic names and gives MXNet's output; our own files round-trip the same way."""

import json
import os

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import GluonError

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def build():
    class Chain(mx.gluon.nn.Block):
        def add(self, block):
            self._children[block.name + str(len(self._children))] = block

        def forward(self, x):
            for block in self._children.values():
                x = block(x)
            return x

    inner = Chain()
    inner.add(mx.gluon.nn.Dense(4, activation="tanh"))
    net = Chain()
    net.add(inner)
    net.add(mx.gluon.nn.Dense(3))
    return net


def test_a_model_saved_by_mxnet_loads_into_a_new_build_and_gives_its_output():
    saved = np.load(os.path.join(HERE, "block_save.npz"))
    net = build()  # automatic names other than the saved dense3/dense4
    net.load(os.path.join(HERE, "block_save"))
    assert [b._active for b in (net._children["dense41"], net._children["chain00"]._children["dense30"])] == [True] * 2
    np.testing.assert_allclose(net(mx.nd.array(saved["x"])).asnumpy(), saved["out"], rtol=1e-5, atol=1e-6)


def test_our_files_round_trip_and_carry_mxnets_fields(tmp_path):
    net = build()
    net.initialize(mx.init.Uniform(0.5))
    net.hybridize()
    x = mx.nd.array(np.random.RandomState(1).uniform(-1, 1, (3, 5)))
    want = net(x).asnumpy()
    prefix = str(tmp_path / "model")
    net.save(prefix)
    with open(prefix + "-model.json") as f:
        top = next(iter(json.load(f).values()))
    dense = next(entry for key, entry in top.items() if key.startswith("dense"))
    assert dense["hybridized"] and {"symbol", "inputs", "in_format", "out_format"} <= set(dense)
    again = build()
    again.load(prefix)
    np.testing.assert_allclose(again(x).asnumpy(), want, rtol=1e-6)


def test_loading_into_a_different_model_fails_clearly(tmp_path):
    net = build()
    net.initialize()
    net(mx.nd.ones((1, 5)))  # shapes known: the parameters can be saved
    prefix = str(tmp_path / "model")
    net.save(prefix)
    other = mx.gluon.nn.HybridSequential()
    with pytest.raises(GluonError, match="same code"):
        other.load(prefix)
    with open(prefix + "-model.json", "w") as f:
        f.write("{not json")
    with pytest.raises(GluonError, match="not a model file"):
        build().load(prefix)
