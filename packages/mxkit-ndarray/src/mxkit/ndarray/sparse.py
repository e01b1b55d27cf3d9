"""Row-sparse arrays (MXNet's ``RowSparseNDArray``, ``stype="row_sparse"``): the rows of a
large array that are present, as two NDArrays: ``data`` (one row per stored row,
``(k, *shape[1:])``) and ``indices`` (their sorted, distinct row ids, int64, ``(k,)``).
Rows not stored are zero.

What is provided is what MXNet 1.x code uses them for around a KVStore (embeddings and
large linear models pull only the rows a batch touches): making them (``tostype``,
``zeros(stype="row_sparse")``, :func:`row_sparse_array`), reading them (``asnumpy``,
``tostype("default")``), moving them between devices, keeping chosen rows
(:meth:`RowSparseNDArray.retain`) and scaling them by a number. Any other arithmetic works on
the dense form (MXNet's "storage fallback") and gives a dense NDArray. Operators, autograd
and the optimizers take dense arrays: pass ``x.tostype("default")``. ``csr`` storage is not
provided.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from mxkit.core.errors import DTypeError, MXKitError, ShapeError
from mxkit.ndarray.ndarray import NDArray


class SparseStorageError(MXKitError, ValueError):
    """A sparse array that is malformed or a storage type mxkit does not provide."""


def _as_rows(indices: Any) -> np.ndarray:
    host = indices.asnumpy() if isinstance(indices, NDArray) else np.asarray(indices)
    if host.size and host.dtype.kind == "f" and not np.array_equal(host, np.floor(host)):
        raise SparseStorageError(f"row ids must be whole numbers, got {host.ravel()[:8]!r}")
    return host.astype(np.int64).ravel()


class RowSparseNDArray:
    """A row-sparse array: ``data`` rows at row ids ``indices`` of a ``shape`` array.

    Made by :func:`row_sparse_array`, ``NDArray.tostype("row_sparse")`` or
    ``mx.nd.zeros(shape, stype="row_sparse")``; not constructed directly.
    """

    stype = "row_sparse"
    __array_priority__ = 1000.0

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

    # ---- description --------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        """The logical (dense) shape."""
        return self._shape

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return int(np.prod(self._shape, dtype=np.int64))

    @property
    def dtype(self) -> Any:
        """The dtype of the values."""
        return self._data.dtype

    @property
    def context(self) -> Any:
        """The device of the values."""
        return self._data.context

    ctx = context

    @property
    def data(self) -> NDArray:
        """The stored rows, ``(k, *shape[1:])``."""
        return self._data

    @property
    def indices(self) -> NDArray:
        """The sorted row ids of the stored rows (int64, ``(k,)``)."""
        return self._indices

    def __repr__(self) -> str:
        shape = "x".join(str(d) for d in self._shape)
        return f"\n<RowSparseNDArray {shape} @{self.context}>"

    # ---- conversion ---------------------------------------------------------------------

    def asnumpy(self) -> np.ndarray:
        """The dense values as a numpy array."""
        dense = np.zeros(self._shape, dtype=self._data.dtype)
        rows = self._indices.asnumpy().astype(np.int64)
        if rows.size:
            dense[rows] = self._data.asnumpy()
        return dense

    def tostype(self, stype: str) -> Any:
        """``"default"``: the dense NDArray; ``"row_sparse"``: a copy."""
        if stype == "default":
            from mxkit.ndarray.creation import array

            return array(self.asnumpy(), ctx=self.context, dtype=self._data.dtype)
        if stype == "row_sparse":
            return self.copy()
        raise _unsupported_stype(stype, "tostype")

    def wait_to_read(self) -> None:
        self._data.wait_to_read()
        self._indices.wait_to_read()

    def copy(self) -> RowSparseNDArray:
        """A deep copy on the same device."""
        return RowSparseNDArray(self._data.copy(), self._indices.copy(), self._shape)

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
        return RowSparseNDArray(self._data.copyto(other), self._indices.copyto(other), self._shape)

    def as_in_context(self, context: Any) -> RowSparseNDArray:
        """This array on ``context`` (itself when it is there already)."""
        return self if context == self.context else self.copyto(context)

    def retain(self, indices: Any) -> RowSparseNDArray:
        """The stored rows among ``indices`` (row ids; others are dropped), as MXNet's ``sparse.retain``."""
        wanted = np.unique(_as_rows(indices))
        rows = self._indices.asnumpy().astype(np.int64)
        keep = np.nonzero(np.isin(rows, wanted))[0]
        return _from_positions(self, keep, rows[keep])

    def assign_rows(self, data: NDArray, indices: NDArray) -> None:
        """Replace the stored rows in place (a KVStore's ``row_sparse_pull`` fills its outputs so)."""
        self._set(data, indices)

    # ---- arithmetic: scaling keeps the storage, anything else falls back to dense -------

    def _scaled(self, op: Any) -> RowSparseNDArray:
        return RowSparseNDArray(op(self._data), self._indices.copy(), self._shape)

    def __mul__(self, other: Any) -> Any:
        if _is_number(other):
            return self._scaled(lambda d: d * other)
        return self.tostype("default") * _dense(other)

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> Any:
        if _is_number(other):
            return self._scaled(lambda d: d / other)
        return self.tostype("default") / _dense(other)

    def __neg__(self) -> RowSparseNDArray:
        return self._scaled(lambda d: -d)

    def __add__(self, other: Any) -> Any:
        return self.tostype("default") + _dense(other)

    def __radd__(self, other: Any) -> Any:
        return _dense(other) + self.tostype("default")

    def __sub__(self, other: Any) -> Any:
        return self.tostype("default") - _dense(other)

    def __rsub__(self, other: Any) -> Any:
        return _dense(other) - self.tostype("default")

    def __rtruediv__(self, other: Any) -> Any:
        return _dense(other) / self.tostype("default")

    def __getattr__(self, name: str) -> Any:
        # an NDArray method the row-sparse form lacks: say how to reach it
        if name.startswith("_") or not hasattr(NDArray, name):
            raise AttributeError(f"'RowSparseNDArray' object has no attribute {name!r}")
        raise SparseStorageError(f"RowSparseNDArray.{name}: row_sparse arrays keep rows for KVStore exchange; "
                                 f"call .tostype('default') first for {name}")


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def _dense(value: Any) -> Any:
    return value.tostype("default") if isinstance(value, RowSparseNDArray) else value


def _from_positions(source: RowSparseNDArray, positions: np.ndarray, rows: np.ndarray) -> RowSparseNDArray:
    from mxkit.ndarray.creation import array
    from mxkit.ndarray.invoke import invoke_by_name

    ctx = source.context
    taken = invoke_by_name("take", source.data, array(positions, ctx=ctx, dtype="int64"), axis=0)
    return RowSparseNDArray(taken, array(rows, ctx=ctx, dtype="int64"), source.shape)


def _unsupported_stype(stype: Any, what: str) -> MXKitError:
    if stype == "csr":
        return SparseStorageError(f"{what}: csr storage is not provided by mxkit (row_sparse is); use "
                                  f"stype='default'")
    return DTypeError(f"{what}: unknown storage type {stype!r}; MXNet's are 'default', 'row_sparse' and 'csr'")


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
            dtype = data.dtype if isinstance(data, NDArray) else "float32"
        return RowSparseNDArray(array(host_data[order] if rows.size else host_data, ctx=ctx, dtype=dtype),
                                array(rows[order], ctx=ctx, dtype="int64"), shape)
    dense = arg1 if isinstance(arg1, NDArray) else array(arg1, ctx=ctx, dtype=dtype)
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
    """An all-zero array of storage ``stype`` (no stored rows for ``"row_sparse"``)."""
    from mxkit.ndarray.creation import array
    from mxkit.ndarray.creation import zeros as dense_zeros

    if stype in (None, "default"):
        return dense_zeros(shape, ctx=ctx, dtype=dtype, **kwargs)
    if stype != "row_sparse":
        raise _unsupported_stype(stype, "zeros")
    shape = (int(shape),) if isinstance(shape, numbers.Integral) else tuple(int(d) for d in shape)
    name = "float32" if dtype is None else np.dtype(dtype).name
    return RowSparseNDArray(array(np.zeros((0, *shape[1:]), dtype=name), ctx=ctx, dtype=name),
                            array(np.zeros(0, np.int64), ctx=ctx, dtype="int64"), shape)


empty = zeros


def retain(data: RowSparseNDArray, indices: Any) -> RowSparseNDArray:
    """``data.retain(indices)``: the stored rows among ``indices``."""
    if not isinstance(data, RowSparseNDArray):
        raise SparseStorageError(f"retain needs a row_sparse array, got {type(data).__name__}")
    return data.retain(indices)


__all__ = ["RowSparseNDArray", "SparseStorageError", "empty", "from_dense", "retain", "row_sparse_array", "zeros"]
