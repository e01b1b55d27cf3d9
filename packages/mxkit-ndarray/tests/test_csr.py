"""CSRNDArray: construction from every MXNet form, the parts against a numpy reference,
conversions, row slicing, copies, save/load against MXNet 1.9.1's file, and the errors for
malformed structures."""

from pathlib import Path

import mxkit.ndarray as nd
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit.core.errors import DTypeError, ShapeError
from mxkit.ndarray.csr import CSRNDArray
from mxkit.ndarray.sparse import RowSparseNDArray, SparseStorageError

FIXTURES = Path(__file__).parent / "fixtures"
DENSE = np.array([[0, 1.5, 0, 0], [0, 0, 0, 0], [2, 0, -3, 0]], dtype=np.float32)


def reference_parts(dense):
    """data, indices, indptr of a dense matrix, computed row by row (independent of the code under test)."""
    data, indices, indptr = [], [], [0]
    for row in dense:
        for col, value in enumerate(row):
            if value != 0:
                data.append(value)
                indices.append(col)
        indptr.append(len(data))
    return np.array(data, dtype=dense.dtype), np.array(indices), np.array(indptr)


def test_tostype_csr_has_the_parts_of_the_nonzero_values():
    csr = nd.array(DENSE).tostype("csr")
    assert isinstance(csr, CSRNDArray) and csr.stype == "csr" and csr.shape == (3, 4)
    data, indices, indptr = reference_parts(DENSE)
    np.testing.assert_array_equal(csr.data.asnumpy(), data)
    np.testing.assert_array_equal(csr.indices.asnumpy(), indices)
    np.testing.assert_array_equal(csr.indptr.asnumpy(), indptr)
    assert csr.indices.dtype == np.int64 and csr.indptr.dtype == np.int64
    np.testing.assert_array_equal(csr.asnumpy(), DENSE)
    np.testing.assert_array_equal(nd.cast_storage(csr, "default").asnumpy(), DENSE)
    assert nd.cast_storage(csr, "default").stype == "default"
    rsp = csr.tostype("row_sparse")
    assert isinstance(rsp, RowSparseNDArray)
    np.testing.assert_array_equal(rsp.indices.asnumpy(), [0, 2])
    np.testing.assert_array_equal(rsp.tostype("csr").asnumpy(), DENSE)


def test_csr_matrix_from_every_form():
    data, indices, indptr = reference_parts(DENSE)
    from_parts = nd.sparse.csr_matrix((data, indices, indptr), shape=(3, 4))
    np.testing.assert_array_equal(from_parts.asnumpy(), DENSE)
    inferred = nd.sparse.csr_matrix((data, indices, indptr))
    assert inferred.shape == (3, 3)  # as MXNet: columns up to the largest index
    rows, cols = np.nonzero(DENSE)
    coo = nd.sparse.csr_matrix((np.concatenate([DENSE[rows, cols], [1.0]]), (np.append(rows, 0), np.append(cols, 1))),
                               shape=(3, 4))
    expected = DENSE.copy()
    expected[0, 1] += 1.0  # repeats are summed
    np.testing.assert_array_equal(coo.asnumpy(), expected)
    empty = nd.sparse.csr_matrix((2, 5))
    assert empty.shape == (2, 5) and empty.data.shape == (0,) and empty.indptr.asnumpy().tolist() == [0, 0, 0]
    assert nd.sparse.csr_matrix(DENSE.astype(np.float64)).dtype == np.float64  # numpy keeps its dtype
    assert nd.sparse.csr_matrix(DENSE.tolist()).dtype == np.float32
    copied = nd.sparse.csr_matrix(from_parts)
    assert copied is not from_parts
    np.testing.assert_array_equal(copied.asnumpy(), DENSE)
    assert nd.zeros((3, 4), stype="csr").stype == "csr"
    assert nd.empty((3, 4), stype="csr").asnumpy().sum() == 0
    assert nd.array(from_parts).stype == "csr"
    assert nd.array(DENSE, stype="csr").stype == "csr"


def test_row_slices_and_copies():
    csr = nd.array(DENSE).tostype("csr")
    np.testing.assert_array_equal(csr[1:3].asnumpy(), DENSE[1:3])
    np.testing.assert_array_equal(csr[2].asnumpy(), DENSE[2:3])
    np.testing.assert_array_equal(csr[-1].asnumpy(), DENSE[2:3])
    np.testing.assert_array_equal(csr[:].asnumpy(), DENSE)
    np.testing.assert_array_equal(csr[2:1].asnumpy(), np.zeros((0, 4)))
    sliced = nd.sparse.slice(csr, begin=(0, 1), end=(3, 3))
    assert sliced.stype == "csr"
    np.testing.assert_array_equal(sliced.asnumpy(), DENSE[:, 1:3])
    target = nd.zeros((3, 4), stype="csr")
    csr.copyto(target)
    np.testing.assert_array_equal(target.asnumpy(), DENSE)
    dense_target = nd.ones((3, 4))
    csr.copyto(dense_target)
    np.testing.assert_array_equal(dense_target.asnumpy(), DENSE)
    target[:] = np.ones((3, 4))
    np.testing.assert_array_equal(target.asnumpy(), np.ones((3, 4)))
    assert csr.astype("float64").dtype == np.float64
    csr.check_format()


def test_asscipy_when_scipy_is_there():
    spsp = pytest.importorskip("scipy.sparse")
    csr = nd.array(DENSE).tostype("csr")
    matrix = csr.asscipy()
    assert isinstance(matrix, spsp.csr_matrix)
    np.testing.assert_array_equal(matrix.toarray(), DENSE)
    back = nd.sparse.csr_matrix(spsp.coo_matrix(DENSE))
    np.testing.assert_array_equal(back.asnumpy(), DENSE)


def test_save_load_matches_mxnet_191_file(tmp_path):
    # sparse.params: written by MXNet 1.9.1 (fixtures/make_fixtures.py): row_sparse, csr,
    # an empty row_sparse and a dense array; loading keeps the storage, saving gives the same bytes
    loaded = nd.load(str(FIXTURES / "sparse.params"))
    assert [x.stype for x in loaded] == ["row_sparse", "csr", "row_sparse", "default"]
    csr = loaded[1]
    assert csr.indptr.asnumpy().tolist() == [0, 0, 2, 2, 3] and csr.indices.asnumpy().tolist() == [0, 2, 1]
    path = tmp_path / "again.params"
    nd.save(str(path), loaded)
    assert path.read_bytes() == (FIXTURES / "sparse.params").read_bytes()
    named = {"c": nd.array(DENSE).tostype("csr"), "r": nd.array(DENSE).tostype("row_sparse")}
    nd.save(str(path), named)
    back = nd.load(str(path))
    assert back["c"].stype == "csr" and back["r"].stype == "row_sparse"
    np.testing.assert_array_equal(back["c"].asnumpy(), DENSE)
    np.testing.assert_array_equal(back["r"].asnumpy(), DENSE)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.floats(0.0, 1.0), st.integers(0, 2 ** 31 - 1))
def test_random_sparsity_round_trips(rows, cols, density, seed):
    rng = np.random.default_rng(seed)
    dense = (rng.standard_normal((rows, cols)) * (rng.random((rows, cols)) < density)).astype(np.float32)
    csr = nd.sparse.csr_matrix(dense)
    data, indices, indptr = reference_parts(dense)
    np.testing.assert_array_equal(csr.indptr.asnumpy(), indptr)
    np.testing.assert_array_equal(csr.indices.asnumpy(), indices)
    np.testing.assert_array_equal(csr.data.asnumpy(), data)
    rebuilt = nd.sparse.csr_matrix((csr.data, csr.indices, csr.indptr), shape=(rows, cols))
    np.testing.assert_array_equal(rebuilt.asnumpy(), dense)
    start = int(rng.integers(0, rows + 1))
    np.testing.assert_array_equal(csr[start:].asnumpy(), dense[start:])


@pytest.mark.parametrize("parts, message", [
    (([1.0, 2.0], [0, 5], [0, 1, 2]), "outside the 4 columns"),
    (([1.0, 2.0], [2, 1], [0, 2, 2]), "not strictly increasing"),
    (([1.0, 2.0], [1, 1], [0, 2, 2]), "not strictly increasing"),
    (([1.0, 2.0], [0, 1], [0, 2, 1]), "decreases|end at"),
    (([1.0, 2.0], [0, 1], [1, 1, 2]), "start at 0"),
    (([1.0, 2.0], [0, 1], [0, 1, 3]), "end at the number of values"),
    (([1.0, 2.0], [0], [0, 1, 2]), "one index per value"),
    (([1.0], [0], [0, 1]), "entries for 2 rows"),
    (([1.0], [0.5], [0, 1, 1]), "whole numbers"),
    (([1.0, 2.0, 3.0], [0, 2, 1], [0, 2, 1, 3]), "decreases"),
])
def test_malformed_structures_are_refused(parts, message):
    with pytest.raises(SparseStorageError, match=message):
        nd.sparse.csr_matrix(parts, shape=(2, 4) if len(parts[2]) != 4 else (3, 4))


def test_other_bad_inputs_are_clear_errors():
    with pytest.raises(DTypeError, match="unknown storage type 'dense'"):
        nd.array(DENSE).tostype("dense")
    with pytest.raises(DTypeError, match="unknown storage type"):
        nd.zeros((2, 2), stype="coo")
    with pytest.raises(ShapeError, match="2-D"):
        nd.array(np.ones(3)).tostype("csr")
    with pytest.raises(ShapeError, match="2-D"):
        nd.zeros((2, 2, 2), stype="csr")
    with pytest.raises(ShapeError, match="data must be 1-D"):
        nd.sparse.csr_matrix((np.ones((2, 2)), [0, 1], [0, 1, 2]), shape=(2, 2))
    csr = nd.array(DENSE).tostype("csr")
    with pytest.raises(SparseStorageError, match="step 1"):
        csr[::2]
    with pytest.raises(IndexError, match="outside the 3 rows"):
        csr[3]
    with pytest.raises(SparseStorageError, match="reshape is not supported"):
        csr.reshape((12,))
    with pytest.raises(SparseStorageError, match="ambiguous"):
        bool(csr)
    with pytest.raises(SparseStorageError, match=r"x\[:\] = value"):
        csr[0] = 1.0
