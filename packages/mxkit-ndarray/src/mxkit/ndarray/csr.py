"""Compressed sparse row arrays (MXNet's ``CSRNDArray``, ``stype="csr"``): a 2-D array as
three NDArrays, ``data`` (the stored values, ``(nnz,)``), ``indices`` (the column of each
value, int64, ``(nnz,)``; sorted and distinct within each row) and ``indptr`` (int64,
``(rows + 1,)``: row ``i``'s values are ``data[indptr[i]:indptr[i+1]]``).

Every structure given by a caller is checked before it is kept: ``indptr`` starts at 0,
never decreases and ends at ``nnz``; every column is inside the shape; columns increase
within a row. Sparse linear models and the ``LibSVMIter`` produce these arrays; the
operators on them live in :mod:`mxkit.ndarray.sparse_ops`.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from mxkit.core.errors import ShapeError
from mxkit.ndarray.ndarray import NDArray
from mxkit.ndarray.sparse_base import BaseSparseNDArray, SparseStorageError, host_of, is_number


def _int_host(values: Any, what: str) -> np.ndarray:
    host = host_of(values)
    if host.ndim != 1:
        raise ShapeError(f"csr {what} must be 1-D, got shape {host.shape}")
    if host.size and host.dtype.kind == "f" and not np.array_equal(host, np.floor(host)):
        raise SparseStorageError(f"csr {what} must be whole numbers, got {host[:8]!r}")
    if host.size and host.dtype.kind not in "iuf":
        raise SparseStorageError(f"csr {what} must be integers, got dtype {host.dtype}")
    return host.astype(np.int64)


def structure_problem(indices: np.ndarray, indptr: np.ndarray, nnz: int, shape: tuple[int, ...]) -> str | None:
    """What is wrong with a csr structure, or None when it is valid (host int64 arrays)."""
    if len(shape) != 2:
        return f"csr arrays are 2-D, got shape {shape}"
    if min(shape) < 0:
        return f"the shape {shape} has a negative dimension"
    if indptr.shape != (shape[0] + 1,):
        return f"indptr has {indptr.size} entries for {shape[0]} rows; expected {shape[0] + 1} (rows + 1)"
    if indices.shape != (nnz,):
        return f"{indices.size} column indices for {nnz} values; expected one index per value"
    if indptr[0] != 0:
        return f"indptr must start at 0, got {indptr[0]}"
    if indptr[-1] != nnz:
        return f"indptr must end at the number of values ({nnz}), got {indptr[-1]}"
    steps = np.diff(indptr)
    if steps.size and steps.min() < 0:
        row = int(np.argmin(steps))
        return f"indptr decreases at row {row} ({indptr[row]} then {indptr[row + 1]}); it must not decrease"
    if nnz:
        if indices.min() < 0 or indices.max() >= shape[1]:
            bad = indices[(indices < 0) | (indices >= shape[1])][:8].tolist()
            return f"column indices {bad} fall outside the {shape[1]} columns of shape {shape}"
        rows = np.repeat(np.arange(shape[0]), steps)
        same_row = rows[1:] == rows[:-1]
        bad_step = same_row & (indices[1:] <= indices[:-1])
        if bad_step.any():
            row = int(rows[1:][bad_step][0])
            return (f"the column indices of row {row} are not strictly increasing "
                    f"({indices[indptr[row]:indptr[row + 1]][:8].tolist()}); sort them and merge repeats")
    return None


class CSRNDArray(BaseSparseNDArray):
    """A 2-D array in compressed sparse row storage (see the module docstring).

    Made by :func:`csr_matrix`, ``x.tostype("csr")``, ``mx.nd.zeros(shape, stype="csr")``
    or slicing another ``CSRNDArray`` by rows; not constructed directly.
    """

    stype = "csr"

    def __init__(self, data: NDArray, indices: NDArray, indptr: NDArray, shape: tuple[int, ...]):
        self._shape = tuple(int(d) for d in shape)
        self._set(data, indices, indptr)

    def _set(self, data: NDArray, indices: NDArray, indptr: NDArray) -> None:
        if len(self._shape) != 2:
            raise ShapeError(f"csr arrays are 2-D, got shape {self._shape}")
        if data.ndim != 1 or indices.shape != data.shape or indptr.shape != (self._shape[0] + 1,):
            raise ShapeError(f"csr parts data {data.shape}, indices {indices.shape}, indptr {indptr.shape} do not "
                             f"describe a {self._shape} array; expected (nnz,), (nnz,), ({self._shape[0] + 1},)")
        self._data, self._indices, self._indptr = data, indices, indptr

    def _parts(self) -> list[Any]:
        return [self._data, self._indices, self._indptr]

    @property
    def data(self) -> NDArray:
        """The stored values, ``(nnz,)``."""
        return self._data

    @property
    def indices(self) -> NDArray:
        """The column index of each stored value (int64, ``(nnz,)``)."""
        return self._indices

    @property
    def indptr(self) -> NDArray:
        """Row offsets into ``data`` (int64, ``(rows + 1,)``)."""
        return self._indptr

    @property
    def nnz(self) -> int:
        """How many values are stored."""
        return int(self._data.shape[0])

    def host_parts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (self._data.asnumpy(), self._indices.asnumpy().astype(np.int64),
                self._indptr.asnumpy().astype(np.int64))

    def _validate(self, full_check: bool) -> None:
        indptr = self._indptr.asnumpy().astype(np.int64)
        indices = self._indices.asnumpy().astype(np.int64) if full_check else np.zeros(self.nnz, np.int64)
        if not full_check:
            problem = None if indptr[0] == 0 and indptr[-1] == self.nnz else "indptr does not span the values"
        else:
            problem = structure_problem(indices, indptr, self.nnz, self._shape)
        if problem:
            raise SparseStorageError(f"invalid csr array of shape {self._shape}: {problem}")

    # ---- conversion ---------------------------------------------------------------------

    def asnumpy(self) -> np.ndarray:
        """The dense values as a numpy array."""
        data, indices, indptr = self.host_parts()
        return dense_from_parts(data, indices, indptr, self._shape)

    def asscipy(self) -> Any:
        """A ``scipy.sparse.csr_matrix`` of the same values (needs scipy, which mxkit does not
        require)."""
        try:
            import scipy.sparse as spsp
        except ImportError:
            raise SparseStorageError("asscipy needs scipy, which is not installed; use asnumpy() for the "
                                     "dense values or .data/.indices/.indptr for the parts") from None
        data, indices, indptr = self.host_parts()
        return spsp.csr_matrix((data, indices, indptr), shape=self._shape, dtype=data.dtype)

    def copy(self) -> CSRNDArray:
        """A deep copy on the same device."""
        return CSRNDArray(self._data.copy(), self._indices.copy(), self._indptr.copy(), self._shape)

    def _with_data(self, data: NDArray) -> CSRNDArray:
        return CSRNDArray(data, self._indices.copy(), self._indptr.copy(), self._shape)

    def _assign_from(self, other: Any) -> None:
        if tuple(other.shape) != self._shape:
            raise ShapeError(f"cannot assign an array of shape {tuple(other.shape)} to a csr array of shape "
                             f"{self._shape}")
        source = other if isinstance(other, CSRNDArray) else csr_matrix(host_of(other), ctx=self.context,
                                                                       dtype=self.dtype)
        ctx = self.context
        self._set(source.data.copyto(ctx).astype(self.dtype, copy=False), source.indices.copyto(ctx),
                  source.indptr.copyto(ctx))

    def copyto(self, other: Any) -> Any:
        """A copy on device ``other`` (a Context), or into ``other`` (a CSRNDArray takes this
        structure; a dense NDArray the dense values)."""
        if isinstance(other, CSRNDArray):
            other._assign_from(self)
            return other
        if isinstance(other, NDArray):
            if tuple(other.shape) != self._shape:
                raise ShapeError(f"copyto: a csr array of shape {self._shape} into an array of shape {other.shape}")
            return self.tostype("default").copyto(other)
        if isinstance(other, BaseSparseNDArray):
            raise SparseStorageError(f"copyto: a csr array into a {other.stype} array; convert it with "
                                     f"tostype({other.stype!r}) first")
        return CSRNDArray(self._data.copyto(other), self._indices.copyto(other), self._indptr.copyto(other),
                          self._shape)

    # ---- rows -----------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> CSRNDArray:
        """Rows ``key`` (an int or a step-1 slice) as a csr array, as MXNet's ``csr[a:b]``."""
        if isinstance(key, numbers.Integral) and not isinstance(key, bool):
            index = int(key) + self._shape[0] if key < 0 else int(key)
            if not 0 <= index < self._shape[0]:
                raise IndexError(f"row {key} is outside the {self._shape[0]} rows of this csr array")
            return self.slice_rows(index, index + 1)
        if isinstance(key, slice):
            start, stop, step = key.indices(self._shape[0])
            if step != 1:
                raise SparseStorageError(f"csr arrays are sliced by rows with step 1, got step {key.step}")
            return self.slice_rows(start, max(start, stop))
        raise SparseStorageError(f"csr arrays are indexed by a row or a slice of rows, got {key!r}; use "
                                 f"mx.nd.sparse.slice for columns or tostype('default') for other indexing")

    def slice_rows(self, start: int, stop: int) -> CSRNDArray:
        """Rows ``start:stop`` as a csr array (no values are copied on the host)."""
        from mxkit.ndarray.creation import array

        indptr = self._indptr.asnumpy().astype(np.int64)
        lo, hi = int(indptr[start]), int(indptr[stop])
        ctx = self.context
        return CSRNDArray(self._data[lo:hi].copy() if hi > lo else array(np.zeros(0, self.dtype), ctx=ctx,
                                                                          dtype=self.dtype),
                          array(self._indices.asnumpy()[lo:hi].astype(np.int64), ctx=ctx, dtype="int64"),
                          array(indptr[start:stop + 1] - lo, ctx=ctx, dtype="int64"),
                          (stop - start, self._shape[1]))

    def __setitem__(self, key: Any, value: Any) -> None:
        if not (isinstance(key, slice) and key == slice(None)):
            raise SparseStorageError(f"a csr array can be assigned only as x[:] = value (got key {key!r})")
        if is_number(value):
            value = np.full(self._shape, value, dtype=self.dtype)
        self._assign_from(value)


def dense_from_parts(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
                     shape: tuple[int, ...]) -> np.ndarray:
    """The dense numpy array of host csr parts."""
    dense = np.zeros(shape, dtype=data.dtype)
    if data.size:
        rows = np.repeat(np.arange(shape[0]), np.diff(indptr))
        dense[rows, indices] = data
    return dense


def parts_from_dense(host: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(data, indices, indptr)`` of the nonzero values of a 2-D numpy array."""
    if host.ndim != 2:
        raise ShapeError(f"csr storage holds 2-D arrays, got shape {host.shape}")
    mask = host != 0
    indptr = np.zeros(host.shape[0] + 1, np.int64)
    np.cumsum(mask.sum(axis=1), out=indptr[1:])
    rows, cols = np.nonzero(mask)
    return host[rows, cols], cols.astype(np.int64), indptr


def from_host_parts(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, ...],
                    ctx: Any = None, dtype: Any = None) -> CSRNDArray:
    """A CSRNDArray of trusted host parts (made here, not given by a caller)."""
    from mxkit.ndarray.creation import array

    dtype = data.dtype if dtype is None else dtype
    return CSRNDArray(array(data, ctx=ctx, dtype=dtype), array(indices, ctx=ctx, dtype="int64"),
                      array(indptr, ctx=ctx, dtype="int64"), shape)


def empty_csr(shape: tuple[int, ...], ctx: Any = None, dtype: Any = "float32") -> CSRNDArray:
    """An all-zero csr array (nothing stored)."""
    if len(shape) != 2:
        raise ShapeError(f"csr arrays are 2-D, got shape {shape}")
    return from_host_parts(np.zeros(0, dtype), np.zeros(0, np.int64), np.zeros(shape[0] + 1, np.int64),
                           shape, ctx=ctx, dtype=dtype)


def _default_dtype(source: Any, dtype: Any) -> Any:
    # MXNet keeps the dtype of an NDArray, numpy or scipy source, else float32
    if dtype is not None:
        return dtype
    if isinstance(source, (NDArray, np.ndarray, BaseSparseNDArray)) or _is_scipy_sparse(source):
        return np.dtype(source.dtype).name
    return "float32"


def _is_scipy_sparse(value: Any) -> bool:
    return hasattr(value, "tocsr") and hasattr(value, "nnz") and hasattr(value, "shape")


def _shape_arg(shape: Any) -> tuple[int, ...] | None:
    if shape is None:
        return None
    try:
        return tuple(int(d) for d in shape)
    except TypeError:
        raise ShapeError(f"csr_matrix: shape must be a pair of ints, got {shape!r}") from None


def csr_matrix(arg1: Any, shape: Any = None, ctx: Any = None, dtype: Any = None) -> CSRNDArray:
    """A csr array, as MXNet's ``mx.nd.sparse.csr_matrix``, from

    - ``(data, indices, indptr)`` with ``shape`` (inferred as ``(len(indptr) - 1,
      max(indices) + 1)`` when omitted);
    - ``(data, (row, col))``: coordinates, repeats summed (scipy's COO form);
    - ``(rows, cols)``: an all-zero array of that shape;
    - a dense NDArray, numpy array or nested list (its nonzero values);
    - a ``CSRNDArray`` (copied) or a scipy sparse matrix.

    Raises
    ------
    SparseStorageError
        When the structure is malformed: ``indptr`` not starting at 0, decreasing or not
        ending at ``len(data)``; column indices outside the shape or not increasing within
        a row.
    ShapeError
        When the parts' lengths disagree or the array is not 2-D.
    """
    shape = _shape_arg(shape)
    if isinstance(arg1, CSRNDArray):
        result = arg1.copyto(ctx) if ctx is not None else arg1.copy()
        return result if dtype is None else result.astype(dtype)
    if isinstance(arg1, tuple) and len(arg1) == 2 and all(isinstance(d, numbers.Integral) for d in arg1):
        if shape is not None and shape != (int(arg1[0]), int(arg1[1])):
            raise SparseStorageError(f"csr_matrix: the shape {tuple(int(d) for d in arg1)} and shape={shape} differ")
        return empty_csr((int(arg1[0]), int(arg1[1])), ctx=ctx, dtype=_default_dtype(None, dtype))
    if isinstance(arg1, tuple) and len(arg1) == 3:
        data, indices, indptr = arg1
        host_data = host_of(data)
        if host_data.ndim != 1:
            raise ShapeError(f"csr_matrix: data must be 1-D (one value per stored element), got shape "
                             f"{host_data.shape}")
        cols, offsets = _int_host(indices, "indices"), _int_host(indptr, "indptr")
        if shape is None:
            if offsets.size == 0:
                raise ShapeError("csr_matrix: indptr is empty; it has rows + 1 entries")
            shape = (offsets.size - 1, int(cols.max()) + 1 if cols.size else 0)
        problem = structure_problem(cols, offsets, host_data.size, shape)
        if problem:
            raise SparseStorageError(f"csr_matrix: {problem}")
        return from_host_parts(host_data, cols, offsets, shape, ctx=ctx, dtype=_default_dtype(data, dtype))
    if isinstance(arg1, tuple) and len(arg1) == 2:
        data, coords = arg1
        if not (isinstance(coords, tuple) and len(coords) == 2):
            raise SparseStorageError("csr_matrix takes (data, indices, indptr), (data, (row, col)), (rows, cols), "
                                     f"a dense array or a sparse matrix; got a pair of {type(coords).__name__}")
        return _from_coordinates(host_of(data), _int_host(coords[0], "row"), _int_host(coords[1], "col"), shape,
                                 ctx, _default_dtype(data, dtype))
    if _is_scipy_sparse(arg1):
        matrix = arg1.tocsr()
        matrix.sum_duplicates()
        matrix.sort_indices()
        return csr_matrix((matrix.data, matrix.indices, matrix.indptr), shape=shape or matrix.shape, ctx=ctx,
                          dtype=_default_dtype(arg1, dtype))
    dense_dtype = _default_dtype(arg1, dtype)
    host = host_of(arg1.tostype("default") if isinstance(arg1, BaseSparseNDArray) else arg1)
    if host.dtype == object:
        raise SparseStorageError(f"csr_matrix cannot read {type(arg1).__name__} input")
    if shape is not None and tuple(host.shape) != shape:
        raise ShapeError(f"csr_matrix: the array has shape {host.shape}, not the given shape {shape}")
    host = host.astype(dense_dtype, copy=False)
    data, cols, offsets = parts_from_dense(host)
    if ctx is None and isinstance(arg1, (NDArray, BaseSparseNDArray)):
        ctx = arg1.context
    return from_host_parts(data, cols, offsets, tuple(host.shape), ctx=ctx, dtype=dense_dtype)


def _from_coordinates(data: np.ndarray, rows: np.ndarray, cols: np.ndarray, shape: tuple[int, ...] | None,
                      ctx: Any, dtype: Any) -> CSRNDArray:
    if not data.ndim == rows.ndim == cols.ndim == 1 or not data.size == rows.size == cols.size:
        raise ShapeError(f"csr_matrix((data, (row, col))): the three must be 1-D of one length, got "
                         f"{data.shape}, {rows.shape}, {cols.shape}")
    if shape is None:
        shape = (int(rows.max()) + 1 if rows.size else 0, int(cols.max()) + 1 if cols.size else 0)
    if len(shape) != 2:
        raise ShapeError(f"csr arrays are 2-D, got shape {shape}")
    if rows.size and (rows.min() < 0 or rows.max() >= shape[0] or cols.min() < 0 or cols.max() >= shape[1]):
        raise SparseStorageError(f"csr_matrix((data, (row, col))): a coordinate falls outside the shape {shape}")
    flat = rows * shape[1] + cols
    unique, inverse = np.unique(flat, return_inverse=True)
    summed = np.zeros(unique.size, dtype=data.dtype)
    np.add.at(summed, inverse, data)
    out_rows, out_cols = unique // max(shape[1], 1), unique % max(shape[1], 1)
    indptr = np.zeros(shape[0] + 1, np.int64)
    np.cumsum(np.bincount(out_rows, minlength=shape[0]), out=indptr[1:])
    return from_host_parts(summed, out_cols.astype(np.int64), indptr, shape, ctx=ctx, dtype=dtype)


__all__ = ["CSRNDArray", "csr_matrix", "dense_from_parts", "empty_csr", "from_host_parts", "parts_from_dense",
           "structure_problem"]
