"""Operators on csr and row_sparse arrays: values against numpy on the dense arrays, output
storage types against MXNet 1.9.1's rules, gradients against hand-derived numpy ones."""

import mxkit.ndarray as nd
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit.core.errors import ShapeError
from mxkit.ndarray import autograd

A = np.array([[0, 1, 0], [2, 0, 3], [0, 0, 0], [0, 4, 0]], dtype=np.float32)
B = np.array([[5, 0, 0], [1, 0, -1], [0, 0, 0], [0, 0, 2]], dtype=np.float32)


def sparse(values, stype):
    return nd.array(values).tostype(stype)


def random_matrix(rng, shape, density):
    return (rng.standard_normal(shape) * (rng.random(shape) < density)).astype(np.float32)


# ---- dot ---------------------------------------------------------------------------------

def test_dot_storage_types_and_values():
    rng = np.random.default_rng(0)
    csr = sparse(A, "csr")
    rhs = rng.standard_normal((3, 2)).astype(np.float32)
    out = nd.sparse.dot(csr, nd.array(rhs))
    assert out.stype == "default"
    np.testing.assert_allclose(out.asnumpy(), A @ rhs, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(nd.dot(csr, nd.array(rhs)).asnumpy(), A @ rhs, rtol=1e-6, atol=1e-6)
    lhs_t = rng.standard_normal((4, 2)).astype(np.float32)
    out_t = nd.sparse.dot(csr, nd.array(lhs_t), transpose_a=True)
    assert out_t.stype == "row_sparse"
    np.testing.assert_array_equal(out_t.indices.asnumpy(), [0, 1, 2])  # the columns the csr array uses
    np.testing.assert_allclose(out_t.asnumpy(), A.T @ lhs_t, rtol=1e-6, atol=1e-6)
    dense_lhs = rng.standard_normal((2, 4)).astype(np.float32)
    out_dc = nd.dot(nd.array(dense_lhs), csr)
    assert out_dc.stype == "csr"
    np.testing.assert_allclose(out_dc.asnumpy(), dense_lhs @ A, rtol=1e-6, atol=1e-6)
    out_rsp = nd.dot(csr, sparse(B[:3], "row_sparse"))
    assert out_rsp.stype == "default"
    np.testing.assert_allclose(out_rsp.asnumpy(), A @ B[:3], rtol=1e-6, atol=1e-6)
    forced = nd.sparse.dot(csr, nd.array(rhs), forward_stype="csr")
    assert forced.stype == "csr"
    vector = nd.sparse.dot(csr, nd.array(rhs[:, 0]))
    np.testing.assert_allclose(vector.asnumpy(), A @ rhs[:, 0], rtol=1e-6, atol=1e-6)
    with pytest.raises(ShapeError, match="inner dimensions"):
        nd.sparse.dot(csr, nd.ones((4, 2)))


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 5), st.integers(1, 5), st.integers(1, 4), st.floats(0, 1), st.integers(0, 2 ** 31 - 1),
       st.booleans())
def test_dot_over_random_sparsity(m, k, n, density, seed, transpose_a):
    rng = np.random.default_rng(seed)
    lhs = random_matrix(rng, (m, k), density)
    rhs = rng.standard_normal((m if transpose_a else k, n)).astype(np.float32)
    out = nd.sparse.dot(nd.sparse.csr_matrix(lhs), nd.array(rhs), transpose_a=transpose_a)
    expected = (lhs.T if transpose_a else lhs).astype(np.float64) @ rhs
    # float32 sums of k terms: a few ulps of the largest partial sum
    np.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-5, atol=1e-5 * max(k, m))


# ---- elementwise ---------------------------------------------------------------------------

@pytest.mark.parametrize("lhs_stype, rhs_stype, op, expected_stype", [
    ("csr", "csr", "add", "csr"), ("row_sparse", "row_sparse", "add", "row_sparse"),
    ("csr", "default", "add", "default"), ("row_sparse", "default", "sub", "default"),
    ("csr", "csr", "sub", "csr"), ("row_sparse", "row_sparse", "mul", "row_sparse"),
    ("row_sparse", "default", "mul", "row_sparse"), ("default", "row_sparse", "mul", "row_sparse"),
    ("csr", "default", "mul", "csr"), ("default", "csr", "mul", "csr"), ("csr", "csr", "mul", "csr"),
    ("csr", "row_sparse", "add", "default"),
])
def test_elementwise_output_storage_and_values(lhs_stype, rhs_stype, op, expected_stype):
    functions = {"add": (nd.sparse.add, np.add), "sub": (nd.sparse.subtract, np.subtract),
                 "mul": (nd.sparse.multiply, np.multiply)}
    ours, reference = functions[op]
    out = ours(sparse(A, lhs_stype), sparse(B, rhs_stype))
    assert out.stype == expected_stype
    np.testing.assert_array_equal(out.asnumpy(), reference(A, B))
    operator_form = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y}[op]
    assert operator_form(sparse(A, lhs_stype), sparse(B, rhs_stype)).stype == expected_stype
    assert getattr(nd, f"elemwise_{op}")(sparse(A, lhs_stype), sparse(B, rhs_stype)).stype == expected_stype


def test_structure_is_the_union_or_intersection():
    summed = sparse(A, "row_sparse") + sparse(-A, "row_sparse")
    assert summed.indices.asnumpy().tolist() == [0, 1, 3]  # rows kept although they cancel, as MXNet's
    product = sparse(A, "row_sparse") * sparse(B, "row_sparse")
    assert product.indices.asnumpy().tolist() == [0, 1, 3]
    masked = sparse(A, "csr") * nd.array(np.full(A.shape, 2.0, np.float32))
    assert masked.indices.asnumpy().tolist() == [1, 0, 2, 1]


def test_scalars_keep_storage_only_when_zero_stays_zero():
    csr = sparse(A, "csr")
    assert (csr * 2).stype == "csr" and (2 * csr).stype == "csr" and (csr / 2).stype == "csr"
    np.testing.assert_array_equal((csr * 2).asnumpy(), A * 2)
    assert (-csr).stype == "csr"
    shifted = csr + 1
    assert shifted.stype == "default"
    np.testing.assert_array_equal(shifted.asnumpy(), A + 1)
    np.testing.assert_array_equal((1 - sparse(A, "row_sparse")).asnumpy(), 1 - A)


@pytest.mark.parametrize("name", ["abs", "sqrt", "square", "sign", "sin", "tanh", "log1p", "expm1", "relu",
                                  "floor", "ceil", "round", "negative", "arcsinh"])
@pytest.mark.parametrize("stype", ["csr", "row_sparse"])
def test_zero_preserving_unary_keeps_storage(name, stype):
    values = np.abs(A) / 5 if name in ("sqrt", "log1p") else A / 5
    out = getattr(nd.sparse, name)(sparse(values, stype))
    assert out.stype == stype
    reference = {"relu": lambda x: np.maximum(x, 0), "negative": np.negative}.get(name, getattr(np, name, None))
    np.testing.assert_allclose(out.asnumpy(), reference(values), rtol=1e-6, atol=1e-7)
    assert getattr(nd, name)(sparse(values, stype)).stype == stype


def test_other_unary_and_reductions_are_dense():
    csr = sparse(A, "csr")
    out = nd.exp(csr)
    assert out.stype == "default"
    np.testing.assert_allclose(out.asnumpy(), np.exp(A), rtol=1e-6)
    for axis in (None, 0, 1):
        np.testing.assert_allclose(nd.sparse.sum(csr, axis=axis).asnumpy(), A.sum(axis=axis))
        np.testing.assert_allclose(nd.sparse.mean(sparse(A, "row_sparse"), axis=axis).asnumpy(),
                                   A.mean(axis=axis), rtol=1e-6)
    np.testing.assert_allclose(csr.sum(axis=1).asnumpy(), A.sum(axis=1))
    np.testing.assert_allclose(nd.sparse.clip(csr, -1, 2).asnumpy(), np.clip(A, -1, 2))
    assert nd.sparse.clip(csr, -1, 2).stype == "csr" and nd.sparse.clip(csr, 1, 2).stype == "default"


def test_square_sum_and_retain_and_add_n():
    rsp = sparse(A, "row_sparse")
    kept = nd.sparse.square_sum(rsp, axis=1, keepdims=True)
    assert kept.stype == "row_sparse" and kept.indices.asnumpy().tolist() == [0, 1, 3]
    np.testing.assert_array_equal(kept.asnumpy(), (A ** 2).sum(axis=1, keepdims=True))
    assert nd._internal._square_sum(rsp, axis=1, keepdims=True).stype == "row_sparse"
    np.testing.assert_array_equal(nd.sparse.square_sum(rsp, axis=0).asnumpy(), (A ** 2).sum(axis=0))
    np.testing.assert_array_equal(nd._internal._square_sum(nd.array(A), axis=0).asnumpy(), (A ** 2).sum(axis=0))
    retained = nd.sparse.retain(rsp, nd.array([1, 2, 3], dtype="int64"))
    assert retained.indices.asnumpy().tolist() == [1, 3]
    total = nd.sparse.add_n(rsp, sparse(B, "row_sparse"), rsp)
    assert total.stype == "row_sparse"
    np.testing.assert_array_equal(total.asnumpy(), 2 * A + B)
    assert nd.sparse.zeros_like(rsp).stype == "row_sparse"
    np.testing.assert_array_equal(nd.sparse.where(sparse(A, "csr"), nd.array(A), nd.array(B)).asnumpy(),
                                  np.where(A != 0, A, B))


def test_out_and_fallback():
    out = nd.zeros(A.shape, stype="csr")
    nd.sparse.elemwise_add(sparse(A, "csr"), sparse(B, "csr"), out=out)
    np.testing.assert_array_equal(out.asnumpy(), A + B)
    fallback = nd.softmax(sparse(A, "csr"))  # no sparse form: the dense operator on the dense values
    assert fallback.stype == "default"
    reference = np.exp(A - A.max(axis=1, keepdims=True))
    np.testing.assert_allclose(fallback.asnumpy(), reference / reference.sum(axis=1, keepdims=True), rtol=1e-6)
    with pytest.raises(ShapeError, match="one shape"):
        nd.sparse.elemwise_add(sparse(A, "csr"), sparse(A[:2], "csr"))


# ---- gradients ------------------------------------------------------------------------------

@pytest.mark.parametrize("weight_stype", ["default", "row_sparse"])
def test_dot_gives_a_row_sparse_weight_gradient(weight_stype):
    csr = sparse(A, "csr")
    weight = nd.ones((3, 2)) if weight_stype == "default" else sparse(np.ones((3, 2), np.float32), "row_sparse")
    weight.attach_grad(stype="row_sparse")
    head = np.arange(8, dtype=np.float32).reshape(4, 2)
    with autograd.record():
        y = nd.dot(csr, weight)
    y.backward(nd.array(head))
    grad = weight.grad
    assert grad.stype == "row_sparse"
    np.testing.assert_allclose(grad.asnumpy(), A.T @ head, rtol=1e-6)
    assert grad.indices.asnumpy().tolist() == [0, 1, 2]


def test_embedding_gradient_as_row_sparse_rows():
    weight = nd.array(np.arange(12, dtype=np.float32).reshape(6, 2))
    weight.attach_grad(stype="row_sparse")
    with autograd.record():
        out = nd.Embedding(nd.array([[1, 4], [4, 0]]), weight, input_dim=6, output_dim=2, sparse_grad=True)
    out.backward()
    assert weight.grad.stype == "row_sparse"
    assert weight.grad.indices.asnumpy().tolist() == [0, 1, 4]
    expected = np.zeros((6, 2), np.float32)
    expected[[0, 1]] = 1
    expected[4] = 2
    np.testing.assert_array_equal(weight.grad.asnumpy(), expected)


@pytest.mark.parametrize("stype", ["csr", "row_sparse"])
def test_sparse_variables_get_gradients_of_their_storage(stype):
    x = sparse(A, stype)
    y = sparse(B, "default")
    x.attach_grad()
    assert x.grad.stype == stype
    with autograd.record():
        z = x * y + x * 2
    z.backward()
    assert x.grad.stype == stype
    np.testing.assert_allclose(x.grad.asnumpy(), B + 2)
    with autograd.record():
        w = nd.sparse.square(x)
    assert w.stype == stype
    w.backward(nd.ones(A.shape).tostype(stype))
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * A)
    detached = x.detach()
    assert detached.stype == stype and detached.grad is None


def test_forward_stype_crop_quadratic_and_retain_forms():
    csr = sparse(A, "csr")
    assert nd.dot(nd.array(B.T), csr, forward_stype="default").stype == "default"
    assert nd.dot(nd.array(B), nd.array(A.T), forward_stype="csr").stype == "csr"
    cropped = nd.crop(csr, begin=1, end=3)
    assert cropped.stype == "csr"
    np.testing.assert_array_equal(cropped.asnumpy(), A[1:3])
    kept = nd.contrib.quadratic(csr, a=1.0, b=2.0, c=0.0)
    assert kept.stype == "csr"
    np.testing.assert_allclose(kept.asnumpy(), A ** 2 + 2 * A)
    shifted = nd.contrib.quadratic(csr, a=1.0, b=2.0, c=1.0)
    assert shifted.stype == "default"
    np.testing.assert_allclose(shifted.asnumpy(), A ** 2 + 2 * A + 1)
    retained = nd._internal._sparse_retain(nd.array(A), nd.array([0, 3]))
    assert retained.stype == "row_sparse"
    np.testing.assert_array_equal(retained.asnumpy(), A * np.array([[1], [0], [0], [1]]))
    assert nd.cast_storage(nd.array(A), stype="csr").stype == "csr"


def test_numpy_interop_transpose_and_stepped_slices_fall_back_to_dense():
    csr = sparse(A, "csr")
    np.testing.assert_array_equal(np.asarray(csr), A)
    assert np.all(np.asarray(sparse(A, "row_sparse")) == A)
    np.testing.assert_array_equal(csr.T.asnumpy(), A.T)
    stepped = nd.sparse.slice(csr, begin=(0,), end=(4,), step=(2,))
    assert stepped.stype == "default"
    np.testing.assert_array_equal(stepped.asnumpy(), A[0:4:2])
