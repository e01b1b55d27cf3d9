"""The kernels this plugin registers for backend ``numpy``, each in front of the kernel it replaces.

A oneDNN kernel serves the cases it covers (float32, 1-D and 2-D windows...) and hands every
other call to the kernel that was registered before it (mxkit-cpu's) or, without one, to the
operator's generic kernel. When oneDNN cannot be loaded nothing is registered at all.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

BACKEND = "numpy"

#: operator name -> the module attribute of its oneDNN kernel, ``(module, function)``
OVERRIDES = {
    "Convolution": ("conv", "convolution"),
    "_backward_Convolution": ("conv", "convolution_backward"),
    "Pooling": ("pool", "pooling"),
    "_backward_Pooling": ("pool", "pooling_backward"),
    "BatchNorm": ("norm", "batchnorm"),
    "_backward_BatchNorm": ("norm", "batchnorm_backward"),
    "FullyConnected": ("dense", "fully_connected"),
    "_backward_FullyConnected": ("dense", "fully_connected_backward"),
    "Activation": ("eltwise", "activation"),
    "_backward_relu": ("eltwise", "relu_backward"),
    "_backward_sigmoid": ("eltwise", "sigmoid_backward"),
    "_backward_tanh": ("eltwise", "tanh_backward"),
    "softmax": ("softmax", "softmax"),
    "_backward_softmax": ("softmax", "softmax_backward"),
    "log_softmax": ("softmax", "log_softmax"),
    "_backward_log_softmax": ("softmax", "log_softmax_backward"),
}

Kernel = Callable[[Any, list, list, dict], None]


class Unhandled(Exception):
    """Raised by a oneDNN kernel for a call it does not cover (the replaced kernel serves it)."""


def with_fallback(kernel: Callable[..., None], fallback: Kernel) -> Kernel:
    """``kernel``, handing the calls it raises :class:`Unhandled` for to ``fallback``.

    ``kernel(inputs, outputs, params, replaced)`` also gets ``replaced(inputs, outputs)``, the
    replaced kernel bound to this call (keywords change its parameters), as one more candidate to time (see
    :meth:`mxkit_onednn.program.ProgramCache.run`)."""

    @functools.wraps(kernel)
    def serve(xp: Any, inputs: list, outputs: list, params: dict) -> None:
        try:
            kernel(inputs, outputs, params, lambda ins, outs, **changed: fallback(xp, ins, outs, {**params, **changed}))
        except Unhandled:
            fallback(xp, inputs, outputs, params)

    serve.replaced = fallback  # type: ignore[attr-defined]
    return serve


def register(registry: Any) -> list[str]:
    """Register the oneDNN kernels (none when oneDNN cannot be loaded); the names registered."""
    import importlib

    from mxkit_onednn.library import load

    if load() is None:
        return []
    registered = []
    for name, (module_name, function_name) in OVERRIDES.items():
        op = registry.get(name)
        fallback = op.kernels.get(BACKEND) or op.kernel
        kernel = getattr(importlib.import_module(f"mxkit_onednn.{module_name}"), function_name)
        registry.register_kernel(name, backend=BACKEND, kernel=with_fallback(kernel, fallback))
        registered.append(name)
    return registered


__all__ = ["BACKEND", "OVERRIDES", "Unhandled", "register", "with_fallback"]
