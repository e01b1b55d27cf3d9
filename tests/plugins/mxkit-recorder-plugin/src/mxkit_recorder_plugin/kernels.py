"""A kernel override: ``relu`` on the ``recorder`` device runs this kernel, not the generic one.

It is registered through the ``mxkit_kernels`` hook (see :mod:`mxkit_recorder_plugin.plugin`)
and uses only :mod:`mxkit.ndarray.kernels`, the published surface for kernels.
"""

from __future__ import annotations

from typing import Any

#: the input shape of every call of the override, for tests to inspect
RELU_CALLS: list[tuple[int, ...]] = []


def relu(xp: Any, inputs: list, outputs: list, params: dict) -> None:
    """``max(x, 0)`` written straight into the output; integer inputs go to the generic kernel."""
    RELU_CALLS.append(tuple(inputs[0].shape))
    if inputs[0].dtype.kind != "f":
        from mxkit.ndarray.kernels import get_op  # inside: the registry calls this plugin while it is built

        get_op("relu").kernel(xp, inputs, outputs, params)
        return
    xp.maximum(inputs[0], 0, out=outputs[0])


def register(registry: Any) -> None:
    """Register the overrides of this plugin into the operator registry."""
    registry.register_kernel("relu", backend="recorder", kernel=relu)
