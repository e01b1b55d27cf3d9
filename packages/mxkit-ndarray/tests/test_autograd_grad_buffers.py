"""backward() writes a ``grad_req="write"`` variable's one gradient straight into its grad buffer
(the backward operator's output is the buffer, as in the executor) instead of a fresh array
copied in afterwards. The stored gradients must be the bits ``autograd.grad`` returns (its
results are fresh arrays, the path without direct writes), and every case where a direct
write would be wrong (several contributions, a graph reading the buffer, a shared buffer,
``grad_req="add"``) must keep the general path."""

import itertools
from types import SimpleNamespace

import mxkit.core
import mxkit.ndarray
import mxkit.ndarray.transfer
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

mx = SimpleNamespace(nd=mxkit.ndarray, autograd=mxkit.ndarray.autograd, cpu=mxkit.core.cpu)


@pytest.fixture
def copies(monkeypatch):
    """The copies into NDArrays pushed while the test runs (``x[:] = y`` goes through copy_into)."""
    made = []
    real = mxkit.ndarray.transfer.copy_into

    def counting(target, source):
        made.append((target, source))
        real(target, source)

    monkeypatch.setattr(mxkit.ndarray.transfer, "copy_into", counting)
    return made


def _mlp(data, label, weights, act_type="relu"):
    h = data
    for i in range(len(weights) // 2):
        h = mx.nd.FullyConnected(h, weights[2 * i], weights[2 * i + 1], num_hidden=weights[2 * i].shape[0])
        if i < len(weights) // 2 - 1:
            h = mx.nd.Activation(h, act_type=act_type)
    return mx.nd.SoftmaxOutput(h, label)


def _mlp_arrays(rng, batch, sizes):
    data = mx.nd.array(rng.standard_normal((batch, sizes[0])).astype("float32"))
    label = mx.nd.array(rng.integers(0, sizes[-1], batch).astype("float32"))
    weights = []
    for fan_in, fan_out in itertools.pairwise(sizes):
        weights.append(mx.nd.array((rng.standard_normal((fan_out, fan_in)) / np.sqrt(fan_in)).astype("float32")))
        weights.append(mx.nd.array(rng.standard_normal(fan_out).astype("float32")))
    return data, label, weights


@settings(max_examples=12, deadline=None)
@given(batch=st.integers(1, 9), sizes=st.lists(st.integers(1, 12), min_size=2, max_size=4),
       act_type=st.sampled_from(["relu", "tanh", "sigmoid"]), seed=st.integers(0, 2**16))
def test_mlp_gradients_written_in_place_equal_grad_bitwise(batch, sizes, act_type, seed):
    rng = np.random.default_rng(seed)
    data, label, weights = _mlp_arrays(rng, batch, sizes)
    for w in weights:
        w.attach_grad()
    buffers = [w.grad for w in weights]
    with mx.autograd.record():
        out = _mlp(data, label, weights, act_type)
    expected = [g.asnumpy() for g in mx.autograd.grad(out, weights, retain_graph=True)]
    out.backward()
    for w, buffer, want in zip(weights, buffers, expected):
        assert w.grad is buffer
        np.testing.assert_array_equal(w.grad.asnumpy().view(np.uint32), want.view(np.uint32))


def test_training_steps_with_direct_writes_match_copies(copies):
    """Three SGD steps, gradients stored by backward() against gradients from grad() applied by hand:
    the same weights to the bit, and no copy pushed by the backward() steps."""
    rng = np.random.default_rng(0)
    data, label, weights = _mlp_arrays(rng, 16, (20, 12, 8, 5))
    reference = [w.copy() for w in weights]
    for w in weights:
        w.attach_grad()
    for w in reference:
        w.attach_grad()
    for _ in range(3):
        with mx.autograd.record():
            out = _mlp(data, label, reference)
        grads = mx.autograd.grad(out, reference)
        for w, g in zip(reference, grads):
            w -= g * 0.1
        del copies[:]
        with mx.autograd.record():
            out = _mlp(data, label, weights)
        out.backward()
        assert copies == []  # every gradient was written by _backward_FullyConnected itself
        for w in weights:
            w -= w.grad * 0.1
    for got, want in zip(weights, reference):
        np.testing.assert_array_equal(got.asnumpy().view(np.uint32), want.asnumpy().view(np.uint32))


def test_variable_used_twice_accumulates(copies):
    x = mx.nd.array(np.arange(1, 7, dtype="float32").reshape(2, 3))
    w = mx.nd.array(np.full((4, 3), 0.5, dtype="float32"))
    w.attach_grad()
    with mx.autograd.record():
        y = mx.nd.FullyConnected(x, w, num_hidden=4, no_bias=True)
        z = mx.nd.FullyConnected(x * 2, w, num_hidden=4, no_bias=True)
        loss = (y * z).sum()
    loss.backward()
    assert len(copies) == 1  # the sum of the two contributions is copied in
    yv = x.asnumpy() @ w.asnumpy().T
    want = z.asnumpy().T @ x.asnumpy() + yv.T @ (2 * x.asnumpy())
    np.testing.assert_allclose(w.grad.asnumpy(), want, rtol=1e-6)


def test_graph_reading_a_grad_buffer_upstream_sees_its_old_value():
    """u = x * w.grad feeds the layer of w: u's gradient (computed after w's) must read the buffer's old
    value, so w's gradient cannot be written into the buffer during the pass."""
    x = mx.nd.array(np.array([[1.0, 2.0], [3.0, 4.0]], dtype="float32"))
    w = mx.nd.array(np.array([[0.5, -1.0], [2.0, 1.0], [1.5, 0.25]], dtype="float32"))
    x.attach_grad()
    w.attach_grad()
    w.grad[:] = np.array([[10.0, 20.0], [30.0, 40.0], [50.0, 60.0]], dtype="float32")
    with mx.autograd.record():
        u = x * w.grad[0:2]  # a view of the buffer: its var is the buffer's
        loss = mx.nd.FullyConnected(u, w, num_hidden=3, no_bias=True).sum()
    loss.backward()
    old = np.array([[10.0, 20.0], [30.0, 40.0]], dtype="float32")
    d_u = np.ones((2, 3), dtype="float32") @ w.asnumpy()
    np.testing.assert_allclose(x.grad.asnumpy(), d_u * old, rtol=1e-6)
    np.testing.assert_allclose(w.grad.asnumpy(), np.ones((2, 3)).T @ (x.asnumpy() * old), rtol=1e-6)


def test_shared_grad_buffer_and_add_keep_the_general_path():
    x = mx.nd.array(np.ones((2, 3), dtype="float32"))
    a = mx.nd.array(np.full((2, 3), 2.0, dtype="float32"))
    b = mx.nd.array(np.full((4, 3), 3.0, dtype="float32"))
    c = mx.nd.array(np.full((4, 3), 0.25, dtype="float32"))
    shared = mx.nd.zeros((4, 3))
    mx.autograd.mark_variables([b, c], [shared, shared])
    a.attach_grad(grad_req="add")
    a.grad[:] = 1.0
    with mx.autograd.record():
        y = mx.nd.FullyConnected(x * a, b, num_hidden=4, no_bias=True)
        z = mx.nd.FullyConnected(x, c, num_hidden=4, no_bias=True)
        loss = y.sum() + (z * 3).sum()
    loss.backward()
    # "add" adds to what the buffer held: 1 + sum over the rows of b (4 x 3)
    np.testing.assert_allclose(a.grad.asnumpy(), np.full((2, 3), 13.0))
    # the shared buffer holds one of the two gradients whole (b's: 4 everywhere, c's: 6), never a mix
    # of them written by two kernels
    stored = shared.asnumpy()
    assert (stored == 4.0).all() or (stored == 6.0).all()


def test_variable_head_and_float64():
    w = mx.nd.array(np.array([[1.0, 2.0]]), dtype="float64")
    x = mx.nd.array(np.array([[3.0, 4.0]]), dtype="float64")
    w.attach_grad()
    with mx.autograd.record():
        y = mx.nd.FullyConnected(x, w, num_hidden=1, no_bias=True)
    y.backward()
    assert w.grad.dtype == np.float64
    np.testing.assert_array_equal(w.grad.asnumpy(), [[3.0, 4.0]])
    w.grad[:] = 0
    with mx.autograd.record():
        w2 = w * 1
    mx.autograd.backward([w2, w])  # a head that is the variable itself: two contributions
    np.testing.assert_array_equal(w.grad.asnumpy(), [[2.0, 2.0]])
