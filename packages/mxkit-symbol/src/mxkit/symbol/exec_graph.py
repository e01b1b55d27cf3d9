"""The executor's graph: forward and backward nodes, inferred shapes and dtypes, and the
plain-Python description the memory planner reads.

Built once per bind from a symbol, the argument shapes and dtypes and ``grad_req``:

- the forward nodes are exactly those the heads depend on (prediction and feature
  extraction never see a later layer) and the backward nodes are only built when some
  argument has ``grad_req`` other than ``null``;
- every gradient reaches its argument's array through a node that writes it: the node that
  produced it when nothing else claims that entry (``write``), otherwise an ``identity``
  copy (``write``) or an ``elemwise_add`` onto the array's current value (``add``);
- :meth:`ExecGraph.memory_graph` describes it to :mod:`mxkit.memplan`: arguments, their
  gradients, auxiliary states and outputs are external; everything else is planned.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from math import prod
from typing import Any

from mxkit.core.errors import DTypeError, MXKitError, ShapeError
from mxkit.symbol.autodiff import GraphApplier, build_backward, is_loss_head
from mxkit.symbol.graph import Entry, Node, aux_variables, topo_order
from mxkit.symbol.infer import infer_dtypes, infer_shapes, key, variable_dtypes, variable_shapes

GRAD_REQS = ("write", "add", "null")


@dataclass
class ExecGraph:
    """Everything a bind needs to know about the graph (no arrays).

    Attributes
    ----------
    heads : list of Entry
        The symbol's outputs.
    arg_nodes, aux_nodes : list of Node
        Argument and auxiliary-state variables, in ``list_arguments`` order.
    grad_req : dict of str to str
        Per argument: ``write``, ``add`` or ``null``.
    forward_nodes, backward_nodes : list of Node
        Operator nodes in execution order.
    head_grad_nodes : list of Node or None
        Per head, the variable its gradient is fed through (``None`` for loss heads, heads
        nothing is differentiated through, and prediction-only binds).
    unmonitored_ids : set of int
        Ids of nodes the graph adds that MXNet's graph does not have (the constant gradient
        of a loss head): a monitor does not report them.
    grad_writers : dict of str to Entry
        Argument name to the entry whose producer writes its gradient array.
    grad_inputs : dict of str to Node
        For ``grad_req='add'``: argument name to the variable standing for the gradient
        array's current value.
    shapes, dtypes : dict
        Entry key ``(id(node), index)`` to shape / dtype name.
    retired : list of Node
        Nodes the graph passes replaced (kept alive: ``shapes`` still has their keys).
    recomputed_ids : set of int
        Ids of the backward nodes that recompute forward results (the ``mirror`` pass).
    notes : dict of int to str
        Node id to what a graph pass made it from (a folded convolution's Convolution and
        BatchNorm), shown by the executor's ``debug_str``.
    portable_heads : list of Entry
        The outputs over the forward graph as the passes left it in MXNet's operators (before
        elementwise fusion): ``Executor.get_optimized_symbol``.
    planner : PlannerSpec or None
        The memory planner of this bind, resolved once by :func:`build_exec_graph`: the
        graph passes and the plan use the same one even if the configuration changes.
    """

    heads: list[Entry]
    arg_nodes: list[Node]
    aux_nodes: list[Node]
    grad_req: dict[str, str]
    forward_nodes: list[Node] = field(default_factory=list)
    backward_nodes: list[Node] = field(default_factory=list)
    head_grad_nodes: list[Node | None] = field(default_factory=list)
    unmonitored_ids: set[int] = field(default_factory=set)
    grad_writers: dict[str, Entry] = field(default_factory=dict)
    grad_inputs: dict[str, Node] = field(default_factory=dict)
    shapes: dict[Any, tuple] = field(default_factory=dict)
    dtypes: dict[Any, str] = field(default_factory=dict)
    retired: list[Node] = field(default_factory=list)
    recomputed_ids: set[int] = field(default_factory=set)
    notes: dict[int, str] = field(default_factory=dict)
    portable_heads: list[Entry] = field(default_factory=list)
    planner: Any = None

    def nbytes(self, entry_key: Any) -> int:
        from mxkit.core.dtypes import itemsize

        return prod(self.shapes[entry_key]) * itemsize(self.dtypes[entry_key])

    def external_keys(self) -> set:
        """Entries whose memory the executor owns outside the plan (outputs, gradients)."""
        keys = {key(h) for h in self.heads}
        keys.update(key(e) for e in self.grad_writers.values())
        return keys

    def memory_graph(self, device: str = "cpu(0)") -> Any:
        """The :class:`mxkit.memplan.Graph` of the forward and backward nodes, in order."""
        from mxkit.memplan import Entry as MemEntry
        from mxkit.memplan import Graph
        from mxkit.memplan import Node as MemNode

        names: dict[Any, str] = {}
        entries: list[Any] = []
        external = self.external_keys()

        def name_of(entry: Entry) -> str:
            k = key(entry)
            if k not in names:
                label = entry.node.output_names()[entry.index]
                names[k] = f"{len(names)}:{label}"
                is_external = entry.node.is_variable or k in external
                entries.append(MemEntry(names[k], self.nbytes(k), device, is_external))
            return names[k]

        nodes = []
        for position, node in enumerate(self.forward_nodes + self.backward_nodes):
            inputs = [name_of(e) for e in node.inputs]
            outputs = [name_of(Entry(node, i)) for i in range(node.num_outputs())]
            inplace = node.op.inplace(node.params) if callable(node.op.inplace) else node.op.inplace
            # inputs read for their shape only (a gradient's ``like``) need not stay alive until here
            nodes.append(MemNode(f"{position}:{node.name}", tuple(inputs), tuple(outputs), inplace=tuple(inplace),
                                 ignored_inputs=node.op.reads_shape_only))
        return Graph(nodes, entries)

    def plan_memory(self, device: str = "cpu(0)") -> tuple[Any, Any]:
        """The memory graph (:meth:`memory_graph`) and its verified plan by the bind's planner.

        The planner is :attr:`planner`, the one :func:`build_exec_graph` resolved; a
        recomputing planner (``sublinear``) is told which nodes recompute forward results,
        which its checkpoint selection chose in the ``mirror`` pass.

        Returns
        -------
        (mxkit.memplan.Graph, mxkit.memplan.MemoryPlan)

        Raises
        ------
        mxkit.memplan.PlanError
            When the plan does not verify.
        """
        from mxkit.memplan import plan_memory

        memory_graph = self.memory_graph(device)
        options: dict[str, Any] = {}
        if self.planner.select_checkpoints is not None:
            executed = self.forward_nodes + self.backward_nodes
            options["recompute"] = [planned.name for node, planned in zip(executed, memory_graph.nodes)
                                    if id(node) in self.recomputed_ids]
        plan = plan_memory(memory_graph, self.planner, **options)
        plan.verify(memory_graph)
        return memory_graph, plan


def normalize_grad_req(grad_req: Any, arguments: list[str]) -> dict[str, str]:
    """``grad_req`` as a dict over every argument (from a string, list or dict)."""
    if isinstance(grad_req, str):
        reqs = dict.fromkeys(arguments, grad_req)
    elif isinstance(grad_req, Mapping):
        unknown = [k for k in grad_req if k not in arguments]
        if unknown:
            # MXNet reads the names it needs from the dict and ignores the others (a dict written
            # for a layer with a bias serves one without); a warning still shows a typo
            warnings.warn(f"grad_req names {', '.join(map(repr, unknown))}, which are not arguments (ignored); "
                          f"the arguments are: {', '.join(arguments)}", stacklevel=3)
        reqs = {name: grad_req.get(name, "null") for name in arguments}
    elif isinstance(grad_req, list | tuple):
        if len(grad_req) != len(arguments):
            raise MXKitError(f"grad_req list has {len(grad_req)} entries for {len(arguments)} arguments "
                             f"({', '.join(arguments)})")
        reqs = dict(zip(arguments, grad_req))
    else:
        raise MXKitError(f"grad_req must be 'write', 'add', 'null', a list or a dict, got {grad_req!r}")
    for name, req in reqs.items():
        if req not in GRAD_REQS:
            raise MXKitError(f"grad_req of {name!r} is {req!r}; expected one of {', '.join(GRAD_REQS)}")
    return reqs


def build_exec_graph(symbol: Any, shapes: Mapping[str, Any], dtypes: Mapping[str, Any], grad_req: Any,
                     for_training: bool = True, memplan: Any = None) -> ExecGraph:
    """Forward and (when needed) backward nodes of ``symbol`` with every shape and dtype.

    ``memplan`` (a planner name, None for config ``memplan``, or a resolved
    :class:`~mxkit.core.specs.PlannerSpec`) is resolved here, once per bind, and kept as
    :attr:`ExecGraph.planner`. The graph passes run over the nodes (config
    ``graph_passes``); when the planner is a recomputing one such as ``sublinear`` and there
    is a backward pass, the ``mirror`` pass runs too, with that planner's checkpoint selection.

    Raises
    ------
    ShapeError
        When the given shapes do not determine every entry (naming the arguments still
        unknown) or an operator rejects them.
    """
    from mxkit.core.plugins import get_planner
    from mxkit.core.specs import PlannerSpec
    from mxkit.symbol.passes import PassGraph, configured_passes, optimize_graph

    planner = memplan if isinstance(memplan, PlannerSpec) else get_planner(memplan)
    from mxkit.symbol.control_flow import expand_loops

    # foreach loops become their body once per step, now that the data's length is known
    heads = expand_loops(list(symbol._outputs), shapes)
    order = topo_order(heads)
    aux_ids = aux_variables(order)
    arg_nodes = [n for n in order if n.is_variable and id(n) not in aux_ids]
    aux_nodes = [n for n in order if n.is_variable and id(n) in aux_ids]
    if heads != list(symbol._outputs):
        # an unrolled loop reaches its variables in another order: keep the symbol's (list_arguments)
        rank = {id(n): i for i, n in enumerate(topo_order(symbol._outputs)) if n.is_variable}
        arg_nodes.sort(key=lambda n: rank[id(n)])
        aux_nodes.sort(key=lambda n: rank[id(n)])
    _check_unique_names(arg_nodes + aux_nodes)
    reqs = normalize_grad_req(grad_req, [n.name for n in arg_nodes])
    if not for_training:
        reqs = dict.fromkeys(reqs, "null")
    graph = ExecGraph(heads, arg_nodes, aux_nodes, reqs)
    graph.planner = planner
    graph.forward_nodes = [n for n in order if n.op is not None]

    known_shapes = variable_shapes(order, shapes)
    graph.shapes = infer_shapes(order, known_shapes)
    _require_complete(graph.shapes, order, heads, "shape")
    known_dtypes = variable_dtypes(order, dtypes)
    graph.dtypes = infer_dtypes(order, known_dtypes)
    _default_dtypes(graph, order)

    wrt = [n for n in arg_nodes if reqs[n.name] != "null"]
    if wrt:
        _add_backward(graph, wrt)
    # passes see forward and backward nodes together, rooted at the outputs and gradient writers
    forward_ids = {id(n) for n in graph.forward_nodes}
    select = planner.select_checkpoints if graph.backward_nodes else None
    passes = PassGraph(graph.forward_nodes + graph.backward_nodes, heads + list(graph.grad_writers.values()),
                       graph.shapes, graph.dtypes, forward_ids, shared_ids={id(n) for n in order},
                       select_checkpoints=select)
    optimize_graph(passes, configured_passes(recompute=select is not None, inference=not graph.backward_nodes))
    graph.forward_nodes = [n for n in passes.nodes if id(n) in passes.forward_ids]
    graph.backward_nodes = [n for n in passes.nodes if id(n) not in passes.forward_ids]
    graph.heads = passes.roots[:len(heads)]
    graph.portable_heads = (passes.portable_roots or passes.roots)[:len(heads)]
    graph.grad_writers = dict(zip(graph.grad_writers, passes.roots[len(heads):]))
    graph.retired = passes.retired
    graph.recomputed_ids = {id(n) for n in graph.backward_nodes if id(n) in passes.recomputed_ids}
    graph.notes = passes.notes
    graph.unmonitored_ids |= passes.unmonitored_ids
    return graph


def _check_unique_names(variables: list[Node]) -> None:
    seen: dict[str, int] = {}
    for node in variables:
        seen[node.name] = seen.get(node.name, 0) + 1
    twice = [n for n, c in seen.items() if c > 1]
    if twice:
        raise MXKitError(f"the symbol has several different variables named {', '.join(map(repr, twice))}; "
                         f"variable names must be unique to bind")


def _require_complete(shapes: Mapping, order: list[Node], heads: list[Entry], what: str) -> None:
    def complete(value: Any) -> bool:
        return value is not None and all(d > 0 for d in value)

    missing = [n.name for n in order if n.is_variable and not complete(shapes.get((id(n), 0)))]
    if missing:
        raise ShapeError(f"cannot infer the {what}s of {', '.join(missing)} from the given shapes; pass them to "
                         f"simple_bind, e.g. {missing[0]}=(...)")
    for node in order:
        for i in range(node.num_outputs()):
            if not complete(shapes.get((id(node), i))):
                raise ShapeError(f"cannot infer the shape of output {node.output_names()[i]!r} "
                                 f"(operator {node.op_name}) from the given shapes")


def _default_dtypes(graph: ExecGraph, order: list[Node]) -> None:
    from mxkit.core import config

    if any(graph.dtypes.get((id(n), 0)) is None for n in order if n.is_variable):
        default = config.get("default_dtype")
        known = {(id(n), 0): graph.dtypes.get((id(n), 0)) or default for n in order if n.is_variable}
        graph.dtypes = infer_dtypes(order, known)
    for node in order:
        for i in range(node.num_outputs()):
            if graph.dtypes.get((id(node), i)) is None:
                raise DTypeError(f"cannot infer the dtype of {node.output_names()[i]!r} (operator {node.op_name}); "
                                 f"pass type_dict")


def _add_backward(graph: ExecGraph, wrt: list[Node]) -> None:
    head_grads: list[Entry] = []
    for head in graph.heads:
        if is_loss_head(head):
            graph.head_grad_nodes.append(None)
            ones = GraphApplier(f"{head.node.name}_head", graph.shapes, graph.dtypes)("ones_like", head)
            graph.unmonitored_ids.add(id(ones.node))
            head_grads.append(ones)
        else:
            variable = Node(None, f"{head.node.output_names()[head.index]}_head_grad")
            graph.head_grad_nodes.append(variable)
            head_grads.append(Entry(variable, 0))
            graph.shapes[(id(variable), 0)] = graph.shapes[key(head)]
            graph.dtypes[(id(variable), 0)] = graph.dtypes[key(head)]
    grads = build_backward(graph.heads, head_grads, wrt, graph.shapes, graph.dtypes)
    claimed: dict[Any, int] = {}
    for entry in list(grads.values()) + graph.heads:
        claimed[key(entry)] = claimed.get(key(entry), 0) + 1
    writers: list[Entry] = []
    for node in wrt:
        grad = grads.get(id(node))
        if grad is None:
            continue  # no head depends on it: the gradient is zero
        req = graph.grad_req[node.name]
        if req == "add":
            current = Node(None, f"{node.name}_grad_current")
            graph.grad_inputs[node.name] = current
            graph.shapes[(id(current), 0)] = graph.shapes[(id(node), 0)]
            graph.dtypes[(id(current), 0)] = graph.dtypes[(id(node), 0)]
            writer = GraphApplier(f"{node.name}_grad", graph.shapes, graph.dtypes)("elemwise_add", Entry(current, 0),
                                                                                  grad)
        elif grad.node.is_variable or claimed[key(grad)] > 1 or key(grad) in {key(w) for w in writers}:
            writer = GraphApplier(f"{node.name}_grad", graph.shapes, graph.dtypes)("identity", grad)
        else:
            writer = grad
        graph.grad_writers[node.name] = writer
        writers.append(writer)
    forward_ids = {id(n) for n in graph.forward_nodes}
    every = topo_order(graph.heads + writers)
    graph.backward_nodes = [n for n in every if n.op is not None and id(n) not in forward_ids]
    known_shapes = dict(graph.shapes)
    known_dtypes = dict(graph.dtypes)
    for name, current in graph.grad_inputs.items():
        arg = next(n for n in graph.arg_nodes if n.name == name)
        known_shapes[(id(current), 0)] = graph.shapes[(id(arg), 0)]
        known_dtypes[(id(current), 0)] = graph.dtypes[(id(arg), 0)]
    graph.shapes = infer_shapes(every, known_shapes)
    graph.dtypes = infer_dtypes(every, known_dtypes)
    for node in graph.backward_nodes:
        for i in range(node.num_outputs()):
            if graph.shapes.get((id(node), i)) is None or graph.dtypes.get((id(node), i)) is None:
                raise ShapeError(f"cannot infer the shape/dtype of backward node {node.name!r} "
                                 f"(operator {node.op_name}) output {i}")


__all__ = ["GRAD_REQS", "ExecGraph", "build_exec_graph", "normalize_grad_req"]
