"""Autograd: every differentiable operator's gradient against central finite differences (float64)."""

from types import SimpleNamespace

import mxkit.core
import mxkit.ndarray
import numpy as np
import pytest
from mxkit.ndarray.autograd import AutogradError
from mxkit.ndarray.ops.unary import UNARY

# MXNet's short names without the facade package (these tests run with mxkit-ndarray and
# mxkit-cpu installed alone)
mx = SimpleNamespace(nd=mxkit.ndarray, random=mxkit.ndarray.random, autograd=mxkit.ndarray.autograd,
                     cpu=mxkit.core.cpu, Context=mxkit.core.Context, MXKitError=mxkit.core.MXKitError)

RNG = np.random.default_rng(2)


def numeric_gradient(f, inputs, weights, eps=1e-6):
    """Central differences of sum(f(inputs) * weights) w.r.t. each input."""
    grads = []
    for x in inputs:
        grad = np.zeros_like(x)
        for index in np.ndindex(x.shape):
            saved = x[index]
            x[index] = saved + eps
            plus = (f(*inputs) * weights).sum()
            x[index] = saved - eps
            minus = (f(*inputs) * weights).sum()
            x[index] = saved
            grad[index] = (plus - minus) / (2 * eps)
        grads.append(grad)
    return grads


def check_gradient(fn, *arrays, which=None, rtol=1e-5, atol=1e-6):
    """Compare autograd gradients of sum(fn(*xs) * w) with finite differences."""
    arrays = [np.array(a, dtype=np.float64) for a in arrays]
    which = range(len(arrays)) if which is None else which

    def forward(*host):
        return fn(*[mx.nd.array(h, dtype="float64") for h in host]).asnumpy()

    out_shape = forward(*arrays).shape
    weights = RNG.standard_normal(out_shape)
    xs = [mx.nd.array(a, dtype="float64") for a in arrays]
    for i in which:
        xs[i].attach_grad()
    with mx.autograd.record():
        y = fn(*xs)
    y.backward(mx.nd.array(weights, dtype="float64"))
    expected = numeric_gradient(forward, arrays, weights)
    for i in which:
        np.testing.assert_allclose(xs[i].grad.asnumpy(), expected[i], rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {i}")


DOMAIN = {"log": "pos", "log10": "pos", "log2": "pos", "log1p": "pos", "sqrt": "pos", "rsqrt": "pos",
          "rcbrt": "pos", "cbrt": "pos", "reciprocal": "pos", "arcsin": "unit", "arccos": "unit",
          "arctanh": "unit", "arccosh": "above1", "abs": "away0", "relu": "away0"}


def sample(kind, shape=(2, 3)):
    x = RNG.standard_normal(shape)
    if kind == "pos":
        return np.abs(x) + 0.5
    if kind == "unit":
        return np.tanh(x) * 0.8
    if kind == "above1":
        return np.abs(x) + 1.5
    if kind == "away0":
        return np.sign(x) * (np.abs(x) + 0.2)
    return x


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_gradients(name):
    check_gradient(getattr(mx.nd, name), sample(DOMAIN.get(name)))


@pytest.mark.parametrize("act", ["relu", "sigmoid", "tanh", "softrelu", "softsign"])
def test_activation_gradient(act):
    check_gradient(lambda x: mx.nd.Activation(x, act_type=act), sample("away0"))


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "power", "maximum", "minimum", "hypot", "mod"])
@pytest.mark.parametrize("rshape", [(2, 3), (1, 3), (3,), (2, 1)])
def test_broadcast_binary_gradients(name, rshape):
    lhs = np.abs(RNG.standard_normal((2, 3))) + 0.5
    rhs = np.abs(RNG.standard_normal(rshape)) + 0.7
    if name == "mod":
        lhs = lhs * 3 + 0.05  # keep away from the jumps of mod
        rhs = np.full(rshape, 0.9)
    check_gradient(getattr(mx.nd, f"broadcast_{name}"), lhs, rhs)


@pytest.mark.parametrize("name", ["_plus_scalar", "_minus_scalar", "_rminus_scalar", "_mul_scalar", "_div_scalar",
                                  "_rdiv_scalar", "_power_scalar", "_rpower_scalar", "_maximum_scalar",
                                  "_hypot_scalar"])
def test_scalar_gradients(name):
    check_gradient(lambda x: getattr(mx.nd, name)(x, scalar=1.3), np.abs(sample(None)) + 0.4)


def test_operator_overloads_gradient():
    check_gradient(lambda a, b: (a * b + 2) / (b ** 2 + 1) - 3 * a, sample(None), sample(None))


@pytest.mark.parametrize("name", ["sum", "mean", "prod", "max", "min", "nansum", "norm"])
@pytest.mark.parametrize("axis, keepdims, exclude", [(None, False, False), ((1,), True, False), ((0, 2), False, False),
                                                     ((1,), False, True)])
def test_reduction_gradients(name, axis, keepdims, exclude):
    x = np.abs(RNG.standard_normal((2, 3, 2))) + 0.5
    check_gradient(lambda a: getattr(mx.nd, name)(a, axis=axis, keepdims=keepdims, exclude=exclude), x)


@pytest.mark.parametrize("fn", [
    lambda x: mx.nd.reshape(x, shape=(3, -1)),
    lambda x: mx.nd.transpose(x, axes=(2, 0, 1)),
    lambda x: mx.nd.swapaxes(x, dim1=0, dim2=2),
    lambda x: mx.nd.flatten(x),
    lambda x: mx.nd.expand_dims(x, axis=1),
    lambda x: mx.nd.squeeze(mx.nd.expand_dims(x, axis=1)),
    lambda x: mx.nd.tile(x, reps=(2, 1, 3)),
    lambda x: mx.nd.repeat(x, repeats=2, axis=1),
    lambda x: mx.nd.repeat(x, repeats=2),
    lambda x: mx.nd.flip(x, axis=(0, 2)),
    lambda x: mx.nd.slice(x, begin=(0, 1), end=(2, None), step=(1, 2)),
    lambda x: mx.nd.slice_axis(x, axis=2, begin=0, end=1),
    lambda x: mx.nd.clip(x, -0.5, 0.5),
    lambda x: mx.nd.broadcast_to(mx.nd.sum(x, axis=1, keepdims=True), shape=(2, 4, 2)),
    lambda x: mx.nd.softmax(x, axis=1),
    lambda x: mx.nd.log_softmax(x),
    lambda x: mx.nd.split(x, num_outputs=3, axis=1)[1],
    lambda x: mx.nd.LeakyReLU(x, slope=0.2),
    lambda x: x[1, 1:],
    lambda x: x[:, ::2] * x[:, 1],
    lambda x: x.reshape(-1)[2:5],
], ids=lambda f: "")
def test_shape_operator_gradients(fn):
    x = RNG.standard_normal((2, 3, 2))
    x[np.abs(np.abs(x) - 0.5) < 0.05] = 0.3  # stay away from clip's kinks
    check_gradient(fn, x)


def test_join_gradients():
    a, b = sample(None), sample(None)
    check_gradient(lambda x, y: mx.nd.concat(x, y, dim=0), a, b)
    check_gradient(lambda x, y: mx.nd.stack(x, y, axis=2), a, b)
    check_gradient(lambda c, x, y: mx.nd.where(c, x, y), (a > 0).astype(float), a, b, which=[1, 2])


def test_indexing_gradients():
    data = sample(None, (4, 3))
    check_gradient(lambda x, i: mx.nd.take(x, i), data, np.array([[0, 2], [2, 3]]), which=[0])
    check_gradient(lambda x, i: mx.nd.pick(x, i, axis=1), data, np.array([0, 2, 1, 1]), which=[0])
    check_gradient(lambda x, i: mx.nd.gather_nd(x, i), data, np.array([[0, 3, 3], [1, 2, 2]]), which=[0])
    check_gradient(lambda x: x[[1, 1, 3]], data)


@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matrix_product_gradients(ta, tb):
    a = sample(None, (3, 2) if ta else (2, 3))
    b = sample(None, (4, 3) if tb else (3, 4))
    check_gradient(lambda x, y: mx.nd.dot(x, y, transpose_a=ta, transpose_b=tb), a, b)
    a3 = sample(None, (2, 3, 2) if ta else (2, 2, 3))
    b3 = sample(None, (2, 4, 3) if tb else (2, 3, 4))
    check_gradient(lambda x, y: mx.nd.batch_dot(x, y, transpose_a=ta, transpose_b=tb), a3, b3)
    check_gradient(lambda x, y: mx.nd.linalg_gemm2(x, y, transpose_a=ta, transpose_b=tb, alpha=0.7), a3, b3)


def test_dot_nd_gradient():
    check_gradient(lambda x, y: mx.nd.dot(x, y), sample(None, (2, 2, 3)), sample(None, (3, 2)))


def test_cast_gradient_returns_input_dtype():
    x = mx.nd.array([1.0, 2.0], dtype="float64")
    x.attach_grad()
    with mx.autograd.record():
        y = (x.astype("float32") * 3).sum()
    y.backward()
    assert x.grad.dtype == np.float64 and x.grad.asnumpy().tolist() == [3.0, 3.0]


def test_grad_req_add_accumulates_and_write_overwrites():
    x = mx.nd.array([1.0, 2.0])
    x.attach_grad(grad_req="add")
    for _ in range(3):
        with mx.autograd.record():
            y = (x * x).sum()
        y.backward()
    assert x.grad.asnumpy().tolist() == [6.0, 12.0]
    x.attach_grad()
    for _ in range(2):
        with mx.autograd.record():
            y = (x * x).sum()
        y.backward()
    assert x.grad.asnumpy().tolist() == [2.0, 4.0]


def test_grad_function_and_higher_order():
    x = mx.nd.array([0.5, -1.0, 2.0], dtype="float64")
    x.attach_grad()
    with mx.autograd.record():
        y = (x ** 3).sum()
        (dx,) = mx.autograd.grad(y, [x], create_graph=True)
        z = dx.sum()
    z.backward()
    np.testing.assert_allclose(dx.asnumpy(), 3 * x.asnumpy() ** 2)
    np.testing.assert_allclose(x.grad.asnumpy(), 6 * x.asnumpy())


def test_reused_variable_accumulates_over_paths():
    check_gradient(lambda x: x * x + mx.nd.exp(x) * x - x, sample(None))


def test_modes_and_scopes():
    assert not mx.autograd.is_recording() and not mx.autograd.is_training()
    with mx.autograd.record():
        assert mx.autograd.is_recording() and mx.autograd.is_training()
        with mx.autograd.pause():
            assert not mx.autograd.is_recording()
        with mx.autograd.predict_mode():
            assert not mx.autograd.is_training()
    with mx.autograd.record(train_mode=False):
        assert not mx.autograd.is_training()
    with mx.autograd.train_mode():
        assert mx.autograd.is_training() and not mx.autograd.is_recording()
    assert mx.autograd.set_recording(True) is False
    assert mx.autograd.set_recording(False) is True


def test_autograd_errors():
    x = mx.nd.array([1.0, 2.0])
    with pytest.raises(AutogradError, match="attach_grad"):
        (x * 2).backward()
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.argmax(x * 2, axis=0) + x.sum()
    y.backward()  # argmax has zero gradient, the sum path still counts
    assert x.grad.asnumpy().tolist() == [1.0, 1.0]
    with pytest.raises(AutogradError, match="grad_req must be one of"):
        x.attach_grad(grad_req="sometimes")
    with mx.autograd.record():
        y = x * 2
    with pytest.raises(AutogradError, match="head gradient shape"):
        y.backward(mx.nd.ones((3,)))


@pytest.mark.parametrize("fn", [
    lambda x: mx.nd.sort(x, axis=1),
    lambda x: mx.nd.sort(x, axis=None, is_ascend=False),
    lambda x: mx.nd.topk(x, axis=1, k=2, ret_typ="value"),
    lambda x: mx.nd.topk(x, axis=None, k=3, ret_typ="value", is_ascend=True),
    lambda x: mx.nd.topk(x, axis=0, k=1, ret_typ="both")[0],
], ids=["sort", "sort-flat-desc", "topk", "topk-flat", "topk-both"])
def test_ordering_gradients(fn):
    x = RNG.permutation(12).reshape(3, 4) * 0.37 + 0.1  # distinct values: no ties
    check_gradient(fn, x)


def test_gradients_of_inputs_that_need_none_are_marked_null_for_the_kernel(monkeypatch):
    # FullyConnected's data is a plain array: its gradient is read by nothing, so the backward
    # kernel is told so (params["_req"]) and skips that product, as in the executor
    from mxkit.ndarray.registry import get_op

    rng = np.random.default_rng(0)
    x_np, w_np, b_np = rng.standard_normal((5, 3)), rng.standard_normal((4, 3)), rng.standard_normal(4)
    x, w, b = mx.nd.array(x_np), mx.nd.array(w_np), mx.nd.array(b_np)  # the CPU plugin's kernels are in
    op = get_op("_backward_FullyConnected")
    kernel = op.kernel_for("numpy")
    seen = []

    def spy(xp, inputs, outputs, params):
        seen.append(params.get("_req"))
        kernel(xp, inputs, outputs, params)

    monkeypatch.setitem(op.kernels, "numpy", spy)

    def differentiate():
        with mx.autograd.record():
            y = mx.nd.FullyConnected(x, w, b, num_hidden=4)
        y.backward(mx.nd.array(np.ones((5, 4))))

    w.attach_grad()
    b.attach_grad()
    differentiate()
    np.testing.assert_allclose(w.grad.asnumpy(), np.ones((4, 5)) @ x_np, rtol=1e-6)
    np.testing.assert_allclose(b.grad.asnumpy(), np.full(4, 5.0), rtol=1e-6)
    assert seen == [("null", "write", "write")]  # (the kernel ran on the engine: after the sync above)

    # every input a variable: nothing marked, and the data gradient is right
    seen.clear()
    x.attach_grad()
    differentiate()
    np.testing.assert_allclose(x.grad.asnumpy(), np.ones((5, 4)) @ w_np, rtol=1e-6)
    assert seen == [None]


def test_a_recorded_gradient_keeps_every_input_gradient():
    # create_graph=True records the backward for a second differentiation: nothing is skipped
    x = mx.nd.array([[1.0, 2.0]])
    w = mx.nd.array([[3.0, 4.0]])
    w.attach_grad()
    with mx.autograd.record():
        y = mx.nd.FullyConnected(x, w, num_hidden=1, no_bias=True)
        (grad_w,) = mx.autograd.grad(y, [w], create_graph=True)
    np.testing.assert_allclose(grad_w.asnumpy(), [[1.0, 2.0]])


def test_requires_grad_tells_which_arrays_take_part_in_differentiation():
    autograd = mx.autograd
    variable, constant = mx.nd.ones((2,)), mx.nd.ones((2,))
    variable.attach_grad()
    assert autograd.requires_grad(variable) and not autograd.requires_grad(constant)
    with autograd.record():
        derived = variable * 2
        unrelated = constant * 2
    assert autograd.requires_grad(derived) and not autograd.requires_grad(unrelated)
    assert not autograd.requires_grad(variable.detach() * 2)
