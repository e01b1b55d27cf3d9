"""``mx.test_utils``: MXNet 1.x's testing helpers, with its names and semantics.

Test suites written for MXNet port by changing their import::

    from mxkit import mx
    from mxkit.mx.test_utils import assert_almost_equal, check_numeric_gradient

The helpers live in :mod:`mxkit.mx.testing`; this module gathers MXNet's names.
"""

from mxkit.mx.testing.arrays import (
    default_context,
    rand_ndarray,
    rand_shape_2d,
    rand_shape_3d,
    rand_shape_nd,
    random_arrays,
    random_uniform_arrays,
    set_default_context,
)
from mxkit.mx.testing.compare import (
    almost_equal,
    assert_allclose,
    assert_almost_equal,
    assert_almost_equal_ignore_nan,
    assert_exception,
    default_atols,
    default_dtype,
    default_numeric_eps,
    default_rtols,
    find_max_violation,
    get_atol,
    get_etol,
    get_rtol,
    get_tolerance,
    get_tols,
    locationError,
    np_reduce,
    same,
)
from mxkit.mx.testing.datasets import get_mnist, get_mnist_iterator, get_mnist_ubyte, read_idx, write_idx
from mxkit.mx.testing.environment import discard_stderr, environment
from mxkit.mx.testing.symbolic import (
    check_consistency,
    check_numeric_gradient,
    check_symbolic_backward,
    check_symbolic_forward,
    numeric_grad,
    simple_forward,
)


def list_gpus() -> list[int]:
    """The ids of the GPUs the installed gpu backend sees (empty without one)."""
    from mxkit.core.context import num_gpus

    return list(range(num_gpus()))


__all__ = [
    "almost_equal", "assert_allclose", "assert_almost_equal", "assert_almost_equal_ignore_nan", "assert_exception",
    "check_consistency", "check_numeric_gradient", "check_symbolic_backward", "check_symbolic_forward",
    "default_atols", "default_context", "default_dtype", "default_numeric_eps", "default_rtols", "discard_stderr",
    "environment", "find_max_violation", "get_atol", "get_etol", "get_mnist", "get_mnist_iterator",
    "get_mnist_ubyte", "get_rtol", "get_tolerance", "get_tols", "list_gpus", "locationError", "np_reduce",
    "numeric_grad", "rand_ndarray", "rand_shape_2d", "rand_shape_3d", "rand_shape_nd", "random_arrays",
    "random_uniform_arrays", "read_idx", "same", "set_default_context", "simple_forward", "write_idx",
]
