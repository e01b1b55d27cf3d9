"""``mx.nd.reset_arrays``: zeroes many arrays in place (MXNet's operator behind zero_grad)."""

import numpy as np
import pytest
from mxkit import ndarray as nd
from mxkit.ndarray.params import ParamError


def test_reset_arrays_zeroes_dense_and_sparse_arrays_in_place():
    rng = np.random.RandomState(0)
    dense = [nd.array(rng.uniform(1, 2, shape).astype(dtype)) for shape, dtype in
             (((2, 3), "float16"), ((4,), "float32"), ((1, 2, 2), "float64"))]
    sparse = nd.array(rng.uniform(1, 2, (3, 2)).astype(np.float32)).tostype("row_sparse")
    nd.reset_arrays(*dense, sparse, num_arrays=4)
    for array in dense:
        np.testing.assert_array_equal(array.asnumpy(), np.zeros(array.shape))
    assert sparse.stype == "row_sparse" and sparse.indices.shape[0] == 0
    np.testing.assert_array_equal(sparse.asnumpy(), np.zeros((3, 2)))


def test_reset_arrays_checks_its_arguments():
    with pytest.raises(ParamError, match="num_arrays=3 but 1 arrays"):
        nd.reset_arrays(nd.ones((2,)), num_arrays=3)
    with pytest.raises(ParamError, match="argument 0 is a list"):
        nd.reset_arrays([1, 2])
