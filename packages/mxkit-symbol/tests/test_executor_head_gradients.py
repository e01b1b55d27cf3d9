"""Head gradients given to ``Executor.backward`` as MXNet 1.9.1 reads them: one per output,
any after the last output ignored, and the gradient of an output that nothing is
differentiated through never read (so its shape is not checked)."""

import numpy as np
import pytest
from mxkit import ndarray as nd
from mxkit import symbol as sym
from mxkit.core.errors import ShapeError
from mxkit.symbol.executor import ExecutorError


def test_gradients_after_the_last_output_are_ignored():
    x = sym.Variable("x")
    exe = (x * 2).simple_bind(None, x=(2, 2))
    exe.forward(is_train=True, x=np.ones((2, 2)))
    exe.backward([nd.ones((2, 2)) * 3, nd.ones((5,))])
    np.testing.assert_array_equal(exe.grad_dict["x"].asnumpy(), np.full((2, 2), 6.0))


@pytest.mark.parametrize("make", [lambda x: sym.shape_array(x), lambda x: sym.size_array(x),
                                  lambda x: sym.argsort(x, axis=1)])
def test_unread_head_gradient_is_not_checked(make):
    x = sym.Variable("x")
    exe = make(x).simple_bind(None, x=(3, 4))
    exe.forward(is_train=True, x=np.arange(12.0).reshape(3, 4))
    exe.backward([nd.ones((7, 7))])  # a shape no output has: MXNet never reads it either
    np.testing.assert_array_equal(exe.grad_dict["x"].asnumpy(), np.zeros((3, 4)))


def test_read_head_gradient_of_the_wrong_shape_is_an_error():
    x = sym.Variable("x")
    exe = (x * 2).simple_bind(None, x=(2, 2))
    exe.forward(is_train=True, x=np.ones((2, 2)))
    with pytest.raises(ShapeError, match=r"out_grads\[0\] has shape \(3,\), output 0 has \(2, 2\)"):
        exe.backward([nd.ones((3,))])
    with pytest.raises(ExecutorError, match="got 0 out_grads"):
        exe.backward([])
