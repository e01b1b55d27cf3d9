"""Executors and NDArrays on one engine: ordering through vars, and kernel errors at sync points."""

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


def test_a_failing_kernel_raises_at_the_sync_point_naming_the_node():
    x = sym.Variable("x")
    out = sym.relu(sym.sin(sym.tanh(x), name="breaks"), name="after")
    # the numpy backend's sin fails while this executor is bound (kernels are chosen at bind)
    sin = get_registry().get("sin")
    previous = sin.kernels.get("numpy")
    get_registry().register_kernel("sin", backend="numpy", kernel=_failing_kernel)
    try:
        exe = out.simple_bind(None, grad_req="null", x=(3,))
    finally:
        if previous is None:
            del sin.kernels["numpy"]
        else:
            sin.kernels["numpy"] = previous
    exe.forward(x=np.ones(3, dtype="float32"))
    with pytest.raises(MXKitError, match=r"node 'breaks'.*deliberate failure"):
        exe.outputs[0].asnumpy()
