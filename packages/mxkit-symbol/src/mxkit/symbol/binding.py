"""Binding a symbol: ``bind`` to given arrays, ``simple_bind`` allocating them from shapes,
and ``plan_memory`` / ``training_memory`` planning without allocating (for models larger
than memory)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from mxkit.core.errors import ShapeError
from mxkit.ndarray.sparse_base import BaseSparseNDArray
from mxkit.symbol.exec_graph import build_exec_graph, normalize_grad_req
from mxkit.symbol.executor import Executor, ExecutorError, _nd, _new_array
from mxkit.symbol.infer import key


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
         memplan: str | None = None, shared_exec: Executor | None = None, group2ctx: Any = None) -> Executor:
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
    group2ctx : dict of str to Context, optional
        Devices of the ``ctx_group`` attributes (:mod:`mxkit.symbol.placement`); the arrays
        given say where their variables are.
    """
    ctx = _context(ctx)
    arguments = symbol.list_arguments()
    arg_list = _as_list(args, arguments, "args", required=True)
    _, NDArray = _nd()
    # a graph computes on dense values: a sparse argument is bound as its dense copy
    arg_list = [a.tostype("default") if isinstance(a, BaseSparseNDArray) else a for a in arg_list]
    for name, array in zip(arguments, arg_list):
        if not isinstance(array, NDArray):
            raise ExecutorError(f"bind: argument {name!r} is {type(array).__name__}, expected an NDArray")
    grad_list = _as_list(args_grad, arguments, "args_grad", required=False)
    # a sparse gradient array asks for a gradient: the executor writes a dense one (grad_dict)
    grad_list = [g.tostype("default") if isinstance(g, BaseSparseNDArray) else g for g in grad_list]
    reqs = normalize_grad_req(grad_req, arguments)
    reqs = {n: (r if g is not None else "null") for (n, r), g in zip(reqs.items(), grad_list)}
    aux_names = symbol.list_auxiliary_states()
    aux_list = _as_list(aux_states, aux_names, "aux_states", required=True)
    aux_list = [a.tostype("default") if isinstance(a, BaseSparseNDArray) else a for a in aux_list]
    shapes = {n: tuple(a.shape) for n, a in zip(arguments, arg_list)}
    shapes.update({n: tuple(a.shape) for n, a in zip(aux_names, aux_list)})
    dtypes = {n: np.dtype(a.storage.dtype).name for n, a in zip(arguments, arg_list)}
    dtypes.update({n: np.dtype(a.storage.dtype).name for n, a in zip(aux_names, aux_list)})
    graph = build_exec_graph(symbol, shapes, dtypes, reqs, for_training=True, memplan=memplan)
    for node, array in zip(graph.arg_nodes, arg_list):
        inferred = graph.shapes[(id(node), 0)]
        if tuple(array.shape) != tuple(inferred):
            raise ShapeError(f"bind: argument {node.name!r} has shape {array.shape}, the graph needs {inferred}")
    for name, grad, array in zip(arguments, grad_list, arg_list):
        if grad is not None and tuple(grad.shape) != tuple(array.shape):
            raise ShapeError(f"bind: gradient of {name!r} has shape {grad.shape}, the argument has {array.shape}")
    return Executor(symbol, ctx, graph, arg_list, grad_list, aux_list, shared_exec, group2ctx=group2ctx)


def simple_bind(symbol: Any, ctx: Any, grad_req: Any = "write", type_dict: Mapping[str, Any] | None = None,
                memplan: str | None = None, shared_exec: Executor | None = None,
                shapes: Mapping[str, Any] | None = None, group2ctx: Any = None) -> Executor:
    """Allocate every argument, gradient and auxiliary array from input shapes and bind.

    With ``group2ctx`` (dict of ``ctx_group`` name to Context), the arrays of a variable of a
    named group are allocated on that group's device (:mod:`mxkit.symbol.placement`).

    Raises
    ------
    ShapeError
        When the shapes given do not determine every argument (naming those left unknown),
        or a given shape contradicts the graph.
    """
    from mxkit.symbol.placement import normalize_group2ctx, variable_context

    ctx = _context(ctx)
    groups = normalize_group2ctx(group2ctx, ctx)
    graph = build_exec_graph(symbol, shapes or {}, type_dict or {}, grad_req, for_training=True, memplan=memplan)
    args, grads, aux = [], [], []
    for node in graph.arg_nodes:
        k = (id(node), 0)
        where = variable_context(node, ctx, groups)
        args.append(_new_array(where, graph.shapes[k], graph.dtypes[k]))
        grads.append(_new_array(where, graph.shapes[k], graph.dtypes[k]) if graph.grad_req[node.name] != "null"
                     else None)
    for node in graph.aux_nodes:
        k = (id(node), 0)
        aux.append(_new_array(variable_context(node, ctx, groups), graph.shapes[k], graph.dtypes[k]))
    return Executor(symbol, ctx, graph, args, grads, aux, shared_exec, group2ctx=groups)


def plan_memory(symbol: Any, for_training: bool = True, memplan: str | None = None,
                type_dict: Mapping[str, Any] | None = None, shapes: Mapping[str, Any] | None = None) -> Any:
    """The verified :class:`~mxkit.memplan.plan.MemoryPlan` of a bind, allocating nothing.

    Its ``total_bytes`` are the intermediates only; :func:`training_memory` adds the arrays
    a bind allocates outside the plan.
    """
    graph = build_exec_graph(symbol, shapes or {}, type_dict or {}, "write", for_training=for_training,
                             memplan=memplan)
    return graph.plan_memory()[1]


@dataclass(frozen=True)
class BindMemory:
    """The bytes a bind needs, by kind (:func:`training_memory`).

    Attributes
    ----------
    plan : MemoryPlan
        The intermediates' plan (``plan.total_bytes`` of them).
    arguments, gradients, auxiliary, outputs : int
        Bytes of the argument arrays (data, labels, weights), their gradient arrays, the
        auxiliary states, and the executor's output and head-gradient arrays.
    """

    plan: Any
    arguments: int
    gradients: int
    auxiliary: int
    outputs: int

    @property
    def planned(self) -> int:
        """Bytes of the planned intermediates."""
        return int(self.plan.total_bytes)

    @property
    def total_bytes(self) -> int:
        """Everything a bind allocates."""
        return self.planned + self.arguments + self.gradients + self.auxiliary + self.outputs


def training_memory(symbol: Any, memplan: str | None = None, grad_req: Any = "write",
                    type_dict: Mapping[str, Any] | None = None, shapes: Mapping[str, Any] | None = None,
                    for_training: bool = True) -> BindMemory:
    """What ``simple_bind`` would allocate, by kind, computed by planning only.

    For networks larger than memory: ResNet-152 at batch 128 needs about 20 GB to bind but
    a few seconds to plan. The planned bytes are exactly the executor's pools; the other
    kinds are the arrays a bind allocates outside the plan.
    """
    graph = build_exec_graph(symbol, shapes or {}, type_dict or {}, grad_req, for_training=for_training,
                             memplan=memplan)
    plan = graph.plan_memory()[1]
    arguments = sum(graph.nbytes((id(n), 0)) for n in graph.arg_nodes)
    gradients = sum(graph.nbytes((id(n), 0)) for n in graph.arg_nodes if graph.grad_req[n.name] != "null")
    auxiliary = sum(graph.nbytes((id(n), 0)) for n in graph.aux_nodes)
    owned = {key(h) for h in graph.heads if not h.node.is_variable}
    owned.update((id(v), 0) for v in graph.head_grad_nodes if v is not None)
    return BindMemory(plan, arguments, gradients, auxiliary, sum(graph.nbytes(k) for k in owned))


__all__ = ["BindMemory", "Executor", "ExecutorError", "bind", "plan_memory", "simple_bind", "training_memory"]
