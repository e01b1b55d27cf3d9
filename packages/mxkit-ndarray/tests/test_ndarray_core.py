"""NDArray creation, arithmetic, views, in-place forms, conversion and errors, against numpy."""

from types import SimpleNamespace

import mxkit.core
import mxkit.ndarray
import numpy as np
import pytest
from mxkit.core.errors import DeviceError, DTypeError, EngineError, MXKitError, ShapeError

# MXNet's short names without the facade package (these tests run with mxkit-ndarray and
# mxkit-cpu installed alone)
mx = SimpleNamespace(nd=mxkit.ndarray, random=mxkit.ndarray.random, autograd=mxkit.ndarray.autograd,
                     cpu=mxkit.core.cpu, Context=mxkit.core.Context, MXKitError=mxkit.core.MXKitError)

RNG = np.random.default_rng(0)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def test_facade_ones():
    facade = pytest.importorskip("mxkit.mx", reason="the facade (package mxkit) is not installed")
    a = facade.nd.ones((2, 3))
    assert a.shape == (2, 3) and a.dtype == np.float32 and a.context == mx.cpu(0)
    np.testing.assert_array_equal(a.asnumpy(), np.ones((2, 3), np.float32))


@pytest.mark.parametrize("make, expected", [
    (lambda: mx.nd.zeros((2, 3), dtype="int32"), np.zeros((2, 3), np.int32)),
    (lambda: mx.nd.full((2, 2), 7.5), np.full((2, 2), 7.5, np.float32)),
    (lambda: mx.nd.arange(2, 11, 3), np.arange(2, 11, 3, dtype=np.float32)),
    (lambda: mx.nd.arange(5), np.arange(5, dtype=np.float32)),
    (lambda: mx.nd.arange(0, 3, repeat=2), np.repeat(np.arange(3, dtype=np.float32), 2)),
    (lambda: mx.nd.eye(3, 4, k=1), np.eye(3, 4, k=1, dtype=np.float32)),
    (lambda: mx.nd.eye(3, k=-1, dtype="float64"), np.eye(3, k=-1)),
    (lambda: mx.nd.array([[1, 2], [3, 4]]), np.array([[1, 2], [3, 4]], np.float32)),
    # MXNet 1.x: float32 from a numpy array unless dtype is given
    (lambda: mx.nd.array(np.arange(4, dtype=np.int64)), np.arange(4, dtype=np.float32)),
    (lambda: mx.nd.array(np.arange(4), dtype="int64"), np.arange(4, dtype=np.int64)),
    (lambda: mx.nd.zeros_like(mx.nd.ones((2, 2))), np.zeros((2, 2), np.float32)),
    (lambda: mx.nd.ones_like(mx.nd.zeros((3,), dtype="float64")), np.ones(3)),
    (lambda: mx.nd.zeros((0, 3)), np.zeros((0, 3), np.float32)),
])
def test_creation(make, expected):
    got = make().asnumpy()
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_empty_is_aligned_and_shaped():
    a = mx.nd.empty((3, 5), dtype="float64")
    assert a.shape == (3, 5) and a.dtype == np.float64
    assert a._data.ctypes.data % 64 == 0


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "**", "%", "==", "!=", ">", ">=", "<", "<="])
@pytest.mark.parametrize("lshape, rshape", [((2, 3), (2, 3)), ((2, 3), (3,)), ((4, 1, 3), (2, 1)), ((1,), (3, 2))])
def test_binary_operators_broadcast_like_numpy(op, lshape, rshape):
    a, b = np.abs(rand(*lshape)) + 0.5, np.abs(rand(*rshape)) + 0.5
    got = eval(f"x {op} y", {"x": mx.nd.array(a), "y": mx.nd.array(b)}).asnumpy()
    expected = eval(f"x {op} y", {"x": a, "y": b}).astype(np.float32)
    np.testing.assert_allclose(got, expected, rtol=1e-5)


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "**", "%", ">", "<", "==", ">=", "<=", "!="])
def test_scalar_on_both_sides(op):
    a = np.abs(rand(3, 4)) + 0.5
    x = mx.nd.array(a)
    for scalar in (2, 0.5):
        np.testing.assert_allclose(eval(f"x {op} s", {"x": x, "s": scalar}).asnumpy(),
                                   eval(f"x {op} s", {"x": a, "s": scalar}).astype(np.float32), rtol=1e-5)
        np.testing.assert_allclose(eval(f"s {op} x", {"x": x, "s": scalar}).asnumpy(),
                                   eval(f"s {op} x", {"x": a, "s": scalar}).astype(np.float32), rtol=1e-5)


def test_unary_operators_and_functions():
    a = rand(3, 3)
    x = mx.nd.array(a)
    np.testing.assert_allclose((-x).asnumpy(), -a)
    np.testing.assert_allclose(abs(x).asnumpy(), np.abs(a))
    np.testing.assert_allclose(mx.nd.maximum(x, 0.1).asnumpy(), np.maximum(a, 0.1))
    np.testing.assert_allclose(mx.nd.minimum(x, mx.nd.array(a.T)).asnumpy(), np.minimum(a, a.T))
    np.testing.assert_allclose(mx.nd.power(mx.nd.abs(x), 2).asnumpy(), np.abs(a) ** 2, rtol=1e-5)
    np.testing.assert_allclose(mx.nd.add(1, x).asnumpy(), 1 + a)
    np.testing.assert_allclose(mx.nd.subtract(1, x).asnumpy(), 1 - a)


def test_in_place_forms():
    a = rand(2, 3)
    x = mx.nd.array(a)
    storage = x._data
    x += 1
    x *= mx.nd.array(a)
    x -= 0.5
    x /= 2
    assert x._data is storage  # in place: no new buffer
    np.testing.assert_allclose(x.asnumpy(), ((a + 1) * a - 0.5) / 2, rtol=1e-5)


def test_setitem_forms():
    x = mx.nd.zeros((4, 5))
    expected = np.zeros((4, 5), np.float32)
    x[:] = 3
    expected[:] = 3
    x[1:3] = mx.nd.ones((2, 5)) * 2
    expected[1:3] = 2
    x[0] = np.arange(5)
    expected[0] = np.arange(5)
    x[3, 4] = -1
    expected[3, 4] = -1
    x[:, 1] = mx.nd.array([9, 8, 7, 6])
    expected[:, 1] = [9, 8, 7, 6]
    x[mx.nd.array([0, 2], dtype="int32")] = 0
    expected[[0, 2]] = 0
    x[2:, ::2] = 5
    expected[2:, ::2] = 5
    np.testing.assert_array_equal(x.asnumpy(), expected)


def test_basic_indexing_gives_views_sharing_storage_and_var():
    x = mx.nd.array(np.arange(24).reshape(2, 3, 4))
    row = x[1]
    assert row.shape == (3, 4) and row.var is x.var
    assert np.shares_memory(row._data, x._data)
    row[:] = -1
    assert (x.asnumpy()[1] == -1).all()
    sub = x[0, 1:3, ::2]
    np.testing.assert_array_equal(sub.asnumpy(), np.arange(24).reshape(2, 3, 4)[0, 1:3, ::2])
    assert x[0, 0, 0].shape == (1,)  # MXNet 1.x: no 0-d results
    assert x[..., 1].shape == (2, 3)
    assert x[None].shape == (1, 2, 3, 4)


def test_advanced_indexing_copies():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = mx.nd.array(a)
    np.testing.assert_array_equal(x[[2, 0]].asnumpy(), a[[2, 0]])
    np.testing.assert_array_equal(x[mx.nd.array([1, 1])].asnumpy(), a[[1, 1]])
    np.testing.assert_array_equal(x[[0, 2], [1, 3]].asnumpy(), a[[0, 2], [1, 3]])
    np.testing.assert_array_equal(x[1, [0, 3]].asnumpy(), a[1, [0, 3]])
    got = x[[0]]
    got[:] = 100
    assert x.asnumpy()[0, 0] == 0  # a copy, not a view


@pytest.mark.parametrize("key, message", [
    ((5,), "out of range for axis 0 of size 3"),
    ((0, 0, 0), "too many indices"),
    # boolean masks and slices beside index arrays work as in numpy (test_advanced_indexing.py);
    # what numpy refuses is refused with its reason
    ((np.array([True, False]),), "boolean index did not match"),
    ((slice(None), [0, 4]), "out of bounds"),
])
def test_bad_indices_raise_clearly(key, message):
    x = mx.nd.zeros((3, 4))
    with pytest.raises(MXKitError, match=message):
        x[key if len(key) > 1 else key[0]]


def test_reshape_is_a_view_with_mxnet_codes():
    x = mx.nd.array(np.arange(24).reshape(2, 3, 4))
    y = x.reshape((0, -1))
    assert y.shape == (2, 12) and np.shares_memory(y._data, x._data) and y.var is x.var
    assert x.reshape(-3, -2).shape == (6, 4)
    assert x.reshape(shape=(4, -1), reverse=True).shape == (4, 6)
    y[:] = 0
    assert x.asnumpy().sum() == 0
    with pytest.raises(ShapeError, match="cannot reshape"):
        x.reshape((5, -1))


def test_conversions_and_repr():
    x = mx.nd.array([[1, 2], [3, 4]])
    assert repr(x) == "\n[[1. 2.]\n [3. 4.]]\n<NDArray 2x2 @cpu(0)>"
    assert mx.nd.array([5]).asscalar() == 5.0
    assert np.asarray(x).tolist() == [[1, 2], [3, 4]]
    assert x.astype("int32").dtype == np.int32
    assert x.astype("float32", copy=False) is x
    assert x.size == 4 and x.ndim == 2 and len(x) == 2
    assert [row.asnumpy().tolist() for row in x] == [[1, 2], [3, 4]]
    with pytest.raises(ShapeError, match="exactly one element"):
        x.asscalar()
    with pytest.raises(ValueError, match="ambiguous"):
        bool(x)


def test_copy_copyto_and_contexts():
    x = mx.nd.array([1, 2, 3])
    y = x.copy()
    y[:] = 0
    assert x.asnumpy().tolist() == [1, 2, 3]
    z = x.copyto(mx.cpu(1))
    assert z.context == mx.cpu(1) and z.asnumpy().tolist() == [1, 2, 3]
    assert x.as_in_context(mx.cpu(0)) is x
    target = mx.nd.zeros((3,))
    x.copyto(target)
    assert target.asnumpy().tolist() == [1, 2, 3]
    with pytest.raises(DeviceError, match="different devices"):
        x + z
    with mx.cpu(2):
        assert mx.nd.ones((1,)).context == mx.cpu(2)


def test_shape_errors_name_operator_params_and_shapes():
    with pytest.raises(ShapeError) as info:
        mx.nd.dot(mx.nd.ones((2, 3)), mx.nd.ones((4, 5)), transpose_b=True)
    message = str(info.value)
    assert "dot(transpose_b=True)" in message and "(2, 3), (4, 5)" in message
    with pytest.raises(ShapeError, match=r"Concat\(num_args=2, dim=0\) on input shapes \[\(2, 3\), \(2, 4\)\]"):
        mx.nd.concat(mx.nd.ones((2, 3)), mx.nd.ones((2, 4)), dim=0)


def test_dtype_mismatch_is_a_dtype_error():
    with pytest.raises(DTypeError, match="float32 and float64"):
        mx.nd.ones((2,)) + mx.nd.ones((2,), dtype="float64")
    with pytest.raises(DTypeError, match="unsupported dtype"):
        mx.nd.zeros((2,), dtype="complex64")


def test_kernel_failure_raises_at_sync_point_with_detail():
    x = mx.nd.array([1, 2, 3])
    try:
        bad = mx.nd.take(x, mx.nd.array([7]), mode="raise")
        bad.wait_to_read()
    except EngineError as exc:
        assert "take(mode=raise) on input shapes [(3,), (1,)]" in str(exc)
        assert "out of range" in str(exc)
    else:
        pytest.fail("an out-of-range take must raise")
    assert (x + 1).asnumpy().tolist() == [2, 3, 4]  # the engine keeps working


def test_generated_functions_have_signatures_and_docs():
    import inspect

    sig = inspect.signature(mx.nd.sum)
    assert list(sig.parameters)[:4] == ["data", "axis", "keepdims", "exclude"]
    assert "Parameters" in mx.nd.sum.__doc__ and "keepdims" in mx.nd.sum.__doc__
    np.testing.assert_allclose(mx.nd.sum(mx.nd.ones((2, 3)), 1).asnumpy(), [3, 3])
    with pytest.raises(MXKitError, match="inputs must be NDArrays"):
        mx.nd.relu([1, 2])


def test_missing_backend_says_what_to_install(monkeypatch):
    with pytest.raises(DeviceError, match="install"):
        mx.nd.ones((2,), ctx=mx.Context("opencl", 0))


def test_waitall_and_wait_to_write():
    x = mx.nd.ones((100,))
    for _ in range(10):
        x += 1
    x.wait_to_write()
    mx.nd.waitall()
    assert x.asnumpy()[0] == 11


@pytest.mark.parametrize("call, reference", [
    (lambda x, out: mx.nd.relu(x, out=out), lambda a: np.maximum(a, 0)),
    (lambda x, out: mx.nd.one_hot(mx.nd.array([1, 0, 2, 1]), depth=3, out=out), lambda a: np.eye(3)[[1, 0, 2, 1]]),
    (lambda x, out: mx.nd.sum(mx.nd.ones((4, 3, 2)), axis=2, out=out), lambda a: np.full((4, 3), 2.0)),
    (lambda x, out: mx.nd.transpose(mx.nd.array(np.arange(12.0).reshape(3, 4)), out=out),
     lambda a: np.arange(12.0).reshape(3, 4).T),
])
def test_out_may_be_a_strided_view(call, reference):
    base = mx.nd.zeros((4, 6))
    x = mx.nd.array(np.arange(-6, 6, dtype=np.float32).reshape(4, 3))
    target = base[:, ::2]  # (4, 3), not contiguous
    call(x, target)
    expected = np.zeros((4, 6), np.float32)
    expected[:, ::2] = reference(x.asnumpy())
    np.testing.assert_allclose(base.asnumpy(), expected)
