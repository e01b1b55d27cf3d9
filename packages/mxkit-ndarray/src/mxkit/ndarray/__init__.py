"""mxkit-ndarray: NDArray, the operator registry, random, save/load and autograd (``mx.nd``).

Every operator of the registry is a function here (``mx.nd.broadcast_add``,
``mx.nd.Reshape``...); the functions below are MXNet 1.x's Python-level helpers that
choose an operator from their arguments (``mx.nd.add(a, 1)`` uses ``_plus_scalar``).
"""

from __future__ import annotations

from typing import Any

from mxkit.ndarray import _internal, autograd, contrib, linalg, random
from mxkit.ndarray.choosers import histogram, onehot_encode, split_v2
from mxkit.ndarray.creation import arange, array, concatenate, empty, eye, full, moveaxis, ones, waitall, zeros
from mxkit.ndarray.dlpack import from_dlpack, to_dlpack_for_read, to_dlpack_for_write
from mxkit.ndarray.invoke import OperatorError
from mxkit.ndarray.ndarray import NDArray
from mxkit.ndarray.params import ParamError
from mxkit.ndarray.registry import OpDef, get_op, get_registry
from mxkit.ndarray.saveload import load, load_frombuffer, save


def _binary_function(name: str, kind: str):
    def function(lhs: Any, rhs: Any) -> Any:
        if isinstance(lhs, NDArray):
            return lhs._binary(rhs, kind)
        if isinstance(rhs, NDArray):
            return rhs._binary(lhs, kind, reverse=True)
        raise ParamError(f"mx.nd.{name} needs at least one NDArray operand, got {type(lhs).__name__} and "
                         f"{type(rhs).__name__}")

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


def _extremum(name: str, broadcast_op: str, scalar_op: str):
    def function(lhs: Any, rhs: Any) -> Any:
        from mxkit.ndarray.invoke import invoke_by_name

        if isinstance(lhs, NDArray) and isinstance(rhs, NDArray):
            return invoke_by_name(broadcast_op, lhs, rhs)
        if isinstance(lhs, NDArray):
            return invoke_by_name(scalar_op, lhs, scalar=float(rhs))
        if isinstance(rhs, NDArray):
            return invoke_by_name(scalar_op, rhs, scalar=float(lhs))
        raise ParamError(f"mx.nd.{name} needs at least one NDArray operand")

    function.__name__ = name
    function.__doc__ = f"Elementwise {name} of two arrays (broadcasting) or an array and a scalar."
    return function


maximum = _extremum("maximum", "broadcast_maximum", "_maximum_scalar")
minimum = _extremum("minimum", "broadcast_minimum", "_minimum_scalar")
hypot = _extremum("hypot", "broadcast_hypot", "_hypot_scalar")


def _generate() -> None:
    from mxkit.ndarray import op_functions

    op_functions.generate(globals())


_generate()

__all__ = [
    "NDArray", "OpDef", "OperatorError", "ParamError", "_internal",
    "add", "arange", "array", "autograd", "concatenate", "contrib",
    "divide", "empty", "equal", "eye", "from_dlpack", "full", "get_op", "get_registry", "greater",
    "greater_equal", "histogram", "hypot", "lesser", "lesser_equal", "linalg", "load", "load_frombuffer", "maximum",
    "minimum",
    "modulo", "moveaxis", "multiply", "not_equal", "onehot_encode",
    "ones", "power", "random", "save", "split_v2", "subtract",
    "to_dlpack_for_read", "to_dlpack_for_write", "true_divide", "waitall", "zeros",
]
