"""``mx.nd._internal``: every operator under its registered name, internal ones included.

MXNet code reaches the underscore operators this way (``mx.nd._internal._plus_scalar``,
``mx.nd._internal._mul``); public names resolve too.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    from mxkit.ndarray.op_functions import make_function
    from mxkit.ndarray.registry import get_registry

    registry = get_registry()
    if name not in registry:
        raise AttributeError(f"module 'mxkit.ndarray._internal' has no attribute {name!r} (no operator of that "
                             f"name is registered)")
    function = make_function(name, registry.get(name))
    globals()[name] = function
    return function
