"""Custom operators written in Python: MXNet 1.x's ``mx.operator``.

A user subclasses :class:`CustomOpProp` (what the operator takes and returns, shapes and
dtypes) and :class:`CustomOp` (``forward`` and ``backward`` on NDArrays), registers the
property under a name with :func:`register`, and calls it as
``mx.sym.Custom(data, op_type="name", **kwargs)`` or ``mx.nd.Custom(...)``; the keyword
arguments reach the property's ``__init__`` as strings, as in MXNet.

How it runs (the ``Custom`` operator is defined in :mod:`mxkit.ndarray.ops.nn_custom`):
the node is one engine operation, pushed asynchronously, reading its inputs and writing
its outputs and auxiliary states. The engine worker only hands the call to this module's
own threads and returns, as MXNet's ``CustomOperator`` does: the user's Python code pushes
NDArray operations and waits on them (``asnumpy()``), which on an engine worker could
wait for a worker that never comes. The user gets NDArrays that share the operator's
buffers but carry fresh engine vars, so the operations they push are not held back by the
operation that is running them. When the user's method returns, the thread waits until
everything it pushed on those arrays has finished, then completes the engine operation;
an exception completes it with a :class:`CustomOpError` naming the ``op_type``, raised at
the next sync point on the outputs.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from mxkit.core.errors import MXKitError
from mxkit.ndarray.registry import UnknownOperatorError

#: threads that run custom operators' Python code (MXNet's MXNET_CUSTOM_OP_NUM_THREADS default);
#: one is added only when every other one is busy, so nested custom operators still find one
MAX_CUSTOM_THREADS = 16


class CustomOpError(MXKitError):
    """A custom operator's property or method failed or returned something unusable."""


# -- the user-facing classes -----------------------------------------------------------------

class CustomOp:
    """Base class of a custom operator's computation (MXNet's ``mx.operator.CustomOp``).

    ``forward`` and ``backward`` receive lists of NDArrays and write their results with
    :meth:`assign`, honouring the request of each output.
    """

    def forward(self, is_train: bool, req: Sequence[str], in_data: Sequence[Any], out_data: Sequence[Any],
                aux: Sequence[Any]) -> None:
        """Compute ``out_data`` from ``in_data`` (and the auxiliary states ``aux``).

        Parameters
        ----------
        is_train : bool
            Whether this is a training pass.
        req : list of str
            Per output: ``'write'``, ``'inplace'``, ``'add'`` or ``'null'`` (nothing reads it).
        in_data, out_data, aux : list of NDArray
        """
        raise NotImplementedError(f"{type(self).__name__} must implement forward()")

    def backward(self, req: Sequence[str], out_grad: Sequence[Any], in_data: Sequence[Any],
                 out_data: Sequence[Any], in_grad: Sequence[Any], aux: Sequence[Any]) -> None:
        """Compute ``in_grad`` (gradients of the arguments) from the output gradients.

        Parameters
        ----------
        req : list of str
            Per argument gradient, as for :meth:`forward`.
        out_grad, in_data, out_data, in_grad, aux : list of NDArray
        """
        raise NotImplementedError(f"{type(self).__name__} must implement backward()")

    def assign(self, dst: Any, req: str, src: Any) -> None:
        """Store ``src`` into ``dst`` as ``req`` says: ``'null'`` nothing, ``'write'`` and
        ``'inplace'`` overwrite, ``'add'`` accumulate."""
        if req == "null":
            return
        if req in ("write", "inplace"):
            dst[:] = src
        elif req == "add":
            from mxkit.ndarray.ndarray import NDArray

            if not isinstance(src, NDArray):
                from mxkit.ndarray.creation import array

                src = array(src, ctx=dst.context, dtype=dst.dtype)
            dst[:] = dst + src
        else:
            raise CustomOpError(f"CustomOp.assign: unknown req {req!r}; expected 'null', 'write', 'inplace' or 'add'")


class CustomOpProp:
    """Base class of a custom operator's description (MXNet's ``mx.operator.CustomOpProp``).

    Parameters
    ----------
    need_top_grad : bool
        Whether ``backward`` needs the gradient of the outputs. ``False`` makes the operator
        a loss layer: it ends a graph and supplies its own gradient (``SoftmaxOutput``).
    """

    def __init__(self, need_top_grad: bool = True) -> None:
        self.need_top_grad_ = need_top_grad

    def infer_shape(self, in_shape: list) -> tuple:
        """``(argument shapes, output shapes, auxiliary shapes)`` from the argument shapes.

        The default gives every output the first argument's shape and has no auxiliary states.
        """
        return in_shape, (in_shape[0],) * len(self.list_outputs()), ()

    def infer_type(self, in_type: list) -> tuple:
        """``(argument types, output types, auxiliary types)``; by default all the first argument's."""
        first = in_type[0]
        return ([first] * len(in_type), [first] * len(self.list_outputs()),
                [first] * len(self.list_auxiliary_states()))

    def list_arguments(self) -> list[str]:
        """The input names (default ``['data']``)."""
        return ["data"]

    def list_outputs(self) -> list[str]:
        """The output names (default ``['output']``)."""
        return ["output"]

    def list_auxiliary_states(self) -> list[str]:
        """The auxiliary state names (default none)."""
        return []

    def declare_backward_dependency(self, out_grad: list, in_data: list, out_data: list) -> list:
        """What ``backward`` reads: the output gradients (when ``need_top_grad``), inputs and outputs."""
        deps = list(out_grad) if self.need_top_grad_ else []
        return deps + list(in_data) + list(out_data)

    def create_operator(self, ctx: Any, in_shapes: list, in_dtypes: list) -> CustomOp:
        """The :class:`CustomOp` that computes this operator for these shapes and dtypes."""
        raise NotImplementedError(f"{type(self).__name__} must implement create_operator()")


# -- registration ------------------------------------------------------------------------------

_props: dict[str, type] = {}
_props_lock = threading.Lock()
_prop_cache: dict[tuple, CustomOpProp] = {}


def register(reg_name: str) -> Callable[[type], type]:
    """Class decorator: register a :class:`CustomOpProp` subclass as ``op_type=reg_name``.

    Registering a name again replaces the earlier property, as in MXNet.
    """
    if not isinstance(reg_name, str) or not reg_name:
        raise CustomOpError(f"mx.operator.register needs a non-empty name string, got {reg_name!r}")

    def do_register(prop_cls: type) -> type:
        if not (isinstance(prop_cls, type) and issubclass(prop_cls, CustomOpProp)):
            raise CustomOpError(f"mx.operator.register({reg_name!r}) decorates a CustomOpProp subclass, "
                                f"got {prop_cls!r}")
        with _props_lock:
            _props[reg_name] = prop_cls
            for key in [k for k in _prop_cache if k[0] == reg_name]:
                del _prop_cache[key]
        return prop_cls

    return do_register


def get_all_registered_operators() -> list[str]:
    """Every operator name and alias of the registry (MXNet's ``MXListAllOpNames``); the
    custom ``op_type`` names registered with :func:`register` run through ``Custom``."""
    from mxkit.ndarray.registry import get_registry

    return get_registry().names(include_aliases=True)


def get_registered_custom_operators() -> list[str]:
    """The ``op_type`` names registered with :func:`register`."""
    return sorted(_props)


class OperatorArguments(NamedTuple):
    """An operator's arguments as MXNet's ``get_operator_arguments`` gives them: the inputs,
    then the parameters, with MXNet's type strings."""

    narg: int
    names: list
    types: list


_KIND_NAMES = {"int": "int", "float": "float", "bool": "boolean", "shape": "Shape(tuple)", "floats": "tuple of <float>",
               "ints_or_none": "Shape(tuple)", "str": "string", "dtype": "{None, 'bfloat16', 'bool', 'float16', "
               "'float32', 'float64', 'int32', 'int64', 'int8', 'uint8'}"}


def _type_string(param: Any) -> str:
    kind = "{" + ", ".join(repr(c) for c in sorted(param.choices)) + "}" if param.choices else \
        _KIND_NAMES.get(param.kind, param.kind)
    if param.required:
        return f"{kind}, required"
    default = param.default
    shown = int(default) if isinstance(default, bool) else list(default) if isinstance(default, tuple) else default
    return f"{kind}, optional, default={str(shown)!r}" if isinstance(default, str) else \
        f"{kind}, optional, default={shown}"


def get_operator_arguments(op_name: str) -> OperatorArguments:
    """The inputs and parameters of operator ``op_name`` (MXNet's ``get_operator_arguments``).

    Raises
    ------
    UnknownOperatorError
        For a name that is not an operator (listing the closest).
    """
    from mxkit.ndarray.registry import get_registry

    op = get_registry().get(op_name)
    defaults = {p.name: p.default for p in op.params if not p.required}
    try:
        inputs, input_type = list(op.list_inputs(defaults)) + list(op.list_aux(defaults)), "NDArray-or-Symbol"
    except (KeyError, TypeError):
        inputs, input_type = ["data"], "NDArray-or-Symbol[]"  # a number set by a parameter, as MXNet shows it
    params = list(op.params)
    names = inputs + [p.name for p in params]
    types = [input_type] * len(inputs) + [_type_string(p) for p in params]
    return OperatorArguments(len(names), names, types)


def prop_class(op_type: str) -> type:
    """The property class registered as ``op_type``.

    Raises
    ------
    UnknownOperatorError
        Naming ``op_type`` and the registered names.
    """
    prop_cls = _props.get(op_type)
    if prop_cls is None:
        known = ", ".join(repr(n) for n in sorted(_props)) or "none"
        raise UnknownOperatorError(f"Custom: op_type {op_type!r} is not registered; registered custom "
                                   f"operators: {known}; register one with @mx.operator.register({op_type!r}) "
                                   f"before building or loading the graph")
    return prop_cls


def user_kwargs(params: dict) -> dict[str, str]:
    """The keyword arguments for the property (every parameter but ``op_type`` and private ones)."""
    return {k: v for k, v in params.items() if k != "op_type" and not k.startswith("_")}


def prop_for(params: dict) -> CustomOpProp:
    """The property instance of a ``Custom`` call (one per op_type and keyword arguments)."""
    op_type = params["op_type"]
    kwargs = user_kwargs(params)
    cache_key = (op_type, tuple(sorted(kwargs.items())))
    prop = _prop_cache.get(cache_key)
    if prop is None:
        prop_cls = prop_class(op_type)
        try:
            prop = prop_cls(**kwargs)
        except Exception as exc:
            raise CustomOpError(f"Custom op_type {op_type!r}: {prop_cls.__name__}(**{kwargs!r}) failed: "
                                f"{type(exc).__name__}: {exc}") from exc
        if not hasattr(prop, "need_top_grad_"):
            raise CustomOpError(f"Custom op_type {op_type!r}: {prop_cls.__name__}.__init__ must call "
                                f"super().__init__(need_top_grad=...)")
        _prop_cache[cache_key] = prop
    return prop


def call_prop(op_type: str, what: str, method: Callable[..., Any], *args: Any) -> Any:
    """``method(*args)`` with any failure reported as a :class:`CustomOpError` naming the op_type."""
    try:
        return method(*args)
    except MXKitError:
        raise
    except Exception as exc:
        raise CustomOpError(f"Custom op_type {op_type!r}: {what} failed: {type(exc).__name__}: {exc}") from exc


# -- operator instances ------------------------------------------------------------------------
#
# MXNet creates a custom operator once per bound executor (and once per imperative call)
# and hands the same object to forward and backward. The backward node reads the forward
# outputs, so the instance is found by the identity of the first output buffer: an
# executor reuses its buffers (one instance for every iteration), an imperative call makes
# new ones (one instance per call); the entry goes when the buffer does.

_instances: dict[int, tuple[Any, CustomOpProp, CustomOp]] = {}
_instances_lock = threading.RLock()  # a weakref callback may run inside a locked block


def _forget(buffer_id: int) -> Callable[[Any], None]:
    def forget(_ref: Any) -> None:
        with _instances_lock:
            _instances.pop(buffer_id, None)

    return forget


def operator_instance(prop: CustomOpProp, op_type: str, ctx: Any, anchor: Any, in_shapes: list,
                      in_dtypes: list) -> CustomOp:
    """The :class:`CustomOp` tied to output buffer ``anchor`` (created on first use)."""
    with _instances_lock:
        entry = _instances.get(id(anchor))
    # the property must match too: a memory plan may give a dead output's buffer to another node
    if entry is not None and entry[0]() is anchor and entry[1] is prop:
        return entry[2]
    instance = call_prop(op_type, "create_operator", prop.create_operator, ctx, in_shapes, in_dtypes)
    if not isinstance(instance, CustomOp):
        raise CustomOpError(f"Custom op_type {op_type!r}: create_operator returned {instance!r}, expected a "
                            f"mx.operator.CustomOp instance")
    try:
        ref = weakref.ref(anchor, _forget(id(anchor)))
    except TypeError:  # an array type without weak references: no reuse, one instance per call
        return instance
    with _instances_lock:
        _instances[id(anchor)] = (ref, prop, instance)
    return instance


# -- running off the engine's workers --------------------------------------------------------

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _runner() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(MAX_CUSTOM_THREADS, thread_name_prefix="mxkit-custom-op")
    return _pool


def _forget_pool_in_child() -> None:
    global _pool
    _pool = None  # the parent's threads do not exist in a forked child


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)


def run_off_engine(job: Callable[[], None], op_type: str, what: str, on_complete: Callable[..., None]) -> None:
    """Run ``job`` on a custom-operator thread, then complete the engine operation
    (with a :class:`CustomOpError` naming ``op_type`` if it raised)."""

    def task() -> None:
        from mxkit.engine.profiler import custom_operator_scope
        from mxkit.ndarray.invoke import in_flight

        in_flight.exempt_this_thread()
        _running.op_type = op_type
        try:
            # profiled as MXNet's: "<op_type>::pure_python" and "<op_type>::<op>" ("_backward_<op_type>" for backward)
            with custom_operator_scope(op_type if what == "forward" else f"_backward_{op_type}"):
                job()
        except BaseException as exc:
            if isinstance(exc, CustomOpError):
                error = exc
            else:
                error = CustomOpError(f"Custom op_type {op_type!r}: {what} raised {type(exc).__name__}: {exc}")
                error.__cause__ = exc
            on_complete(error)
            return
        on_complete()

    _runner().submit(task)


_running = threading.local()


def refuse_inside_custom_op(what: str) -> None:
    """Raise if called from a custom operator's method: ``what`` would wait for every pending
    operation, the running custom operator's own included, which completes only after it returns."""
    op_type = getattr(_running, "op_type", None)
    if op_type is not None:
        raise CustomOpError(f"{what} inside custom operator {op_type!r} would wait for that operator itself; "
                            f"wait for the arrays you need instead (x.wait_to_read(), x.asnumpy())")


def wrap_arrays(ctx: Any, buffers: Sequence[Any], eng: Any) -> list[Any]:
    """NDArrays over ``buffers`` with fresh engine vars (the user's view of the operation's arrays)."""
    from mxkit.ndarray.ndarray import NDArray

    return [NDArray._from_data(buffer, ctx, eng.new_var()) for buffer in buffers]


def settle(arrays: Sequence[Any], eng: Any) -> None:
    """Wait until every operation pushed on ``arrays`` has finished, reads included (a final
    write of every var is ordered after them), and raise the first error one left."""
    if not arrays:
        return
    variables = [a._var for a in arrays]
    eng.push(_noop, variables, variables, arrays[0]._ctx, 0, "Custom.settle")  # overwrites nothing
    for var in variables:
        eng.wait_for_var(var)


def _noop() -> None:
    return None


__all__ = ["MAX_CUSTOM_THREADS", "CustomOp", "CustomOpError", "CustomOpProp", "OperatorArguments",
           "get_all_registered_operators", "get_operator_arguments", "get_registered_custom_operators",
           "prop_class", "prop_for", "register"]
