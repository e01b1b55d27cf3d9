"""Hypothesis property tests: broadcasting arithmetic, reductions, views and reshape against numpy."""

from types import SimpleNamespace

import mxkit.core
import mxkit.ndarray
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

# MXNet's short names without the facade package (these tests run with mxkit-ndarray and
# mxkit-cpu installed alone)
mx = SimpleNamespace(nd=mxkit.ndarray, random=mxkit.ndarray.random, autograd=mxkit.ndarray.autograd,
                     cpu=mxkit.core.cpu, Context=mxkit.core.Context, MXKitError=mxkit.core.MXKitError)

FLOATS = st.floats(-100, 100, allow_nan=False, allow_subnormal=False, width=32)


@st.composite
def broadcastable_pair(draw):
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4))
    lhs = draw(hnp.arrays(np.float32, shapes.input_shapes[0], elements=FLOATS))
    rhs = draw(hnp.arrays(np.float32, shapes.input_shapes[1], elements=FLOATS))
    return lhs, rhs


@settings(max_examples=60, deadline=None)
@given(broadcastable_pair(), st.sampled_from(["+", "-", "*", "maximum", "minimum", ">", "=="]))
def test_broadcast_arithmetic_matches_numpy(pair, op):
    lhs, rhs = pair
    x, y = mx.nd.array(lhs), mx.nd.array(rhs)
    if op in ("maximum", "minimum"):
        got, expected = getattr(mx.nd, op)(x, y), getattr(np, op)(lhs, rhs)
    else:
        got, expected = eval(f"x {op} y"), eval(f"lhs {op} rhs").astype(np.float32)
    result = got.asnumpy()
    if expected.shape == ():
        expected = expected.reshape(1) if result.shape == (1,) else expected
    np.testing.assert_allclose(result, expected, rtol=1e-6)


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=4, max_side=4), elements=FLOATS),
       st.data())
def test_sum_over_any_axes_matches_numpy(array, data):
    axes = data.draw(st.lists(st.integers(0, array.ndim - 1), unique=True, max_size=array.ndim))
    keepdims = data.draw(st.booleans())
    got = mx.nd.sum(mx.nd.array(array, dtype="float64"), axis=tuple(axes), keepdims=keepdims).asnumpy()
    expected = np.sum(array, axis=tuple(axes) if axes else None, keepdims=keepdims)
    np.testing.assert_allclose(got.reshape(np.shape(expected)) if np.ndim(expected) == 0 else got,
                               expected, rtol=1e-9, atol=1e-9)


@st.composite
def array_and_basic_index(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5))
    array = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    index = draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    return array, index


@settings(max_examples=80, deadline=None)
@given(array_and_basic_index())
def test_basic_indexing_views_match_numpy_and_write_through(case):
    array, index = case
    x = mx.nd.array(array)
    view = x[index]
    expected = array[index]
    got = view.asnumpy()
    np.testing.assert_array_equal(got.reshape(np.shape(expected)) if np.ndim(expected) == 0 else got, expected)
    if view.size:
        view[:] = -1
        mirror = array.copy()
        mirror[index] = -1
        np.testing.assert_array_equal(x.asnumpy(), mirror)


@settings(max_examples=60, deadline=None)
@given(hnp.array_shapes(min_dims=1, max_dims=4, max_side=4), st.data())
def test_reshape_with_minus_one_matches_numpy(shape, data):
    array = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    target = list(data.draw(st.permutations(shape)))
    target[data.draw(st.integers(0, len(target) - 1))] = -1
    np.testing.assert_array_equal(mx.nd.array(array).reshape(tuple(target)).asnumpy(),
                                  array.reshape(tuple(target)))
