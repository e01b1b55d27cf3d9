"""mx.autograd.get_symbol: the recorded graph as a Symbol, checked by evaluating it against
numpy, with MXNet's names for the leaves, and the errors for what has no Symbol form."""

import mxkit.ndarray.autograd
import numpy as np
import pytest
from mxkit import mx
from mxkit.core.errors import MXKitError


def _leaf(values):
    array = mx.nd.array(values)
    array.attach_grad()
    return array


def test_exported_graph_computes_what_was_recorded():
    x, z = _leaf([1.0, 2.0]), _leaf([3.0, -1.0])
    with mx.autograd.record():
        y = mx.nd.exp(x * x + 2 * z - 1)
    sym = mx.autograd.get_symbol(y)
    assert sym.list_arguments() == ["var0", "var1"]
    assert all(name.startswith("node_") for name in sym.get_internals().list_outputs()
               if not name.startswith("var"))
    a, b = np.array([0.5, -1.5], np.float32), np.array([2.0, 0.25], np.float32)
    got = sym.eval(var0=mx.nd.array(a), var1=mx.nd.array(b))[0].asnumpy()
    # var0 is x and var1 is z: the walk meets x * x first
    np.testing.assert_allclose(got, np.exp(a * a + 2 * b - 1), rtol=1e-6)


def test_one_node_per_operation_and_constant_inputs_become_null_variables():
    x = _leaf(np.arange(6, dtype=np.float32).reshape(2, 3))
    constant = mx.nd.array([[1.0, 2.0, 3.0]])
    with mx.autograd.record():
        first, second = mx.nd.split(x, num_outputs=2, axis=0)
        y = mx.nd.broadcast_add(first * second, constant)
    sym = mx.autograd.get_symbol(y)
    assert sorted(sym.list_arguments()) == ["null0", "var0"]
    ops = [n for n in sym.get_internals().list_outputs() if "split" in n or n.startswith("node_")]
    assert len([n for n in ops if n.endswith("_output0") or n.endswith("_output1")]) == 2  # one split node
    data = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    got = sym.eval(var0=mx.nd.array(data), null0=mx.nd.array([[1.0, 2.0, 3.0]]))[0].asnumpy()
    np.testing.assert_allclose(got, data[:1] * data[1:] + np.array([[1.0, 2.0, 3.0]]))


def test_a_list_of_heads_gives_a_group():
    x = _leaf([1.0, 2.0])
    with mx.autograd.record():
        a, b = x * 2, x + 1
    sym = mx.autograd.get_symbol([a, b])
    assert len(sym.list_outputs()) == 2 and sym.list_arguments() == ["var0"]


def test_errors_name_what_cannot_be_exported():
    with pytest.raises(MXKitError, match=r"not computed under autograd\.record"):
        mx.autograd.get_symbol(mx.nd.ones((2,)))

    class Square(mx.autograd.Function):
        def forward(self, x):
            return x * x

        def backward(self, dy):
            return dy

    x = _leaf([1.0])
    with mx.autograd.record():
        y = Square()(x) + 1
    with pytest.raises(MXKitError, match="Function"):
        mx.autograd.get_symbol(y)
    # mxkit-ndarray alone has no Symbol type: its get_symbol says where the exporter is
    with pytest.raises(MXKitError, match="needs mxkit-symbol"):
        mxkit.ndarray.autograd.get_symbol(y)
