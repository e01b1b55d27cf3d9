"""What MXNet 1.x accepts that ported code passes: inplace reshapes, scalar operands, ftml's clip_grad,
0-d sources, numpy shapes, axis lists, one-element assignment, from_numpy, contrib.isinf/isnan/isfinite."""

import numpy as np
import pytest
from mxkit import ndarray as nd
from mxkit.core.errors import MXKitError, ShapeError
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


def test_a_0d_source_gives_a_0d_array():
    scalar = nd.array(np.ones([]))
    assert scalar.shape == () and scalar.asnumpy() == 1.0
    assert nd.array(2.5).shape == () and nd.array([2.5]).shape == (1,)


def test_shapes_given_as_numpy_arrays_and_axis_lists():
    assert nd.ones((1, 3)).broadcast_to(shape=np.array([4, 3])).shape == (4, 3)
    x = nd.array(np.arange(210.0).reshape(5, 6, 7))
    for source, destination in [(0, -1), ([0, 1], [-1, -2]), ((2, 0), (0, 2)), ([], [])]:
        np.testing.assert_array_equal(nd.moveaxis(x, source, destination).asnumpy(),
                                      np.moveaxis(x.asnumpy(), source, destination))
    with pytest.raises(ShapeError, match="same number of axes"):
        nd.moveaxis(x, [0, 1], [0])
    with pytest.raises(ShapeError, match="out of range"):
        nd.moveaxis(x, 3, 0)
    with pytest.raises(ShapeError, match="repeated"):
        nd.moveaxis(x, [0, 0], [1, 2])


def test_a_value_with_extra_leading_axes_of_length_1_assigns():
    target = nd.zeros((2, 4, 3))
    target[0] = np.arange(3.0).reshape(1, 1, 1, 3)  # MXNet drops the extra leading 1s
    target[1] = nd.ones((1, 4, 3))
    expected = np.stack([np.tile(np.arange(3.0), (4, 1)), np.ones((4, 3))])
    np.testing.assert_array_equal(target.asnumpy(), expected)
    with pytest.raises(ShapeError, match=r"\(2, 1, 3\)"):
        target[0] = np.ones((2, 1, 3))


def test_one_element_into_one_element():
    b = nd.zeros(2)
    b[0] = np.array([47.844944], dtype=np.float32)
    b[1] = nd.array([3.0])
    np.testing.assert_array_equal(b.asnumpy(), np.array([47.844944, 3.0], dtype=np.float32))
    with pytest.raises(ShapeError, match=r"shape \(2,\) to an array of shape \(\)"):
        b[0] = np.array([1.0, 2.0])
    with pytest.raises(ShapeError, match="to a selection of shape"):
        b[0] = nd.ones((2,))


@pytest.mark.parametrize("zero_copy", [False, True])
def test_from_numpy_keeps_values_and_dtype(zero_copy):
    for source in (np.arange(6, dtype=np.float32).reshape(3, 2), np.array(7).reshape(()), np.zeros((1, 0, 2))):
        array = nd.from_numpy(source, zero_copy=zero_copy)
        assert array.dtype == source.dtype
        np.testing.assert_array_equal(array.asnumpy(), source)


def test_from_numpy_zero_copy_shares_memory_and_freezes_the_source():
    source = np.arange(6, dtype=np.float32).reshape(3, 2)
    array = nd.from_numpy(source)
    with pytest.raises(ValueError, match="read-only"):
        source[2, 1] = 0
    array[2, 1] = 100
    array.wait_to_read()
    assert source[2, 1] == 100
    again = nd.from_numpy(source)  # sharing it a second time: both NDArrays write it
    again[0, 0] = -5
    again.wait_to_read()
    assert source[0, 0] == -5 and array.asnumpy()[0, 0] == -5 and not source.flags.writeable
    immutable = np.frombuffer(bytes(32), dtype=np.float64)  # memory of a bytes object: never writeable
    with pytest.raises(MXKitError, match="zero_copy=False"):
        nd.from_numpy(immutable)
    np.testing.assert_array_equal(nd.from_numpy(immutable, zero_copy=False).asnumpy(), np.zeros(4))
    with pytest.raises(ShapeError, match="C-contiguous"):
        nd.from_numpy(np.ones((3, 2)).T)


def test_contrib_isinf_isnan_isfinite_match_numpy():
    values = np.array([[np.inf, -np.inf], [np.nan, 5.0]], dtype=np.float32)
    data = nd.array(values)
    np.testing.assert_array_equal(nd.contrib.isinf(data).asnumpy(), np.isinf(values))
    np.testing.assert_array_equal(nd.contrib.isnan(data).asnumpy(), np.isnan(values))
    np.testing.assert_array_equal(nd.contrib.isfinite(data).asnumpy(), np.isfinite(values))


def test_fully_connected_takes_1d_data_as_one_feature_per_sample():
    # MXNet's FullyConnected(flatten=True) reads (batch,) data as (batch, 1)
    from mxkit.ndarray import autograd

    x, w, b = nd.array([1.0, 2.0, 3.0]), nd.array([[2.0], [3.0]]), nd.array([1.0, 0.0])
    x.attach_grad()
    w.attach_grad()
    with autograd.record():
        y = nd.FullyConnected(x, w, b, num_hidden=2)
    y.backward(nd.ones((3, 2)))
    column = np.array([[1.0], [2.0], [3.0]])
    np.testing.assert_allclose(y.asnumpy(), column @ np.array([[2.0, 3.0]]) + [1.0, 0.0])
    np.testing.assert_allclose(x.grad.asnumpy(), [5.0, 5.0, 5.0])  # each row of ones times the weights
    np.testing.assert_allclose(w.grad.asnumpy(), [[6.0], [6.0]])


def test_broadcast_like_with_mxnet_axes():
    from mxkit.ndarray import autograd

    lhs = nd.array(np.arange(3.0).reshape(1, 3, 1))
    out = nd.broadcast_like(lhs, nd.ones((4, 5, 6)), lhs_axes=(0, 2), rhs_axes=(0, 1))
    np.testing.assert_array_equal(out.asnumpy(), np.broadcast_to(np.arange(3.0).reshape(1, 3, 1), (4, 3, 5)))
    lhs.attach_grad()
    with autograd.record():
        out = nd.broadcast_like(lhs, nd.ones((4, 5, 6)), lhs_axes=(0, 2), rhs_axes=(0, 1))
    out.backward()
    np.testing.assert_array_equal(lhs.grad.asnumpy().ravel(), [20.0, 20.0, 20.0])  # 4 x 5 copies each
    with pytest.raises(ShapeError, match="cannot be broadcast"):
        nd.broadcast_like(nd.ones((2, 3)), nd.ones((4, 5)), lhs_axes=(0,), rhs_axes=(0,))
    with pytest.raises(ShapeError, match="same length"):
        nd.broadcast_like(nd.ones((1, 3)), nd.ones((4, 5)), lhs_axes=(0,), rhs_axes=(0, 1))
    with pytest.raises(ShapeError, match="empty"):
        nd.broadcast_like(nd.ones((1, 3)), nd.ones((4, 5)), lhs_axes=(), rhs_axes=())
    cases = [((1, 2, 1, 3), (5, 6, 7, 8), (0, 2), (1, 3), (6, 2, 8, 3)), ((1,), (5,), (0,), (-1,), (5,)),
             ((1, 7, 9, 1, 1), (9, 1), (-2, -1), (-2, -1), (1, 7, 9, 9, 1)),
             ((2, 1), (1, 7, 9, 1, 1), (1,), (-3,), (2, 9))]
    for lhs_shape, rhs_shape, lhs_axes, rhs_axes, expected in cases:  # MXNet's own cases
        assert nd.broadcast_like(nd.ones(lhs_shape), nd.ones(rhs_shape), lhs_axes=lhs_axes,
                                 rhs_axes=rhs_axes).shape == expected


def test_dropout_of_everything_is_allowed_as_in_mxnet():
    from mxkit.ndarray import autograd

    x = nd.ones((3, 4))
    x.attach_grad()
    with autograd.record():
        y = nd.Dropout(x, p=1.0)  # training: every input dropped
    y.backward()
    np.testing.assert_array_equal(y.asnumpy(), np.zeros((3, 4)))
    np.testing.assert_array_equal(x.grad.asnumpy(), np.zeros((3, 4)))
    np.testing.assert_array_equal(nd.Dropout(x, p=1.0).asnumpy(), np.ones((3, 4)))  # inference: identity
