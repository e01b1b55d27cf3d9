# ruff: noqa: F401  (a re-export module without __all__, like MXNet's: every import is public)
"""``mx.test_utils``: MXNet 1.x's testing helpers, with its names and semantics.

Test suites written for MXNet port by changing their import::

    from mxkit import mx
    from mxkit.mx.test_utils import assert_almost_equal, check_numeric_gradient

The helpers live in :mod:`mxkit.mx.testing`; this module gathers MXNet's names. Like
MXNet's, it has no ``__all__``: ``from mxnet.test_utils import *`` gives MXNet's callers the
modules it imports too (``mx``, ``np``, ``rnd``, ``sys``, ``os``...), and test suites rely on it.
"""

# The standard modules and names MXNet's test_utils imports at its top, for star imports.
import bz2
import errno
import gzip
import json
import logging
import numbers
import os
import platform
import struct
import sys
import time
import traceback
import zipfile
from collections import OrderedDict
from contextlib import contextmanager

import numpy as np
import numpy.random as rnd
import numpy.testing as npt
from mxkit import mx
from mxkit.core.context import Context, current_context
from mxkit.mx.runtime import Features
from mxkit.mx.util import getenv, setenv, use_np
from mxkit.ndarray import NDArray, array
from mxkit.symbol import Symbol

try:
    import scipy.stats as ss
except ImportError:  # scipy is optional: only the chi-square checks need it
    ss = None

from mxkit.mx.testing.arrays import (
    assign_each,
    assign_each2,
    create_sparse_array,
    create_sparse_array_zd,
    default_context,
    rand_ndarray,
    rand_shape_2d,
    rand_shape_3d,
    rand_shape_nd,
    rand_sparse_ndarray,
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
    effective_dtype,
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
from mxkit.mx.testing.misc import (
    DummyIter,
    checkShapes,
    collapse_sum_like,
    compare_ndarray_tuple,
    compare_optimizer,
    create_2d_tensor,
    create_vector,
    random_sample,
    retry,
    same_array,
    same_symbol_structure,
)
from mxkit.mx.testing.stats import (
    chi_square_check,
    gen_buckets_probs_with_ppf,
    mean_check,
    var_check,
    verify_generator,
)
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

