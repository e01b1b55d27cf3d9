"""MakeLoss and make_loss: identity forward, a gradient that ignores the head gradient.

The expected gradients are written out from MXNet 1.x's definition (grad_scale divided by
1, the batch size or the count of outputs above valid_thresh; make_loss: ones), and agree
with what MXNet 1.9.1 prints for the same calls.
"""

import numpy as np
import pytest
from mxkit import mx
from mxkit.core.errors import MXKitError

X = np.array([[1.0, -2.0, 3.0], [0.5, -1.0, 2.0]], dtype=np.float32)


@pytest.mark.parametrize(("normalization", "divisor"), [
    ("null", 1.0), ("batch", 2.0), ("valid", float(((2 * X) > 0.6).sum()))])
def test_makeloss_gradient_is_the_scaled_constant(normalization, divisor):
    x = mx.nd.array(X)
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.MakeLoss(x * 2, grad_scale=0.5, normalization=normalization, valid_thresh=0.6)
    np.testing.assert_array_equal(y.asnumpy(), 2 * X)
    y.backward(mx.nd.full(X.shape, 7.0))  # the head gradient is ignored
    np.testing.assert_allclose(x.grad.asnumpy(), np.full(X.shape, 0.5 / divisor * 2), rtol=1e-6)


def test_make_loss_gradient_is_ones_through_the_graph():
    x = mx.nd.array(X)
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.make_loss(x * x)
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * X)


def test_makeloss_is_a_loss_head_of_a_symbol_executor():
    a = mx.sym.Variable("a")
    net = mx.sym.MakeLoss(mx.sym.square(a), grad_scale=3.0, normalization="batch")
    exe = net.simple_bind(None, a=(4, 3))
    exe.arg_dict["a"][:] = X[0]
    exe.forward(is_train=True)
    exe.backward()  # no head gradient needed: MakeLoss makes its own
    np.testing.assert_allclose(exe.grad_dict["a"].asnumpy(), np.tile(3.0 / 4 * 2 * X[0], (4, 1)), rtol=1e-6)


def test_an_unknown_normalization_is_refused_with_the_choices():
    with pytest.raises(MXKitError, match=r"normalization.*null.*batch.*valid"):
        mx.nd.MakeLoss(mx.nd.array(X), normalization="mean")
