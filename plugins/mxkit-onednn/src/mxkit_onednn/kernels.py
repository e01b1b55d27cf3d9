"""The kernels this plugin registers for backend ``numpy``, each in front of the kernel it replaces.

A oneDNN kernel serves the cases it covers (float32, 1-D and 2-D windows...) and hands every
other call to the kernel that was registered before it (mxkit-cpu's) or, without one, to the
operator's generic kernel. When oneDNN cannot be loaded nothing is registered at all.

Each oneDNN kernel declares the operator parameters it implements (:func:`handles`), and for
each the values it implements (:data:`ANY`, a tuple of values, or a predicate). A call whose
parameters hold anything else, a value outside a declared set or an undeclared parameter set
to something other than its default, goes to the replaced kernel before the oneDNN kernel
sees it: a parameter an operator gains later, or one a kernel was never written for, cannot
be silently ignored.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from mxkit_onednn.program import FALLBACK, Program

BACKEND = "numpy"

#: operator name -> the module attribute of its oneDNN kernel, ``(module, function)``
OVERRIDES = {
    "Convolution": ("conv", "convolution"),
    "_backward_Convolution": ("conv", "convolution_backward"),
    "_FusedConvolution": ("conv", "fused_convolution"),
    "Deconvolution": ("deconv", "deconvolution"),
    "_backward_Deconvolution": ("deconv", "deconvolution_backward"),
    "LRN": ("lrn", "lrn"),
    "_backward_LRN": ("lrn", "lrn_backward"),
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
    "add_n": ("combine", "add_n"),
    "Concat": ("combine", "concat"),
    "softmax": ("softmax", "softmax"),
    "_backward_softmax": ("softmax", "softmax_backward"),
    "log_softmax": ("softmax", "log_softmax"),
    "_backward_log_softmax": ("softmax", "log_softmax_backward"),
}

Kernel = Callable[[Any, list, list, dict], None]

#: a declared parameter whose every value the kernel implements
ANY = "any value"

#: a declaration: parameter name -> ANY, a tuple of the values implemented, or a predicate on the value
Declared = dict[str, Any]


def handles(**declared: Any) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Mark a oneDNN kernel with the parameters it implements: ``name=ANY``, ``name=(value, ...)`` or
    ``name=predicate``. Parameters left out are implemented only at their operator's default."""

    def mark(kernel: Callable[..., None]) -> Callable[..., None]:
        kernel.handles = dict(declared)  # type: ignore[attr-defined]
        return kernel

    return mark


def accepts(rule: Any, value: Any) -> bool:
    """Whether a declaration's ``rule`` for a parameter (:data:`ANY`, a tuple of values, a predicate) covers
    ``value`` (a value of the tuple: equal and of the same type, so that ``0`` is not ``False``)."""
    if rule is ANY:
        return True
    if callable(rule):
        return bool(rule(value))
    return any(value is allowed or (type(value) is type(allowed) and value == allowed) for allowed in rule)


def unhandled_params(declared: Declared, params: dict, defaults: dict) -> list[str]:
    """The parameters of a call that a kernel declaring ``declared`` does not implement: those outside
    their declared values, and the undeclared ones that are not at their default (``defaults``: the
    operator's optional parameters and their defaults; a parameter missing from it has none). Names
    starting with ``_`` are the executor's (``_req``, ``_is_train``), not the operator's."""
    unhandled = []
    for name, value in params.items():
        if name.startswith("_"):
            continue
        if name in declared:
            if not accepts(declared[name], value):
                unhandled.append(name)
        elif name not in defaults or value != defaults[name]:
            unhandled.append(name)
    return unhandled


class Unhandled(Exception):
    """Raised by a oneDNN kernel for a call it does not cover (the replaced kernel serves it)."""


def with_fallback(kernel: Callable[..., None], fallback: Kernel, defaults: dict | None = None) -> Kernel:
    """``kernel``, handing to ``fallback`` the calls whose parameters it does not declare (see
    :func:`unhandled_params`; ``defaults``: the operator's parameter defaults) and those it raises
    :class:`Unhandled` for.

    ``kernel(inputs, outputs, params, replaced)`` also gets ``replaced(inputs, outputs)``, the
    replaced kernel bound to this call (keywords change its parameters), as one more candidate to time (see
    :meth:`mxkit_onednn.program.ProgramCache.run`)."""

    declared: Declared = getattr(kernel, "handles", None) or {}
    defaults = {} if defaults is None else defaults
    prepare = getattr(kernel, "prepare", None)
    # calls already prepared once, by signature (see call_signature): ``(program cache, key, views)`` of the
    # call that found out (``views``: what _as_given said of them). A kernel with a ``prepare`` works out a
    # call's views and key before its program cache says who serves it, several microseconds: more than the
    # replaced kernel's whole call on the small arrays it wins on (an MLP's activations, a 10-way output
    # layer), and a fifth of a small oneDNN call's. Where the replaced kernel serves, a later call goes to
    # it; where a program serves and the views were the arrays themselves, to the program
    known_calls: dict[tuple, tuple[Any, Any, int]] = {}
    signature_of = _signature_function()

    def served_as_known(signature: tuple, xp: Any, inputs: list, outputs: list, params: dict) -> bool:
        known = known_calls.get(signature)
        if known is None:
            return False
        cache, key, given = known
        served = cache.serving(key)
        if served is FALLBACK:
            if cache.only is None:
                fallback(xp, inputs, outputs, params)  # (what the program would call, on these same arrays)
                return True
        elif served is not None and (given == AS_GIVEN or (given == SAME_MEMORY and type(served) is Program)):
            served.run(inputs, outputs)
            return True
        return False

    def serve_known(xp: Any, inputs: list, outputs: list, params: dict) -> bool:
        """Serve a call whose signature was met before, straight from what serves it; False (nothing done)
        for any other call. Wrappers (:func:`mxkit_onednn.bf16.by_dtype`) ask this first: a known signature is
        a float32 one, so their own dtype checks can wait for the calls it leaves."""
        if prepare is None:
            return False
        signature = signature_of(inputs, outputs, params)
        return signature is not None and served_as_known(signature, xp, inputs, outputs, params)

    @functools.wraps(kernel)
    def serve(xp: Any, inputs: list, outputs: list, params: dict) -> None:
        signature = signature_of(inputs, outputs, params) if prepare is not None else None
        if signature is not None and served_as_known(signature, xp, inputs, outputs, params):
            return
        if unhandled_params(declared, params, defaults):
            fallback(xp, inputs, outputs, params)
            return
        replaced = lambda ins, outs, **changed: fallback(xp, ins, outs, {**params, **changed})  # noqa: E731
        try:
            if prepare is None:
                kernel(inputs, outputs, params, replaced)
                return
            bound = prepare(inputs, outputs, params, replaced)
            bound.once()  # (the kernel's own call)
        except Unhandled:
            fallback(xp, inputs, outputs, params)
            return
        if signature is not None and bound.cache.program(bound.key) is not None:
            if len(known_calls) >= MAX_REMEMBERED_CALLS:
                known_calls.clear()
            known_calls[signature] = (bound.cache, bound.key, _as_given(bound, inputs, outputs))

    def bind(xp: Any, inputs: list, outputs: list, params: dict) -> Callable[[], None] | None:
        """``serve`` bound to these arrays (the registry's ``kernel.bind``): what serves is decided here once,
        and a kernel with a ``prepare`` (returning a :class:`mxkit_onednn.program.BoundCall`) works out its
        views once. Inputs that are not C-contiguous float32 arrays would be copied by the preparation, and
        a copy made once would not follow the arrays: those calls are left to ``serve``."""
        if unhandled_params(declared, params, defaults):
            return bound_kernel(fallback, xp, inputs, outputs, params)
        if prepare is None or not all(isinstance(a, np.ndarray) and a.dtype == np.float32 and a.flags.c_contiguous
                                      for a in inputs):
            return None
        try:
            return prepare(inputs, outputs, params,
                           lambda ins, outs, **changed: fallback(xp, ins, outs, {**params, **changed}))
        except Unhandled:
            return bound_kernel(fallback, xp, inputs, outputs, params)

    serve.replaced = fallback  # type: ignore[attr-defined]
    serve.bind = bind  # type: ignore[attr-defined]
    serve.serve_known = serve_known  # type: ignore[attr-defined]
    return serve


#: call signatures a kernel remembers with what serves them (emptied when full)
MAX_REMEMBERED_CALLS = 4096


#: what a prepared call's views are (:func:`_as_given`): other arrays (copies, views of other memory), the call's
#: arrays reshaped, or the call's arrays themselves
OTHER, SAME_MEMORY, AS_GIVEN = 0, 1, 2


def _as_given(bound: Any, inputs: list, outputs: list) -> int:
    """How a prepared call's views relate to the call's own arrays (C-contiguous, as its signature says).

    :data:`AS_GIVEN`: they are the arrays (the same memory, shapes and strides, in the same order) and nothing
    is copied back: the program runs on the arrays of any later call of the same signature as they are.
    :data:`SAME_MEMORY`: the same memory of the same dtype, reshaped: a plain :class:`Program` runs on them as
    they are too (its primitives read addresses and sizes), a chunked one does not (it slices the first axis).
    """

    def relation(views: list, arrays: list) -> int:
        if len(views) != len(arrays):
            return OTHER
        found = AS_GIVEN
        for view, array in zip(views, arrays):
            if type(view) is not np.ndarray or view.dtype != array.dtype or view.nbytes != array.nbytes \
                    or not view.flags.c_contiguous or view.ctypes.data != array.ctypes.data:
                return OTHER
            if view.shape != array.shape:
                found = SAME_MEMORY
        return found

    if bound.finish is not None:
        return OTHER
    return min(relation(bound.inputs, inputs), relation(bound.outputs, outputs))


def call_signature(inputs: list, outputs: list, params: dict) -> tuple | None:
    """What a kernel's program key and views follow from: the arrays' shapes when every one is a
    C-contiguous float32 numpy array of native byte order (the views are then the arrays themselves), then
    the number of inputs and the parameters; None for any other call, or one whose parameters do not hash.

    Computed in C by the extension (``_dnnl.float32_call_signature``), which every oneDNN kernel needs: it
    runs on each call, where a Python loop over the arrays (a flags object per array) took more than the rest
    of a known call's lookup."""
    return _signature_function()(inputs, outputs, params)


def _signature_function() -> Callable[[list, list, dict], tuple | None]:
    from mxkit_onednn.library import load, status

    dnnl = load()
    if dnnl is None:
        from mxkit.core.errors import MissingComponentError

        raise MissingComponentError(f"mxkit-onednn's kernels need its extension, which is not loaded: {status()}")
    return dnnl.float32_call_signature


def bound_kernel(kernel: Kernel, xp: Any, inputs: list, outputs: list, params: dict) -> Callable[[], None]:
    """``kernel`` bound to these arguments: its own ``bind`` where it has one, else a plain call of it."""
    bind = getattr(kernel, "bind", None)
    bound = bind(xp, inputs, outputs, params) if bind is not None else None
    if bound is not None:
        return bound
    return functools.partial(kernel, xp, inputs, outputs, params)


def operator_defaults(op: Any) -> dict:
    """The optional parameters of operator definition ``op`` and their defaults."""
    return {param.name: param.default for param in op.params if not param.required}


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
        registry.register_kernel(name, backend=BACKEND, kernel=with_fallback(kernel, fallback, operator_defaults(op)))
        registered.append(name)
    # bfloat16 calls: oneDNN's bfloat16 kernels in front of those just registered, or the float32 route
    from mxkit_onednn.bf16 import register as register_bfloat16

    registered += [name for name in register_bfloat16(registry) if name not in registered]
    return registered


__all__ = ["ANY", "BACKEND", "accepts", "OVERRIDES", "Unhandled", "bound_kernel", "handles", "operator_defaults",
           "register", "unhandled_params", "with_fallback"]
