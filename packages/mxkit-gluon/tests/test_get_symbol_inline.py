"""autograd.get_symbol over a hybridized block's call: inlined into its operators when the
graph has at most ``inline_limit`` of them (MXNet's default 2), one _CachedOp node otherwise
(MXNet 1.9.1's test_gluon.test_inline counts the difference)."""

import json

import numpy as np
from mxkit import mx
from mxkit.gluon import nn


def _net(layers):
    net = nn.HybridSequential()
    with net.name_scope():
        for _ in range(layers):
            net.add(nn.Dense(4))
    net.initialize(mx.init.Uniform(0.5))
    return net


def _recorded(net, x):
    with mx.autograd.record():
        y = net(x)
    symbol = mx.autograd.get_symbol(y)
    y.backward()
    return symbol, y


def _ops(symbol):
    return [n["op"] for n in json.loads(symbol.tojson())["nodes"] if n["op"] != "null"]


def test_inlined_graph_evaluates_to_the_blocks_output():
    net = _net(3)
    net.hybridize(inline_limit=3)
    x = mx.nd.array(np.random.RandomState(0).randn(2, 4))
    symbol, y = _recorded(net, x)
    assert _ops(symbol) == ["FullyConnected"] * 3
    # the data (not marked) is null0; the six parameters (marked by their gradients) are var0..var5
    assert symbol.list_arguments() == ["null0"] + [f"var{i}" for i in range(6)]
    values = [x] + [p.data() for p in net.collect_params().values()]
    got = symbol.eval(**dict(zip(symbol.list_arguments(), values)))[0]
    np.testing.assert_allclose(got.asnumpy(), y.asnumpy(), rtol=1e-6)


def test_graphs_over_the_limit_are_one_cached_op_node():
    net = _net(3)
    net.hybridize(inline_limit=0)
    x = mx.nd.zeros((1, 4))
    symbol, _ = _recorded(net, x)
    assert _ops(symbol) == ["_CachedOp"]
    inlined = _net(3)
    inlined.hybridize(inline_limit=3)
    assert len(json.loads(_recorded(inlined, x)[0].tojson())["nodes"]) == \
        len(json.loads(symbol.tojson())["nodes"]) + 2  # as in MXNet's test_inline
    # MXNet's default limit is 2 operators
    small, large = _net(2), _net(3)
    small.hybridize()
    large.hybridize()
    assert _ops(_recorded(small, x)[0]) == ["FullyConnected"] * 2
    assert _ops(_recorded(large, x)[0]) == ["_CachedOp"]
