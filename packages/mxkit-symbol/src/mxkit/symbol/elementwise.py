"""MXNet's module-level binary functions of ``mx.sym``: ``maximum``, ``minimum``, ``hypot``, ``pow``.

Each takes two symbols (broadcasting), a symbol and a number, or two numbers (a number back).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from numbers import Real
from typing import Any

from mxkit.symbol.op import create
from mxkit.symbol.symbol import Symbol, SymbolError


def _binary(name: str, broadcast_op: str, scalar_op: str, reverse_scalar_op: str,
            on_numbers: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def function(left: Any, right: Any) -> Any:
        for operand in (left, right):
            if not isinstance(operand, (Symbol, Real)):
                raise SymbolError(f"mx.sym.{name} takes symbols or numbers, got {type(left).__name__} and "
                                  f"{type(right).__name__}")
        if isinstance(left, Symbol) and isinstance(right, Symbol):
            return create(broadcast_op, left, right)
        if isinstance(left, Symbol):
            return create(scalar_op, left, scalar=float(right))
        if isinstance(right, Symbol):
            return create(reverse_scalar_op, right, scalar=float(left))
        return on_numbers(left, right)

    function.__name__ = name
    function.__doc__ = f"Elementwise {name} of two symbols (broadcasting), a symbol and a number, or two numbers."
    return function


maximum = _binary("maximum", "broadcast_maximum", "_maximum_scalar", "_maximum_scalar", max)
minimum = _binary("minimum", "broadcast_minimum", "_minimum_scalar", "_minimum_scalar", min)
hypot = _binary("hypot", "broadcast_hypot", "_hypot_scalar", "_hypot_scalar", math.hypot)
power = _binary("power", "broadcast_power", "_power_scalar", "_rpower_scalar", pow)
pow = power  # MXNet has both names

__all__ = ["hypot", "maximum", "minimum", "pow", "power"]
