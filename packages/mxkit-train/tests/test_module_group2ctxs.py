"""Module and BucketingModule with ``group2ctxs``: model-parallel groups on their devices."""

import numpy as np
import pytest
from mxkit import ndarray as nd
from mxkit import symbol as sym
from mxkit.core.context import cpu
from mxkit.io import DataBatch
from mxkit.symbol.attribute import AttrScope
from mxkit.train.module import BucketingModule, Module
from mxkit.train.module.executor_group import ModuleError, prepare_group2ctxs


def two_groups():
    with AttrScope(ctx_group="dev1"):
        a = sym.Variable("a") * 2
    with AttrScope(ctx_group="dev2"):
        b = sym.Variable("b")
        return a + b * 3


def input_grads(contexts, group2ctxs):
    mod = Module(two_groups(), context=contexts, data_names=["a", "b"], label_names=None, group2ctxs=group2ctxs)
    mod.bind(data_shapes=[("a", (4, 5)), ("b", (4, 5))], inputs_need_grad=True)
    mod.init_params()
    mod.forward(DataBatch(data=[nd.ones((4, 5)), nd.ones((4, 5))]), is_train=True)
    mod.backward([nd.ones((4, 5))])
    return mod.get_input_grads(merge_multi_context=False), mod.get_outputs()[0]


def test_input_gradients_live_on_their_groups_devices():
    grads, out = input_grads([cpu(0)], {"dev1": cpu(1), "dev2": cpu(2)})
    (grad_a,), (grad_b,) = grads
    assert grad_a.context == cpu(1) and grad_b.context == cpu(2)
    np.testing.assert_array_equal(grad_a.asnumpy(), np.full((4, 5), 2.0))
    np.testing.assert_array_equal(grad_b.asnumpy(), np.full((4, 5), 3.0))
    np.testing.assert_array_equal(out.asnumpy(), np.full((4, 5), 5.0))


@pytest.mark.parametrize("group2ctxs", [
    [{"dev1": cpu(2), "dev2": cpu(3)}, {"dev1": cpu(4), "dev2": cpu(5)}],
    {"dev1": cpu(2), "dev2": [cpu(3)]},
    {"dev1": [cpu(2), cpu(4)], "dev2": [cpu(3), cpu(5)]},
])
def test_data_parallel_copies_each_have_their_groups(group2ctxs):
    grads, out = input_grads([cpu(0), cpu(1)], group2ctxs)
    per_device = prepare_group2ctxs(group2ctxs, 2)
    for device, (grad_a, grad_b) in enumerate(zip(*grads)):
        assert grad_a.context == per_device[device]["dev1"] and grad_b.context == per_device[device]["dev2"]
        np.testing.assert_array_equal(grad_a.asnumpy(), np.full((2, 5), 2.0))
    np.testing.assert_array_equal(out.asnumpy(), np.full((4, 5), 5.0))


def test_prepare_group2ctxs_spreads_one_dict_over_the_devices():
    assert prepare_group2ctxs(None, 2) == [None, None]
    assert prepare_group2ctxs({"g": cpu(1)}, 2) == [{"g": cpu(1)}, {"g": cpu(1)}]
    assert prepare_group2ctxs({"g": [cpu(1), cpu(2)]}, 2) == [{"g": cpu(1)}, {"g": cpu(2)}]


def test_bad_group2ctxs_are_clear_errors():
    with pytest.raises(ModuleError, match="3 dicts for 2 contexts"):
        prepare_group2ctxs([{}, {}, {}], 2)
    with pytest.raises(ModuleError, match=r"group2ctxs\['g'\].*list of 1 or 2"):
        prepare_group2ctxs({"g": [cpu(1), cpu(2), cpu(3)]}, 2)
    with pytest.raises(ModuleError, match="must be a dict"):
        Module(two_groups(), data_names=["a", "b"], label_names=None, group2ctxs="dev1")


def test_bucketing_module_binds_its_buckets_with_the_groups():
    def sym_gen(length):
        with AttrScope(ctx_group="dev1"):
            data = sym.Variable("data")
            hidden = sym.FullyConnected(data, num_hidden=6, name="fc1")
        with AttrScope(ctx_group="dev2"):
            out = sym.SoftmaxOutput(sym.FullyConnected(hidden, num_hidden=3, name="fc2"), name="softmax")
        return out, ("data",), ("softmax_label",)

    mod = BucketingModule(sym_gen, default_bucket_key=4, context=[cpu(0)],
                          group2ctxs=[{"dev1": cpu(1), "dev2": cpu(2)}])
    mod.bind(data_shapes=[("data", (2, 4))], label_shapes=[("softmax_label", (2,))])
    mod.init_params()
    mod.forward(DataBatch(data=[nd.ones((2, 4))], label=[nd.zeros((2,))]), is_train=True)
    out = mod.get_outputs()[0]
    assert out.context == cpu(2)
    np.testing.assert_allclose(out.asnumpy().sum(axis=1), np.ones(2), rtol=1e-6)
    weights = mod._curr_module._exec_group.execs[0].arg_dict
    assert weights["fc1_weight"].context == cpu(1) and weights["fc2_weight"].context == cpu(2)
