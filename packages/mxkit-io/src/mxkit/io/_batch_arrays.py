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
from mxkit.core.errors import ConfigError, MissingComponentError


@functools.cache
def _ndarray_constructor() -> Any:
    try:
        from mxkit.ndarray import array
    except ImportError:
        return None
    return array


def batch_converter(ctx: Any = None) -> Any:
    """A function turning a numpy batch array into the configured batch type.

    With ``ctx`` (a device, e.g. ``mx.gpu(0)``), batches are NDArrays on that device: the
    iterator's own threads then copy each batch while the model trains on the previous one.

    Raises
    ------
    ConfigError
        If ``ctx`` is given while the config asks for numpy batches, which live on the host.
    MissingComponentError
        If ``ctx`` is given (or NDArray batches are asked for) without mxkit-ndarray.
    """
    choice = config.get("io_batch_type")
    if choice == "numpy":
        if ctx is not None:
            raise ConfigError(f"ctx={ctx} asks for batches on a device, but io_batch_type is 'numpy' (host arrays); "
                              f"set io_batch_type to 'auto' or 'ndarray', or leave ctx out")
        return _identity
    constructor = _ndarray_constructor()
    if constructor is None:
        if choice == "ndarray" or ctx is not None:
            raise MissingComponentError(
                f"{'ctx=' + str(ctx) if ctx is not None else 'io_batch_type ndarray'} needs NDArray batches, "
                "but mxkit.ndarray.array is not available (mxkit-ndarray is not installed or too old); install it "
                "(`pip install mxkit-ndarray mxkit-cpu`) or set io_batch_type to 'numpy' or 'auto'"
            )
        return _identity
    def convert(array: np.ndarray) -> Any:
        # the batch keeps its dtype (an int32 CSVIter gives int32 batches), as MXNet's iterators do;
        # mx.nd.array alone would make every numpy array float32
        return constructor(array, ctx=ctx, dtype=array.dtype)

    return convert


def csr_batch_converter(ctx: Any = None) -> Any:
    """A function turning a batch in csr parts -- ``(values, columns, indptr, shape, todense)``
    -- into the configured batch type: a csr array (MXNet's ``CSRNDArray``) for NDArray
    batches, the dense numpy array (``todense()``) for numpy batches."""
    dense = batch_converter(ctx)
    if dense is _identity:
        return lambda values, columns, indptr, shape, todense: todense()
    from mxkit import ndarray  # (the optional door above: NDArray batches were chosen, so it is installed)

    csr_matrix = getattr(getattr(ndarray, "sparse", None), "csr_matrix", None)
    if csr_matrix is None:  # an mxkit-ndarray without csr arrays: dense batches
        return lambda values, columns, indptr, shape, todense: dense(todense())

    def convert(values: np.ndarray, columns: np.ndarray, indptr: np.ndarray, shape: Any, todense: Any) -> Any:
        return csr_matrix((values, columns, indptr), shape=shape, ctx=ctx, dtype=values.dtype)

    return convert


def _identity(array: np.ndarray) -> np.ndarray:
    return array


def as_numpy(array: Any) -> np.ndarray:
    """A numpy view or copy of a batch array of either type."""
    if isinstance(array, np.ndarray):
        return array
    if hasattr(array, "asnumpy"):
        return array.asnumpy()  # type: ignore[no-any-return]
    return np.asarray(array)
