"""``mx.sym.contrib``: the ``_contrib_*`` operators under their short names (``mx.sym.contrib.Foo``)."""

from __future__ import annotations

from typing import Any

from mxkit.symbol.control_flow import foreach

__all__ = ["foreach"]


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    from mxkit.symbol.op import operator_function

    function = operator_function(f"_contrib_{name}")
    if function is None:
        raise AttributeError(f"module 'mxkit.symbol.contrib' has no attribute {name!r} (no operator "
                             f"_contrib_{name} is registered)")
    globals()[name] = function
    return function
