"""MXNet 1.x behaviour of array creation and host device types that ported code relies on."""

import numpy as np
import pytest
from mxkit import mx
from mxkit.core.errors import DTypeError


@pytest.mark.parametrize("source", [np.ones(3), np.arange(3), np.ones(2, dtype=np.float16), [1, 2], 3.5])
def test_array_defaults_to_float32_like_mxnet(source):
    assert mx.nd.array(source).dtype == np.float32


def test_array_keeps_an_ndarray_dtype_or_an_explicit_one():
    assert mx.nd.array(mx.nd.ones(2, dtype="int32")).dtype == np.int32
    assert mx.nd.array(np.arange(3), dtype="int64").dtype == np.int64
    np.testing.assert_array_equal(mx.nd.array(np.arange(3)).asnumpy(), [0.0, 1.0, 2.0])


@pytest.mark.parametrize("device", ["cpu_pinned", "cpu_shared"])
def test_host_device_types_are_cpu_memory(device):
    ctx = mx.Context(device, 0)
    a = mx.nd.array([[1, 2], [3, 4]], ctx=ctx)
    assert a.context == ctx
    b = (a * 2).as_in_context(mx.cpu())
    assert b.context == mx.cpu()
    np.testing.assert_array_equal(b.asnumpy(), [[2, 4], [6, 8]])
    c = mx.nd.zeros((2, 2), ctx=mx.cpu())
    b.copyto(a)
    a.copyto(c)
    np.testing.assert_array_equal(c.asnumpy(), [[2, 4], [6, 8]])
    assert mx.cpu_pinned(1) == mx.Context("cpu_pinned", 1)
    assert mx.cpu_shared(0).device_typeid == 5


def test_stype_default_is_accepted_and_unprovided_storage_is_a_clear_error():
    assert mx.nd.zeros((2, 3), stype="default").stype == "default"
    assert mx.nd.ones((2,), stype=None).asnumpy().tolist() == [1.0, 1.0]
    assert mx.nd.empty((1,), stype="default").shape == (1,)
    # sparse zeros exist (test_csr.py, test_row_sparse.py); sparse ones() do not, as in MXNet
    assert mx.nd.zeros((2, 3), stype="csr").stype == "csr"
    with pytest.raises(DTypeError, match=r"'row_sparse' is not available here"):
        mx.nd.ones((2, 3), stype="row_sparse")
    with pytest.raises(DTypeError, match="unknown storage type 'dense'"):
        mx.nd.ones((2, 3), stype="dense")


class _Sigmoid(mx.autograd.Function):
    def forward(self, x):
        y = 1 / (1 + mx.nd.exp(-x))
        self.save_for_backward(y)
        return y

    def backward(self, dy):
        (y,) = self.saved_tensors
        return dy * y * (1 - y)


class _AddMul(mx.autograd.Function):
    def forward(self, a, b):
        return a + b, a * b

    def backward(self, d_sum, d_prod):
        a, b = self._inputs
        return d_sum + d_prod * b, d_sum + d_prod * a

    def __call__(self, a, b):
        self._inputs = (a, b)
        return super().__call__(a, b)


def test_autograd_function_uses_the_hand_written_gradient():
    x = mx.nd.array([0.0, 1.0, -2.0])
    x.attach_grad()
    with mx.autograd.record():
        z = _Sigmoid()(x) * 2
    z.backward()
    s = 1 / (1 + np.exp(-x.asnumpy().astype(np.float64)))
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * s * (1 - s), rtol=1e-6)


def test_autograd_function_with_two_inputs_and_outputs():
    a, b = mx.nd.array([1.0, 2.0]), mx.nd.array([3.0, -1.0])
    a.attach_grad()
    b.attach_grad()
    with mx.autograd.record():
        total, product = _AddMul()(a, b)
        loss = total + 2 * product
    loss.backward()
    np.testing.assert_allclose(a.grad.asnumpy(), 1 + 2 * b.asnumpy())
    np.testing.assert_allclose(b.grad.asnumpy(), 1 + 2 * a.asnumpy())


def test_autograd_function_errors():
    class Identity(mx.autograd.Function):
        def forward(self, x):
            return x

    class WrongCount(mx.autograd.Function):
        def forward(self, x):
            return x * 1

        def backward(self, dy):
            return dy, dy

    x = mx.nd.ones(2)
    x.attach_grad()
    with pytest.raises(mx.autograd.AutogradError, match="returned one of its inputs"), mx.autograd.record():
        Identity()(x)
    with mx.autograd.record():
        y = WrongCount()(x)
    with pytest.raises(mx.autograd.AutogradError, match="returned 2 gradients for 1 inputs"):
        y.backward()
    with pytest.raises(mx.autograd.AutogradError, match="takes NDArrays"):
        _Sigmoid()(np.ones(2))


def test_tostype_default_is_a_copy_and_an_unknown_storage_is_an_error():
    a = mx.nd.array([[1, 0], [0, 2]])
    b = a.tostype("default")
    assert b.stype == "default" and b is not a
    b[:] = 5
    assert a.asnumpy().tolist() == [[1, 0], [0, 2]]
    assert a.tostype("csr").stype == "csr"
    with pytest.raises(DTypeError, match="unknown storage type 'csc'"):
        a.tostype("csc")


def test_ndarray_pickles_with_its_values_and_dtype():
    import pickle

    a = mx.nd.array([[1, 2], [3, 4]], dtype="int32")
    b = pickle.loads(pickle.dumps(a))
    assert b.dtype == np.int32 and b.shape == (2, 2) and b.context == mx.cpu()
    np.testing.assert_array_equal(b.asnumpy(), a.asnumpy())
    b[:] = 0
    assert a.asnumpy().sum() == 10  # a copy, not shared memory


def test_add_n_and_its_alias_sum_and_differentiate():
    rng = np.random.default_rng(0)
    values = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(3)]
    arrays = [mx.nd.array(v) for v in values]
    np.testing.assert_allclose(mx.nd.add_n(*arrays).asnumpy(), sum(values), rtol=1e-6)
    np.testing.assert_allclose(mx.nd.ElementWiseSum(*arrays[:2]).asnumpy(), values[0] + values[1], rtol=1e-6)
    a, b = arrays[0], arrays[1]
    a.attach_grad()
    b.attach_grad()
    with mx.autograd.record():
        y = mx.nd.add_n(a, b, a) * 3
    y.backward()
    np.testing.assert_allclose(a.grad.asnumpy(), np.full((2, 3), 6.0))
    np.testing.assert_allclose(b.grad.asnumpy(), np.full((2, 3), 3.0))
    with pytest.raises(mx.base.MXNetError, match="add_n"):
        mx.nd.add_n(mx.nd.ones((2,)), mx.nd.ones((3,)))


def test_internal_namespace_reaches_every_operator():
    out = mx.nd._internal._plus_scalar(mx.nd.array([1.0, 2.0]), scalar=2)
    np.testing.assert_array_equal(out.asnumpy(), [3.0, 4.0])
    with pytest.raises(AttributeError, match="no operator"):
        mx.nd._internal._nope  # noqa: B018
