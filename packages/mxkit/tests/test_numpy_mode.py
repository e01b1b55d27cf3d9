"""mx.np / mx.npx: the creation functions against numpy, and MXNet's NumPy-mode switches with
honest semantics (array mode is refused with NumpyModeError, the shape flag works)."""

import numpy as np
import pytest
from mxkit import mx
from mxkit.core.errors import DTypeError, MXKitError
from mxkit.mx.numpy_mode import NumpyModeError


def test_the_modules_import_under_their_mxnet_names():
    import importlib

    for name in ("np", "numpy", "npx", "numpy_extension"):
        assert getattr(mx, name) is not None
    assert mx.np is mx.numpy and mx.npx is mx.numpy_extension
    assert importlib.import_module("mxkit.mx.numpy").ndarray is mx.nd.NDArray
    assert isinstance(mx.np.zeros((2,)), mx.np.ndarray)


@pytest.mark.parametrize("make, want", [
    (lambda: mx.np.array([[1, 2], [3, 4]]), np.array([[1, 2], [3, 4]], np.float32)),
    (lambda: mx.np.array(np.arange(3)), np.arange(3, dtype=np.float32)),
    (lambda: mx.np.array([1, 2], dtype="int32"), np.array([1, 2], np.int32)),
    (lambda: mx.np.zeros((2, 3)), np.zeros((2, 3), np.float32)),
    (lambda: mx.np.ones(4, dtype="float16"), np.ones(4, np.float16)),
    (lambda: mx.np.full((2, 2), 7), np.full((2, 2), 7, np.float32)),
    (lambda: mx.np.arange(5), np.arange(5, dtype=np.float32)),
    (lambda: mx.np.arange(1, 2, 0.25), np.arange(1, 2, 0.25, dtype=np.float32)),
    (lambda: mx.np.concatenate([mx.np.ones((1, 2)), mx.np.zeros((2, 2))]),
     np.concatenate([np.ones((1, 2)), np.zeros((2, 2))]).astype(np.float32)),
    (lambda: mx.np.zeros(()), np.zeros((), np.float32)),
])
def test_creation_matches_numpy_with_mxnet_default_float32(make, want):
    got = make().asnumpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_empty_and_random_have_the_asked_shapes():
    assert mx.np.empty((3, 2)).shape == (3, 2)
    mx.np.random.seed(5)
    first = mx.np.random.uniform(-1, 1, size=(200,)).asnumpy()
    mx.np.random.seed(5)
    np.testing.assert_array_equal(mx.np.random.uniform(-1, 1, size=(200,)).asnumpy(), first)
    assert first.min() >= -1 and first.max() < 1 and first.std() > 0.4  # uniform(-1, 1): std 0.577
    assert mx.np.random.normal(size=(2, 3)).shape == (2, 3)
    assert mx.np.random.uniform().shape == ()


def test_fortran_order_is_refused_clearly():
    with pytest.raises(DTypeError, match="order='F' is not supported"):
        mx.np.zeros((2, 2), order="F")


def test_array_mode_is_refused_and_the_shape_flag_works():
    assert mx.util.is_np_array() is False and mx.npx.is_np_array() is False
    with pytest.raises(NumpyModeError, match="NumPy array mode is not provided"):
        mx.npx.set_np()
    with pytest.raises(NumpyModeError, match="dtype=True"):
        mx.npx.set_np(array=False, dtype=True)
    assert issubclass(NumpyModeError, MXKitError) and issubclass(NumpyModeError, NotImplementedError)
    assert mx.util.is_np_shape() is False
    mx.npx.set_np(shape=True, array=False)
    try:
        assert mx.util.is_np_shape() is True
        assert mx.util.is_np_array() is False
    finally:
        mx.npx.reset_np()
    assert mx.util.is_np_shape() is False


def test_use_np_decorates_but_refuses_to_run():
    @mx.util.use_np
    def uses_numpy_mode(x):
        return x + 1

    @mx.test_utils.use_np
    class Model:
        def forward(self, x):
            return x

    with pytest.raises(NumpyModeError, match="uses_numpy_mode is decorated with @use_np"):
        uses_numpy_mode(1)
    with pytest.raises(NumpyModeError, match="decorated with @use_np"):
        Model().forward(1)
    with pytest.raises(TypeError, match="use_np decorates a function or a class"):
        mx.util.use_np(3)


def test_storage_type_ids_are_mxnets():
    from mxkit.ndarray import ndarray

    assert ndarray.STORAGE_TYPE_STR_TO_ID == {"undefined": -1, "default": 0, "row_sparse": 1, "csr": 2}
    assert ndarray._STORAGE_TYPE_STR_TO_ID is ndarray.STORAGE_TYPE_STR_TO_ID
