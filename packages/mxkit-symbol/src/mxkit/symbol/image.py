"""``mx.sym.image``: the ``_image_*`` operators under their short names (``mx.sym.image.to_tensor``)."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    from mxkit.symbol.op import operator_function

    function = operator_function(f"_image_{name}")
    if function is None:
        raise AttributeError(f"module 'mxkit.symbol.image' has no attribute {name!r} (no operator "
                             f"_image_{name} is registered)")
    globals()[name] = function
    return function
