"""``mx.nd.CachedOp(sym)``: a Symbol called on NDArrays like an operator.

The implementation binds the Symbol through the executor, which lives in mxkit-symbol, a
layer above this one: mxkit-symbol registers it here when it is imported (which it is
whenever a Symbol exists), so NDArray never imports Symbol.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mxkit.core.errors import MXKitError

_implementation: Callable[..., Any] | None = None


def register_cached_op(implementation: Callable[..., Any]) -> None:
    """Make ``implementation(sym, flags)`` what ``CachedOp(sym, flags)`` builds (called by
    mxkit-symbol)."""
    global _implementation
    _implementation = implementation


class CachedOp:
    """A Symbol as one callable operator on NDArrays (MXNet's ``mx.nd.CachedOp``).

    ``op = mx.nd.CachedOp(sym)`` then ``op(*arrays)`` with one array per
    ``sym.list_inputs()`` (arguments and auxiliary states, in that order) returns the
    outputs (one NDArray, or a list), ``out=`` writes them into given arrays, and inside
    ``autograd.record()`` the call is differentiable. See
    :class:`mxkit.symbol.cached_op.SymbolCachedOp`.

    Raises
    ------
    MXKitError
        When mxkit-symbol, which runs the graph, is not installed.
    """

    def __new__(cls, sym: Any, flags: Any = ()) -> Any:
        if _implementation is None:
            raise MXKitError("mx.nd.CachedOp runs a Symbol, which needs mxkit-symbol; install it with: "
                             "pip install mxkit-symbol")
        return _implementation(sym, flags)


__all__ = ["CachedOp", "register_cached_op"]
