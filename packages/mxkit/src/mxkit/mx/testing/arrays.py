"""The default test device and random shapes and arrays (MXNet's ``test_utils`` names)."""

from __future__ import annotations

from typing import Any

import numpy as np
from mxkit.core import context as _context
from mxkit.core.errors import MXKitError
from mxkit.mx.testing.compare import default_dtype


def default_context() -> _context.Context:
    """The device tests run on: the innermost ``with ctx:``, else :func:`set_default_context`'s, else cpu(0)."""
    return _context.current_context()


def set_default_context(ctx: Any) -> None:
    """Make ``ctx`` this thread's default device (``mx.current_context()`` outside any ``with``)."""
    _context.set_thread_default(None if ctx is None else _context.Context(ctx))


def random_arrays(*shapes: tuple[int, ...]) -> np.ndarray | list[np.ndarray]:
    """Standard-normal float32 numpy arrays of the given shapes (one array for one shape)."""
    arrays = [np.array(np.random.randn(), dtype=default_dtype()) if len(s) == 0
              else np.random.randn(*s).astype(default_dtype()) for s in shapes]
    return arrays[0] if len(arrays) == 1 else arrays


def random_uniform_arrays(*shapes: tuple[int, ...], low: float = 0.0, high: float = 1.0,
                          dtype: Any = None) -> np.ndarray | list[np.ndarray]:
    """Uniform numpy arrays in ``[low, high)`` of the given shapes."""
    dtype = default_dtype() if dtype is None else dtype
    arrays = [np.random.uniform(low, high, size=s).astype(dtype) for s in shapes]
    return arrays[0] if len(arrays) == 1 else arrays


def _low(allow_zero_size: bool) -> int:
    return 0 if allow_zero_size else 1


def rand_shape_2d(dim0: int = 10, dim1: int = 10, allow_zero_size: bool = False) -> tuple[int, int]:
    """A random 2-d shape with sizes in ``1..dim`` (``0..dim`` with ``allow_zero_size``)."""
    low = _low(allow_zero_size)
    return int(np.random.randint(low, dim0 + 1)), int(np.random.randint(low, dim1 + 1))


def rand_shape_3d(dim0: int = 10, dim1: int = 10, dim2: int = 10,
                  allow_zero_size: bool = False) -> tuple[int, int, int]:
    """A random 3-d shape with sizes in ``1..dim`` (``0..dim`` with ``allow_zero_size``)."""
    low = _low(allow_zero_size)
    return (int(np.random.randint(low, dim0 + 1)), int(np.random.randint(low, dim1 + 1)),
            int(np.random.randint(low, dim2 + 1)))


def rand_shape_nd(num_dim: int, dim: int = 10, allow_zero_size: bool = False) -> tuple[int, ...]:
    """A random ``num_dim``-d shape with sizes in ``1..dim`` (``0..dim`` with ``allow_zero_size``)."""
    if num_dim < 0:
        raise MXKitError(f"rand_shape_nd: num_dim={num_dim} is negative; expected a number of dimensions >= 0")
    return tuple(int(d) for d in np.random.randint(_low(allow_zero_size), dim + 1, size=num_dim))


def rand_ndarray(shape: tuple[int, ...], stype: str = "default", density: float | None = None, dtype: Any = None,
                 modifier_func: Any = None, shuffle_csr_indices: bool = False, distribution: Any = None,
                 ctx: Any = None) -> Any:
    """A random NDArray of ``shape`` on ``ctx`` (default: :func:`default_context`).

    ``stype="default"``: standard-normal values. ``stype="row_sparse"``: as MXNet's, each row
    is stored with probability ``density`` (default: a uniform draw), with uniform [0, 1)
    values; a :class:`~mxkit.ndarray.sparse.RowSparseNDArray`.

    ``stype="csr"``: each element is stored with probability ``density``, with uniform
    [0, 1) values; a :class:`~mxkit.ndarray.csr.CSRNDArray`.

    Raises
    ------
    MXKitError
        For an unknown ``stype`` or a density outside [0, 1].
    """
    if stype == "csr":
        from mxkit.ndarray.sparse import csr_matrix

        density = np.random.rand() if density is None else density
        if not 0 <= density <= 1:
            raise MXKitError(f"rand_ndarray: density must be in [0, 1], got {density!r}")
        if len(shape) != 2:
            raise MXKitError(f"rand_ndarray: csr arrays are 2-D, got shape {tuple(shape)}")
        kept = np.random.rand(*shape) * (np.random.rand(*shape) < density)
        return csr_matrix(kept, ctx=ctx if ctx is not None else default_context(),
                          dtype=dtype if dtype is not None else default_dtype())
    if stype == "row_sparse":
        from mxkit.ndarray.sparse import row_sparse_array

        density = np.random.rand() if density is None else density
        if not 0 <= density <= 1:
            raise MXKitError(f"rand_ndarray: density must be in [0, 1], got {density!r}")
        rows = np.argwhere(np.random.rand(shape[0]) < density).flatten()
        stored = np.random.rand(len(rows), *shape[1:])
        return row_sparse_array((stored, rows), shape=tuple(shape), ctx=ctx if ctx is not None else default_context(),
                                dtype=dtype if dtype is not None else default_dtype())
    if stype != "default":
        raise MXKitError(f"rand_ndarray: {stype!r} is not a storage type; MXNet's are 'default', "
                         f"'row_sparse' and 'csr'")
    from mxkit.ndarray import array

    values = random_arrays(tuple(shape))
    if modifier_func is not None:
        values = np.vectorize(modifier_func)(values)
    return array(values, ctx=ctx if ctx is not None else default_context(),
                 dtype=dtype if dtype is not None else default_dtype())


def rand_sparse_ndarray(shape: tuple[int, ...], stype: str, density: float | None = None, dtype: Any = None,
                        distribution: Any = None, data_init: Any = None, rsp_indices: Any = None,
                        modifier_func: Any = None, shuffle_csr_indices: bool = False, ctx: Any = None) -> Any:
    """A random sparse array and its parts, as MXNet's: ``(array, (values, row ids))`` for
    ``"row_sparse"`` (each row stored with probability ``density``, or the rows
    ``rsp_indices``), ``(array, (indptr, indices, values))`` for ``"csr"`` (each element
    stored with probability ``density``; only the ``"uniform"`` distribution). Values are
    uniform in [0, 1), or ``data_init``, passed through ``modifier_func`` when given.
    """
    from mxkit.ndarray.sparse import csr_matrix, row_sparse_array

    density = np.random.rand() if density is None else density
    if not 0 <= density <= 1:
        raise MXKitError(f"rand_sparse_ndarray: density must be in [0, 1], got {density!r}")
    if distribution not in (None, "uniform"):
        raise MXKitError(f"rand_sparse_ndarray: distribution {distribution!r} is not provided; use 'uniform'")
    dtype = default_dtype() if dtype is None else dtype
    ctx = ctx if ctx is not None else default_context()

    def values(count: Any) -> np.ndarray:
        drawn = np.random.rand(*count).astype(dtype)
        if data_init is not None:
            drawn.fill(data_init)
        if modifier_func is not None:
            drawn = np.vectorize(modifier_func)(drawn).astype(dtype)
        return drawn

    if stype == "row_sparse":
        rows = np.asarray(rsp_indices if rsp_indices is not None
                          else np.argwhere(np.random.rand(shape[0]) < density).flatten(), dtype=np.int64)
        stored = values((rows.size, *shape[1:]))
        return row_sparse_array((stored, rows), shape=tuple(shape), ctx=ctx, dtype=dtype), (stored, rows)
    if stype == "csr":
        if len(shape) != 2:
            raise MXKitError(f"rand_sparse_ndarray: csr arrays are 2-D, got shape {tuple(shape)}")
        mask = np.random.rand(*shape) < density
        dense = np.zeros(shape, dtype=dtype)
        dense[mask] = values((int(mask.sum()),))
        arr = csr_matrix(dense, ctx=ctx, dtype=dtype)
        return arr, (arr.indptr.asnumpy(), arr.indices.asnumpy(), arr.data.asnumpy())
    raise MXKitError(f"rand_sparse_ndarray: stype must be 'row_sparse' or 'csr', got {stype!r}")


def create_sparse_array(shape: tuple[int, ...], stype: str, data_init: Any = None, rsp_indices: Any = None,
                        dtype: Any = None, modifier_func: Any = None, density: float = 0.5,
                        shuffle_csr_indices: bool = False) -> Any:
    """A random sparse array (:func:`rand_sparse_ndarray` without its parts), as MXNet's;
    ``rsp_indices`` are sorted first."""
    if stype not in ("row_sparse", "csr"):
        raise MXKitError(f"create_sparse_array: stype must be 'row_sparse' or 'csr', got {stype!r}")
    indices = np.sort(np.asarray(rsp_indices)) if stype == "row_sparse" and rsp_indices is not None else None
    array, _ = rand_sparse_ndarray(shape, stype, density=density, data_init=data_init, rsp_indices=indices,
                                   dtype=dtype, modifier_func=modifier_func, shuffle_csr_indices=shuffle_csr_indices)
    return array


def create_sparse_array_zd(shape: tuple[int, ...], stype: str, density: float, data_init: Any = None,
                           rsp_indices: Any = None, dtype: Any = None, modifier_func: Any = None,
                           shuffle_csr_indices: bool = False) -> Any:
    """:func:`create_sparse_array` where a row_sparse array stores exactly ``rsp_indices``
    (density 0 for the others), as MXNet's."""
    if stype == "row_sparse":
        density = 0.0
        if rsp_indices is not None and len(rsp_indices) > shape[0]:
            raise MXKitError(f"create_sparse_array_zd: {len(rsp_indices)} row ids for {shape[0]} rows")
    return create_sparse_array(shape, stype, data_init=data_init, rsp_indices=rsp_indices, dtype=dtype,
                               modifier_func=modifier_func, density=density,
                               shuffle_csr_indices=shuffle_csr_indices)


def assign_each(the_input: Any, function: Any) -> np.ndarray:
    """``function`` applied to every element of ``the_input`` (a copy when None), as MXNet's."""
    values = np.asarray(the_input)
    if function is None:
        return np.copy(values)
    return np.vectorize(function, otypes=[np.float64])(values).reshape(values.shape) if values.size \
        else np.zeros(values.shape)


def assign_each2(input1: Any, input2: Any, function: Any) -> np.ndarray:
    """``function(a, b)`` for every pair of elements of two same-shaped inputs, as MXNet's."""
    first, second = np.asarray(input1), np.asarray(input2)
    if first.shape != second.shape:
        raise MXKitError(f"assign_each2: the inputs have shapes {first.shape} and {second.shape}; they must match")
    if function is None:
        return np.copy(first)
    return np.vectorize(function, otypes=[np.float64])(first, second) if first.size else np.zeros(first.shape)


__all__ = ["assign_each", "assign_each2", "create_sparse_array", "create_sparse_array_zd", "default_context",
           "rand_ndarray", "rand_sparse_ndarray", "rand_shape_2d", "rand_shape_3d", "rand_shape_nd", "random_arrays",
           "random_uniform_arrays", "set_default_context"]
