"""Executors and NDArrays on one engine: ordering through vars, and kernel errors at sync points."""

import contextlib

import numpy as np
import pytest
from mxkit import ndarray as nd
from mxkit import symbol as sym
from mxkit.core.errors import MXKitError
from mxkit.ndarray.registry import get_registry


def _failing_kernel(xp, inputs, outputs, params):
    raise ValueError("deliberate failure for the test")


def test_ndarray_work_before_and_after_a_forward_is_ordered():
    x, w = sym.Variable("x"), sym.Variable("w")
    exe = sym.dot(sym.tanh(x), w).simple_bind(None, grad_req="null", x=(64, 32), w=(32, 16))
    rng = np.random.default_rng(9)
    for _ in range(20):
        xv = rng.standard_normal((64, 32)).astype("float32")
        wv = rng.standard_normal((32, 16)).astype("float32")
        source = nd.array(xv)
        exe.arg_dict["x"][:] = source * 2          # an NDArray op writing the argument, not waited for
        exe.arg_dict["w"][:] = nd.array(wv)
        out = exe.forward()[0]
        doubled = out + out                        # an NDArray op reading the output, not waited for
        exe.arg_dict["x"][:] = source * 0          # must not overtake the forward that reads x
        np.testing.assert_allclose(doubled.asnumpy(), 2 * (np.tanh(2 * xv) @ wv), rtol=1e-4, atol=1e-5)


@contextlib.contextmanager
def _sin_kernel(kernel):
    """``kernel`` as the numpy backend's sin for the ``with`` block (an executor bound in it keeps it)."""
    sin = get_registry().get("sin")
    previous = sin.kernels.get("numpy")
    get_registry().register_kernel("sin", backend="numpy", kernel=kernel)
    try:
        yield
    finally:
        if previous is None:
            del sin.kernels["numpy"]
        else:
            sin.kernels["numpy"] = previous


def test_a_failing_kernel_raises_at_the_sync_point_naming_the_node():
    x = sym.Variable("x")
    out = sym.relu(sym.sin(sym.tanh(x), name="breaks"), name="after")
    # the numpy backend's sin fails while this executor is bound (kernels are chosen at bind)
    with _sin_kernel(_failing_kernel):
        exe = out.simple_bind(None, grad_req="null", x=(3,))
    exe.forward(x=np.ones(3, dtype="float32"))
    with pytest.raises(MXKitError, match=r"node 'breaks'.*deliberate failure"):
        exe.outputs[0].asnumpy()


def test_a_kernel_that_binds_is_bound_once_per_step_and_mode():
    """An executor binds each step's kernel to its arrays (the registry's optional ``kernel.bind``) at the
    step's first run in training and in prediction, and later runs call what the bind returned."""
    binds, calls = [], []

    def counted_sin(xp, inputs, outputs, params):
        xp.sin(inputs[0], out=outputs[0])

    def bind(xp, inputs, outputs, params):
        binds.append(params.get("_is_train", False))

        def bound():
            calls.append(1)
            counted_sin(xp, inputs, outputs, params)

        return bound

    counted_sin.bind = bind
    x = sym.Variable("x")
    out = sym.relu(sym.sin(x, name="bound"), name="after")
    with _sin_kernel(counted_sin):
        exe = out.simple_bind(None, grad_req="null", x=(3,))
    values = np.array([0.5, -1.0, 2.0], dtype="float32")
    for is_train, scale in ((True, 1), (True, 2), (False, 3), (False, 4), (True, 5)):
        result = exe.forward(is_train=is_train, x=values * scale)[0].asnumpy()
        np.testing.assert_allclose(result, np.maximum(np.sin(values * scale), 0), rtol=1e-6)
    assert binds == [True, False] and len(calls) == 5
