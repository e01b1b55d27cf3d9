"""foreach: nd.contrib.foreach and sym.contrib.foreach against a numpy loop and finite
differences, the graph loop against the imperative one, shape inference through the body,
and the refusals."""

import numpy as np
import pytest
from mxkit import ndarray as nd
from mxkit import symbol as sym
from mxkit.core.errors import MXKitError, ShapeError
from mxkit.ndarray import autograd
from mxkit.ndarray.control_flow import ForeachError
from mxkit.symbol.control_flow import LoopError

RNG = np.random.RandomState(0)
X = RNG.randn(4, 2, 3)  # 4 steps, batch 2, 3 features
S0 = RNG.randn(2, 3)
W = RNG.randn(3, 3) * 0.5


def numpy_loop(x, s, w):
    """outputs (2 tanh(x_t w + s_{t-1}) per step, stacked) and the last state."""
    outs = []
    for t in range(x.shape[0]):
        s = np.tanh(x[t] @ w + s)
        outs.append(2 * s)
    return np.stack(outs), s


def loss_numpy(x, s, w):
    outs, last = numpy_loop(x, s, w)
    return (outs * np.arange(1, outs.size + 1).reshape(outs.shape)).sum() + (last ** 2).sum()


def finite_difference(f, value, eps=1e-6):
    grad = np.zeros_like(value)
    for index in np.ndindex(value.shape):
        up, down = value.copy(), value.copy()
        up[index] += eps
        down[index] -= eps
        grad[index] = (f(up) - f(down)) / (2 * eps)
    return grad


def _weights(shape):
    return nd.array(np.arange(1, np.prod(shape) + 1).reshape(shape), dtype="float64")


def test_imperative_foreach_matches_a_numpy_loop_and_finite_differences():
    x, s, w = (nd.array(a, dtype="float64") for a in (X, S0, W))
    for a in (x, s, w):
        a.attach_grad()

    def body(step, states):
        h = nd.tanh(nd.dot(step, w) + states[0])
        return h * 2, [h]

    with autograd.record():
        outs, states = nd.contrib.foreach(body, x, [s])
        loss = (outs * _weights(outs.shape)).sum() + (states[0] ** 2).sum()
    loss.backward()
    want_outs, want_last = numpy_loop(X, S0, W)
    np.testing.assert_allclose(outs.asnumpy(), want_outs, rtol=1e-12)
    np.testing.assert_allclose(states[0].asnumpy(), want_last, rtol=1e-12)
    np.testing.assert_allclose(w.grad.asnumpy(), finite_difference(lambda v: loss_numpy(X, S0, v), W), rtol=1e-6)
    np.testing.assert_allclose(x.grad.asnumpy(), finite_difference(lambda v: loss_numpy(v, S0, W), X), rtol=1e-6)
    np.testing.assert_allclose(s.grad.asnumpy(), finite_difference(lambda v: loss_numpy(X, v, W), S0), rtol=1e-6)


def _graph_loop(**kwargs):
    def body(step, states):
        h = sym.tanh(sym.dot(step, sym.var("w")) + states[0])
        return h * 2, [h]

    return sym.contrib.foreach(body, sym.var("x"), [sym.var("s")], **kwargs)


def test_graph_foreach_infers_shapes_through_its_body_and_trains_like_the_numpy_loop():
    outs, states = _graph_loop(name="loop")
    net = sym.Group([outs, states[0]])
    assert net.list_arguments() == ["x", "s", "w"]
    _, out_shapes, _ = net.infer_shape(x=(4, 2, 3), s=(2, 3), w=(3, 3))
    assert out_shapes == [(4, 2, 3), (2, 3)]
    exe = net.simple_bind(None, x=(4, 2, 3), s=(2, 3), w=(3, 3), type_dict={"x": "float64", "s": "float64",
                                                                              "w": "float64"})
    for name, value in (("x", X), ("s", S0), ("w", W)):
        exe.arg_dict[name][:] = value
    got_outs, got_last = exe.forward(is_train=True)
    want_outs, want_last = numpy_loop(X, S0, W)
    np.testing.assert_allclose(got_outs.asnumpy(), want_outs, rtol=1e-12)
    np.testing.assert_allclose(got_last.asnumpy(), want_last, rtol=1e-12)
    exe.backward([_weights((4, 2, 3)), nd.array(2 * want_last, dtype="float64")])
    np.testing.assert_allclose(exe.grad_dict["w"].asnumpy(), finite_difference(lambda v: loss_numpy(X, S0, v), W),
                               rtol=1e-6)
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), finite_difference(lambda v: loss_numpy(v, S0, W), X),
                               rtol=1e-6)
    # another length binds another unrolling of the same symbol
    short = net.simple_bind(None, x=(1, 2, 3), s=(2, 3), w=(3, 3))
    for name, value in (("x", X[:1]), ("s", S0), ("w", W)):
        short.arg_dict[name][:] = value
    np.testing.assert_allclose(short.forward()[0].asnumpy(), numpy_loop(X[:1], S0, W)[0], rtol=1e-5)


def test_several_data_states_and_outputs_keep_their_structure():
    a, b = RNG.randn(3, 2), RNG.randn(3, 2)

    def body_nd(steps, states):
        total, count = states
        return [steps[0] * steps[1], steps[0] + total], [total + steps[1], count + 1]

    def body_sym(steps, states):
        total, count = states
        return [steps[0] * steps[1], steps[0] + total], [total + steps[1], count + 1]

    (prod, run), (total, count) = nd.contrib.foreach(body_nd, [nd.array(a), nd.array(b)], [nd.zeros(2), nd.zeros(1)])
    np.testing.assert_allclose(prod.asnumpy(), a * b, rtol=1e-6)
    np.testing.assert_allclose(total.asnumpy(), b.sum(0), rtol=1e-6)
    assert count.asnumpy().tolist() == [3.0]
    np.testing.assert_allclose(run.asnumpy(), a + np.vstack([np.zeros(2), np.cumsum(b, 0)[:-1]]), rtol=1e-6)
    outs, states = sym.contrib.foreach(body_sym, [sym.var("a"), sym.var("b")], [sym.var("t"), sym.var("c")])
    graph = sym.Group([*outs, *states])
    results = graph.eval(a=nd.array(a), b=nd.array(b), t=nd.zeros(2), c=nd.zeros(1))
    for got, want in zip(results, (prod, run, total, count)):
        np.testing.assert_allclose(got.asnumpy(), want.asnumpy(), rtol=1e-6)


def test_refusals_are_clear():
    with pytest.raises(ForeachError, match=r"must return \(outputs, new_states\)"):
        nd.contrib.foreach(lambda d, s: d, nd.ones((2, 3)), [nd.ones(3)])
    with pytest.raises(ForeachError, match="same first dimension"):
        nd.contrib.foreach(lambda d, s: (d[0], s), [nd.ones((2, 3)), nd.ones((3, 3))], [nd.ones(3)])
    with pytest.raises(ForeachError, match="no steps"):
        nd.contrib.foreach(lambda d, s: (d, s), nd.ones((0, 3)), [nd.ones(3)])
    with pytest.raises(ForeachError, match="must be an NDArray"):
        nd.contrib.foreach(lambda d, s: (d, s), nd.ones((2, 3)), [3.0])
    with pytest.raises(LoopError, match="one new state per state"):
        sym.contrib.foreach(lambda d, s: (d, []), sym.var("x"), [sym.var("s")])
    with pytest.raises(LoopError, match="auxiliary states"):
        sym.contrib.foreach(lambda d, s: (sym.BatchNorm(d, name="bn"), s), sym.var("x"), [sym.var("s")])
    outs, _ = _graph_loop(name="loop")
    with pytest.raises(LoopError, match="foreach loop, whose body MXNet's JSON keeps as a subgraph"):
        outs.tojson()
    with pytest.raises(ShapeError, match="keep its shape"):
        sym.contrib.foreach(lambda d, s: (d, [d.sum(axis=1)]), sym.var("x"), [sym.var("s")])[0].infer_shape(
            x=(4, 2, 3), s=(2, 3))
    with pytest.raises(MXKitError, match="number of steps"):
        outs.simple_bind(None, x=(0, 2, 3), s=(2, 3), w=(3, 3))
