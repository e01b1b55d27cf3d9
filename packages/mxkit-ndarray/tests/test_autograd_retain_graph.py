"""retain_graph and the fresh-gradient flag, as in MXNet: a spent graph cannot be differentiated again."""

import numpy as np
import pytest
from mxkit import ndarray as nd
from mxkit.ndarray import autograd
from mxkit.ndarray.autograd import AutogradError


def test_a_graph_is_differentiated_again_only_when_retained():
    x, dx = nd.ones((2, 2)), nd.zeros((2, 2))
    autograd.mark_variables([x], [dx], grad_reqs="add")
    with autograd.record():
        y = x * 3 + 1
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_array_equal(dx.asnumpy(), np.full((2, 2), 6.0))
    with pytest.raises(AutogradError, match="retain_graph=True"):
        y.backward()
    with autograd.record():
        w = y * 2  # recorded on top of the spent part of the graph
    with pytest.raises(AutogradError, match="already differentiated"):
        w.backward()
    with autograd.record():  # a new recording is a new graph
        z = x * 3
    z.backward()
    np.testing.assert_array_equal(dx.asnumpy(), np.full((2, 2), 9.0))


def test_grad_retains_only_when_asked_or_creating_a_graph():
    x = nd.array([2.0])
    x.attach_grad()
    with autograd.record():
        y = x * x
    (first,) = autograd.grad(y, [x], retain_graph=True)
    (second,) = autograd.grad(y, [x])
    assert first.asscalar() == second.asscalar() == 4.0
    with pytest.raises(AutogradError, match="freed"):
        autograd.grad(y, [x])


def test_backward_marks_written_gradients_fresh():
    x, y = nd.ones((2,)), nd.ones((2,))
    autograd.mark_variables([x, y], [nd.zeros((2,)), nd.zeros((2,))])
    assert not x._fresh_grad and not y._fresh_grad
    with autograd.record():
        out = x + 2 * y
    out.backward()
    assert x._fresh_grad and y._fresh_grad
    x._fresh_grad = False  # a consumer (an optimizer step) clears it
    with autograd.record():
        out = x.detach() + y
    out.backward()
    assert not x._fresh_grad and y._fresh_grad


def test_in_place_writes_into_the_recorded_graph_are_refused():
    target, value = nd.zeros((3, 4)), nd.ones((4,))
    value.attach_grad()
    mxnet_message = r"Inplace operations \(\+=, -=, x\[:\]=, etc\) are not supported when recording with autograd"
    with autograd.record(), pytest.raises(AutogradError, match=mxnet_message):
        target[0] = value  # the gradient to value would be lost
    with autograd.record():
        target[1] = nd.ones((4,))  # nothing recorded is involved: a plain write
    np.testing.assert_array_equal(target.asnumpy()[1], np.ones(4))


def _recorded_chain(x):
    """``x`` through three recorded operators; weak references to the two intermediates."""
    import weakref

    with autograd.record():
        a = nd.exp(x)
        b = a * x  # its gradient reads a and x
        y = nd.sum(b * b)
    refs = [weakref.ref(a), weakref.ref(b)]
    return y, refs


def test_backward_releases_the_intermediates_it_consumed():
    """MXNet frees a graph as its backward pass goes: after backward() nothing but the caller keeps
    the forward pass's intermediates (they stayed until the heads were collected, and a training
    loop holding its last loss kept a whole step's activations alive beside the next)."""
    x, dx = nd.array(np.linspace(-1, 1, 6).reshape(2, 3)), nd.zeros((2, 3))
    autograd.mark_variables([x], [dx])
    y, refs = _recorded_chain(x)
    assert all(ref() is not None for ref in refs)  # held by the recorded graph
    y.backward()
    assert all(ref() is None for ref in refs)
    xv = x.asnumpy()  # d/dx sum((x e^x)^2) = 2 x e^x (e^x + x e^x)
    np.testing.assert_allclose(dx.asnumpy(), 2 * xv * np.exp(xv) * (np.exp(xv) + xv * np.exp(xv)), rtol=1e-5)
    with pytest.raises(AutogradError, match="retain_graph=True"):
        y.backward()


def test_a_retained_graph_keeps_its_intermediates_until_its_last_backward():
    x, dx = nd.array(np.linspace(-1, 1, 6).reshape(2, 3)), nd.zeros((2, 3))
    autograd.mark_variables([x], [dx], grad_reqs="add")
    y, refs = _recorded_chain(x)
    y.backward(retain_graph=True)
    assert all(ref() is not None for ref in refs)
    first = dx.asnumpy().copy()
    y.backward()
    np.testing.assert_allclose(dx.asnumpy(), 2 * first, rtol=1e-6)
    assert all(ref() is None for ref in refs)


def test_grad_without_retaining_releases_and_with_create_graph_keeps():
    x = nd.array(np.linspace(-1, 1, 6).reshape(2, 3))
    x.attach_grad()
    y, refs = _recorded_chain(x)
    autograd.grad(y, [x])
    assert all(ref() is None for ref in refs)
    y, refs = _recorded_chain(x)
    with autograd.record():
        (gx,) = autograd.grad(y, [x], create_graph=True)
    assert all(ref() is not None for ref in refs)  # the gradient's own graph reads them
    del gx
