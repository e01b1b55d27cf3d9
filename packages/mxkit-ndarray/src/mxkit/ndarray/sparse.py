"""Row-sparse arrays (MXNet's ``RowSparseNDArray``, ``stype="row_sparse"``): the rows of a
large array that are present, as two NDArrays: ``data`` (one row per stored row,
``(k, *shape[1:])``) and ``indices`` (their sorted, distinct row ids, int64, ``(k,)``).
Rows not stored are zero.

This module is also ``mx.nd.sparse``: it re-exports the csr arrays
(:mod:`mxkit.ndarray.csr`) and the sparse operators (:mod:`mxkit.ndarray.sparse_ops`).
"""

from __future__ import annotations

import builtins
import numbers
from typing import Any

import numpy as np
from mxkit.core.errors import ShapeError
from mxkit.ndarray.ndarray import NDArray
from mxkit.ndarray.sparse_base import BaseSparseNDArray, SparseStorageError, check_stype, is_number


def _as_rows(indices: Any) -> np.ndarray:
    host = indices.asnumpy() if isinstance(indices, NDArray) else np.asarray(indices)
    if host.size and host.dtype.kind == "f" and not np.array_equal(host, np.floor(host)):
        raise SparseStorageError(f"row ids must be whole numbers, got {host.ravel()[:8]!r}")
    return host.astype(np.int64).ravel()


class RowSparseNDArray(BaseSparseNDArray):
    """A row-sparse array: ``data`` rows at row ids ``indices`` of a ``shape`` array.

    Made by :func:`row_sparse_array`, ``NDArray.tostype("row_sparse")`` or
    ``mx.nd.zeros(shape, stype="row_sparse")``; not constructed directly.
    """

    stype = "row_sparse"

    def __init__(self, data: NDArray, indices: NDArray, shape: tuple[int, ...]):
        self._shape = tuple(int(d) for d in shape)
        self._set(data, indices)

    def _set(self, data: NDArray, indices: NDArray) -> None:
        if not self._shape:
            raise ShapeError("a row_sparse array needs at least one axis (its rows)")
        if tuple(data.shape[1:]) != self._shape[1:] or data.ndim != len(self._shape):
            raise ShapeError(f"row_sparse data of shape {data.shape} does not hold rows of an array of shape "
                             f"{self._shape}; expected (k, {', '.join(map(str, self._shape[1:]))})")
        if indices.shape != (data.shape[0],):
            raise ShapeError(f"row_sparse indices of shape {indices.shape} for {data.shape[0]} stored rows; "
                             f"expected ({data.shape[0]},)")
        self._data, self._indices = data, indices

    def _parts(self) -> list[Any]:
        return [self._data, self._indices]

    @property
    def data(self) -> NDArray:
        """The stored rows, ``(k, *shape[1:])``."""
        return self._data

    @property
    def indices(self) -> NDArray:
        """The sorted row ids of the stored rows (int64, ``(k,)``)."""
        return self._indices

    def _validate(self, full_check: bool) -> None:
        if not full_check:
            return
        rows = self._indices.asnumpy().astype(np.int64)
        if rows.size and (rows.min() < 0 or rows.max() >= self._shape[0]):
            raise SparseStorageError(f"row_sparse indices {rows.tolist()[:8]} fall outside the {self._shape[0]} "
                                     f"rows of shape {self._shape}")
        if rows.size > 1 and not np.all(np.diff(rows) > 0):
            raise SparseStorageError(f"row_sparse indices {rows.tolist()[:8]} are not strictly increasing")

    # ---- conversion ---------------------------------------------------------------------

    def asnumpy(self) -> np.ndarray:
        """The dense values as a numpy array."""
        dense = np.zeros(self._shape, dtype=self._data.dtype)
        rows = self._indices.asnumpy().astype(np.int64)
        if rows.size:
            dense[rows] = self._data.asnumpy()
        return dense

    def copy(self) -> RowSparseNDArray:
        """A deep copy on the same device."""
        return RowSparseNDArray(self._data.copy(), self._indices.copy(), self._shape)

    def _with_data(self, data: NDArray) -> RowSparseNDArray:
        return RowSparseNDArray(data, self._indices.copy(), self._shape)

    def _assign_from(self, other: Any) -> None:
        if tuple(other.shape) != self._shape:
            raise ShapeError(f"cannot assign an array of shape {tuple(other.shape)} to a row_sparse array of "
                             f"shape {self._shape}")
        source = other if isinstance(other, RowSparseNDArray) else from_dense(_as_dense_ndarray(other, self))
        self._set(source.data.copyto(self.context).astype(self.dtype, copy=False),
                  source.indices.copyto(self.context))

    def copyto(self, other: Any) -> Any:
        """A copy on device ``other`` (a Context), or into ``other`` (a RowSparseNDArray takes
        these rows; a dense NDArray the dense values)."""
        if isinstance(other, RowSparseNDArray):
            if other.shape != self._shape:
                raise ShapeError(f"copyto: a row_sparse array of shape {self._shape} into one of shape {other.shape}")
            other._set(self._data.copyto(other.context), self._indices.copyto(other.context))
            return other
        if isinstance(other, NDArray):
            if tuple(other.shape) != self._shape:
                raise ShapeError(f"copyto: a row_sparse array of shape {self._shape} into an array of shape "
                                 f"{other.shape}")
            return self.tostype("default").copyto(other)
        if isinstance(other, BaseSparseNDArray):
            raise SparseStorageError(f"copyto: a row_sparse array into a {other.stype} array; convert it with "
                                     f"tostype({other.stype!r}) first")
        return RowSparseNDArray(self._data.copyto(other), self._indices.copyto(other), self._shape)

    def __getitem__(self, key: Any) -> RowSparseNDArray:
        if isinstance(key, builtins.slice) and key == builtins.slice(None):
            return self
        raise SparseStorageError(f"a row_sparse array can be indexed only by [:] (got {key!r}), as in MXNet; "
                                 f"use retain() to keep rows or tostype('default') to index")

    def __setitem__(self, key: Any, value: Any) -> None:
        if not (isinstance(key, builtins.slice) and key == builtins.slice(None)):
            raise SparseStorageError(f"a row_sparse array can be assigned only as x[:] = value (got key {key!r})")
        if is_number(value):
            from mxkit.ndarray.creation import full

            value = full(self._shape, value, ctx=self.context, dtype=self.dtype)
        self._assign_from(value)

    def retain(self, indices: Any) -> RowSparseNDArray:
        """The stored rows among ``indices`` (row ids; others are dropped), as MXNet's ``sparse.retain``."""
        wanted = np.unique(_as_rows(indices))
        rows = self._indices.asnumpy().astype(np.int64)
        keep = np.nonzero(np.isin(rows, wanted))[0]
        return _from_positions(self, keep, rows[keep])

    def assign_rows(self, data: NDArray, indices: NDArray) -> None:
        """Replace the stored rows in place (a KVStore's ``row_sparse_pull`` fills its outputs so)."""
        self._set(data, indices)


def _as_dense_ndarray(value: Any, like: Any) -> NDArray:
    from mxkit.ndarray.creation import array

    if isinstance(value, NDArray):
        return value
    if isinstance(value, BaseSparseNDArray):
        return value.tostype("default")
    return array(np.asarray(value), ctx=like.context, dtype=like.dtype)


def _from_positions(source: RowSparseNDArray, positions: np.ndarray, rows: np.ndarray) -> RowSparseNDArray:
    from mxkit.ndarray.creation import array
    from mxkit.ndarray.invoke import invoke_by_name

    ctx = source.context
    taken = invoke_by_name("take", source.data, array(positions, ctx=ctx, dtype="int64"), axis=0)
    return RowSparseNDArray(taken, array(rows, ctx=ctx, dtype="int64"), source.shape)


def row_sparse_array(arg1: Any, shape: Any = None, ctx: Any = None, dtype: Any = None) -> RowSparseNDArray:
    """A row-sparse array from ``(data, indices)`` (with ``shape``), a dense array, or a
    RowSparseNDArray, as MXNet's ``mx.nd.sparse.row_sparse_array``.

    Raises
    ------
    SparseStorageError
        When the row ids are not distinct, out of range or not whole numbers.
    ShapeError
        When ``data`` does not hold rows of ``shape``.
    """
    from mxkit.ndarray.creation import array

    if isinstance(arg1, RowSparseNDArray):
        result = arg1.copyto(ctx) if ctx is not None else arg1.copy()
        return result if dtype is None else RowSparseNDArray(result.data.astype(dtype), result.indices, result.shape)
    if isinstance(arg1, tuple) and len(arg1) == 2 and all(isinstance(d, numbers.Integral) for d in arg1):
        # (rows, cols): an all-zero array of that shape
        if shape is not None and tuple(int(d) for d in shape) != tuple(int(d) for d in arg1):
            raise SparseStorageError(f"row_sparse_array: the shape {tuple(int(d) for d in arg1)} and shape={shape} "
                                     f"differ")
        return zeros("row_sparse", tuple(int(d) for d in arg1), ctx=ctx, dtype=dtype)
    if isinstance(arg1, tuple) and len(arg1) == 2:
        data, indices = arg1
        host_data = data.asnumpy() if isinstance(data, NDArray) else np.asarray(data)
        rows = _as_rows(indices)
        if shape is None:
            shape = (int(rows.max()) + 1 if rows.size else 0, *host_data.shape[1:])
        shape = tuple(int(d) for d in shape)
        if rows.size and (rows.min() < 0 or rows.max() >= shape[0]):
            raise SparseStorageError(f"row_sparse_array: row ids {rows.tolist()[:8]} fall outside the {shape[0]} "
                                     f"rows of shape {shape}")
        if len(np.unique(rows)) != rows.size:
            raise SparseStorageError(f"row_sparse_array: row ids {rows.tolist()[:8]} repeat; each row is stored once")
        order = np.argsort(rows, kind="stable")
        if dtype is None:
            dtype = data.dtype if isinstance(data, (NDArray, np.ndarray)) else "float32"
        return RowSparseNDArray(array(host_data[order] if rows.size else host_data, ctx=ctx, dtype=dtype),
                                array(rows[order], ctx=ctx, dtype="int64"), shape)
    if isinstance(arg1, BaseSparseNDArray):
        arg1 = arg1.tostype("default")
    if dtype is None and isinstance(arg1, (NDArray, np.ndarray)):
        dtype = arg1.dtype
    dense = array(arg1, ctx=ctx, dtype=dtype) if not isinstance(arg1, NDArray) or ctx is not None or \
        dtype != arg1.dtype else arg1
    return from_dense(dense)


def from_dense(dense: NDArray) -> RowSparseNDArray:
    """The rows of ``dense`` with a nonzero element (MXNet's dense to row_sparse cast)."""
    from mxkit.ndarray.creation import array

    if dense.ndim == 0:
        raise ShapeError("a 0-d array has no rows to store as row_sparse")
    host = dense.asnumpy()
    rows = np.nonzero(host.reshape(host.shape[0], -1).any(axis=1))[0] if host.size else np.zeros(0, np.int64)
    return RowSparseNDArray(array(host[rows], ctx=dense.context, dtype=host.dtype),
                            array(rows, ctx=dense.context, dtype="int64"), tuple(dense.shape))


def zeros(stype: str, shape: Any, ctx: Any = None, dtype: Any = None, **kwargs: Any) -> Any:
    """An all-zero array of storage ``stype``: nothing stored for ``"row_sparse"`` and ``"csr"``."""
    from mxkit.ndarray.creation import array
    from mxkit.ndarray.creation import zeros as dense_zeros

    stype = check_stype(stype, "zeros")
    if stype == "default":
        return dense_zeros(shape, ctx=ctx, dtype=dtype, **kwargs)
    shape = (int(shape),) if isinstance(shape, numbers.Integral) else tuple(int(d) for d in shape)
    name = "float32" if dtype is None else np.dtype(dtype).name
    if stype == "csr":
        from mxkit.ndarray.csr import empty_csr

        return empty_csr(shape, ctx=ctx, dtype=name)
    return RowSparseNDArray(array(np.zeros((0, *shape[1:]), dtype=name), ctx=ctx, dtype=name),
                            array(np.zeros(0, np.int64), ctx=ctx, dtype="int64"), shape)


def empty(stype: str, shape: Any, ctx: Any = None, dtype: Any = None) -> Any:
    """As :func:`zeros` (a sparse array with nothing stored is all zeros)."""
    return zeros(stype, shape, ctx=ctx, dtype=dtype)


def retain(data: RowSparseNDArray, indices: Any) -> RowSparseNDArray:
    """``data.retain(indices)``: the stored rows among ``indices``."""
    if not isinstance(data, RowSparseNDArray):
        raise SparseStorageError(f"retain needs a row_sparse array, got {type(data).__name__}")
    return data.retain(indices)


def __getattr__(name: str) -> Any:
    # MXNet's mx.nd.sparse also has every operator (mx.nd.sparse.FullyConnected...): the
    # registry's, which take sparse inputs through the storage rules or the dense fallback
    if name.startswith("__"):
        raise AttributeError(name)
    from mxkit.ndarray import _internal

    try:
        return getattr(_internal, name)
    except AttributeError:
        raise AttributeError(f"module 'mxkit.ndarray.sparse' has no attribute {name!r}") from None


# mx.nd.sparse also holds the csr arrays and the sparse operators
from mxkit.ndarray.csr import CSRNDArray, csr_matrix  # noqa: E402
from mxkit.ndarray.sparse_ops import (  # noqa: E402
    abs,
    add,
    add_n,
    arccos,
    arcsin,
    arcsinh,
    arctan,
    arctanh,
    array,
    cast_storage,
    ceil,
    clip,
    cos,
    degrees,
    divide,
    dot,
    elemwise_add,
    elemwise_div,
    elemwise_mul,
    elemwise_sub,
    exp,
    expm1,
    fix,
    floor,
    log1p,
    mean,
    multiply,
    negative,
    norm,
    radians,
    relu,
    rint,
    round,
    sign,
    sin,
    sinh,
    slice,
    sqrt,
    square,
    square_sum,
    subtract,
    sum,
    tan,
    tanh,
    trunc,
    where,
    zeros_like,
)

__all__ = ["BaseSparseNDArray", "CSRNDArray", "RowSparseNDArray", "SparseStorageError", "abs", "add", "add_n",
           "arccos", "arcsin", "arcsinh", "arctan", "arctanh", "array", "cast_storage", "ceil", "clip", "cos",
           "csr_matrix", "degrees", "divide", "dot", "elemwise_add", "elemwise_div", "elemwise_mul", "elemwise_sub",
           "empty", "exp", "expm1", "fix", "floor", "from_dense", "log1p", "mean", "multiply", "negative", "norm",
           "radians", "relu", "retain", "rint", "round", "row_sparse_array", "sign", "sin", "sinh", "slice", "sqrt",
           "square", "square_sum", "subtract", "sum", "tan", "tanh", "trunc", "where", "zeros", "zeros_like"]
