"""Inputs read for their shape only (``OpDef.reads_shape_only``) do not keep their producers' outputs alive.

The gradient of ``a + b`` is ``_reduce_sum_like(g, a)`` and ``_reduce_sum_like(g, b)``: they
need the shapes of ``a`` and ``b``, never their values (MXNet's ``_backward_add`` takes no
input at all). Before this was told to the planner, the summands of every residual sum
stayed allocated until the backward pass: ResNet-50's training plan was 1.19x MXNet's.
"""

import numpy as np
import pytest
from mxkit import ndarray as nd
from mxkit import symbol as sym
from mxkit.memplan.liveness import lifetimes
from mxkit.ndarray.registry import get_registry
from mxkit.symbol.exec_graph import build_exec_graph


def _residual_block():
    data = sym.Variable("data")
    body = sym.BatchNorm(sym.Convolution(data, num_filter=4, kernel=(3, 3), pad=(1, 1), name="conv"), name="bn")
    return sym.Activation(body + data, act_type="relu", name="out")


def test_the_like_operands_are_declared_shape_only():
    registry = get_registry()
    assert registry.get("_reduce_sum_like").reads_shape_only == {1}
    assert registry.get("broadcast_like").reads_shape_only == {1}
    assert registry.get("reshape_like").reads_shape_only == {1}
    # a kernel that reads the values must not claim otherwise
    assert registry.get("elemwise_add").reads_shape_only == frozenset()


def test_a_summand_dies_at_the_sum_not_in_the_backward_pass():
    graph = build_exec_graph(_residual_block(), {"data": (2, 4, 5, 5)}, {}, "write", for_training=True)
    memory = graph.memory_graph()
    times = lifetimes(memory)
    names = [entry.name for entry in memory.entries]
    bn_out = next(i for i, name in enumerate(names) if name.endswith(":bn_output"))
    add_step = next(step for step, node in enumerate(memory.nodes) if "_plus" in node.name or "add" in node.name)
    # the BatchNorm output is read by the sum only; the backward's _reduce_sum_like reads its shape
    assert times.end[bn_out] == add_step
    assert any(node.name.endswith("_reduce_sum_like") or "_reduce_sum_like" in node.name
               for node in memory.nodes[len(graph.forward_nodes):])


@pytest.mark.parametrize("strategy", ["inplace", "coshare", "mxnet", "greedy", "auto"])
def test_gradients_are_the_same_when_the_storage_of_shape_only_inputs_is_reused(strategy):
    net = _residual_block() * sym.Variable("w")
    rng = np.random.default_rng(0)
    values = {"data": rng.normal(size=(2, 4, 5, 5)), "w": rng.normal(size=(2, 4, 5, 5)),
              "conv_weight": rng.normal(size=(4, 4, 3, 3)) * 0.2, "conv_bias": rng.normal(size=4),
              "bn_gamma": rng.normal(size=4) + 1, "bn_beta": rng.normal(size=4)}
    grads = {}
    for memplan in ("none", strategy):
        exe = net.simple_bind(None, memplan=memplan, data=(2, 4, 5, 5), w=(2, 4, 5, 5))
        for name, value in values.items():
            exe.arg_dict[name][:] = value
        exe.forward(is_train=True)
        exe.backward(nd.array(np.linspace(-1, 1, 200).reshape(2, 4, 5, 5)))
        nd.waitall()
        grads[memplan] = {name: g.asnumpy() for name, g in exe.grad_dict.items()}
    for name, reference in grads["none"].items():
        np.testing.assert_array_equal(grads[strategy][name], reference, err_msg=name)


def test_binding_a_graph_larger_than_memory_is_an_mxkit_error():
    from mxkit.core.errors import OutOfMemoryError
    from mxkit.symbol import FullyConnected, Variable

    # (sizes past what any address space holds: the allocation fails on every machine,
    # whatever its memory overcommit policy)
    net = FullyConnected(Variable("data"), num_hidden=2**31, name="fc")
    with pytest.raises(OutOfMemoryError, match=r"cannot allocate .* it needs [0-9.]+ EiB"):
        net.simple_bind(data=(2**31, 2**31))
