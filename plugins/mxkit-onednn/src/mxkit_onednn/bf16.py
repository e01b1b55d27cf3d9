"""bfloat16 on the CPU: which calls run in bfloat16 on oneDNN, and what serves the others.

A call whose arrays hold bfloat16 (numpy's dtype from ``ml_dtypes``) goes, in this order, to

1. a bfloat16 oneDNN kernel (:mod:`mxkit_onednn.bf16_ops`: Convolution with its gradients,
   FullyConnected with its gradients, Pooling and its gradient, BatchNorm with bfloat16 data and
   float32 statistics, Activation relu/sigmoid/tanh and their gradients, add_n and elemwise_add)
   where the CPU has bfloat16 primitives (:func:`availability`) and the call's parameters are ones
   that kernel declares;
2. otherwise the float32 kernel it replaced, through float32 copies (:func:`through_float32`): the
   bfloat16 inputs widened (exactly), the float32 kernel run (oneDNN's or mxkit-cpu's), the outputs
   rounded to bfloat16. That is also what every operator this plugin overrides without a bfloat16
   kernel of its own does (Deconvolution, LRN, softmax, log_softmax, Concat): a result rounded once,
   as a bfloat16 kernel accumulating in float32 would give, rather than an error, because a network
   converted by ``mx.contrib.amp`` meets them between bfloat16 layers.

Operators no plugin overrides run their generic numpy kernels on the bfloat16 arrays through
``ml_dtypes``: elementwise functions compute each element in float32 and round it, matrix products
accumulate in float32, and mxkit-ndarray's reductions widen bfloat16 to float32 before they sum. MXNet's
AMP lists, which :func:`mxkit.mx.contrib.amp.convert_symbol` follows, run softmax, the losses and the
reductions in float32 anyway.

Float32 and float64 calls go to the kernel that was registered before, unchanged.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

import numpy as np

from mxkit_onednn.kernels import BACKEND, operator_defaults, with_fallback
from mxkit_onednn.library import LOG, load

BFLOAT16 = "bfloat16"

#: operator -> its bfloat16 oneDNN kernel in :mod:`mxkit_onednn.bf16_ops`
BF16_KERNELS = {
    "Convolution": "convolution",
    "_backward_Convolution": "convolution_backward",
    "FullyConnected": "fully_connected",
    "_backward_FullyConnected": "fully_connected_backward",
    "Pooling": "pooling",
    "_backward_Pooling": "pooling_backward",
    "BatchNorm": "batchnorm",
    "_backward_BatchNorm": "batchnorm_backward",
    "Activation": "activation",
    "_backward_relu": "relu_backward",
    "_backward_sigmoid": "sigmoid_backward",
    "_backward_tanh": "tanh_backward",
    "add_n": "add_n",
    "elemwise_add": "elemwise_add",
}

#: operators this plugin overrides in float32 whose bfloat16 calls run through float32 copies
FLOAT32_ROUTED = ("_FusedConvolution", "Deconvolution", "_backward_Deconvolution", "LRN", "_backward_LRN", "softmax",
                  "_backward_softmax", "log_softmax", "_backward_log_softmax", "Concat")

_probe: dict[str, Any] = {}


def is_bfloat16(array: Any) -> bool:
    """Whether ``array`` is a numpy array of bfloat16 (``ml_dtypes``' dtype, named ``bfloat16``)."""
    # kind first: ml_dtypes' dtypes are kind "V", and numpy builds ``dtype.name`` in Python on
    # every read (microseconds; this is asked several times per operator call)
    return isinstance(array, np.ndarray) and array.dtype.kind == "V" and array.dtype.name == BFLOAT16


def availability() -> str | None:
    """None when oneDNN runs bfloat16 primitives on this CPU, otherwise why not.

    oneDNN 3.2 runs bfloat16 natively on CPUs with AVX512_BF16 (or AVX2_VNNI_2), emulates it on
    plain AVX-512 (avx512_core) and has no bfloat16 primitive below that (AVX2 alone): the probe asks
    it for a small bfloat16 convolution, the question every kernel here would ask, once per process."""
    if "reason" not in _probe:
        dnnl = load()
        if dnnl is None:
            _probe["reason"] = "oneDNN is not loaded"
        else:
            try:
                src, dst = dnnl.typed_md((1, 16, 4, 4), BFLOAT16, "any"), dnnl.typed_md((1, 16, 2, 2), BFLOAT16, "any")
                dnnl.convolution_forward_pd(dnnl.FORWARD_INFERENCE, src, dnnl.typed_md((16, 16, 3, 3), BFLOAT16, "any"),
                                            None, dst, (1, 1), (0, 0), (0, 0), (0, 0))
                _probe["reason"] = None
            except RuntimeError as exc:
                _probe["reason"] = (f"oneDNN has no bfloat16 convolution on this CPU (its instruction set "
                                    f"0x{dnnl.effective_cpu_isa():x}; bfloat16 needs AVX-512 or AVX2_VNNI_2): {exc}")
    return _probe["reason"]


def forget() -> None:
    """Probe again on the next :func:`availability` (tests)."""
    _probe.clear()


def through_float32(kernel: Callable[..., None]) -> Callable[..., None]:
    """``kernel`` (a float32 kernel, ``kernel(xp, inputs, outputs, params)``) for calls with bfloat16 arrays:
    it runs on float32 copies of them (the widening is exact) and its results are rounded into the
    bfloat16 outputs. Outputs start as copies of the outputs' contents (a kernel that adds to its output,
    or updates it in place, sees what is there); float32 arrays (BatchNorm's moving statistics, updated in
    place) are passed as they are."""

    def routed(xp: Any, inputs: list, outputs: list, params: dict) -> None:
        wide_inputs = [a.astype(np.float32) if is_bfloat16(a) else a for a in inputs]
        wide_outputs = [a.astype(np.float32) if is_bfloat16(a) else a for a in outputs]
        kernel(xp, wide_inputs, wide_outputs, params)
        for target, wide in zip(outputs, wide_outputs):
            if wide is not target:
                np.copyto(target, wide, casting="unsafe")

    routed.__name__ = f"{getattr(kernel, '__name__', 'kernel')}_through_float32"
    return routed


def by_dtype(bfloat16_kernel: Callable[..., None], other: Callable[..., None]) -> Callable[..., None]:
    """A kernel sending calls with a bfloat16 array among their inputs or outputs to ``bfloat16_kernel``, the
    others to ``other`` (kept as its ``float32`` attribute; it takes ``other``'s name and attributes, so the kernel
    a oneDNN kernel replaced is still its ``replaced``)."""

    # a call ``other`` already knows (a float32 signature met before: see with_fallback) is served before the dtype
    # checks, which cost a small layer's call more than that lookup
    serve_known = getattr(other, "serve_known", None)

    @functools.wraps(other)  # its name, module and attributes (``replaced``: the kernel it replaced) stay visible
    def serve(xp: Any, inputs: list, outputs: list, params: dict) -> None:
        if serve_known is not None and serve_known(xp, inputs, outputs, params):
            return
        if any(is_bfloat16(a) for a in inputs) or any(is_bfloat16(a) for a in outputs):
            bfloat16_kernel(xp, inputs, outputs, params)
        else:
            other(xp, inputs, outputs, params)

    def bind(xp: Any, inputs: list, outputs: list, params: dict) -> Callable[[], None]:
        """``serve`` bound to these arrays (the registry's ``kernel.bind``): the dtype decides once."""
        from mxkit_onednn.kernels import bound_kernel

        bfloat16 = any(is_bfloat16(a) for a in inputs) or any(is_bfloat16(a) for a in outputs)
        return bound_kernel(bfloat16_kernel if bfloat16 else other, xp, inputs, outputs, params)

    serve.float32 = other  # type: ignore[attr-defined]
    serve.bfloat16 = bfloat16_kernel  # type: ignore[attr-defined]
    # set after functools.wraps, which copied ``other``'s own bind (that one would skip the dtype check)
    serve.bind = bind  # type: ignore[attr-defined]
    return serve


def register(registry: Any) -> list[str]:
    """Put the bfloat16 kernels (or, without bfloat16 primitives on this CPU, the float32 route) in front of
    the kernels registered for the operators of :data:`BF16_KERNELS` and :data:`FLOAT32_ROUTED`; the names."""
    reason = availability()
    if reason is not None:
        LOG.info("mxkit-onednn: bfloat16 calls run through float32 kernels: %s", reason)
    ops = importlib.import_module("mxkit_onednn.bf16_ops") if reason is None else None
    registered = []
    for name in (*BF16_KERNELS, *FLOAT32_ROUTED):
        op = registry.get(name)
        previous = op.kernels.get(BACKEND) or op.kernel
        routed = through_float32(previous)
        if ops is not None and name in BF16_KERNELS:
            kernel = with_fallback(getattr(ops, BF16_KERNELS[name]), routed, operator_defaults(op))
        else:
            kernel = routed
        registry.register_kernel(name, backend=BACKEND, kernel=by_dtype(kernel, previous))
        registered.append(name)
    return registered


__all__ = ["BF16_KERNELS", "BFLOAT16", "FLOAT32_ROUTED", "availability", "by_dtype", "forget", "is_bfloat16",
           "register", "through_float32"]
