"""The operator registry shared by NDArray (imperative) and Symbol (graphs).

An :class:`OpDef` describes an operator once, independent of any array type: its MXNet
name and aliases, typed parameters, input/output names, shape and dtype inference,
in-place options, the inputs its backward pass ignores, its gradient and its kernels.

Kernels have the signature ``kernel(xp, inputs, outputs, params)``: ``xp`` is the array
module of the backend (numpy, cupy), ``inputs`` and ``outputs`` are arrays of that
module (outputs preallocated with the inferred shape and dtype, to be written in
place) and ``params`` is the typed parameter dict. Random operators also receive the
backend's generator as ``params["_rng"]``. The generic kernel, written against ``xp``,
serves every backend; a backend overrides one through the ``mxkit_kernels`` hook::

    @hookimpl
    def mxkit_kernels(registry):
        registry.register_kernel("relu", backend="numpy", kernel=fast_relu)

A kernel may also offer ``kernel.bind(xp, inputs, outputs, params)``: a callable of no
arguments that does what ``kernel(xp, inputs, outputs, params)`` does, for calls that pass
these same arrays and parameters again and again (an executor's steps, bound once), or
None where it has nothing to save. What a kernel decides from the arguments alone (which
implementation serves, the views it needs) it decides once, at the bind or the first call.

A gradient is ``gradient(F, params, inputs, outputs, out_grads) -> [input grads]``,
written against an operator applier ``F`` (``F.elemwise_mul(a, b)``,
``F("sum", x, axis=(0,))``): NDArray's autograd passes one that runs the operators,
Symbol one that adds backward nodes to a graph. ``None`` in the result means zero.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mxkit.core.errors import MXKitError
from mxkit.ndarray.params import ParamSchema, schema

Shape = tuple[int, ...]
Kernel = Callable[[Any, Sequence[Any], Sequence[Any], dict], None]
ShapeFn = Callable[[dict, list[Shape]], list[Shape]]
DTypeFn = Callable[[dict, list[str]], list[str]]


class UnknownOperatorError(MXKitError, LookupError):
    """An operator name that the registry does not know."""


class _AllInputs(frozenset):
    """``backward_ignores`` of an operator whose backward reads no input value (only shapes)."""

    def __contains__(self, index: object) -> bool:
        return True

    def __repr__(self) -> str:
        return "ALL_INPUTS"


ALL_INPUTS: frozenset[int] = _AllInputs()


def same_dtype_as_first(params: dict, in_dtypes: list[str]) -> list[str]:
    """Default dtype inference: one output with the dtype of the first input (or ``params["dtype"]``)."""
    if params.get("dtype") is not None:
        return [params["dtype"]]
    return [in_dtypes[0] if in_dtypes else "float32"]


@dataclass
class OpDef:
    """One operator.

    Parameters
    ----------
    name : str
        MXNet's name (``broadcast_add``, ``Reshape``...).
    infer_shape : callable
        ``infer_shape(params, in_shapes) -> out_shapes``; raises :class:`ShapeError`.
    kernel : callable, optional
        The generic ``xp`` kernel (see the module docstring).
    params : ParamSchema
        The typed parameters.
    num_inputs : int or callable
        A number, or ``f(params)`` for variadic operators (``concat``'s ``num_args``).
    num_outputs : int or callable
        A number, or ``f(params)``.
    input_names, output_names : tuple of str or callable
        MXNet's argument names (``data``, ``weight``, ``bias``...), or ``f(params)``.
    infer_dtype : callable
        ``infer_dtype(params, in_dtypes) -> out_dtypes``.
    inplace : tuple of (int, int, bool), or ``f(params)`` returning one
        ``(input, output, identity)`` pairs whose storage may be shared; ``identity``
        marks outputs that equal the input. A function serves operators whose number of
        inputs depends on their parameters.
    gradient : callable, optional
        The gradient builder (module docstring); ``None`` for a non-differentiable operator.
    backward_ignores : frozenset of int
        Input indices whose values the gradient never reads.
    reads_shape_only : frozenset of int
        Input indices whose values the kernel never reads, only their shape and dtype
        (``like`` of ``_reduce_sum_like``): memory planning may reuse their storage before
        the node runs, as MXNet's gradient operators that take no input values allow.
    aux_names : tuple of str or callable
        Auxiliary states (updated in place, not differentiated), or ``f(params)``
        (``Custom``, whose states its registered property lists).
    needs_rng : bool
        Whether the kernel draws random numbers (gets ``params["_rng"]``).
    is_loss : callable, optional
        ``is_loss(params)``: whether a node of this operator is a loss layer (it ends a graph
        and makes its own head gradient), for operators whose parameters decide (``Custom``:
        its property's ``need_top_grad``). Built-in losses are listed by name in
        :data:`mxkit.symbol.autodiff.LOSS_OPERATORS`.
    async_kernel : callable, optional
        ``async_kernel(ctx, inputs, outputs, params, on_complete)``: an operator whose work
        runs off the engine's workers (``Custom``, whose Python code may push and wait for
        other operations). It is pushed with ``push_async`` and must call ``on_complete()``
        (or ``on_complete(exc)``) exactly once; it takes precedence over ``kernel``.
    """

    name: str
    infer_shape: ShapeFn
    kernel: Kernel | None = None
    params: ParamSchema = field(default_factory=schema)
    num_inputs: int | Callable[[dict], int] = 1
    num_outputs: int | Callable[[dict], int] = 1
    input_names: tuple[str, ...] | Callable[[dict], tuple[str, ...]] = ("data",)
    output_names: tuple[str, ...] | Callable[[dict], tuple[str, ...]] = ("output",)
    infer_dtype: DTypeFn = same_dtype_as_first
    inplace: tuple[tuple[int, int, bool], ...] | Callable[[dict], tuple[tuple[int, int, bool], ...]] = ()
    gradient: Callable[..., list[Any]] | None = None
    backward_ignores: frozenset[int] = frozenset()
    reads_shape_only: frozenset[int] = frozenset()
    aux_names: tuple[str, ...] | Callable[[dict], tuple[str, ...]] = ()
    aliases: tuple[str, ...] = ()
    needs_rng: bool = False
    doc: str = ""
    kernels: dict[str, Kernel] = field(default_factory=dict)
    is_loss: Callable[[dict], bool] | None = None
    async_kernel: Callable[..., None] | None = None

    def count_inputs(self, params: dict) -> int:
        return self.num_inputs(params) if callable(self.num_inputs) else self.num_inputs

    def count_outputs(self, params: dict) -> int:
        return self.num_outputs(params) if callable(self.num_outputs) else self.num_outputs

    def list_inputs(self, params: dict) -> tuple[str, ...]:
        if callable(self.input_names):
            return self.input_names(params)
        count = self.count_inputs(params)
        if len(self.input_names) == count:
            return self.input_names
        return tuple(f"arg{i}" for i in range(count))

    def list_outputs(self, params: dict) -> tuple[str, ...]:
        if callable(self.output_names):
            return self.output_names(params)
        count = self.count_outputs(params)
        if len(self.output_names) == count:
            return self.output_names
        return tuple(f"output{i}" for i in range(count))

    def list_aux(self, params: dict) -> tuple[str, ...]:
        """Names of the auxiliary states (they follow the regular inputs)."""
        return tuple(self.aux_names(params)) if callable(self.aux_names) else self.aux_names

    def parse_params(self, values: dict[str, Any]) -> dict[str, Any]:
        """Typed parameters from Python values or MXNet strings (see :class:`ParamSchema`)."""
        return self.params.parse(values, self.name)

    def kernel_for(self, backend_name: str) -> Kernel:
        """The backend's own kernel if it registered one, else the generic ``xp`` kernel."""
        kernel = self.kernels.get(backend_name, self.kernel)
        if kernel is None:
            raise MXKitError(f"operator {self.name} has no kernel for backend {backend_name!r} and no "
                             f"generic kernel; backends with kernels: {', '.join(self.kernels) or 'none'}")
        return kernel

    def describe_call(self, params: dict, in_shapes: Sequence[Any]) -> str:
        """``name(param=value, ...) on input shapes [...]`` for error messages."""
        shown = self.params.to_strings({k: v for k, v in params.items() if not k.startswith("_")})
        args = ", ".join(f"{k}={v}" for k, v in shown.items())
        shapes = ", ".join(str(tuple(s)) if s is not None else "?" for s in in_shapes)
        return f"{self.name}({args}) on input shapes [{shapes}]"

    def docstring(self) -> str:
        """The generated numpy-style docstring of ``mx.nd.<name>``."""
        lines = [self.doc.strip() or f"The {self.name} operator.", "", "Parameters", "----------"]
        if not callable(self.input_names) and not callable(self.num_inputs):
            for name in self.input_names:
                lines += [f"{name} : NDArray", "    Input."]
        else:
            lines += ["*data : NDArray", "    Inputs (a variable number)."]
        for param in self.params:
            lines += [param.describe(), f"    {param.doc}" if param.doc else "    "]
        lines += ["out : NDArray, optional", "    Where to write the result.", "", "Returns", "-------",
                  "NDArray or list of NDArray"]
        if self.aliases:
            lines += ["", "Aliases: " + ", ".join(self.aliases)]
        return "\n".join(lines)


class OperatorRegistry:
    """Every operator by name and alias, with per-backend kernel overrides."""

    def __init__(self) -> None:
        self._ops: dict[str, OpDef] = {}
        self._canonical: list[str] = []
        self._lock = threading.Lock()

    def register(self, op: OpDef) -> OpDef:
        """Add ``op`` under its name and aliases (a second definition of a name is an error)."""
        with self._lock:
            for key in (op.name, *op.aliases):
                if key in self._ops:
                    raise MXKitError(f"operator name {key!r} is already registered "
                                     f"(by {self._ops[key].name}); pick another name or alias")
            for key in (op.name, *op.aliases):
                self._ops[key] = op
            self._canonical.append(op.name)
        return op

    def get(self, name: str) -> OpDef:
        """The operator named ``name`` (or an alias).

        Raises
        ------
        UnknownOperatorError
            Listing the closest known names.
        """
        try:
            return self._ops[name]
        except KeyError:
            close = difflib.get_close_matches(name, list(self._ops), n=5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UnknownOperatorError(f"unknown operator {name!r}{hint}") from None

    def __contains__(self, name: str) -> bool:
        return name in self._ops

    def names(self, include_aliases: bool = False) -> list[str]:
        """Registered operator names (canonical ones, or every name and alias)."""
        return sorted(self._ops) if include_aliases else list(self._canonical)

    def register_kernel(self, name: str, backend: str, kernel: Kernel) -> None:
        """Make ``kernel`` the implementation of operator ``name`` on backend ``backend``.

        Raises
        ------
        UnknownOperatorError
            ``name`` is not an operator (every operator is defined before the plugins'
            kernel hooks run); the message lists the closest names.
        """
        if not callable(kernel):
            raise MXKitError(f"kernel for operator {name!r} on backend {backend!r} must be callable, "
                             f"got {kernel!r}")
        self.get(name).kernels[backend] = kernel

    def clear_kernels(self) -> None:
        """Drop every backend kernel."""
        with self._lock:
            for op in self._ops.values():
                op.kernels.clear()


_REGISTRY = OperatorRegistry()
_hooks_called = False
_hooks_lock = threading.Lock()


def define(op: OpDef) -> OpDef:
    """Register a built-in operator (used by the modules of :mod:`mxkit.ndarray.ops`)."""
    return _REGISTRY.register(op)


def get_registry() -> OperatorRegistry:
    """The process's operator registry, with the built-in operators and every plugin's kernels."""
    global _hooks_called
    if not _hooks_called:
        with _hooks_lock:
            if not _hooks_called:
                import mxkit.ndarray.ops  # noqa: F401  (defines the built-in operators)

                _hooks_called = True
                _call_kernel_hooks(_REGISTRY)
    return _REGISTRY


def _call_kernel_hooks(registry: OperatorRegistry) -> None:
    """Call every plugin's ``mxkit_kernels`` in registration order, so that a plugin
    registered later (a third party, a test) overrides the kernels of earlier ones."""
    from mxkit.core.errors import PluginError
    from mxkit.core.plugins import get_plugin_manager

    for impl in get_plugin_manager().hook.mxkit_kernels.get_hookimpls():
        try:
            impl.function(registry=registry)
        except MXKitError:
            raise
        except Exception as exc:
            raise PluginError(f"plugin {impl.plugin_name!r} failed in mxkit_kernels: "
                              f"{type(exc).__name__}: {exc}") from exc


def reload_kernels() -> None:
    """Drop backend kernels and ask the plugins again (after registering a plugin by hand)."""
    global _hooks_called
    with _hooks_lock:
        _REGISTRY.clear_kernels()
        _hooks_called = False
    get_registry()


def get_op(name: str) -> OpDef:
    """The operator ``name`` of the process registry."""
    return get_registry().get(name)


__all__ = ["ALL_INPUTS", "Kernel", "OpDef", "OperatorRegistry", "UnknownOperatorError", "define", "get_op",
           "get_registry", "reload_kernels", "same_dtype_as_first"]
