"""``mx.nd.linalg``: the ``_linalg_*`` operators under their short names (``mx.nd.linalg.gemm2``)."""

from __future__ import annotations

from mxkit.ndarray.op_functions import make_function
from mxkit.ndarray.registry import get_registry


def _generate() -> list[str]:
    registry = get_registry()
    names = []
    for name in registry.names():
        if name.startswith("_linalg_"):
            short = name[len("_linalg_"):]
            globals()[short] = make_function(name, registry.get(name))
            names.append(short)
    return names


__all__ = _generate()
