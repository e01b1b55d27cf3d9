"""RowSparseNDArray: conversions against the dense numpy array, the stored rows, scaling,
retain, devices, the dense fallback of other arithmetic, and the errors."""

import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit.core import Context
from mxkit.core.errors import DTypeError, MXKitError, ShapeError
from mxkit.ndarray.sparse import RowSparseNDArray, SparseStorageError

DENSE = np.array([[0, 0, 0], [1, 2, 0], [0, 0, 0], [0, 0, 3], [0, 0, 0]], dtype=np.float32)


def test_tostype_keeps_the_nonzero_rows_and_round_trips():
    rsp = nd.array(DENSE).tostype("row_sparse")
    assert isinstance(rsp, RowSparseNDArray) and rsp.stype == "row_sparse"
    assert rsp.shape == DENSE.shape and rsp.dtype == np.float32
    np.testing.assert_array_equal(rsp.indices.asnumpy(), [1, 3])
    np.testing.assert_array_equal(rsp.data.asnumpy(), DENSE[[1, 3]])
    np.testing.assert_array_equal(rsp.asnumpy(), DENSE)
    back = rsp.tostype("default")
    assert back.stype == "default"
    np.testing.assert_array_equal(back.asnumpy(), DENSE)


def test_zeros_and_row_sparse_array_from_rows():
    empty = nd.zeros((4, 2), stype="row_sparse")
    assert empty.data.shape == (0, 2) and empty.indices.shape == (0,)
    np.testing.assert_array_equal(empty.asnumpy(), np.zeros((4, 2)))
    assert isinstance(nd.empty((4, 2), stype="row_sparse"), RowSparseNDArray)
    # rows given out of order are stored sorted; a stored row may be all zero (it still counts)
    rsp = nd.sparse.row_sparse_array((np.array([[5.0, 6.0], [0.0, 0.0]]), [3, 0]), shape=(4, 2))
    np.testing.assert_array_equal(rsp.indices.asnumpy(), [0, 3])
    want = np.zeros((4, 2))
    want[3] = [5, 6]
    np.testing.assert_array_equal(rsp.asnumpy(), want)


def test_scaling_keeps_rows_and_other_arithmetic_is_dense():
    rsp = nd.array(DENSE).tostype("row_sparse")
    for scaled, want in [(rsp * 4, DENSE * 4), (2.0 * rsp, DENSE * 2), (rsp / 2, DENSE / 2), (-rsp, -DENSE)]:
        assert isinstance(scaled, RowSparseNDArray)
        np.testing.assert_array_equal(scaled.indices.asnumpy(), [1, 3])
        np.testing.assert_allclose(scaled.asnumpy(), want)
    shifted = rsp - 1
    assert shifted.stype == "default"
    np.testing.assert_array_equal(shifted.asnumpy(), DENSE - 1)
    np.testing.assert_array_equal((rsp + nd.ones(DENSE.shape)).asnumpy(), DENSE + 1)
    np.testing.assert_array_equal((1 - rsp).asnumpy(), 1 - DENSE)


def test_retain_copy_and_devices():
    rsp = nd.array(DENSE).tostype("row_sparse")
    kept = nd.sparse.retain(rsp, nd.array([3, 4, 3]))
    np.testing.assert_array_equal(kept.indices.asnumpy(), [3])
    np.testing.assert_array_equal(kept.asnumpy(), np.where(np.arange(5)[:, None] == 3, DENSE, 0))
    other = rsp.copyto(Context("cpu", 1))
    assert other.context == Context("cpu", 1)
    np.testing.assert_array_equal(other.asnumpy(), DENSE)
    target = nd.zeros(DENSE.shape, stype="row_sparse")
    rsp.copyto(target)
    np.testing.assert_array_equal(target.asnumpy(), DENSE)
    dense_target = nd.ones(DENSE.shape)
    rsp.copyto(dense_target)
    np.testing.assert_array_equal(dense_target.asnumpy(), DENSE)


def test_bad_sparse_inputs_are_clear_errors():
    with pytest.raises(SparseStorageError, match="repeat"):
        nd.sparse.row_sparse_array((np.ones((2, 2)), [1, 1]), shape=(3, 2))
    with pytest.raises(SparseStorageError, match="outside"):
        nd.sparse.row_sparse_array((np.ones((1, 2)), [5]), shape=(3, 2))
    with pytest.raises(ShapeError, match="does not hold rows"):
        nd.sparse.row_sparse_array((np.ones((1, 3)), [0]), shape=(3, 2))
    with pytest.raises(SparseStorageError, match="whole numbers"):
        nd.sparse.retain(nd.array(DENSE).tostype("row_sparse"), [0.5])
    with pytest.raises(DTypeError, match=r"unknown storage type 'csc'"):
        nd.zeros((2, 2), stype="csc")
    with pytest.raises(MXKitError, match="csr"):
        nd.array(np.ones((2, 2, 2))).tostype("csr")
    with pytest.raises(SparseStorageError, match=r"tostype\('default'\)"):
        nd.array(DENSE).tostype("row_sparse").reshape((-1,))
    with pytest.raises(ShapeError, match="0-d"):
        nd.array(3.0).tostype("row_sparse")
