"""``mx.nd.CachedOp``: a Symbol called on NDArrays, against the same operators run imperatively."""

import numpy as np
import pytest
from mxkit import ndarray as nd
from mxkit import symbol as sym
from mxkit.ndarray import autograd
from mxkit.symbol.executor import ExecutorError


def conv_plus_two():
    return sym.Convolution(sym.Variable("data"), num_filter=4, kernel=(3, 3), name="conv") + 2


def arrays(seed, batch=2, channels=3):
    rng = np.random.default_rng(seed)
    return (nd.array(rng.normal(size=(batch, channels, 6, 6)), dtype="float64"),
            nd.array(rng.normal(size=(4, channels, 3, 3)), dtype="float64"),
            nd.array(rng.normal(size=(4,)), dtype="float64"))


def imperative(data, weight, bias):
    return nd.Convolution(data, weight, bias, num_filter=4, kernel=(3, 3)) + 2


def test_calls_equal_the_imperative_operators_and_see_new_values():
    op = nd.CachedOp(conv_plus_two())
    data, weight, bias = arrays(0)
    np.testing.assert_allclose(op(data, weight, bias).asnumpy(), imperative(data, weight, bias).asnumpy(),
                               rtol=1e-12)
    bias[:] = 5
    out = nd.zeros((2, 4, 4, 4), dtype="float64")
    assert op(data, weight, bias, out=out) is out
    np.testing.assert_allclose(out.asnumpy(), imperative(data, weight, bias).asnumpy(), rtol=1e-12)
    # another signature binds another executor
    other = arrays(1, batch=3, channels=2)
    np.testing.assert_allclose(op(*other).asnumpy(), imperative(*other).asnumpy(), rtol=1e-12)


def test_gradients_equal_those_of_the_imperative_operators():
    op = nd.CachedOp(conv_plus_two())
    data, weight, bias = arrays(2)
    head = nd.array(np.random.default_rng(3).normal(size=(2, 4, 4, 4)), dtype="float64")
    results = []
    for run in (op, imperative):
        for a in (data, weight, bias):
            a.attach_grad()
        with autograd.record():
            out = run(data, weight, bias) * 2
        out.backward(head)
        results.append([a.grad.asnumpy() for a in (data, weight, bias)])
    for cached, plain in zip(*results):
        np.testing.assert_allclose(cached, plain, rtol=1e-10, atol=1e-12)


def test_a_retained_graph_differentiates_twice_after_other_calls():
    op = nd.CachedOp(conv_plus_two())
    data, weight, bias = arrays(4)
    weight.attach_grad()
    with autograd.record():
        first = op(data, weight, bias)
    op(*arrays(5))  # runs the same executor with other values (no recording)
    first.backward(retain_graph=True)
    once = weight.grad.asnumpy().copy()
    first.backward()
    np.testing.assert_allclose(weight.grad.asnumpy(), once)
    weight.attach_grad()
    with autograd.record():
        expected = nd.Convolution(data, weight, bias, num_filter=4, kernel=(3, 3))
    expected.backward()
    np.testing.assert_allclose(once, weight.grad.asnumpy(), rtol=1e-12)


def test_auxiliary_states_are_the_callers_arrays():
    net = sym.BatchNorm(sym.Variable("data"), fix_gamma=False, momentum=0.5, name="bn")
    op = nd.CachedOp(net)
    assert net.list_inputs() == ["data", "bn_gamma", "bn_beta", "bn_moving_mean", "bn_moving_var"]
    data = nd.array(np.arange(8.0).reshape(4, 2), dtype="float64")
    gamma, beta = nd.ones((2,), dtype="float64"), nd.zeros((2,), dtype="float64")
    mean, var = nd.zeros((2,), dtype="float64"), nd.ones((2,), dtype="float64")
    data.attach_grad()
    with autograd.record(train_mode=True):
        op(data, gamma, beta, mean, var)
    np.testing.assert_allclose(mean.asnumpy(), 0.5 * np.arange(8.0).reshape(4, 2).mean(axis=0))


def test_bad_calls_are_clear_errors():
    op = nd.CachedOp(conv_plus_two())
    with pytest.raises(ExecutorError, match=r"takes 3 inputs \(data, conv_weight, conv_bias\), got 1"):
        op(nd.ones((1, 3, 6, 6)))
    with pytest.raises(ExecutorError, match="'conv_weight' is ndarray, expected an NDArray"):
        op(nd.ones((1, 3, 6, 6)), np.ones((4, 3, 3, 3)), nd.ones((4,)))
    with pytest.raises(ExecutorError, match="takes a Symbol"):
        nd.CachedOp("conv")
