"""NumPy's advanced indexing on NDArray (MXNet 1.x follows NumPy's rules): index arrays that
broadcast, slices, None and ... beside index arrays, boolean masks; values against numpy,
gradients against numpy's scatter-add, and the errors for indices numpy refuses."""

import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit.ndarray import autograd
from mxkit.ndarray.indexing import IndexingError

A = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)

KEYS = [
    (1, [2, 2], np.array([[3], [0]])),                    # arrays broadcast (2,) with (2, 1)
    ([1, 0], slice(1, 3), None, [3, 2]),                  # slices and None between index arrays
    (slice(None), [0, 2], slice(1, 3), [4, 1]),           # separated arrays: their axes go first
    (Ellipsis, [1, 2]),                                   # ... before an array
    (None, slice(None), [2, 1], None),                    # new axes around an array
    (A[:, 0, 0, 0] > 30,),                                # a boolean mask of the first axis
    ([[0, 1], [1, 0]], slice(None, None, -1)),            # a 2-d index array with a reversed slice
]


@pytest.mark.parametrize("key", KEYS, ids=range(len(KEYS)))
def test_values_match_numpy(key):
    got = nd.array(A)[key].asnumpy()
    want = A[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("key", KEYS[:5], ids=range(5))
def test_gradient_scatters_back_adding_repeats(key):
    x = nd.array(A)
    x.attach_grad()
    head = np.random.default_rng(0).standard_normal(A[key].shape).astype(np.float32)
    with autograd.record():
        y = x[key]
    y.backward(nd.array(head))
    want = np.zeros_like(A)
    np.add.at(want, key, head)
    np.testing.assert_allclose(x.grad.asnumpy(), want, rtol=1e-6)


def test_ndarray_index_parts_and_setitem_with_the_same_keys():
    x = nd.array(A)
    key = (nd.array([1, 0]), slice(1, 3), None, [3, 2])
    np.testing.assert_array_equal(x[key].asnumpy(), A[([1, 0], slice(1, 3), None, [3, 2])])
    x[key] = 0
    want = A.copy()
    want[([1, 0], slice(1, 3), None, [3, 2])] = 0
    np.testing.assert_array_equal(x.asnumpy(), want)


def test_bad_advanced_indices_are_clear_errors():
    x = nd.array(A)
    with pytest.raises(IndexingError, match="out of bounds"):
        x[[0, 2], slice(None), [1, 1]]
    with pytest.raises(IndexingError, match="broadcast"):
        x[[0, 1, 0], slice(None), [1, 1]]
    with pytest.raises(IndexingError, match="must hold integers"):
        x[np.array(["a", "b"]), slice(None)]
    with pytest.raises(IndexingError, match="out of bounds"):
        x[(slice(None), [7, 1])] = 0.0
    np.testing.assert_array_equal(x.asnumpy(), A)  # refused before anything was written
