"""``mx.sym.linalg``: the ``_linalg_*`` operators under their short names (``mx.sym.linalg.gemm2``)."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    from mxkit.symbol.op import operator_function

    function = operator_function(f"_linalg_{name}")
    if function is None:
        raise AttributeError(f"module 'mxkit.symbol.linalg' has no attribute {name!r} (no operator "
                             f"_linalg_{name} is registered)")
    globals()[name] = function
    return function
