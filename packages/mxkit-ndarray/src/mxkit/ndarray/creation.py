"""Array creation: ``array``, ``empty``, ``zeros``, ``ones``, ``full``, ``arange``, ``eye``, ``*_like``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from mxkit.core.dtypes import dtype_name
from mxkit.core.errors import DTypeError, ShapeError
from mxkit.ndarray.invoke import allocate, backend_of, engine, invoke_by_name, numpy_dtype, resolve_context
from mxkit.ndarray.ndarray import NDArray


def _shape_tuple(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    try:
        dims = tuple(int(d) for d in shape)
    except TypeError:
        raise ShapeError(f"a shape must be an int or a tuple of ints, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise ShapeError(f"shape {dims} has a negative dimension; dimensions must be >= 0")
    return dims


def _default_dtype(dtype: Any) -> str:
    if dtype is None:
        from mxkit.core import config

        return dtype_name(config.get("default_dtype"))
    return dtype_name(dtype)


def check_dense_stype(stype: str | None, what: str) -> None:
    """Accept MXNet's ``stype=None``/``"default"``; sparse storage types are a clear error."""
    if stype is None or stype == "default":
        return
    if stype in ("row_sparse", "csr"):
        raise DTypeError(f"{what}: storage type {stype!r} is not available here (as in MXNet); make sparse arrays "
                         f"with mx.nd.zeros(shape, stype={stype!r}), x.tostype({stype!r}), "
                         f"mx.nd.sparse.row_sparse_array or mx.nd.sparse.csr_matrix")
    raise DTypeError(f"{what}: unknown storage type {stype!r}; MXNet's are 'default', 'row_sparse' and 'csr'")


def empty(shape: Any, ctx: Any = None, dtype: Any = None, stype: str | None = None) -> NDArray:
    """An uninitialised array of ``shape`` on ``ctx`` (default: the current context); with
    ``stype="row_sparse"`` or ``"csr"`` a sparse array with nothing stored."""
    if stype in ("row_sparse", "csr"):
        from mxkit.ndarray.sparse import zeros as sparse_zeros

        return sparse_zeros(stype, shape, ctx=ctx, dtype=dtype)
    check_dense_stype(stype, "empty")
    context = resolve_context(ctx)
    data = allocate(backend_of(context), _shape_tuple(shape), numpy_dtype(_default_dtype(dtype)), context)
    return NDArray._from_data(data, context, engine().new_var())


def array(source_array: Any, ctx: Any = None, dtype: Any = None, stype: str | None = None) -> Any:
    """An array holding a copy of ``source_array`` (NDArray, numpy array, nested lists, scalar).

    As in MXNet 1.x, the dtype is ``dtype`` when given, else ``source_array``'s when it is an
    NDArray, else float32 -- for numpy arrays too: ``array(np.arange(3))`` is float32, not
    int64 (pass ``dtype=src.dtype`` to keep a numpy array's dtype). A sparse array (or a
    scipy sparse matrix) gives a sparse copy, as in MXNet; ``stype`` converts the result.
    """
    from mxkit.ndarray.sparse_base import BaseSparseNDArray

    if stype not in (None, "default") or isinstance(source_array, BaseSparseNDArray) or (
            hasattr(source_array, "tocsr") and hasattr(source_array, "nnz")):
        return _sparse_array(source_array, ctx, dtype, stype)
    if isinstance(source_array, NDArray):
        result = empty(source_array.shape, ctx or source_array.context,
                       dtype if dtype is not None else source_array._data.dtype)
        return source_array.copyto(result)
    if isinstance(source_array, np.ndarray):
        name = dtype_name(dtype) if dtype is not None else "float32"
        host = source_array
    else:
        try:
            host = np.asarray(source_array, dtype=None if dtype is None else numpy_dtype(dtype_name(dtype)))
        except (TypeError, ValueError) as exc:
            raise DTypeError(f"cannot make an NDArray from {type(source_array).__name__}: {exc}") from None
        if host.dtype == object:
            raise DTypeError(f"cannot make an NDArray from ragged or non-numeric data {source_array!r}")
        name = dtype_name(dtype) if dtype is not None else "float32"
    context = resolve_context(ctx)
    backend = backend_of(context)
    # np.asarray keeps a 0-d source 0-d (np.ascontiguousarray would make it (1,)), as MXNet does
    data = backend.from_host(np.asarray(host, dtype=numpy_dtype(name), order="C"))
    return NDArray._from_data(data, context, engine().new_var())


def _sparse_array(source: Any, ctx: Any, dtype: Any, stype: str | None) -> Any:
    from mxkit.ndarray.sparse_base import BaseSparseNDArray, check_stype
    from mxkit.ndarray.sparse_ops import array as sparse_array

    stype = check_stype(stype, "array") if stype is not None else None
    if isinstance(source, BaseSparseNDArray) or hasattr(source, "tocsr"):
        result = sparse_array(source, ctx=ctx, dtype=dtype)
    else:
        result = array(source, ctx=ctx, dtype=dtype)  # mx.nd.array's dtype rule, then the storage
    return result if stype is None or result.stype == stype else result.tostype(stype)


def zeros(shape: Any, ctx: Any = None, dtype: Any = None, stype: str | None = None, **kwargs: Any) -> NDArray:
    """An array of zeros; ``stype="row_sparse"`` or ``"csr"`` gives a sparse array with nothing stored."""
    if stype in ("row_sparse", "csr"):
        from mxkit.ndarray.sparse import zeros as sparse_zeros

        return sparse_zeros(stype, shape, ctx=ctx, dtype=dtype)
    check_dense_stype(stype, "zeros")
    return invoke_by_name("_zeros", shape=_shape_tuple(shape), dtype=_default_dtype(dtype), ctx=_ctx(ctx), **kwargs)


def ones(shape: Any, ctx: Any = None, dtype: Any = None, stype: str | None = None, **kwargs: Any) -> NDArray:
    """An array of ones (``stype`` may be MXNet's ``"default"``; arrays are dense)."""
    check_dense_stype(stype, "ones")
    return invoke_by_name("_ones", shape=_shape_tuple(shape), dtype=_default_dtype(dtype), ctx=_ctx(ctx), **kwargs)


def full(shape: Any, val: Any, ctx: Any = None, dtype: Any = None, out: NDArray | None = None) -> NDArray:
    """An array filled with ``val``."""
    return invoke_by_name("_full", shape=_shape_tuple(shape), value=float(val), dtype=_default_dtype(dtype),
                          ctx=_ctx(ctx), out=out)


def arange(start: float, stop: float | None = None, step: float = 1.0, repeat: int = 1,
           infer_range: bool = False, ctx: Any = None, dtype: Any = None) -> NDArray:
    """Evenly spaced values in ``[start, stop)``, each repeated ``repeat`` times (MXNet's ``arange``)."""
    return invoke_by_name("_arange", start=start, stop=stop, step=step, repeat=repeat,
                          dtype=_default_dtype(dtype), ctx=_ctx(ctx))


def eye(N: int, M: int = 0, k: int = 0, ctx: Any = None, dtype: Any = None) -> NDArray:
    """A 2-D array with ones on the ``k``-th diagonal."""
    return invoke_by_name("_eye", N=N, M=M, k=k, dtype=_default_dtype(dtype), ctx=_ctx(ctx))


def _ctx(ctx: Any) -> Any:
    return resolve_context(ctx)


def _axes(value: int | Sequence[int], ndim: int, what: str) -> list[int]:
    axes = [value] if isinstance(value, int) else list(value)
    normalized = []
    for axis in axes:
        if not -ndim <= axis < ndim:
            raise ShapeError(f"moveaxis: {what} axis {axis} is out of range for an array of {ndim} dimensions")
        normalized.append(axis % ndim)
    if len(set(normalized)) != len(normalized):
        raise ShapeError(f"moveaxis: repeated {what} axis in {value}")
    return normalized


def moveaxis(tensor: NDArray, source: int | Sequence[int], destination: int | Sequence[int]) -> NDArray:
    """Move axes ``source`` of ``tensor`` to positions ``destination`` (each an int or a
    sequence of ints, as numpy's ``moveaxis``); the other axes keep their order."""
    sources = _axes(source, tensor.ndim, "source")
    destinations = _axes(destination, tensor.ndim, "destination")
    if len(sources) != len(destinations):
        raise ShapeError(f"moveaxis: source {source} and destination {destination} must have the same number "
                         f"of axes")
    order = [axis for axis in range(tensor.ndim) if axis not in sources]
    for dest, src in sorted(zip(destinations, sources)):
        order.insert(dest, src)
    return invoke_by_name("transpose", tensor, axes=tuple(order))


def concatenate(arrays: list[NDArray], axis: int = 0, always_copy: bool = True) -> NDArray:
    """Join ``arrays`` along ``axis`` (MXNet's ``mx.nd.concatenate``)."""
    if not arrays:
        raise ShapeError("concatenate needs at least one array")
    if len(arrays) == 1 and not always_copy:
        return arrays[0]
    return invoke_by_name("Concat", *arrays, dim=axis, num_args=len(arrays))


def waitall() -> None:
    """Wait for every pending operation (MXNet's ``mx.nd.waitall``)."""
    from mxkit.ndarray.operator import refuse_inside_custom_op

    refuse_inside_custom_op("mx.nd.waitall()")
    engine().wait_all()


def reset_arrays(*arrays: Any, num_arrays: int | None = None) -> None:
    """Set every array of ``arrays`` to zero in place (MXNet's ``reset_arrays``, which Gluon's
    ``zero_grad`` uses to clear many gradients in one call). A sparse array is left holding
    no stored entries.

    Parameters
    ----------
    *arrays : NDArray or sparse array
    num_arrays : int, optional
        How many arrays are given (MXNet requires it; it is checked when given).
    """
    from mxkit.ndarray.params import ParamError
    from mxkit.ndarray.sparse_base import BaseSparseNDArray

    if num_arrays is not None and int(num_arrays) != len(arrays):
        raise ParamError(f"reset_arrays: num_arrays={num_arrays} but {len(arrays)} arrays were given; they must "
                         f"match")
    for index, target in enumerate(arrays):
        if not isinstance(target, NDArray | BaseSparseNDArray):
            raise ParamError(f"reset_arrays: argument {index} is a {type(target).__name__}, not an NDArray")
    for target in arrays:
        target[:] = 0


__all__ = ["arange", "array", "concatenate", "empty", "eye", "full", "moveaxis", "ones", "reset_arrays", "waitall",
           "zeros"]
