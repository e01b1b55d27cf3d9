"""Binding a symbol: ``bind`` to given arrays, ``simple_bind`` allocating them from shapes,
and ``plan_memory`` planning without allocating (for models larger than memory)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from mxkit.core.errors import ShapeError
from mxkit.symbol.exec_graph import build_exec_graph, normalize_grad_req
from mxkit.symbol.executor import Executor, ExecutorError, _nd, _new_array


def _context(ctx: Any) -> Any:
    invoke, _ = _nd()
    return invoke.resolve_context(ctx)


def _as_list(values: Any, names: list[str], what: str, required: bool) -> list:
    if values is None:
        if required and names:
            raise ExecutorError(f"bind needs {what} for {', '.join(names)}")
        return [None] * len(names)
    if isinstance(values, Mapping):
        missing = [n for n in names if n not in values]
        if missing and required:
            raise ExecutorError(f"bind: {what} has no array for {', '.join(missing)}; it needs: {', '.join(names)}")
        return [values.get(n) for n in names]
    values = list(values)
    if len(values) != len(names):
        raise ExecutorError(f"bind: {what} has {len(values)} arrays for {len(names)} names ({', '.join(names)})")
    return values


def bind(symbol: Any, ctx: Any, args: Any, args_grad: Any = None, grad_req: Any = "write", aux_states: Any = None,
         memplan: str | None = None, shared_exec: Executor | None = None) -> Executor:
    """Bind ``symbol`` to given NDArrays.

    Parameters
    ----------
    ctx : Context
        The device.
    args : list or dict of NDArray
        Every argument (``list_arguments`` order, or by name).
    args_grad : list or dict of NDArray, optional
        Gradient arrays; arguments without one get ``grad_req='null'``.
    grad_req : str, list or dict
        ``write``, ``add`` or ``null`` (per argument with a list or dict).
    aux_states : list or dict of NDArray, optional
        Auxiliary states (required when the symbol has any).
    memplan : str, optional
        The memory-planning strategy (default: config ``memplan``).
    """
    ctx = _context(ctx)
    arguments = symbol.list_arguments()
    arg_list = _as_list(args, arguments, "args", required=True)
    _, NDArray = _nd()
    for name, array in zip(arguments, arg_list):
        if not isinstance(array, NDArray):
            raise ExecutorError(f"bind: argument {name!r} is {type(array).__name__}, expected an NDArray")
    grad_list = _as_list(args_grad, arguments, "args_grad", required=False)
    reqs = normalize_grad_req(grad_req, arguments)
    reqs = {n: (r if g is not None else "null") for (n, r), g in zip(reqs.items(), grad_list)}
    aux_names = symbol.list_auxiliary_states()
    aux_list = _as_list(aux_states, aux_names, "aux_states", required=True)
    shapes = {n: tuple(a.shape) for n, a in zip(arguments, arg_list)}
    shapes.update({n: tuple(a.shape) for n, a in zip(aux_names, aux_list)})
    dtypes = {n: np.dtype(a._data.dtype).name for n, a in zip(arguments, arg_list)}
    dtypes.update({n: np.dtype(a._data.dtype).name for n, a in zip(aux_names, aux_list)})
    graph = build_exec_graph(symbol, shapes, dtypes, reqs, for_training=True)
    for node, array in zip(graph.arg_nodes, arg_list):
        inferred = graph.shapes[(id(node), 0)]
        if tuple(array.shape) != tuple(inferred):
            raise ShapeError(f"bind: argument {node.name!r} has shape {array.shape}, the graph needs {inferred}")
    for name, grad, array in zip(arguments, grad_list, arg_list):
        if grad is not None and tuple(grad.shape) != tuple(array.shape):
            raise ShapeError(f"bind: gradient of {name!r} has shape {grad.shape}, the argument has {array.shape}")
    return Executor(symbol, ctx, graph, arg_list, grad_list, aux_list, memplan, shared_exec)


def simple_bind(symbol: Any, ctx: Any, grad_req: Any = "write", type_dict: Mapping[str, Any] | None = None,
                memplan: str | None = None, shared_exec: Executor | None = None,
                shapes: Mapping[str, Any] | None = None) -> Executor:
    """Allocate every argument, gradient and auxiliary array from input shapes and bind.

    Raises
    ------
    ShapeError
        When the shapes given do not determine every argument (naming those left unknown),
        or a given shape contradicts the graph.
    """
    ctx = _context(ctx)
    graph = build_exec_graph(symbol, shapes or {}, type_dict or {}, grad_req, for_training=True)
    args, grads, aux = [], [], []
    for node in graph.arg_nodes:
        k = (id(node), 0)
        args.append(_new_array(ctx, graph.shapes[k], graph.dtypes[k]))
        grads.append(_new_array(ctx, graph.shapes[k], graph.dtypes[k]) if graph.grad_req[node.name] != "null"
                     else None)
    for node in graph.aux_nodes:
        k = (id(node), 0)
        aux.append(_new_array(ctx, graph.shapes[k], graph.dtypes[k]))
    return Executor(symbol, ctx, graph, args, grads, aux, memplan, shared_exec)


def plan_memory(symbol: Any, for_training: bool = True, memplan: str | None = None,
                type_dict: Mapping[str, Any] | None = None, shapes: Mapping[str, Any] | None = None) -> Any:
    """The verified :class:`~mxkit.memplan.plan.MemoryPlan` of a bind, allocating nothing."""
    from mxkit.memplan import plan_memory as plan

    graph = build_exec_graph(symbol, shapes or {}, type_dict or {}, "write", for_training=for_training)
    memory_graph = graph.memory_graph()
    result = plan(memory_graph, memplan)
    result.verify(memory_graph)
    return result


__all__ = ["Executor", "ExecutorError", "bind", "plan_memory", "simple_bind"]
