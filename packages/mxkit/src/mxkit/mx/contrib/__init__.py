"""``mx.contrib``: MXNet's contributed operators and tools, under MXNet's paths.

``mx.contrib.nd``/``mx.contrib.ndarray`` and ``mx.contrib.sym``/``mx.contrib.symbol`` are the
``contrib`` operator namespaces of NDArray and Symbol (``mx.nd.contrib``, ``mx.sym.contrib``).
Names are imported on first use, as in the facade. ``mx.contrib.amp`` keeps MXNet's import
path, but mxkit has no automatic mixed precision: its functions raise an error saying so.
MXNet's ``onnx``, ``quantization``, ``tensorrt`` and ``text`` are not provided (see the
migration guide).
"""

from __future__ import annotations

import importlib
from typing import Any

#: short name -> module
CONTRIB_MODULES: dict[str, str] = {
    "nd": "mxkit.ndarray.contrib",
    "ndarray": "mxkit.ndarray.contrib",
    "sym": "mxkit.symbol.contrib",
    "symbol": "mxkit.symbol.contrib",
    "amp": "mxkit.mx.contrib.amp",
}


def __getattr__(name: str) -> Any:
    if name not in CONTRIB_MODULES:
        raise AttributeError(f"module 'mxkit.mx.contrib' has no attribute {name!r}; the names are: "
                             f"{', '.join(sorted(CONTRIB_MODULES))}")
    module = importlib.import_module(CONTRIB_MODULES[name])
    globals()[name] = module
    return module


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(CONTRIB_MODULES))
