"""mxkit-ndarray: NDArray, the operator registry, random, save/load and autograd (``mx.nd``).

Every operator of the registry is a function here (``mx.nd.broadcast_add``,
``mx.nd.Reshape``...); the functions below are MXNet 1.x's Python-level helpers that
choose an operator from their arguments (``mx.nd.add(a, 1)`` uses ``_plus_scalar``).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

from mxkit.ndarray import _internal, autograd, contrib, image, linalg, random, sparse
from mxkit.ndarray.cached_op import CachedOp
from mxkit.ndarray.choosers import histogram, onehot_encode, split_v2
from mxkit.ndarray.creation import (
    arange,
    array,
    concatenate,
    empty,
    eye,
    full,
    moveaxis,
    ones,
    reset_arrays,
    waitall,
    zeros,
)
from mxkit.ndarray.dlpack import from_dlpack, from_numpy, to_dlpack_for_read, to_dlpack_for_write
from mxkit.ndarray.invoke import OperatorError
from mxkit.ndarray.ndarray import NDArray
from mxkit.ndarray.params import ParamError
from mxkit.ndarray.registry import OpDef, get_op, get_registry
from mxkit.ndarray.saveload import load, load_frombuffer, save
from mxkit.ndarray.sparse_base import is_sparse
from mxkit.ndarray.sparse_ops import cast_storage


def sparse_binary(kind: str, lhs: Any, rhs: Any) -> Any:
    """``mx.nd.add`` and its kin when an operand is sparse: MXNet's output storage for the four
    arithmetic operators, the dense operator on the dense values for the others."""
    from mxkit.ndarray import sparse_ops

    arithmetic = {"add": sparse_ops.add, "sub": sparse_ops.subtract, "mul": sparse_ops.multiply,
                  "div": sparse_ops.divide}
    if kind in arithmetic:
        return arithmetic[kind](lhs, rhs)
    dense = [x.tostype("default") if is_sparse(x) else x for x in (lhs, rhs)]
    return _binary_function(kind, kind)(*dense)


def _scalars(name: str, lhs: Any, rhs: Any, scalar_function: Callable[[Any, Any], Any]) -> Any:
    """Two Python numbers give a Python number, as in MXNet (``mx.nd.power(2.0, 3)`` is 8.0)."""
    numbers = (int, float, bool)
    if not (isinstance(lhs, numbers) and isinstance(rhs, numbers)):
        raise ParamError(f"mx.nd.{name} needs NDArrays or numbers, got {type(lhs).__name__} and "
                         f"{type(rhs).__name__}")
    return scalar_function(lhs, rhs)


def _compare(test: Callable[[Any, Any], bool]) -> Callable[[Any, Any], int]:
    return lambda x, y: 1 if test(x, y) else 0  # MXNet returns 1 or 0 for two scalars


_SCALAR_FUNCTIONS: dict[str, Callable[[Any, Any], Any]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
    "mod": operator.mod, "pow": operator.pow, "eq": _compare(operator.eq), "ne": _compare(operator.ne),
    "gt": _compare(operator.gt), "ge": _compare(operator.ge), "lt": _compare(operator.lt),
    "le": _compare(operator.le),
}


def _binary_function(name: str, kind: str):
    def function(lhs: Any, rhs: Any) -> Any:
        if is_sparse(lhs) or is_sparse(rhs):
            return sparse_binary(kind, lhs, rhs)
        if isinstance(lhs, NDArray):
            return lhs._binary(rhs, kind)
        if isinstance(rhs, NDArray):
            return rhs._binary(lhs, kind, reverse=True)
        return _scalars(name, lhs, rhs, _SCALAR_FUNCTIONS[kind])

    function.__name__ = name
    function.__doc__ = f"Elementwise {name} of two arrays (broadcasting) or an array and a scalar."
    return function


add = _binary_function("add", "add")
subtract = _binary_function("subtract", "sub")
multiply = _binary_function("multiply", "mul")
divide = _binary_function("divide", "div")
true_divide = divide
modulo = _binary_function("modulo", "mod")
power = _binary_function("power", "pow")
equal = _binary_function("equal", "eq")
not_equal = _binary_function("not_equal", "ne")
greater = _binary_function("greater", "gt")
greater_equal = _binary_function("greater_equal", "ge")
lesser = _binary_function("lesser", "lt")
lesser_equal = _binary_function("lesser_equal", "le")


def _extremum(name: str, broadcast_op: str, scalar_op: str, scalar_function: Callable[[Any, Any], Any]):
    def function(lhs: Any, rhs: Any) -> Any:
        from mxkit.ndarray.invoke import invoke_by_name

        if isinstance(lhs, NDArray) and isinstance(rhs, NDArray):
            return invoke_by_name(broadcast_op, lhs, rhs)
        if isinstance(lhs, NDArray):
            return invoke_by_name(scalar_op, lhs, scalar=float(rhs))
        if isinstance(rhs, NDArray):
            return invoke_by_name(scalar_op, rhs, scalar=float(lhs))
        return _scalars(name, lhs, rhs, scalar_function)

    function.__name__ = name
    function.__doc__ = f"Elementwise {name} of two arrays (broadcasting) or an array and a scalar."
    return function


maximum = _extremum("maximum", "broadcast_maximum", "_maximum_scalar", lambda x, y: x if x > y else y)
minimum = _extremum("minimum", "broadcast_minimum", "_minimum_scalar", lambda x, y: x if x < y else y)
hypot = _extremum("hypot", "broadcast_hypot", "_hypot_scalar", math.hypot)
# MXNet's logical functions: broadcasting for two arrays, 1 or 0 for two numbers
logical_and = _extremum("logical_and", "broadcast_logical_and", "_logical_and_scalar",
                        lambda x, y: 1 if x and y else 0)
logical_or = _extremum("logical_or", "broadcast_logical_or", "_logical_or_scalar", lambda x, y: 1 if x or y else 0)
logical_xor = _extremum("logical_xor", "broadcast_logical_xor", "_logical_xor_scalar",
                        lambda x, y: 1 if bool(x) != bool(y) else 0)


def _generate() -> None:
    from mxkit.ndarray import op_functions

    op_functions.generate(globals())


_generate()

__all__ = [
    "CachedOp", "NDArray", "OpDef", "OperatorError", "ParamError", "_internal",
    "add", "arange", "array", "autograd", "cast_storage", "concatenate", "contrib", "image",
    "divide", "empty", "equal", "eye", "from_dlpack", "from_numpy", "full", "get_op", "get_registry", "greater",
    "greater_equal", "histogram", "hypot", "lesser", "lesser_equal", "linalg", "load", "load_frombuffer",
    "logical_and", "logical_or", "logical_xor", "maximum",
    "minimum", "modulo", "moveaxis", "multiply", "not_equal", "onehot_encode", "ones", "power", "random", "save",
    "reset_arrays", "sparse", "split_v2", "subtract",
    "to_dlpack_for_read", "to_dlpack_for_write", "true_divide", "waitall", "zeros",
]
