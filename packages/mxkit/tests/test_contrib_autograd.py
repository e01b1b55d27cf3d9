"""mx.contrib.autograd, MXNet's first autograd interface: gradients against the closed forms,
the training-state scopes, and the errors for bad arguments."""

import numpy as np
import pytest
from mxkit import mx
from mxkit.core.errors import MXKitError

ag = mx.contrib.autograd


def test_mark_variables_and_compute_gradient():
    x = mx.nd.array([1.0, 2.0, 3.0])
    dx = mx.nd.zeros_like(x)
    ag.mark_variables([x], [dx])
    with ag.train_section():
        assert mx.autograd.is_recording() and mx.autograd.is_training()
        y = x * x + 2 * x
        with ag.test_section():
            assert not mx.autograd.is_recording() and not mx.autograd.is_training()
    assert not mx.autograd.is_recording()
    ag.compute_gradient([y])
    np.testing.assert_allclose(dx.asnumpy(), 2 * np.array([1.0, 2.0, 3.0]) + 2)


def test_backward_with_head_gradients_and_add_req():
    x = mx.nd.array([1.0, -2.0])
    dx = mx.nd.ones_like(x)
    ag.mark_variables([x], [dx], grad_reqs="add")
    with ag.train_section():
        y = mx.nd.exp(x)
    ag.backward([y], [mx.nd.array([2.0, 3.0])])
    np.testing.assert_allclose(dx.asnumpy(), 1 + np.array([2.0, 3.0]) * np.exp([1.0, -2.0]), rtol=1e-6)


def test_grad_and_loss_and_grad_pick_arguments():
    def f(a, b):
        return a * b + mx.nd.sin(a)

    a, b = mx.nd.array([0.5, 1.0]), mx.nd.array([3.0, -1.0])
    grads, loss = ag.grad_and_loss(f)(a, b)
    np.testing.assert_allclose(grads[0].asnumpy(), b.asnumpy() + np.cos(a.asnumpy()), rtol=1e-6)
    np.testing.assert_allclose(grads[1].asnumpy(), a.asnumpy())
    np.testing.assert_allclose(loss.asnumpy(), a.asnumpy() * b.asnumpy() + np.sin(a.asnumpy()), rtol=1e-6)
    only_b = ag.grad(f, argnum=1)(a, b)
    assert len(only_b) == 1
    np.testing.assert_allclose(only_b[0].asnumpy(), a.asnumpy())


def test_bad_arguments_are_clear_errors():
    x = mx.nd.array([1.0])
    with pytest.raises(MXKitError, match="list or tuple"):
        ag.backward(x)
    with pytest.raises(MXKitError, match="out_grads"):
        ag.backward([x], [x, x])
    with pytest.raises(MXKitError, match="must be NDArrays"):
        ag.grad(lambda a: a)(3.0)
