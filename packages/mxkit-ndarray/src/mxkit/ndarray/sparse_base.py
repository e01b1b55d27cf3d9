"""What row_sparse and csr arrays share (MXNet's ``BaseSparseNDArray``): the description
(shape, dtype, device), conversions, arithmetic that dispatches on storage types, and the
error class for malformed sparse input.

A sparse array is not an :class:`~mxkit.ndarray.ndarray.NDArray`: it holds its parts (values
and index arrays) as NDArrays. Operators on sparse inputs go through
:mod:`mxkit.ndarray.sparse_ops`, which computes MXNet's output storage type.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from mxkit.core.errors import DTypeError, MXKitError

#: MXNet's storage type names
STYPES = ("default", "row_sparse", "csr")


class SparseStorageError(MXKitError, ValueError):
    """A sparse array that is malformed, or an operation its storage type does not support."""


def check_stype(stype: Any, what: str) -> str:
    """``stype`` when it is one of MXNet's storage type names (``None`` means ``"default"``)."""
    if stype is None:
        return "default"
    if stype not in STYPES:
        raise DTypeError(f"{what}: unknown storage type {stype!r}; MXNet's are 'default', 'row_sparse' and 'csr'")
    return str(stype)


def is_number(value: Any) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def host_of(value: Any) -> np.ndarray:
    """A numpy array of an NDArray, a sparse array (its dense values) or array-like input."""
    if hasattr(value, "asnumpy"):
        return value.asnumpy()
    return np.asarray(value)


class BaseSparseNDArray:
    """The base of :class:`~mxkit.ndarray.sparse.RowSparseNDArray` and
    :class:`~mxkit.ndarray.csr.CSRNDArray`: a logical ``shape`` whose nonzero part is
    held in NDArrays (``data`` plus index arrays)."""

    stype = "default"
    __array_priority__ = 1000.0
    _shape: tuple[int, ...]
    #: the dense NDArray autograd differentiates for this array (a variable's, or the recorded
    #: result this array was made from); None outside autograd
    _ag_dense: Any = None

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
    def data(self) -> Any:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    @property
    def dtype(self) -> Any:
        """The dtype of the values."""
        return self.data.dtype

    @property
    def context(self) -> Any:
        """The device of the values."""
        return self.data.context

    ctx = context

    def _parts(self) -> list[Any]:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def __repr__(self) -> str:
        shape = "x".join(str(d) for d in self._shape)
        return f"\n<{type(self).__name__} {shape} @{self.context}>"

    def __len__(self) -> int:
        return self._shape[0]

    def __bool__(self) -> bool:
        raise SparseStorageError(f"the truth value of a {type(self).__name__} is ambiguous; compare its "
                                 f".asnumpy() instead")

    # ---- conversion ---------------------------------------------------------------------

    def tostype(self, stype: str) -> Any:
        """A copy in storage type ``stype`` (``"default"``, ``"row_sparse"`` or ``"csr"``)."""
        from mxkit.ndarray.sparse_ops import cast_storage

        return cast_storage(self, stype)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        # numpy functions take sparse arrays as their dense values, as they take NDArrays
        dense = self.asnumpy()
        return dense if dtype is None else dense.astype(dtype)

    def asnumpy(self) -> np.ndarray:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    @property
    def T(self) -> Any:
        """The transpose (dense: MXNet's storage fallback for transpose)."""
        return self.tostype("default").T

    def wait_to_read(self) -> None:
        for part in self._parts():
            part.wait_to_read()

    def as_in_context(self, context: Any) -> Any:
        """This array on ``context`` (itself when it is there already)."""
        return self if context == self.context else self.copyto(context)

    def as_nd_ndarray(self) -> Any:
        """The dense NDArray of the same values (MXNet 1.x's name)."""
        return self.tostype("default")

    def check_format(self, full_check: bool = True) -> None:
        """Raise :class:`SparseStorageError` when the parts are inconsistent (MXNet's
        ``check_format``; the full check also looks at every index)."""
        self._validate(full_check)

    def _validate(self, full_check: bool) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    # ---- autograd: through the dense values ------------------------------------------------

    def autograd_shadow(self, create: bool = False) -> Any:
        """The dense NDArray autograd differentiates in place of this array (made, holding the
        same values, when ``create`` and there is none); None when there is none."""
        if self._ag_dense is None and create:
            self._ag_dense = self.tostype("default")
        return self._ag_dense

    def attach_grad(self, grad_req: str = "write", stype: str | None = None) -> None:
        """Mark this array as a variable for autograd; :attr:`grad` has storage ``stype``
        (default: this array's, as in MXNet)."""
        from mxkit.ndarray.autograd import mark_variables
        from mxkit.ndarray.sparse import zeros

        stype = self.stype if stype is None else check_stype(stype, "attach_grad")
        mark_variables([self], [zeros(stype, self.shape, ctx=self.context, dtype=self.dtype)], grad_req)

    @property
    def grad(self) -> Any:
        """The gradient made by :meth:`attach_grad` (None before)."""
        return None if self._ag_dense is None else self._ag_dense.grad

    def backward(self, out_grad: Any = None, retain_graph: bool = False, train_mode: bool = True) -> None:
        """Differentiate this array (computed under ``autograd.record()``)."""
        from mxkit.ndarray.autograd import backward

        backward([self], None if out_grad is None else [out_grad], retain_graph, train_mode)

    def detach(self) -> Any:
        """The same values outside the autograd graph."""
        return self._with_data(self.data)

    # ---- arithmetic: dispatched on the storage types, as MXNet's ----------------------------

    def __add__(self, other: Any) -> Any:
        from mxkit.ndarray.sparse_ops import add

        return add(self, other)

    def __radd__(self, other: Any) -> Any:
        from mxkit.ndarray.sparse_ops import add

        return add(other, self)

    def __sub__(self, other: Any) -> Any:
        from mxkit.ndarray.sparse_ops import subtract

        return subtract(self, other)

    def __rsub__(self, other: Any) -> Any:
        from mxkit.ndarray.sparse_ops import subtract

        return subtract(other, self)

    def __mul__(self, other: Any) -> Any:
        from mxkit.ndarray.sparse_ops import multiply

        return multiply(self, other)

    def __rmul__(self, other: Any) -> Any:
        from mxkit.ndarray.sparse_ops import multiply

        return multiply(other, self)

    def __truediv__(self, other: Any) -> Any:
        from mxkit.ndarray.sparse_ops import divide

        return divide(self, other)

    def __rtruediv__(self, other: Any) -> Any:
        from mxkit.ndarray.sparse_ops import divide

        return divide(other, self)

    __div__ = __truediv__

    def __neg__(self) -> Any:
        from mxkit.ndarray.sparse_ops import multiply

        return multiply(self, -1.0)

    # comparisons, powers and remainders: the dense operator; with a number, the storage is
    # kept where the operation maps the unstored zeros to 0 (MXNet's rule for scalar operators)
    def _dense_binary(self, other: Any, operation: Any) -> Any:
        dense_other = other.tostype("default") if isinstance(other, BaseSparseNDArray) else other
        result = operation(self.tostype("default"), dense_other)
        if is_number(other):
            with np.errstate(all="ignore"):
                zero_maps_to_zero = not bool(operation(np.zeros((), dtype=self.dtype), other))
            if zero_maps_to_zero:
                return result.tostype(self.stype)
        return result

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return self._dense_binary(other, lambda a, b: a == b)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return self._dense_binary(other, lambda a, b: a != b)

    def __gt__(self, other: Any) -> Any:
        return self._dense_binary(other, lambda a, b: a > b)

    def __ge__(self, other: Any) -> Any:
        return self._dense_binary(other, lambda a, b: a >= b)

    def __lt__(self, other: Any) -> Any:
        return self._dense_binary(other, lambda a, b: a < b)

    def __le__(self, other: Any) -> Any:
        return self._dense_binary(other, lambda a, b: a <= b)

    def __pow__(self, other: Any) -> Any:
        return self._dense_binary(other, lambda a, b: a ** b)

    def __rpow__(self, other: Any) -> Any:
        return self._dense_binary(other, lambda a, b: b ** a)

    def __mod__(self, other: Any) -> Any:
        return self._dense_binary(other, lambda a, b: a % b)

    __hash__ = object.__hash__  # identity, as NDArray's

    def _inplace(self, result: Any, what: str) -> Any:
        if getattr(result, "stype", "default") != self.stype:
            raise SparseStorageError(f"{what} in place would turn this {self.stype} array into "
                                     f"{result.stype} storage; write x = x {what[-2]} y instead")
        self._assign_from(result)
        return self

    def __iadd__(self, other: Any) -> Any:
        return self._inplace(self + other, "x +=")

    def __isub__(self, other: Any) -> Any:
        return self._inplace(self - other, "x -=")

    def __imul__(self, other: Any) -> Any:
        return self._inplace(self * other, "x *=")

    def __itruediv__(self, other: Any) -> Any:
        return self._inplace(self / other, "x /=")

    def _assign_from(self, other: Any) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def astype(self, dtype: Any, copy: bool = True) -> Any:
        """The same structure with values cast to ``dtype``."""
        if not copy and np.dtype(dtype) == np.dtype(self.dtype):
            return self
        return self._with_data(self.data.astype(dtype))

    def _with_data(self, data: Any) -> Any:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def reshape(self, *shape: Any, **kwargs: Any) -> Any:
        raise SparseStorageError(f"reshape is not supported for {self.stype} storage (as in MXNet); call "
                                 f".tostype('default') first")

    def __getattr__(self, name: str) -> Any:
        # an NDArray method that is an operator (x.sum(), x.sqrt()...) runs as that operator on
        # the sparse array, with MXNet's output storage; other NDArray methods say how to reach them
        from mxkit.ndarray.ndarray import NDArray
        from mxkit.ndarray.registry import get_registry

        if name.startswith("_") or not hasattr(NDArray, name):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")
        if name in get_registry():
            def method(*args: Any, **kwargs: Any) -> Any:
                from mxkit.ndarray import op_functions

                return op_functions.call(name, (self, *args), kwargs)

            method.__name__ = name
            return method
        raise SparseStorageError(f"{type(self).__name__}.{name} is not provided for {self.stype} storage; "
                                 f"call .tostype('default') first for {name}")


def is_sparse(value: Any) -> bool:
    """Whether ``value`` is a row_sparse or csr array."""
    return isinstance(value, BaseSparseNDArray)


__all__ = ["STYPES", "BaseSparseNDArray", "SparseStorageError", "check_stype", "host_of", "is_number",
           "is_sparse"]
