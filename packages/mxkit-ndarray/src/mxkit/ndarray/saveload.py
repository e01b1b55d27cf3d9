"""``mx.nd.save`` and ``mx.nd.load``: NDArrays in MXNet 1.x's binary file format.

The format itself lives in :mod:`mxkit.ndarray.serialization`; these wrappers convert
between NDArrays (and row_sparse/csr arrays, which are saved and loaded as sparse records,
as MXNet does) and the numpy arrays it reads and writes.
"""

from __future__ import annotations

from typing import Any

from mxkit.core.errors import MXKitError


def save(fname: Any, data: Any) -> None:
    """Save an NDArray, a list of NDArrays or a dict ``str -> NDArray`` to ``fname``.

    The file is byte-compatible with MXNet 1.x's ``mx.nd.save``.
    """
    from mxkit.ndarray.ndarray import NDArray
    from mxkit.ndarray.serialization import save_arrays
    from mxkit.ndarray.sparse_base import BaseSparseNDArray

    arrays = (NDArray, BaseSparseNDArray)
    if isinstance(data, arrays):
        data = [data]
    if isinstance(data, dict):
        for key, value in data.items():
            if not isinstance(key, str) or not isinstance(value, arrays):
                raise MXKitError(f"save takes a dict of str -> NDArray; entry {key!r} is "
                                 f"{type(key).__name__} -> {type(value).__name__}")
        converted: Any = {key: _savable(value) for key, value in data.items()}
    elif isinstance(data, (list, tuple)):
        for index, value in enumerate(data):
            if not isinstance(value, arrays):
                raise MXKitError(f"save takes a list of NDArrays; item {index} is a {type(value).__name__}")
        converted = [_savable(value) for value in data]
    else:
        raise MXKitError(f"save takes an NDArray, a list of NDArrays or a dict str -> NDArray, got "
                         f"{type(data).__name__}")
    save_arrays(fname, converted)


def _savable(value: Any) -> Any:
    from mxkit.ndarray.serialization import SparseArray

    if value.stype == "row_sparse":
        return SparseArray("row_sparse", value.shape, value.data.asnumpy(), value.indices.asnumpy().astype("int64"))
    if value.stype == "csr":
        return SparseArray("csr", value.shape, value.data.asnumpy(), value.indices.asnumpy().astype("int64"),
                           value.indptr.asnumpy().astype("int64"))
    return value.asnumpy()


def _loaded(value: Any, ctx: Any) -> Any:
    from mxkit.ndarray.creation import array
    from mxkit.ndarray.serialization import SparseArray

    if value is None:  # an MXNet "none" record (an array without storage) stays None
        return None
    if isinstance(value, SparseArray):
        if value.stype == "csr":
            from mxkit.ndarray.csr import from_host_parts

            return from_host_parts(value.data, value.indices, value.indptr, value.shape, ctx=ctx)
        from mxkit.ndarray.sparse import RowSparseNDArray

        return RowSparseNDArray(array(value.data, ctx=ctx, dtype=value.data.dtype),
                                array(value.indices, ctx=ctx, dtype="int64"), value.shape)
    return array(value, ctx=ctx, dtype=value.dtype)


def load(fname: Any, ctx: Any = None) -> Any:
    """Load a file written by ``mx.nd.save`` (here or in MXNet 1.x): a list or dict of NDArrays on cpu;
    row_sparse and csr records load as RowSparseNDArray and CSRNDArray (their structure is
    checked as the file is read)."""
    from mxkit.core.context import cpu
    from mxkit.ndarray.serialization import load_arrays

    loaded = load_arrays(fname, sparse="keep")
    target = ctx if ctx is not None else cpu(0)
    if isinstance(loaded, dict):
        return {key: _loaded(value, target) for key, value in loaded.items()}
    return [_loaded(value, target) for value in loaded]


def load_frombuffer(buf: bytes) -> Any:
    """Load arrays from the bytes of a saved file."""
    return load(bytes(buf))


__all__ = ["load", "load_frombuffer", "save"]
