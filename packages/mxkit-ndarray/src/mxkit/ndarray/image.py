"""``mx.nd.image``: MXNet's image operators (``_image_*``) under their short names
(``mx.nd.image.to_tensor``, ``normalize``, ``crop``, ``flip_left_right``...)."""

from __future__ import annotations

from mxkit.ndarray.op_functions import make_function
from mxkit.ndarray.registry import get_registry

_PREFIX = "_image_"


def _generate() -> list[str]:
    registry = get_registry()
    names = []
    for name in registry.names(include_aliases=True):
        if name.startswith(_PREFIX):
            short = name[len(_PREFIX):]
            globals()[short] = make_function(name, registry.get(name))
            names.append(short)
    return sorted(names)


__all__ = _generate()
