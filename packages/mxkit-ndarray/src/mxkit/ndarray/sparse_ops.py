"""Operators on row_sparse and csr arrays, with MXNet 1.x's output storage types.

MXNet decides each operator's output storage from its inputs' (``FInferStorageType``);
the rules kept here are MXNet 1.9.1's:

- zero-preserving unary operators (``abs``, ``sqrt``, ``square``, ``sign``, ``relu``,
  ``sin``, ``tanh``, ``log1p``, ``expm1``, rounding...) and scaling by a number keep the
  input's storage and its structure; the others (``exp``, ``cos``...) give dense output;
- ``add``/``subtract`` of two arrays of one sparse storage keep it (the union of their
  structures), anything mixed with dense gives dense;
- ``multiply`` of two arrays of one sparse storage keeps it (the intersection); sparse
  times dense keeps the sparse operand's storage and structure, as does sparse divided by
  dense;
- ``dot(csr, dense)`` is dense, ``dot(csr.T, dense)`` row_sparse (the rows are the
  columns the csr array uses), ``dot(dense, csr)`` csr, ``dot(csr, row_sparse)`` dense;
  ``forward_stype`` overrides;
- anything else falls back to the dense operator on the dense values and gives dense
  output (MXNet's "storage fallback").

Values are computed on the host from the sparse parts where that is the cheaper form
(csr products, row gathers), otherwise with the dense operator. Under
``autograd.record()`` an operator whose dense operand is being differentiated runs as the
dense operator on the densified sparse operand, so gradients flow to that operand.
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np
from mxkit.core.errors import ShapeError
from mxkit.ndarray.csr import CSRNDArray, from_host_parts, parts_from_dense
from mxkit.ndarray.ndarray import NDArray
from mxkit.ndarray.sparse_base import BaseSparseNDArray, SparseStorageError, check_stype, is_number, is_sparse

#: unary operators with f(0) == 0: their output keeps the input's storage (MXNet 1.9.1)
ZERO_PRESERVING_UNARY = frozenset({
    "abs", "sign", "round", "rint", "ceil", "floor", "trunc", "fix", "square", "sqrt", "sin", "tan", "arcsin",
    "arctan", "degrees", "radians", "sinh", "tanh", "arcsinh", "arctanh", "expm1", "log1p", "relu", "negative",
    "_copy", "copy", "cbrt",
})


def _stype(value: Any) -> str:
    return value.stype if isinstance(value, (BaseSparseNDArray, NDArray)) else "default"


def _dense(value: Any) -> Any:
    """The dense NDArray of a sparse array (under ``autograd.record()`` the one autograd
    differentiates, if it has one); other values unchanged."""
    if not isinstance(value, BaseSparseNDArray):
        return value
    if value._ag_dense is not None and autograd_recording():
        return value._ag_dense
    return value.tostype("default")


def _tracking(*values: Any) -> bool:
    """Whether autograd is recording and one of ``values`` is being differentiated: the
    operator then runs densely on what autograd records."""
    if not autograd_recording():
        return False
    return any((isinstance(v, BaseSparseNDArray) and v._ag_dense is not None)
               or (isinstance(v, NDArray) and v._ag is not None) for v in values)


def _tracked(dense_result: Any, stype: str) -> Any:
    """``dense_result`` (recorded by autograd) in storage ``stype``, differentiated through it."""
    if stype == "default" or not isinstance(dense_result, NDArray):
        return dense_result
    result = cast_storage(dense_result, stype)
    result._ag_dense = dense_result
    return result


def _nd(name: str, *inputs: Any, **params: Any) -> Any:
    from mxkit.ndarray.invoke import invoke_by_name

    return invoke_by_name(name, *inputs, **params)


# ---- storage conversion ----------------------------------------------------------------------

def cast_storage(data: Any, stype: str) -> Any:
    """``data`` in storage ``stype`` (MXNet's ``cast_storage``): ``"default"`` (dense),
    ``"row_sparse"`` (the rows holding a nonzero) or ``"csr"`` (the nonzero values of a
    2-D array)."""
    from mxkit.ndarray.creation import array
    from mxkit.ndarray.csr import csr_matrix
    from mxkit.ndarray.sparse import RowSparseNDArray, from_dense

    stype = check_stype(stype, "cast_storage")
    if not isinstance(data, (NDArray, BaseSparseNDArray)):
        raise SparseStorageError(f"cast_storage takes an NDArray or a sparse array, got {type(data).__name__}")
    if stype == data.stype:
        return data.copy()
    if stype == "default":
        return array(data.asnumpy(), ctx=data.context, dtype=data.dtype)
    if stype == "csr":
        if data.ndim != 2:
            raise ShapeError(f"cast_storage to csr needs a 2-D array, got shape {data.shape}")
        return csr_matrix(data.asnumpy(), ctx=data.context, dtype=data.dtype)
    dense = data if isinstance(data, NDArray) else array(data.asnumpy(), ctx=data.context, dtype=data.dtype)
    result = from_dense(dense)
    assert isinstance(result, RowSparseNDArray)
    return result


def array(source_array: Any, ctx: Any = None, dtype: Any = None) -> Any:
    """A sparse array from a sparse source (MXNet's ``mx.nd.sparse.array``): a CSRNDArray or
    RowSparseNDArray is copied, a scipy sparse matrix becomes csr."""
    from mxkit.ndarray.csr import _is_scipy_sparse, csr_matrix
    from mxkit.ndarray.sparse import RowSparseNDArray, row_sparse_array

    if isinstance(source_array, RowSparseNDArray):
        return row_sparse_array(source_array, ctx=ctx, dtype=dtype)
    if isinstance(source_array, CSRNDArray) or _is_scipy_sparse(source_array):
        return csr_matrix(source_array, ctx=ctx, dtype=dtype)
    raise SparseStorageError(f"mx.nd.sparse.array takes a sparse array or a scipy sparse matrix, got "
                             f"{type(source_array).__name__}; use mx.nd.array for dense input")


def zeros_like(data: Any) -> Any:
    """All zeros of ``data``'s shape, dtype and storage."""
    from mxkit.ndarray.sparse import zeros

    return zeros(data.stype, data.shape, ctx=data.context, dtype=data.dtype)


# ---- structures: which positions a sparse result stores ----------------------------------

def _rows_of(value: Any) -> np.ndarray:
    return value.indices.asnumpy().astype(np.int64)


def _mask_of(value: CSRNDArray) -> np.ndarray:
    _, indices, indptr = value.host_parts()
    mask = np.zeros(value.shape, dtype=bool)
    if indices.size:
        mask[np.repeat(np.arange(value.shape[0]), np.diff(indptr)), indices] = True
    return mask


def _gather(dense: np.ndarray, stype: str, structure: np.ndarray, ctx: Any) -> Any:
    """The values of host ``dense`` at ``structure`` (row ids or a csr mask) in storage ``stype``."""
    from mxkit.ndarray.creation import array
    from mxkit.ndarray.sparse import RowSparseNDArray

    if stype == "row_sparse":
        rows = np.asarray(structure, dtype=np.int64)
        return RowSparseNDArray(array(dense[rows], ctx=ctx, dtype=dense.dtype), array(rows, ctx=ctx, dtype="int64"),
                                dense.shape)
    rows, cols = np.nonzero(structure)
    indptr = np.zeros(dense.shape[0] + 1, np.int64)
    np.cumsum(structure.sum(axis=1), out=indptr[1:])
    return from_host_parts(dense[rows, cols], cols.astype(np.int64), indptr, dense.shape, ctx=ctx)


def _structure(value: Any) -> np.ndarray:
    return _rows_of(value) if value.stype == "row_sparse" else _mask_of(value)


def _combine(a: np.ndarray, b: np.ndarray, stype: str, union: bool) -> np.ndarray:
    if stype == "row_sparse":
        return np.union1d(a, b) if union else np.intersect1d(a, b)
    return (a | b) if union else (a & b)


# ---- elementwise binary ----------------------------------------------------------------------

def _binary(kind: str, lhs: Any, rhs: Any, dense_op: str) -> Any:
    ctx = (lhs if isinstance(lhs, (NDArray, BaseSparseNDArray)) else rhs).context
    if is_number(rhs) or is_number(lhs):
        return _with_scalar(kind, lhs, rhs)
    ls, rs = _stype(lhs), _stype(rhs)
    if ls == rs == "default":
        return _nd(dense_op, lhs, rhs)
    result = _nd(dense_op, _dense(lhs), _dense(rhs))
    same_shape = tuple(lhs.shape) == tuple(rhs.shape)
    out_stype, structure = "default", None
    if ls == rs and same_shape:
        out_stype = ls
        structure = _combine(_structure(lhs), _structure(rhs), ls, union=kind in ("add", "sub"))
        if kind == "div":
            out_stype = "default"  # 0 / 0 is not 0: MXNet's elemwise_div of two sparse arrays is dense
    elif kind in ("mul", "div") and ls != "default" and rs == "default" and tuple(result.shape) == tuple(lhs.shape):
        out_stype, structure = ls, _structure(lhs)
    elif kind == "mul" and rs != "default" and ls == "default" and tuple(result.shape) == tuple(rhs.shape):
        out_stype, structure = rs, _structure(rhs)
    if out_stype == "default":
        return result
    if _tracking(lhs, rhs):
        return _tracked(result, out_stype)
    return _gather(result.asnumpy(), out_stype, structure, ctx)


def _with_scalar(kind: str, lhs: Any, rhs: Any) -> Any:
    array_first = not is_number(lhs)
    value, number = (lhs, rhs) if array_first else (rhs, lhs)
    keeps = (kind == "mul") or (kind == "div" and array_first)
    if isinstance(value, BaseSparseNDArray) and keeps and _tracking(value):
        dense = _dense(value)
        return _tracked(dense * number if kind == "mul" else dense / number, value.stype)
    if isinstance(value, BaseSparseNDArray) and keeps:
        data = value.data * number if kind == "mul" else value.data / number
        return value._with_data(data)
    dense = _dense(value)
    ops = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
           "div": lambda a, b: a / b}
    return ops[kind](dense, number) if array_first else ops[kind](number, dense)


def add(lhs: Any, rhs: Any) -> Any:
    """``lhs + rhs`` with MXNet's output storage (see the module docstring)."""
    return _binary("add", lhs, rhs, "broadcast_add")


def subtract(lhs: Any, rhs: Any) -> Any:
    """``lhs - rhs`` with MXNet's output storage."""
    return _binary("sub", lhs, rhs, "broadcast_sub")


def multiply(lhs: Any, rhs: Any) -> Any:
    """``lhs * rhs`` with MXNet's output storage."""
    return _binary("mul", lhs, rhs, "broadcast_mul")


def divide(lhs: Any, rhs: Any) -> Any:
    """``lhs / rhs`` with MXNet's output storage."""
    return _binary("div", lhs, rhs, "broadcast_div")


def _same_shape(name: str, lhs: Any, rhs: Any) -> None:
    if tuple(lhs.shape) != tuple(rhs.shape):
        raise ShapeError(f"{name} needs arrays of one shape, got {tuple(lhs.shape)} and {tuple(rhs.shape)}; use "
                         f"broadcast_{name.split('_')[1]} to broadcast")


def elemwise_add(lhs: Any, rhs: Any, out: Any = None) -> Any:
    """Elementwise sum of two arrays of one shape."""
    _same_shape("elemwise_add", lhs, rhs)
    return _write_out(add(lhs, rhs), out)


def elemwise_sub(lhs: Any, rhs: Any, out: Any = None) -> Any:
    """Elementwise difference of two arrays of one shape."""
    _same_shape("elemwise_sub", lhs, rhs)
    return _write_out(subtract(lhs, rhs), out)


def elemwise_mul(lhs: Any, rhs: Any, out: Any = None) -> Any:
    """Elementwise product of two arrays of one shape."""
    _same_shape("elemwise_mul", lhs, rhs)
    return _write_out(multiply(lhs, rhs), out)


def elemwise_div(lhs: Any, rhs: Any, out: Any = None) -> Any:
    """Elementwise quotient of two arrays of one shape."""
    _same_shape("elemwise_div", lhs, rhs)
    return _write_out(divide(lhs, rhs), out)


def add_n(*args: Any, out: Any = None) -> Any:
    """The sum of arrays of one shape: row_sparse when all are row_sparse (the union of
    their rows), else dense."""
    arrays = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)
    if not arrays:
        raise SparseStorageError("add_n needs at least one array")
    total = arrays[0]
    for other in arrays[1:]:
        _same_shape("elemwise_add", total, other)
        total = add(total, other)
    if len(arrays) == 1:
        total = total.copy()
    return _write_out(total, out)


# ---- unary -----------------------------------------------------------------------------------

def unary(name: str, data: Any, **params: Any) -> Any:
    """Operator ``name`` on ``data``: on the stored values when it maps 0 to 0 (the storage is
    kept), on the dense values otherwise."""
    if isinstance(data, BaseSparseNDArray) and name in ZERO_PRESERVING_UNARY:
        if _tracking(data):
            return _tracked(_nd(name, _dense(data), **params), data.stype)
        return data._with_data(_nd(name, data.data, **params))
    return _nd(name, _dense(data), **params)


def _unary_function(name: str) -> Any:
    def function(data: Any, out: Any = None, **params: Any) -> Any:
        return _write_out(unary(name, data, **params), out)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = (f"``{name}`` of every element; "
                        + ("keeps row_sparse/csr storage (it maps 0 to 0)." if name in ZERO_PRESERVING_UNARY
                           else "the output is dense (it does not map 0 to 0)."))
    return function


abs = _unary_function("abs")
sign = _unary_function("sign")
round = _unary_function("round")
rint = _unary_function("rint")
ceil = _unary_function("ceil")
floor = _unary_function("floor")
trunc = _unary_function("trunc")
fix = _unary_function("fix")
square = _unary_function("square")
sqrt = _unary_function("sqrt")
sin = _unary_function("sin")
tan = _unary_function("tan")
arcsin = _unary_function("arcsin")
arctan = _unary_function("arctan")
degrees = _unary_function("degrees")
radians = _unary_function("radians")
sinh = _unary_function("sinh")
tanh = _unary_function("tanh")
arcsinh = _unary_function("arcsinh")
arctanh = _unary_function("arctanh")
expm1 = _unary_function("expm1")
log1p = _unary_function("log1p")
relu = _unary_function("relu")
negative = _unary_function("negative")
exp = _unary_function("exp")
cos = _unary_function("cos")
arccos = _unary_function("arccos")


def clip(data: Any, a_min: float, a_max: float, out: Any = None) -> Any:
    """Values limited to ``[a_min, a_max]``; sparse storage is kept when 0 lies in the range
    (so the values not stored stay 0), else the output is dense."""
    if isinstance(data, BaseSparseNDArray) and a_min <= 0 <= a_max:
        return _write_out(data._with_data(_nd("clip", data.data, a_min=a_min, a_max=a_max)), out)
    return _write_out(_nd("clip", _dense(data), a_min=a_min, a_max=a_max), out)


# ---- reductions ------------------------------------------------------------------------------

def sum(data: Any, axis: Any = None, keepdims: bool = False, exclude: bool = False, out: Any = None) -> Any:
    """The sum along ``axis`` (dense output, as MXNet's sum of a csr array)."""
    params: dict[str, Any] = {"keepdims": keepdims, "exclude": exclude}
    if axis is not None:
        params["axis"] = axis
    return _write_out(_nd("sum", _dense(data), **params), out)


def mean(data: Any, axis: Any = None, keepdims: bool = False, exclude: bool = False, out: Any = None) -> Any:
    """The mean along ``axis`` (dense output)."""
    params: dict[str, Any] = {"keepdims": keepdims, "exclude": exclude}
    if axis is not None:
        params["axis"] = axis
    return _write_out(_nd("mean", _dense(data), **params), out)


def norm(data: Any, ord: int = 2, axis: Any = None, keepdims: bool = False, out: Any = None) -> Any:
    """The ``ord``-norm (dense output)."""
    params: dict[str, Any] = {"ord": ord, "keepdims": keepdims}
    if axis is not None:
        params["axis"] = axis
    return _write_out(_nd("norm", _dense(data), **params), out)


def square_sum(data: Any, axis: Any = None, keepdims: bool = False, out: Any = None) -> Any:
    """``sum(square(data), axis)`` (MXNet's ``_square_sum``). Of a row_sparse array along
    axis 1 with ``keepdims`` the result is row_sparse with the same rows; otherwise dense."""
    squared = unary("square", data)
    if isinstance(data, BaseSparseNDArray) and data.stype == "row_sparse" and keepdims and data.ndim == 2 \
            and axis in (1, -1, (1,), (-1,), [1], [-1]):
        from mxkit.ndarray.sparse import RowSparseNDArray

        rows = _nd("sum", squared.data, axis=1, keepdims=True)
        return _write_out(RowSparseNDArray(rows, data.indices.copy(), (data.shape[0], 1)), out)
    return _write_out(sum(squared, axis=axis, keepdims=keepdims), out)


# ---- structure -------------------------------------------------------------------------------

def slice(data: Any, begin: Any, end: Any, step: Any = (), out: Any = None) -> Any:
    """``data[begin:end]`` per axis (MXNet's ``slice``). A csr array stays csr: by rows with
    no copy of the structure, by rows and columns through the selected positions."""
    begin = begin if isinstance(begin, (tuple, list)) else (begin,)
    end = end if isinstance(end, (tuple, list)) else (end,)
    if not isinstance(data, CSRNDArray):
        return _write_out(_nd("slice", _dense(data), begin=begin, end=end, step=step), out)
    if step not in ((), None) and any(s not in (None, 1) for s in step):
        # a step other than 1: the dense slice (MXNet's storage fallback)
        return _write_out(_nd("slice", _dense(data), begin=begin, end=end, step=step), out)
    begin, end = tuple(begin), tuple(end)
    if len(begin) not in (1, 2) or len(end) != len(begin):
        raise ShapeError(f"slice of a 2-D csr array takes begin and end of length 1 or 2, got {begin} and {end}")
    row_range = builtins.slice(begin[0], end[0]).indices(data.shape[0])
    rows = data.slice_rows(row_range[0], builtins.max(row_range[0], row_range[1]))
    if len(begin) == 1 or (begin[1] in (None, 0) and end[1] in (None, data.shape[1])):
        return _write_out(rows, out)
    col_lo, col_hi, _ = builtins.slice(begin[1], end[1]).indices(data.shape[1])
    col_hi = builtins.max(col_lo, col_hi)
    values, indices, indptr = rows.host_parts()
    keep = (indices >= col_lo) & (indices < col_hi)
    row_of = np.repeat(np.arange(rows.shape[0]), np.diff(indptr))
    new_indptr = np.zeros(rows.shape[0] + 1, np.int64)
    np.cumsum(np.bincount(row_of[keep], minlength=rows.shape[0]), out=new_indptr[1:])
    result = from_host_parts(values[keep], indices[keep] - col_lo, new_indptr, (rows.shape[0], col_hi - col_lo),
                             ctx=data.context)
    return _write_out(result, out)


def quadratic(data: Any, a: float = 0.0, b: float = 0.0, c: float = 0.0) -> Any:
    """``a * x**2 + b * x + c`` (MXNet's ``contrib.quadratic``): sparse storage is kept when
    ``c == 0`` (0 maps to 0), dense otherwise."""
    if isinstance(data, BaseSparseNDArray) and c == 0 and not _tracking(data):
        return data._with_data(_nd("_contrib_quadratic", data.data, a=a, b=b, c=c))
    return _nd("_contrib_quadratic", _dense(data), a=a, b=b, c=c)


def where(condition: Any, x: Any, y: Any, out: Any = None) -> Any:
    """``x`` where ``condition`` is nonzero, else ``y`` (dense output)."""
    return _write_out(_nd("where", _dense(condition), _dense(x), _dense(y)), out)


# ---- dot -------------------------------------------------------------------------------------

def dot(lhs: Any, rhs: Any, transpose_a: bool = False, transpose_b: bool = False, forward_stype: Any = None,
        out: Any = None) -> Any:
    """Matrix product with MXNet 1.9.1's storage rules (see the module docstring):
    ``dot(csr, dense)`` dense, ``dot(csr, dense, transpose_a=True)`` row_sparse,
    ``dot(dense, csr)`` csr, ``dot(csr, row_sparse)`` dense; ``forward_stype`` converts the
    result to that storage."""
    forward_stype = None if forward_stype is None else check_stype(forward_stype, "dot forward_stype")
    ls, rs = _stype(lhs), _stype(rhs)
    if ls == rs == "default":
        result = _nd("dot", lhs, rhs, transpose_a=transpose_a, transpose_b=transpose_b)
        return _write_out(result if forward_stype in (None, "default") else cast_storage(result, forward_stype), out)
    differentiating = _tracking(lhs, rhs)
    if ls == "csr" and not transpose_b and not differentiating and _stype(rhs) in ("default", "row_sparse"):
        result = _csr_dot_dense(lhs, _dense(rhs), transpose_a)
    else:
        result = _nd("dot", _dense(lhs), _dense(rhs), transpose_a=transpose_a, transpose_b=transpose_b)
        if ls == "csr" and rs == "default" and transpose_a and not transpose_b:
            result = _tracked(result, "row_sparse") if differentiating else _rows_of_product(result, lhs)
        elif ls == "default" and rs == "csr" and not transpose_a and not differentiating:
            result = cast_storage(result, "csr")
    if forward_stype is not None and _stype(result) != forward_stype:
        result = _tracked(_dense(result), forward_stype) if differentiating else cast_storage(result, forward_stype)
    return _write_out(result, out)


def _csr_dot_dense(lhs: CSRNDArray, rhs: NDArray, transpose_a: bool) -> Any:
    """``lhs @ rhs`` (dense) or ``lhs.T @ rhs`` (row_sparse) from the csr parts."""
    from mxkit.ndarray.creation import array
    from mxkit.ndarray.sparse import RowSparseNDArray

    values, indices, indptr = lhs.host_parts()
    dense = rhs.asnumpy()
    vector = dense.ndim == 1
    dense2 = dense.reshape(dense.shape[0], -1)
    inner = lhs.shape[0] if transpose_a else lhs.shape[1]
    if dense2.shape[0] != inner:
        raise ShapeError(f"dot: a csr array of shape {lhs.shape}{' (transposed)' if transpose_a else ''} times an "
                         f"array of shape {tuple(rhs.shape)}: the inner dimensions {inner} and {dense2.shape[0]} "
                         f"differ")
    out_dtype = np.result_type(values.dtype, dense2.dtype)
    row_of = np.repeat(np.arange(lhs.shape[0]), np.diff(indptr))
    if not transpose_a:
        full = np.zeros((lhs.shape[0], dense2.shape[1]), dtype=out_dtype)
        np.add.at(full, row_of, values[:, None] * dense2[indices])
        shaped = full.reshape((lhs.shape[0],) if vector else (lhs.shape[0], *dense.shape[1:]))
        return array(shaped, ctx=lhs.context, dtype=out_dtype)
    used = np.unique(indices)
    full = np.zeros((lhs.shape[1], dense2.shape[1]), dtype=out_dtype)
    np.add.at(full, indices, values[:, None] * dense2[row_of])
    shape = (lhs.shape[1],) if vector else (lhs.shape[1], *dense.shape[1:])
    if vector:
        return array(full.reshape(shape), ctx=lhs.context, dtype=out_dtype)
    return RowSparseNDArray(array(full[used].reshape((used.size, *shape[1:])), ctx=lhs.context, dtype=out_dtype),
                            array(used, ctx=lhs.context, dtype="int64"), shape)


def _rows_of_product(result: NDArray, lhs: CSRNDArray) -> Any:
    # dot(csr.T, dense) stores the rows named by the csr array's columns
    if result.ndim < 2:
        return result
    return _gather(result.asnumpy(), "row_sparse", np.unique(_rows_of(lhs)), result.context)


def autograd_recording() -> bool:
    from mxkit.ndarray import autograd

    return bool(autograd.is_recording())


# ---- out= and the operator-call route ----------------------------------------------------------

def _write_out(result: Any, out: Any) -> Any:
    if out is None:
        return result
    if isinstance(out, BaseSparseNDArray):
        out._assign_from(result)
        return out
    if isinstance(out, NDArray):
        if tuple(out.shape) != tuple(result.shape):
            raise ShapeError(f"out= has shape {tuple(out.shape)}, the result has shape {tuple(result.shape)}")
        out[:] = _dense(result)
        return out
    raise SparseStorageError(f"out= must be an NDArray or a sparse array, got {type(out).__name__}")


#: operators whose sparse forms are written above, by the registry's operator name
_HANDLERS: dict[str, Any] = {
    "elemwise_add": lambda lhs, rhs: add(lhs, rhs),
    "_plus": lambda lhs, rhs: add(lhs, rhs),
    "_add": lambda lhs, rhs: add(lhs, rhs),
    "broadcast_add": lambda lhs, rhs: add(lhs, rhs),
    "broadcast_plus": lambda lhs, rhs: add(lhs, rhs),
    "elemwise_sub": lambda lhs, rhs: subtract(lhs, rhs),
    "_minus": lambda lhs, rhs: subtract(lhs, rhs),
    "_sub": lambda lhs, rhs: subtract(lhs, rhs),
    "broadcast_sub": lambda lhs, rhs: subtract(lhs, rhs),
    "broadcast_minus": lambda lhs, rhs: subtract(lhs, rhs),
    "elemwise_mul": lambda lhs, rhs: multiply(lhs, rhs),
    "_mul": lambda lhs, rhs: multiply(lhs, rhs),
    "broadcast_mul": lambda lhs, rhs: multiply(lhs, rhs),
    "elemwise_div": lambda lhs, rhs: divide(lhs, rhs),
    "_div": lambda lhs, rhs: divide(lhs, rhs),
    "broadcast_div": lambda lhs, rhs: divide(lhs, rhs),
    "_mul_scalar": lambda data, scalar=1.0, **_: multiply(data, scalar),
    "_div_scalar": lambda data, scalar=1.0, **_: divide(data, scalar),
    "dot": lambda lhs, rhs, **p: dot(lhs, rhs, **p),
    "cast_storage": lambda data, stype="default": cast_storage(data, stype),
    "_square_sum": lambda data, **p: square_sum(data, **p),
    "zeros_like": lambda data: zeros_like(data),
    "slice": lambda data, **p: slice(data, **p),
    "crop": lambda data, **p: slice(data, **p),
    "_contrib_quadratic": lambda data, a=0.0, b=0.0, c=0.0: quadratic(data, a, b, c),
    "_sparse_retain": lambda data, indices: _retain(data, indices),
    "add_n": lambda *arrays, **_: add_n(*arrays),
    "ElementWiseSum": lambda *arrays, **_: add_n(*arrays),
    "clip": lambda data, a_min, a_max: clip(data, a_min, a_max),
    "take": lambda a, indices, **p: take(a, indices, **p),
}


def _retain(data: Any, indices: Any) -> Any:
    from mxkit.ndarray.sparse import RowSparseNDArray

    if isinstance(data, RowSparseNDArray):
        return data.retain(indices)
    return cast_storage(_nd("_sparse_retain", _dense(data), _dense(indices)), "row_sparse")


def take(a: Any, indices: Any, axis: int = 0, mode: str = "clip") -> Any:
    """Rows ``indices`` of ``a``: a csr array stays csr along axis 0 (MXNet's ``take``), other
    inputs give the dense ``take``."""
    result = _nd("take", _dense(a), _dense(indices), axis=axis, mode=mode)
    if isinstance(a, CSRNDArray) and axis == 0 and not _tracking(a, indices):
        return cast_storage(result, "csr")
    return result


def apply_operator(op_name: str, inputs: list[Any], params: dict[str, Any], out: Any = None) -> Any:
    """Operator ``op_name`` on inputs among which some are sparse: its sparse form when it
    has one, else the dense operator on the dense values (storage fallback)."""
    handler = _HANDLERS.get(op_name)
    from mxkit.ndarray.ops.optimizer_update import UPDATE_OPS

    if op_name in UPDATE_OPS:
        from mxkit.ndarray.sparse_update import sparse_update

        # an optimizer update: the weight (and states) are updated in place, lazily for row_sparse gradients
        op = UPDATE_OPS[op_name]
        weight, grad, *states = inputs
        sparse_update(op, weight, grad, states, op.parse_params(params))
        target = out[0] if isinstance(out, (list, tuple)) else out
        if target is not None and target is not weight:
            _write_out(weight, target)
        return target if target is not None else weight
    if op_name in ZERO_PRESERVING_UNARY and len(inputs) == 1:
        result = unary(op_name, inputs[0], **params)
    elif handler is not None:
        result = handler(*inputs, **params)
    else:
        from mxkit.ndarray.invoke import invoke_by_name

        result = invoke_by_name(op_name, *[_dense(x) for x in inputs], **params)
    if out is None:
        return result
    if isinstance(result, (list, tuple)):
        for target, value in zip(out if isinstance(out, (list, tuple)) else [out], result):
            _write_out(value, target)
        return out
    return _write_out(result, out[0] if isinstance(out, (list, tuple)) and len(out) == 1 else out)


__all__ = ["ZERO_PRESERVING_UNARY", "abs", "add", "add_n", "apply_operator", "arccos", "arcsin", "arcsinh", "arctan",
           "arctanh", "array", "cast_storage", "ceil", "clip", "cos", "degrees", "divide", "dot", "elemwise_add",
           "elemwise_div", "elemwise_mul", "elemwise_sub", "exp", "expm1", "fix", "floor", "is_sparse", "log1p",
           "mean", "multiply", "negative", "norm", "parts_from_dense", "radians", "relu", "rint", "round", "sign",
           "sin", "sinh", "slice", "sqrt", "square", "square_sum", "subtract", "sum", "tan", "tanh", "trunc",
           "unary", "where", "zeros_like"]
