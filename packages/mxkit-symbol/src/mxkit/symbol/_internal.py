"""``mx.sym._internal``: every operator under its registered name, internal ones included.

MXNet code reaches the underscore operators this way (``mx.sym._internal._plus_scalar``,
``mx.sym._internal._mul``); the public ones are found too, so a name never depends on
which namespace MXNet happened to file it under.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    from mxkit.symbol.op import operator_function

    function = operator_function(name)
    if function is None:
        raise AttributeError(f"module 'mxkit.symbol._internal' has no attribute {name!r} (no operator of that "
                             f"name is registered)")
    globals()[name] = function
    return function
