"""Arguments MXNet 1.x accepts that ported code passes: inplace reshapes, scalar operands, ftml's clip_grad."""

import numpy as np
import pytest
from mxkit import ndarray as nd
from mxkit.core.errors import ShapeError
from mxkit.ndarray import ParamError


def test_flatten_inplace_is_a_view_and_the_default_a_copy():
    tensor = (nd.arange(30) + 1).reshape(2, 3, 5)
    copy, view = tensor.flatten(), tensor.flatten(inplace=True)
    assert copy.shape == view.shape == (2, 15)
    tensor[0] = -1
    np.testing.assert_array_equal(view.asnumpy(), tensor.asnumpy().reshape(2, 15))
    assert copy.asnumpy()[0, 0] == 1


@pytest.mark.parametrize("axis", [0, 2, -1, (0, 4), None])
def test_squeeze_inplace_matches_numpy_and_shares_memory(axis):
    data = nd.array(np.random.default_rng(0).uniform(-1, 1, (1, 5, 1, 3, 1)))
    expected = np.squeeze(data.asnumpy(), axis=axis)
    view = data.squeeze(axis=axis, inplace=True)
    np.testing.assert_array_equal(view.asnumpy(), expected)
    np.testing.assert_array_equal(data.squeeze(axis=axis).asnumpy(), expected)
    data[0] = 7.0
    assert (view.asnumpy() == 7.0).all()
    assert nd.ones((1, 1)).squeeze(inplace=True).shape == (1,)  # as the operator: never 0-d
    with pytest.raises(ShapeError, match="not an axis of length 1"):
        data.squeeze(axis=1, inplace=True)


@pytest.mark.parametrize("axis", [-4, -1, 0, 1, 3])
def test_expand_dims_inplace_matches_numpy_and_shares_memory(axis):
    data = nd.array(np.arange(24.0).reshape(2, 3, 4))
    view = data.expand_dims(axis=axis, inplace=True)
    assert view.shape == np.expand_dims(data.asnumpy(), axis).shape == data.expand_dims(axis).shape
    data[0] = -1.0
    np.testing.assert_array_equal(view.asnumpy(), np.expand_dims(data.asnumpy(), axis))
    with pytest.raises(ShapeError, match="outside"):
        data.expand_dims(axis=5, inplace=True)


def test_two_scalars_give_a_python_number_as_in_mxnet():
    assert nd.power(2.0, 3) == 8.0
    assert nd.add(1, 2.5) == 3.5 and nd.modulo(7, 3) == 1
    assert nd.equal(1, 1) == 1 and nd.greater(1, 2) == 0
    assert nd.maximum(2, 5) == 5 and nd.minimum(2, 5) == 2 and nd.hypot(3, 4) == 5.0
    with pytest.raises(ParamError, match="needs NDArrays or numbers, got str and int"):
        nd.add("a", 1)


def test_ftml_update_takes_mxnet_clip_grad():
    grad = nd.array([5.0, -5.0, 1e-4])

    def step(**clip):
        weight, states = nd.ones((3,)), [nd.zeros((3,)) for _ in range(3)]
        return nd.ftml_update(weight, grad, *states, lr=0.1, t=1, **clip).asnumpy()

    np.testing.assert_array_equal(step(clip_grad=1e-3), step(clip_gradient=1e-3))
    assert not np.array_equal(step(clip_grad=1e-3), step())
