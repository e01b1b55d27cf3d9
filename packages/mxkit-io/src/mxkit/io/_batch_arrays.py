"""Which array type iterators hand out: numpy always works, NDArray when installed.

The choice is the config key ``io_batch_type`` (``MXKIT_IO_BATCH_TYPE``): ``auto`` gives
NDArray batches when mxkit-ndarray can be imported and numpy arrays otherwise; ``numpy``
and ``ndarray`` force one. mxkit-ndarray is imported on the first batch, never before.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from mxkit.core import config
from mxkit.core.config import Option, register_option
from mxkit.core.errors import MissingComponentError

register_option(
    Option(
        "io_batch_type", "str", "auto",
        "array type of data-iterator batches (auto: NDArray when mxkit-ndarray is installed)",
        choices=("auto", "numpy", "ndarray"),
    )
)


@functools.cache
def _ndarray_constructor() -> Any:
    try:
        from mxkit.ndarray import array
    except ImportError:
        return None
    return array


def batch_converter() -> Any:
    """A function turning a numpy batch array into the configured batch type."""
    choice = config.get("io_batch_type")
    if choice == "numpy":
        return _identity
    constructor = _ndarray_constructor()
    if constructor is None:
        if choice == "ndarray":
            raise MissingComponentError(
                "io_batch_type is 'ndarray' but mxkit.ndarray.array is not available (mxkit-ndarray "
                "is not installed or too old); install it "
                "(`pip install mxkit-ndarray mxkit-cpu`) or set io_batch_type to 'numpy' or 'auto'"
            )
        return _identity
    return constructor


def _identity(array: np.ndarray) -> np.ndarray:
    return array


def as_numpy(array: Any) -> np.ndarray:
    """A numpy view or copy of a batch array of either type."""
    if isinstance(array, np.ndarray):
        return array
    if hasattr(array, "asnumpy"):
        return array.asnumpy()  # type: ignore[no-any-return]
    return np.asarray(array)
