"""Block conveniences MXNet code relies on: sharing, hooks, apply, attribute rules, symbolic calls."""

import warnings

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import Block, HybridBlock, Parameter, SymbolBlock, nn


def test_shared_parameters_merge_shapes_and_share_values():
    class Net(Block):
        def __init__(self, in_units=0, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.dense0 = nn.Dense(5, in_units=in_units)

        def forward(self, x):
            return self.dense0(x)

    first = Net(prefix="net1_", in_units=5)
    second = Net(prefix="net2_", params=first.collect_params())  # declares (5, 0): merged with (5, 5)
    assert second.dense0.weight is first.dense0.weight and first.dense0.weight.shape == (5, 5)
    first.collect_params().initialize()
    x = mx.nd.ones((2, 5))
    np.testing.assert_array_equal(second(x).asnumpy(), first(x).asnumpy())
    with pytest.raises(mx.MXKitError, match="incompatible with its declared shape"):
        Net(prefix="net3_", in_units=4, params=first.collect_params())


def test_hooks_detach_and_apply_visits_children_first():
    calls = []
    block = nn.HybridSequential(prefix="test_")
    with block.name_scope():
        block.add(nn.Dense(3), nn.Dropout(0.5))
    block.initialize()
    handle = block.register_forward_hook(lambda b, x, y: calls.append("hook"))
    pre = block.register_forward_pre_hook(lambda b, x: calls.append("pre"))
    block(mx.nd.ones((1, 2)))
    handle.detach()
    block(mx.nd.ones((1, 2)))
    pre.detach()
    block(mx.nd.ones((1, 2)))
    assert calls == ["pre", "hook", "pre"]
    names = []
    block.apply(lambda b: names.append(b.name))
    assert names == ["test_dense0", "test_dropout0", "test"]


def test_block_and_parameter_attributes_keep_their_type():
    block = Block()
    block.child = Block()
    with pytest.raises(TypeError, match="from Block to tuple"):
        block.child = (2,)
    block.weight = Parameter("w")
    with pytest.raises(TypeError, match="from Parameter to int"):
        block.weight = 1
    block.plain = None
    block.plain = 1  # ordinary attributes may change type


def test_sequential_of_hybrid_blocks_suggests_hybridsequential():
    net = nn.Sequential()
    net.add(nn.Dense(2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        net.hybridize()
    assert len(caught) == 1 and "HybridSequential" in str(caught[0].message)


def test_symbol_block_composes_symbolically_inside_a_hybridized_parent():
    inner = nn.HybridSequential()
    inner.add(nn.Dense(4, activation="relu"), nn.Dense(2, in_units=4))
    inner.initialize()
    data = mx.sym.var("data")
    block = SymbolBlock(inner(data), data, params=inner.collect_params())

    class Parent(nn.HybridBlock):
        def __init__(self, child):
            super().__init__()
            self.child = child

        def hybrid_forward(self, F, x):
            return self.child(x) * 2

    parent = Parent(block)
    x = mx.nd.array(np.random.RandomState(0).rand(3, 5).astype(np.float32))
    expected = inner(x).asnumpy() * 2
    parent.hybridize()
    np.testing.assert_allclose(parent(x).asnumpy(), expected, rtol=1e-6)


def test_global_pooling_3d():
    x = mx.nd.array(np.arange(16, dtype=np.float32).reshape(1, 2, 2, 2, 2))
    assert nn.GlobalAvgPool3D()(x).asnumpy().ravel().tolist() == [3.5, 11.5]
    assert nn.GlobalMaxPool3D()(x).asnumpy().ravel().tolist() == [7.0, 15.0]


def test_a_list_of_blocks_held_as_an_attribute_is_warned_about():
    class Listed(Block):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.layers = [nn.Dense(2), nn.Dense(3)]
                self.table = {"a": [nn.Dense(2)]}
                self.names = {"a": "4", "b": 123}

    class Registered(Block):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.layers = nn.Sequential()
                self.layers.add(nn.Dense(2))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert len(Listed().collect_params()) == 0  # the listed Dense layers are not children
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 2 and "Listed.layers is a list holding Blocks" in messages[0]
    assert "Listed.table is a dict holding Blocks" in messages[1]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert len(Registered().collect_params()) == 2
    assert caught == []


def test_symbol_block_parameters_are_named_without_their_common_prefix(tmp_path):
    # MXNet 1.9.1 names this SymbolBlock's parameters batchnorm0_beta ... dense0_weight (checked
    # against it): the prefix all names share is dropped, so that a network holding one saves a
    # file that loads into another instance built under other global name counters
    class Holder(HybridBlock):
        def __init__(self, prefix):
            super().__init__()
            inner = nn.HybridSequential(prefix=prefix)
            with inner.name_scope():
                inner.add(nn.Dense(3, in_units=2), nn.BatchNorm(in_channels=3))
            with self.name_scope():
                self.backbone = SymbolBlock(inner(mx.sym.var("data")), mx.sym.var("data"),
                                            params=inner.collect_params())

        def hybrid_forward(self, F, x):
            return self.backbone(x)

    first = Holder("outer0_")
    assert sorted(first.backbone._reg_params) == ["batchnorm0_beta", "batchnorm0_gamma", "batchnorm0_running_mean",
                                                  "batchnorm0_running_var", "dense0_bias", "dense0_weight"]
    first.initialize(mx.init.Uniform(1.0))
    first.save_parameters(str(tmp_path / "sb.params"))
    assert "backbone.dense0_weight" in mx.nd.load(str(tmp_path / "sb.params"))
    second = Holder("outer7_")
    second.load_parameters(str(tmp_path / "sb.params"))
    x = mx.nd.array(np.arange(4, dtype=np.float32).reshape(2, 2))
    np.testing.assert_array_equal(second(x).asnumpy(), first(x).asnumpy())
