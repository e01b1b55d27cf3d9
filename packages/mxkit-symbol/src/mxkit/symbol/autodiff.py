"""The backward graph, built explicitly from each operator's gradient definition.

As in MXNet (nnvm's ``Gradient`` pass) and Theano, differentiation makes new nodes: each
forward node on a path from a differentiated variable to a head asks its operator's
``gradient(F, params, inputs, outputs, out_grads)`` for its input gradients, where ``F``
here adds nodes to the graph instead of computing. Gradients of an entry used several
times are summed with ``elemwise_add`` nodes. Because backward nodes are ordinary nodes,
the memory planner and the executor treat forward and backward alike.

Head gradients: a loss operator (``SoftmaxOutput``, the regression outputs, ``MakeLoss``)
supplies its own, so its head gets a constant ``ones_like`` node; every other head gets a
variable that ``Executor.backward(out_grads)`` fills.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mxkit.core.errors import MXKitError
from mxkit.ndarray.registry import get_registry
from mxkit.symbol.graph import Entry, Node, known_attributes, topo_order

# Operators whose gradient does not depend on a head gradient (MXNet's loss layers).
LOSS_OPERATORS = frozenset({"SoftmaxOutput", "LinearRegressionOutput", "LogisticRegressionOutput",
                            "MAERegressionOutput", "SVMOutput", "MakeLoss", "make_loss", "IdentityAttachKLSparseReg"})


class GradientError(MXKitError):
    """The backward graph cannot be built (an operator without a gradient on the path)."""


def is_loss_head(entry: Entry) -> bool:
    """Whether ``entry`` is the output of a loss operator that makes its own head gradient."""
    node = entry.node
    if node.op is None:
        return False
    if node.op.is_loss is not None:  # an operator whose parameters say (Custom)
        return bool(node.op.is_loss(node.params))
    return node.op.name in LOSS_OPERATORS and not node.params.get("out_grad", False)


class GraphApplier:
    """The ``F`` handed to gradient definitions: each call adds a node and returns its entries.

    Parameters
    ----------
    stem : str
        Prefix of the names of the nodes made (the forward node's name).
    attrs : dict of str to str, optional
        Attributes every node made carries (the forward node's ``__ctx_group__``, so that its
        backward nodes run on its device under ``group2ctx``).
    """

    def __init__(self, stem: str, shapes: dict | None = None, dtypes: dict | None = None,
                 attrs: dict[str, str] | None = None) -> None:
        self.stem = stem
        self.attrs = dict(attrs or {})
        self.count = 0
        self.shapes = shapes
        self.dtypes = dtypes

    def __call__(self, op_name: str, *inputs: Entry, **params: Any) -> Entry | list[Entry]:
        op = get_registry().get(op_name)
        for i, value in enumerate(inputs):
            if not isinstance(value, Entry):
                raise GradientError(f"gradient of {self.stem!r}: input {i} of {op_name} is {value!r}, expected a "
                                    f"graph entry (an input, output or gradient)")
        public = {k: v for k, v in params.items() if not k.startswith("_")}
        typed = op.parse_params(public)
        node = Node(op, f"{self.stem}_{op.name.lstrip('_')}{self.count}",
                    {**op.params.to_strings(typed), **self.attrs}, list(inputs), typed)
        self.count += 1
        outputs = [Entry(node, i) for i in range(node.num_outputs())]
        if self.shapes is not None:
            self._infer(node, outputs)
        return outputs[0] if len(outputs) == 1 else outputs

    def __getattr__(self, op_name: str) -> Any:
        if op_name.startswith("__"):
            raise AttributeError(op_name)
        return lambda *inputs, **params: self(op_name, *inputs, **params)

    def _infer(self, node: Node, outputs: list[Entry]) -> None:
        """Shapes and dtypes of a new node right away: later gradient code may read them."""
        from mxkit.symbol.infer import key

        in_shapes = [self.shapes.get(key(e)) for e in node.inputs]
        in_dtypes = [self.dtypes.get(key(e)) for e in node.inputs]
        if any(s is None for s in in_shapes) or any(d is None for d in in_dtypes):
            return
        try:
            out_shapes = node.op.infer_shape(node.params, [tuple(s) for s in in_shapes])
            out_dtypes = node.op.infer_dtype(node.params, list(in_dtypes))
        except MXKitError as exc:
            raise GradientError(f"backward node {node.name!r}: {node.op.describe_call(node.params, in_shapes)}: "
                                f"{exc}") from None
        from mxkit.core.dtypes import dtype_name

        for entry, shape, dtype in zip(outputs, out_shapes, out_dtypes):
            self.shapes[key(entry)] = tuple(shape)
            self.dtypes[key(entry)] = dtype_name(dtype)


def _needs_gradient(order: Sequence[Node], wrt: set[int]) -> set[int]:
    """Ids of the nodes that depend on a variable in ``wrt`` (their outputs carry gradient)."""
    needed = set(wrt)
    for node in order:
        if node.op is not None and any(id(e.node) in needed for e in node.inputs):
            needed.add(id(node))
    return needed


def _sum(entries: list[Entry], stem: str, shapes: dict | None, dtypes: dict | None) -> Entry:
    """One entry holding the sum of ``entries`` (a chain of ``elemwise_add`` nodes)."""
    total = entries[0]
    applier = GraphApplier(f"{stem}_sum", shapes, dtypes)
    for entry in entries[1:]:
        total = applier("elemwise_add", total, entry)
    return total


def build_backward(heads: Sequence[Entry], head_grads: Sequence[Entry], wrt: Sequence[Node],
                   shapes: dict | None = None, dtypes: dict | None = None) -> dict[int, Entry]:
    """Gradient entries of the variables ``wrt`` given the gradients of ``heads``.

    Parameters
    ----------
    heads : list of Entry
        The outputs being differentiated.
    head_grads : list of Entry
        Their gradients (same order).
    wrt : list of Node
        Variable nodes to differentiate with respect to.
    shapes, dtypes : dict, optional
        Inferred shapes and dtypes of the forward entries; gradient definitions may read
        ``entry.shape``, and the new nodes' values are added to these dicts.

    Returns
    -------
    dict
        ``id(variable node)`` to the entry of its gradient; a variable no head depends on
        is missing (its gradient is zero).
    """
    if shapes is None:
        return _build_backward(heads, head_grads, wrt, None, None)
    with known_attributes(shapes, dtypes):
        return _build_backward(heads, head_grads, wrt, shapes, dtypes)


def _build_backward(heads: Sequence[Entry], head_grads: Sequence[Entry], wrt: Sequence[Node],
                    shapes: dict | None, dtypes: dict | None) -> dict[int, Entry]:
    order = topo_order(heads)
    needed = _needs_gradient(order, {id(n) for n in wrt})
    pending: dict[tuple[int, int], list[Entry]] = {}
    for head, grad in zip(heads, head_grads):
        if id(head.node) in needed:
            pending.setdefault((id(head.node), head.index), []).append(grad)
    result: dict[int, Entry] = {}
    for node in reversed(order):
        if id(node) not in needed:
            continue
        if node.op is None:
            grads = pending.get((id(node), 0))
            if grads:
                result[id(node)] = _sum(grads, f"{node.name}_grad", shapes, dtypes)
            continue
        count = node.num_outputs()
        out_grads: list[Entry | None] = []
        for i in range(count):
            grads = pending.pop((id(node), i), None)
            out_grads.append(_sum(grads, f"{node.name}_out{i}_grad", shapes, dtypes) if grads else None)
        if all(g is None for g in out_grads):
            continue
        outputs = [Entry(node, i) for i in range(count)]
        group = node.attrs.get("__ctx_group__")
        applier = GraphApplier(f"{node.name}_backward", shapes, dtypes,
                               {"__ctx_group__": group} if group is not None else None)
        filled = [g if g is not None else applier("zeros_like", outputs[i]) for i, g in enumerate(out_grads)]
        in_grads = _call_gradient(node, applier, outputs, filled)
        for entry, grad in zip(node.inputs, in_grads):
            if grad is not None and id(entry.node) in needed:
                pending.setdefault((id(entry.node), entry.index), []).append(grad)
    return result


def _call_gradient(node: Node, applier: GraphApplier, outputs: list[Entry], out_grads: list[Entry]) -> list:
    op = node.op
    if op.gradient is None:
        raise GradientError(f"operator {op.name} (node {node.name!r}) has no gradient, but a differentiated "
                            f"argument flows through it; set grad_req='null' for those arguments or wrap the "
                            f"input in BlockGrad")
    regular = node.inputs[:len(node.inputs) - node.num_aux()]
    try:
        # every input, auxiliary states included, as NDArray autograd passes them: BatchNorm with
        # use_global_stats differentiates through its moving statistics, Custom hands them back
        grads = op.gradient(applier, node.params, list(node.inputs), outputs, out_grads)
    except MXKitError as exc:
        raise GradientError(f"building the gradient of node {node.name!r} (operator {op.name}): {exc}") from None
    grads = list(grads) if isinstance(grads, list | tuple) else [grads]
    if len(grads) < len(regular):
        raise GradientError(f"gradient of operator {op.name} returned {len(grads)} gradients for "
                            f"{len(regular)} inputs (node {node.name!r})")
    return grads


__all__ = ["GradientError", "GraphApplier", "LOSS_OPERATORS", "build_backward", "is_loss_head"]
