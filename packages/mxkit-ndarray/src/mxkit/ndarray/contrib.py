"""``mx.nd.contrib``: the ``_contrib_*`` operators under their short names (``mx.nd.contrib.BilinearResize2D``)."""

from __future__ import annotations

from mxkit.ndarray.op_functions import make_function
from mxkit.ndarray.registry import get_registry


def _generate() -> list[str]:
    registry = get_registry()
    names = []
    for name in registry.names(include_aliases=True):  # aliases too: CTCLoss is also _contrib_CTCLoss
        if name.startswith("_contrib_"):
            short = name[len("_contrib_"):]
            globals()[short] = make_function(name, registry.get(name))
            names.append(short)
    return names


__all__ = _generate()
