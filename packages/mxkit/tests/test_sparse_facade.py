"""Sparse storage through the facade as MXNet 1.x code reaches it: LibSVMIter's csr batches,
mx.sym variables with a storage type, the test helpers' sparse arrays, comparisons."""

import numpy as np
import pytest
from mxkit import mx
from mxkit.core import config


def test_libsvm_iter_gives_csr_batches(tmp_path):
    path = tmp_path / "d.libsvm"
    path.write_text("1 0:1.5 3:2\n0 2:-1\n1 1:4 3:1\n")
    expected = np.array([[1.5, 0, 0, 2], [0, 0, -1, 0], [0, 4, 0, 1]], dtype=np.float32)
    with config.override(io_batch_type="ndarray"):
        batches = list(mx.io.LibSVMIter(data_libsvm=str(path), data_shape=(4,), batch_size=2))
    assert [b.data[0].stype for b in batches] == ["csr", "csr"]
    got = np.concatenate([b.data[0].asnumpy() for b in batches])[:3]
    np.testing.assert_array_equal(got, expected)
    assert batches[1].pad == 1
    np.testing.assert_array_equal(batches[0].data[0].indptr.asnumpy(), [0, 2, 3])


def test_symbol_variables_take_a_storage_type():
    data = mx.sym.Variable("data", stype="csr")
    weight = mx.sym.var("w", stype="row_sparse", shape=(4, 2))
    assert data.attr("__storage_type__") == "2" and weight.attr("__storage_type__") == "1"
    out = mx.sym.sparse.dot(data, weight)
    executor = out.simple_bind(mx.cpu(), data=(3, 4))
    executor.arg_dict["data"][:] = mx.nd.sparse.csr_matrix(np.eye(3, 4, dtype=np.float32))
    executor.arg_dict["w"][:] = np.arange(8, dtype=np.float32).reshape(4, 2)
    np.testing.assert_array_equal(executor.forward()[0].asnumpy(), np.eye(3, 4) @ np.arange(8).reshape(4, 2))
    with pytest.raises(mx.base.MXNetError, match="unknown storage type 'dense'"):
        mx.sym.Variable("x", stype="dense")


def test_test_utils_make_sparse_arrays():
    array, (indptr, indices, values) = mx.test_utils.rand_sparse_ndarray((5, 7), "csr", density=0.5)
    assert array.stype == "csr"
    np.testing.assert_array_equal(array.indptr.asnumpy(), indptr)
    np.testing.assert_array_equal(array.indices.asnumpy(), indices)
    np.testing.assert_array_equal(array.data.asnumpy(), values)
    rsp, (stored, rows) = mx.test_utils.rand_sparse_ndarray((5, 3), "row_sparse", rsp_indices=[1, 3])
    assert rsp.indices.asnumpy().tolist() == rows.tolist() == [1, 3] and stored.shape == (2, 3)
    assert mx.test_utils.rand_ndarray((4, 4), "csr", density=0.3).stype == "csr"


def test_comparisons_keep_storage_only_where_zero_maps_to_zero():
    ones = mx.nd.ones((2, 3)).tostype("csr")
    assert (ones == 0).stype == "default" and (ones == 1).stype == "csr" and (ones != 0).stype == "csr"
    np.testing.assert_array_equal((ones > 0.5).asnumpy(), np.ones((2, 3)))
    assert (ones > 0.5).stype == "csr"
    np.testing.assert_array_equal((ones == mx.nd.zeros((2, 3))).asnumpy(), np.zeros((2, 3)))
    np.testing.assert_array_equal((ones ** 2).asnumpy(), np.ones((2, 3)))
    target = mx.nd.zeros((2, 3), stype="row_sparse")
    mx.nd.ones((2, 3)).copyto(target)
    assert target.stype == "row_sparse" and target.indices.asnumpy().tolist() == [0, 1]
    taken = mx.nd.take(mx.nd.array(np.eye(3)).tostype("csr"), mx.nd.array([2, 0]))
    assert taken.stype == "csr"
    np.testing.assert_array_equal(taken.asnumpy(), np.eye(3)[[2, 0]])


def test_symbolic_checks_take_sparse_locations_and_gradient_storage():
    data = mx.sym.Variable("data")
    out = mx.sym.square(data)
    dense = np.array([[0, 2], [0, 0], [1, 0]], dtype=np.float32)
    location = {"data": mx.nd.sparse.csr_matrix(dense)}
    mx.test_utils.check_symbolic_forward(out, location, [dense ** 2])
    grads = mx.test_utils.check_symbolic_backward(out, location, [np.ones_like(dense)], [2 * dense],
                                                  grad_stypes={"data": "row_sparse"})
    assert grads["data"].stype == "row_sparse" and grads["data"].indices.asnumpy().tolist() == [0, 2]
    mx.test_utils.check_numeric_gradient(out, {"data": np.ones((3, 2), np.float32)},
                                         grad_stype_dict={"data": "row_sparse"})


def test_graph_forms_of_retain_and_cast_storage():
    data, rows = mx.sym.Variable("data"), mx.sym.Variable("rows")
    net = mx.sym.sum(mx.sym.sparse.retain(mx.sym.cast_storage(data, stype="row_sparse"), rows) * 3)
    executor = net.simple_bind(mx.cpu(), data=(4, 2), rows=(2,))
    executor.arg_dict["data"][:] = np.arange(8, dtype=np.float32).reshape(4, 2)
    executor.arg_dict["rows"][:] = [1, 3]
    assert executor.forward(is_train=True)[0].asscalar() == 3 * (2 + 3 + 6 + 7)
    executor.backward()
    np.testing.assert_array_equal(executor.grad_dict["data"].asnumpy(), [[0, 0], [3, 3], [0, 0], [3, 3]])


def test_libsvm_iter_keeps_only_stored_features(tmp_path):
    # ten million feature columns: only the stored features are held, never a dense row
    path = tmp_path / "wide.libsvm"
    path.write_text("1 9999999:2 3:1\n0 5:-1\n1 0:4\n")
    with config.override(io_batch_type="ndarray"):
        data_iter = mx.io.LibSVMIter(data_libsvm=str(path), data_shape=(10_000_000,), batch_size=2)
        batches = list(data_iter)
        assert data_iter.provide_data[0].shape == (2, 10_000_000)
    first = batches[0].data[0]
    assert first.shape == (2, 10_000_000)
    assert first.indices.asnumpy().tolist() == [3, 9999999, 5]  # sorted within the row
    assert first.data.asnumpy().tolist() == [1.0, 2.0, -1.0]
    # round_batch: the last batch is completed from the start of the data (rows 2, 0)
    assert batches[1].pad == 1 and batches[1].data[0].indptr.asnumpy().tolist() == [0, 1, 3]
    with config.override(io_batch_type="ndarray"):
        unrounded = list(mx.io.LibSVMIter(data_libsvm=str(path), data_shape=(10_000_000,), batch_size=2,
                                          round_batch=False))
    # without it, the unfilled tail keeps the previous batch's rows (rows 2, 1), as MXNet's
    assert unrounded[1].data[0].indptr.asnumpy().tolist() == [0, 1, 2]
    assert unrounded[1].data[0].indices.asnumpy().tolist() == [0, 5]
    with config.override(io_batch_type="numpy"):
        small = tmp_path / "small.libsvm"
        small.write_text("1 2:1 0:3\n")
        dense = next(iter(mx.io.LibSVMIter(data_libsvm=str(small), data_shape=(3,), batch_size=1))).data[0]
        assert isinstance(dense, np.ndarray) and dense.tolist() == [[3.0, 0.0, 1.0]]
    path.write_text("1 3:1 3:2\n")
    with pytest.raises(mx.base.MXNetError, match="gives feature 3 twice"):
        mx.io.LibSVMIter(data_libsvm=str(path), data_shape=(5,), batch_size=1)
