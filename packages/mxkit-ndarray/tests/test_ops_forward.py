"""Every operator's forward pass against numpy."""

import math
from types import SimpleNamespace

import mxkit.core
import mxkit.ndarray
import numpy as np
import pytest
from mxkit.ndarray.ops.unary import STEP, UNARY

# MXNet's short names without the facade package (these tests run with mxkit-ndarray and
# mxkit-cpu installed alone)
mx = SimpleNamespace(nd=mxkit.ndarray, random=mxkit.ndarray.random, autograd=mxkit.ndarray.autograd,
                     cpu=mxkit.core.cpu, Context=mxkit.core.Context, MXKitError=mxkit.core.MXKitError)

RNG = np.random.default_rng(1)
A = RNG.standard_normal((3, 4)).astype(np.float32)
POS = (np.abs(A) + 0.5).astype(np.float32)
UNIT = np.tanh(A).astype(np.float32) * 0.9
B3 = RNG.standard_normal((2, 3, 4)).astype(np.float32)

NUMPY_UNARY = {
    "relu": lambda x: np.maximum(x, 0), "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "tanh": np.tanh,
    "softrelu": lambda x: np.log1p(np.exp(x)), "softsign": lambda x: x / (1 + np.abs(x)), "exp": np.exp,
    "expm1": np.expm1, "log": np.log, "log10": np.log10, "log2": np.log2, "log1p": np.log1p, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "cbrt": np.cbrt, "rcbrt": lambda x: 1 / np.cbrt(x), "square": np.square,
    "reciprocal": np.reciprocal, "negative": np.negative, "abs": np.abs, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "arcsin": np.arcsin, "arccos": np.arccos, "arctan": np.arctan, "sinh": np.sinh,
    "cosh": np.cosh, "arcsinh": np.arcsinh, "arccosh": lambda x: np.arccosh(x + 1), "arctanh": np.arctanh,
    "degrees": np.degrees, "radians": np.radians, "identity": lambda x: x,
    "erf": np.vectorize(math.erf), "sign": np.sign, "floor": np.floor, "ceil": np.ceil,
    "round": lambda x: np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5)), "rint": np.rint,
    "trunc": np.trunc, "fix": np.fix, "logical_not": lambda x: (x == 0).astype(x.dtype),
    "zeros_like": np.zeros_like, "ones_like": np.ones_like,
}
DOMAIN = {"log": POS, "log10": POS, "log2": POS, "log1p": POS, "sqrt": POS, "rsqrt": POS, "rcbrt": POS,
          "reciprocal": POS, "arcsin": UNIT, "arccos": UNIT, "arctanh": UNIT, "arccosh": POS + 1}


def test_every_unary_operator_is_tested():
    assert set(UNARY) | set(STEP) == set(NUMPY_UNARY)


@pytest.mark.parametrize("name", sorted(NUMPY_UNARY))
def test_unary(name):
    x = DOMAIN.get(name, A * 3)
    got = getattr(mx.nd, name)(mx.nd.array(x)).asnumpy()
    ref_input = x - 1 if name == "arccosh" else x
    np.testing.assert_allclose(got, NUMPY_UNARY[name](ref_input.astype(np.float64)).astype(np.float32),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("act", ["relu", "sigmoid", "tanh", "softrelu", "softsign"])
def test_activation(act):
    np.testing.assert_allclose(mx.nd.Activation(mx.nd.array(A), act_type=act).asnumpy(),
                               NUMPY_UNARY[act](A), rtol=1e-5, atol=1e-6)


def test_leaky_relu_and_cast():
    np.testing.assert_allclose(mx.nd.LeakyReLU(mx.nd.array(A), slope=0.1).asnumpy(), np.where(A > 0, A, 0.1 * A))
    got = mx.nd.Cast(mx.nd.array(A * 10), dtype="int32")
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got.asnumpy(), (A * 10).astype(np.int32))


BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "mod": np.mod, "power": np.power,
    "maximum": np.maximum, "minimum": np.minimum, "hypot": np.hypot, "equal": np.equal,
    "not_equal": np.not_equal, "greater": np.greater, "greater_equal": np.greater_equal, "lesser": np.less,
    "lesser_equal": np.less_equal, "logical_and": np.logical_and, "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}


@pytest.mark.parametrize("key", sorted(BINARY))
def test_binary_elementwise_broadcast_and_scalar(key):
    lhs = np.round(POS * 2, 1)
    rhs = np.round(POS[::-1] + 0.3, 1).astype(np.float32)
    row = rhs[:1]
    ref = BINARY[key]
    elem_name = {"add": "elemwise_add", "sub": "elemwise_sub", "mul": "elemwise_mul",
                 "div": "elemwise_div"}.get(key, f"_{key}")
    got = getattr(mx.nd, elem_name)(mx.nd.array(lhs), mx.nd.array(rhs)).asnumpy()
    np.testing.assert_allclose(got, ref(lhs, rhs).astype(np.float32), rtol=1e-5)
    got = getattr(mx.nd, f"broadcast_{key}")(mx.nd.array(lhs), mx.nd.array(row)).asnumpy()
    np.testing.assert_allclose(got, ref(lhs, row).astype(np.float32), rtol=1e-5)
    scalar_name = {"add": "_plus_scalar", "sub": "_minus_scalar", "mul": "_mul_scalar",
                   "div": "_div_scalar"}.get(key, f"_{key}_scalar")
    got = getattr(mx.nd, scalar_name)(mx.nd.array(lhs), scalar=1.5).asnumpy()
    np.testing.assert_allclose(got, ref(lhs, np.float32(1.5)).astype(np.float32), rtol=1e-5)


@pytest.mark.parametrize("name, ref", [("_rminus_scalar", lambda x, s: s - x), ("_rdiv_scalar", lambda x, s: s / x),
                                       ("_rmod_scalar", lambda x, s: np.mod(s, x)),
                                       ("_rpower_scalar", lambda x, s: s ** x)])
def test_reversed_scalar_ops(name, ref):
    got = getattr(mx.nd, name)(mx.nd.array(POS), scalar=2.5).asnumpy()
    np.testing.assert_allclose(got, ref(POS, np.float32(2.5)), rtol=1e-5)


def test_int_scalar_is_cast_to_array_dtype_like_mxnet():
    x = mx.nd.array([1, 2, 3], dtype="int32")
    assert (x + 1.7).asnumpy().tolist() == [2, 3, 4]


@pytest.mark.parametrize("name", ["sum", "mean", "prod", "max", "min", "nansum", "nanprod"])
@pytest.mark.parametrize("axis, keepdims, exclude", [(None, False, False), ((1,), False, False),
                                                     ((0, 2), True, False), ((1,), False, True),
                                                     ((-1,), True, True), ((), False, False)])
def test_reductions(name, axis, keepdims, exclude):
    got = getattr(mx.nd, name)(mx.nd.array(B3), axis=axis, keepdims=keepdims, exclude=exclude).asnumpy()
    np_axis = None if not axis else tuple(a % 3 for a in axis)
    if exclude and np_axis is not None:
        np_axis = tuple(i for i in range(3) if i not in np_axis)
    ref = getattr(np, name)(B3.astype(np.float64), axis=np_axis, keepdims=keepdims)
    np.testing.assert_allclose(got, np.asarray(ref, np.float32).reshape(got.shape), rtol=1e-5, atol=1e-6)
    assert got.shape == np.asarray(ref).shape or (got.shape == (1,) and np.asarray(ref).shape == ())


def test_reduction_aliases_and_methods():
    x = mx.nd.array(B3)
    np.testing.assert_allclose(mx.nd.sum_axis(x, axis=1).asnumpy(), B3.sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(x.max(axis=(0, 1)).asnumpy(), B3.max(axis=(0, 1)))
    np.testing.assert_allclose(x.mean().asnumpy(), [B3.mean()], rtol=1e-5)


@pytest.mark.parametrize("ord_, axis", [(2, None), (1, (1,)), (2, (0, 2))])
def test_norm(ord_, axis):
    got = mx.nd.norm(mx.nd.array(B3), ord=ord_, axis=axis).asnumpy()
    if axis is None:
        ref = np.sqrt((B3.astype(np.float64) ** 2).sum())
    elif ord_ == 1:
        ref = np.abs(B3).sum(axis=axis)
    else:
        ref = np.sqrt((B3 ** 2).sum(axis=axis))
    np.testing.assert_allclose(got.reshape(np.shape(ref)), ref, rtol=1e-5)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reductions(name):
    got = getattr(mx.nd, name)(mx.nd.array(B3), axis=1)
    assert got.dtype == np.float32  # MXNet returns indices in the input dtype
    np.testing.assert_array_equal(got.asnumpy(), getattr(np, name)(B3, axis=1))
    np.testing.assert_array_equal(getattr(mx.nd, name)(mx.nd.array(B3)).asnumpy(), getattr(np, name)(B3))
    np.testing.assert_array_equal(mx.nd.argmax_channel(mx.nd.array(A)).asnumpy(), A.argmax(axis=-1))


def test_shape_operators():
    x = mx.nd.array(B3)
    np.testing.assert_array_equal(mx.nd.transpose(x).asnumpy(), B3.T)
    np.testing.assert_array_equal(mx.nd.transpose(x, axes=(1, 0, 2)).asnumpy(), B3.transpose(1, 0, 2))
    np.testing.assert_array_equal(x.T.asnumpy(), B3.T)
    np.testing.assert_array_equal(mx.nd.swapaxes(x, dim1=0, dim2=2).asnumpy(), B3.swapaxes(0, 2))
    np.testing.assert_array_equal(mx.nd.flatten(x).asnumpy(), B3.reshape(2, 12))
    np.testing.assert_array_equal(mx.nd.expand_dims(x, axis=-1).asnumpy(), B3[..., None])
    np.testing.assert_array_equal(mx.nd.squeeze(mx.nd.array(B3[:, :1])).asnumpy(), B3[:, 0])
    np.testing.assert_array_equal(mx.nd.squeeze(mx.nd.array(B3[:, :1]), axis=1).asnumpy(), B3[:, 0])
    np.testing.assert_array_equal(mx.nd.Reshape(x, shape=(-1, 0)).asnumpy(), B3.reshape(8, 3))
    np.testing.assert_array_equal(mx.nd.reshape_like(x, mx.nd.zeros((4, 6))).asnumpy(), B3.reshape(4, 6))
    np.testing.assert_array_equal(mx.nd.tile(x, reps=(2, 1, 3)).asnumpy(), np.tile(B3, (2, 1, 3)))
    np.testing.assert_array_equal(mx.nd.tile(x, reps=(2,)).asnumpy(), np.tile(B3, (2,)))
    np.testing.assert_array_equal(mx.nd.repeat(x, repeats=2, axis=1).asnumpy(), np.repeat(B3, 2, axis=1))
    np.testing.assert_array_equal(mx.nd.repeat(x, repeats=3).asnumpy(), np.repeat(B3, 3))
    np.testing.assert_array_equal(mx.nd.flip(x, axis=1).asnumpy(), B3[:, ::-1])
    np.testing.assert_array_equal(mx.nd.reverse(x, axis=(0, 2)).asnumpy(), B3[::-1, :, ::-1])
    np.testing.assert_array_equal(mx.nd.broadcast_to(mx.nd.array(A[:1]), shape=(3, 4)).asnumpy(),
                                  np.broadcast_to(A[:1], (3, 4)))
    np.testing.assert_array_equal(mx.nd.broadcast_axis(mx.nd.array(A[:1]), axis=0, size=5).asnumpy(),
                                  np.broadcast_to(A[:1], (5, 4)))
    np.testing.assert_array_equal(mx.nd.moveaxis(x, 0, 2).asnumpy(), np.moveaxis(B3, 0, 2))


def test_join_and_split():
    a, b = mx.nd.array(A), mx.nd.array(A * 2)
    np.testing.assert_array_equal(mx.nd.concat(a, b, dim=0).asnumpy(), np.concatenate([A, A * 2], 0))
    np.testing.assert_array_equal(mx.nd.Concat(a, b).asnumpy(), np.concatenate([A, A * 2], 1))
    np.testing.assert_array_equal(mx.nd.concatenate([a, b], axis=1).asnumpy(), np.concatenate([A, A * 2], 1))
    np.testing.assert_array_equal(mx.nd.stack(a, b, axis=1).asnumpy(), np.stack([A, A * 2], 1))
    parts = mx.nd.split(a, num_outputs=2, axis=1)
    for got, ref in zip(parts, np.split(A, 2, axis=1)):
        np.testing.assert_array_equal(got.asnumpy(), ref)
    parts = mx.nd.split(a, num_outputs=3, axis=0, squeeze_axis=True)
    assert parts[0].shape == (4,)
    with pytest.raises(mx.MXKitError, match="cannot be split into num_outputs=3"):
        mx.nd.split(a, num_outputs=3, axis=1)


def test_slicing_operators():
    x = mx.nd.array(B3)
    np.testing.assert_array_equal(mx.nd.slice(x, begin=(0, 1), end=(2, 3)).asnumpy(), B3[0:2, 1:3])
    np.testing.assert_array_equal(mx.nd.slice(x, begin=(None, None, 3), end=(None, None, 0), step=(1, -1, -2))
                                  .asnumpy(), B3[:, ::-1, 3:0:-2])
    np.testing.assert_array_equal(mx.nd.slice_axis(x, axis=2, begin=1, end=None).asnumpy(), B3[:, :, 1:])
    np.testing.assert_array_equal(mx.nd.slice_axis(x, axis=-1, begin=-3, end=-1).asnumpy(), B3[..., -3:-1])


def test_selection_operators():
    cond = (A > 0).astype(np.float32)
    x, y = mx.nd.array(A), mx.nd.array(-A)
    np.testing.assert_array_equal(mx.nd.where(mx.nd.array(cond), x, y).asnumpy(), np.where(cond, A, -A))
    np.testing.assert_array_equal(mx.nd.where(mx.nd.array([1, 0, 1]), x, y).asnumpy(),
                                  np.where(np.array([1, 0, 1])[:, None], A, -A))
    np.testing.assert_allclose(mx.nd.clip(x, -0.5, 0.5).asnumpy(), np.clip(A, -0.5, 0.5))
    np.testing.assert_array_equal(mx.nd.one_hot(mx.nd.array([1, 0, 3, 7]), depth=4).asnumpy(),
                                  [*np.eye(4, dtype=np.float32)[[1, 0, 3]].tolist(), [0, 0, 0, 0]])
    np.testing.assert_array_equal(mx.nd.one_hot(mx.nd.array([[2]]), 3, on_value=5, off_value=-1).asnumpy(),
                                  [[[-1, -1, 5]]])
    index = np.array([0, 3, 1], np.float32)
    np.testing.assert_array_equal(mx.nd.pick(x, mx.nd.array(index), axis=1).asnumpy(), A[[0, 1, 2], [0, 3, 1]])
    np.testing.assert_array_equal(mx.nd.pick(x, mx.nd.array([5, -1, 2]), axis=1).asnumpy(),
                                  A[[0, 1, 2], [3, 0, 2]])  # mode clip
    np.testing.assert_array_equal(mx.nd.pick(x, mx.nd.array([5, -1, 2]), axis=1, mode="wrap").asnumpy(),
                                  A[[0, 1, 2], [1, 3, 2]])
    np.testing.assert_array_equal(mx.nd.pick(x, mx.nd.array([1, 2, 0, 1]), axis=0, keepdims=True).asnumpy(),
                                  A[[1, 2, 0, 1], [0, 1, 2, 3]][None])
    np.testing.assert_array_equal(mx.nd.take(x, mx.nd.array([[2, 0], [1, 1]])).asnumpy(), A[[[2, 0], [1, 1]]])
    np.testing.assert_array_equal(mx.nd.take(x, mx.nd.array([3, -1]), axis=1, mode="wrap").asnumpy(),
                                  A[:, [3, 3]])
    np.testing.assert_array_equal(mx.nd.take(x, mx.nd.array([9]), mode="clip").asnumpy(), A[[2]])
    indices = np.array([[0, 2, 1], [1, 0, 3]])
    np.testing.assert_array_equal(mx.nd.gather_nd(x, mx.nd.array(indices)).asnumpy(), A[indices[0], indices[1]])


def test_ordering_operators():
    data = np.array([[3, 1, 2, 5], [0, 9, 4, 4.5]], np.float32)
    x = mx.nd.array(data)
    np.testing.assert_array_equal(mx.nd.sort(x).asnumpy(), np.sort(data))
    np.testing.assert_array_equal(mx.nd.sort(x, axis=0, is_ascend=False).asnumpy(), -np.sort(-data, axis=0))
    np.testing.assert_array_equal(mx.nd.argsort(x).asnumpy(), np.argsort(data))
    np.testing.assert_array_equal(mx.nd.argsort(x, is_ascend=False).asnumpy(), np.argsort(-data))
    np.testing.assert_array_equal(mx.nd.topk(x, k=2).asnumpy(), np.argsort(-data)[:, :2])
    values, indices = mx.nd.topk(x, k=2, ret_typ="both", is_ascend=True)
    np.testing.assert_array_equal(values.asnumpy(), np.sort(data)[:, :2])
    np.testing.assert_array_equal(indices.asnumpy(), np.argsort(data)[:, :2])
    mask = mx.nd.topk(x, k=1, ret_typ="mask", axis=0).asnumpy()
    np.testing.assert_array_equal(mask, (data == data.max(axis=0)).astype(np.float32))
    np.testing.assert_array_equal(mx.nd.topk(x, k=3, axis=None, ret_typ="value").asnumpy(), [9, 5, 4.5])


@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_dot_variants(ta, tb):
    a = RNG.standard_normal((4, 3) if ta else (3, 4)).astype(np.float32)
    b = RNG.standard_normal((5, 4) if tb else (4, 5)).astype(np.float32)
    got = mx.nd.dot(mx.nd.array(a), mx.nd.array(b), transpose_a=ta, transpose_b=tb).asnumpy()
    np.testing.assert_allclose(got, (a.T if ta else a) @ (b.T if tb else b), rtol=1e-5, atol=1e-5)


def test_dot_nd_and_vectors():
    a, b = B3, RNG.standard_normal((4, 2, 5)).astype(np.float32)
    np.testing.assert_allclose(mx.nd.dot(mx.nd.array(a), mx.nd.array(b)).asnumpy(), np.tensordot(a, b, 1),
                               rtol=1e-5, atol=1e-5)
    v = np.arange(4, dtype=np.float32)
    assert mx.nd.dot(mx.nd.array(v), mx.nd.array(v)).asnumpy().tolist() == [14.0]  # (1,) like MXNet 1.x
    np.testing.assert_allclose(mx.nd.dot(mx.nd.array(A), mx.nd.array(v)).asnumpy(), A @ v, rtol=1e-5)


@pytest.mark.parametrize("ta, tb", [(False, False), (True, True)])
def test_batch_dot_and_gemm2(ta, tb):
    a = RNG.standard_normal((2, 4, 3) if ta else (2, 3, 4)).astype(np.float32)
    b = RNG.standard_normal((2, 5, 4) if tb else (2, 4, 5)).astype(np.float32)
    ref = np.matmul(a.swapaxes(1, 2) if ta else a, b.swapaxes(1, 2) if tb else b)
    np.testing.assert_allclose(mx.nd.batch_dot(mx.nd.array(a), mx.nd.array(b), transpose_a=ta, transpose_b=tb)
                               .asnumpy(), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mx.nd.linalg_gemm2(mx.nd.array(a), mx.nd.array(b), transpose_a=ta, transpose_b=tb,
                                                  alpha=2.0).asnumpy(), 2 * ref, rtol=1e-5, atol=1e-5)


def test_softmax_family():
    x = mx.nd.array(B3)
    e = np.exp(B3 - B3.max(axis=1, keepdims=True))
    np.testing.assert_allclose(mx.nd.softmax(x, axis=1).asnumpy(), e / e.sum(axis=1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(mx.nd.log_softmax(x).asnumpy(),
                               B3 - np.log(np.exp(B3).sum(axis=-1, keepdims=True)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call, message", [
    (lambda: mx.nd.transpose(mx.nd.array(B3), axes=(0, 0, 1)), "not a permutation"),
    (lambda: mx.nd.squeeze(mx.nd.array(B3), axis=1), "only size-1 axes"),
    (lambda: mx.nd.stack(mx.nd.ones((2,)), mx.nd.ones((3,))), "same shape"),
    (lambda: mx.nd.pick(mx.nd.array(A), mx.nd.array([1, 2]), axis=1), "index shape"),
    (lambda: mx.nd.batch_dot(mx.nd.ones((2, 3, 4)), mx.nd.ones((3, 4, 5))), "batch dimensions differ"),
    (lambda: mx.nd.topk(mx.nd.array(A), k=9), "k=9"),
    (lambda: mx.nd.broadcast_to(mx.nd.array(A), shape=(2, 3, 5)), "cannot be broadcast"),
    (lambda: mx.nd.Activation(mx.nd.array(A), act_type="gelu"), "relu, sigmoid"),
    (lambda: mx.nd.slice(mx.nd.array(A), begin=(0,), end=(1, 2)), "one entry per"),
])
def test_operator_errors(call, message):
    with pytest.raises(mx.MXKitError, match=message):
        call()


def test_linalg_namespace():
    a = RNG.standard_normal((2, 3)).astype(np.float32)
    b = RNG.standard_normal((2, 4)).astype(np.float32)
    got = mx.nd.linalg.gemm2(mx.nd.array(a), mx.nd.array(b), transpose_a=True, alpha=0.5).asnumpy()
    np.testing.assert_allclose(got, 0.5 * a.T @ b, rtol=1e-5, atol=1e-6)
