"""``mx.contrib``: MXNet's contrib namespace, each submodule imported on first use.

``mx.contrib.caffe`` (the Caffe converter), ``mx.contrib.nd`` / ``mx.contrib.sym`` (the
contrib operators of NDArray and Symbol), ``mx.contrib.amp`` (MXNet's import path only:
mxkit has no automatic mixed precision, and its functions raise an error saying so),
``mx.contrib.autograd`` (MXNet's first autograd interface: ``train_section``, ``mark_variables``,
``compute_gradient``, ``grad_and_loss``).
MXNet's ``onnx``, ``quantization``, ``tensorrt`` and ``text`` are not provided (see the
migration guide). A component adds a submodule with one line in
:data:`SUBMODULES`; a missing component raises
:class:`~mxkit.core.errors.MissingComponentError` saying what to install.
"""

from __future__ import annotations

import importlib
from typing import Any

from mxkit.core.errors import MissingComponentError

# short name -> (module, distribution, install line)
SUBMODULES: dict[str, tuple[str, str, str]] = {
    "caffe": ("mxkit.caffe", "mxkit-caffe", "pip install mxkit-caffe"),
    "nd": ("mxkit.ndarray.contrib", "mxkit-ndarray", "pip install mxkit-ndarray mxkit-cpu"),
    "ndarray": ("mxkit.ndarray.contrib", "mxkit-ndarray", "pip install mxkit-ndarray mxkit-cpu"),
    "sym": ("mxkit.symbol.contrib", "mxkit-symbol", "pip install mxkit-symbol"),
    "symbol": ("mxkit.symbol.contrib", "mxkit-symbol", "pip install mxkit-symbol"),
    "amp": ("mxkit.mx.contrib.amp", "mxkit", "pip install mxkit"),
    "autograd": ("mxkit.mx.contrib.autograd", "mxkit", "pip install mxkit"),
}


def __getattr__(name: str) -> Any:
    if name not in SUBMODULES:
        raise AttributeError(f"module 'mxkit.mx.contrib' has no attribute {name!r}; the names are: "
                             f"{', '.join(sorted(SUBMODULES))}")
    module_name, distribution, install = SUBMODULES[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if not (module_name == missing or module_name.startswith(missing + ".")):
            raise  # a bug inside the component, not a missing component
        raise MissingComponentError(f"mx.contrib.{name} needs the {distribution} component, which is not "
                                    f"installed; install it with: {install}") from None
    globals()[name] = module  # later lookups skip __getattr__
    return module


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(SUBMODULES))


__all__ = sorted(SUBMODULES)
