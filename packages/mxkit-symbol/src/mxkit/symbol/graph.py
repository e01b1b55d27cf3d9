"""The graph IR under Symbol: nodes, their output entries and traversal order.

A :class:`Node` is a variable (``op is None``) or one invocation of a registry operator.
Its ``attrs`` are MXNet's string attributes: the operator parameters as the user gave
them plus free-form ``__dunder__`` attributes (``__shape__``, ``__lr_mult__``) and scope
attributes (``ctx_group``). The typed parameters are parsed once from them. An input is
an :class:`Entry`: output ``index`` of node ``node``. Nodes are immutable in practice:
composition and gradient construction make new nodes and share the unchanged ones.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

from mxkit.core.errors import ShapeError
from mxkit.ndarray.registry import OpDef

_known = threading.local()


@contextmanager
def known_attributes(shapes: Mapping[tuple[int, int], tuple], dtypes: Mapping[tuple[int, int], str]) -> Iterator[None]:
    """Make ``entry.shape``/``ndim``/``dtype`` answer from these inferred values inside the block.

    Gradient definitions written for NDArrays read their inputs' shapes (``len(x.shape)``);
    while the backward graph is built, entries answer from shape inference.
    """
    previous = getattr(_known, "values", None)
    _known.values = (shapes, dtypes)
    try:
        yield
    finally:
        _known.values = previous


class Entry(NamedTuple):
    """Output ``index`` of ``node`` (MXNet's NodeEntry)."""

    node: Node
    index: int

    def _lookup(self, which: int, what: str) -> Any:
        values = getattr(_known, "values", None)
        value = None if values is None else values[which].get((id(self.node), self.index))
        if value is None:
            raise ShapeError(f"the {what} of {self.node.output_names()[self.index]!r} is not known here; graph "
                             f"entries have shapes only while a bound graph is being differentiated")
        return value

    @property
    def shape(self) -> tuple:
        """The inferred shape (only while differentiating a graph with known shapes)."""
        return tuple(self._lookup(0, "shape"))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> Any:
        from mxkit.core.dtypes import to_numpy

        return to_numpy(self._lookup(1, "dtype"))


class Node:
    """One graph node: a variable or an operator call.

    Parameters
    ----------
    op : OpDef or None
        The operator; ``None`` for a variable.
    name : str
        The node name (unique within a well-formed graph).
    attrs : dict of str to str
        String attributes (operator parameters as given, ``__dunder__`` and scope ones).
    inputs : sequence of Entry
        Regular inputs then auxiliary states, in the operator's order.
    params : dict, optional
        Typed parameters; parsed from ``attrs`` when omitted.
    """

    __slots__ = ("__weakref__", "attrs", "inputs", "name", "op", "params")

    def __init__(self, op: OpDef | None, name: str, attrs: dict[str, str] | None = None,
                 inputs: Sequence[Entry] = (), params: dict[str, Any] | None = None) -> None:
        self.op = op
        self.name = name
        self.attrs = dict(attrs or {})
        self.inputs = list(inputs)
        if params is None:
            params = op.parse_params(op_params(self.attrs)) if op is not None else {}
        self.params = params

    @property
    def is_variable(self) -> bool:
        return self.op is None

    @property
    def op_name(self) -> str:
        """MXNet's op string: the operator name, or ``"null"`` for a variable."""
        return "null" if self.op is None else self.op.name

    def num_outputs(self) -> int:
        return 1 if self.op is None else self.op.count_outputs(self.params)

    def output_names(self) -> list[str]:
        """Names of the node's outputs as ``list_outputs`` shows them (``fc1_output``)."""
        if self.op is None:
            return [self.name]
        return [f"{self.name}_{out}" for out in self.op.list_outputs(self.params)]

    def num_aux(self) -> int:
        return 0 if self.op is None else len(self.op.list_aux(self.params))

    def aux_input_indices(self) -> range:
        """Positions of auxiliary states among ``inputs`` (they come last)."""
        count = self.num_aux()
        return range(len(self.inputs) - count, len(self.inputs))

    def __repr__(self) -> str:
        return f"Node({self.op_name}, {self.name!r})"


def op_params(attrs: dict[str, str]) -> dict[str, str]:
    """The operator parameters among a node's attributes (free-form ones dropped)."""
    return {k: v for k, v in attrs.items() if not (k.startswith("__") and k.endswith("__"))}


def topo_order(heads: Iterable[Entry]) -> list[Node]:
    """Every node reachable from ``heads``, inputs before users (MXNet's DFS post-order).

    Iterative, so deep graphs (long unrolled RNNs) do not hit Python's recursion limit.
    """
    order: list[Node] = []
    seen: set[int] = set()
    for head in heads:
        if id(head.node) in seen:
            continue
        stack: list[tuple[Node, int]] = [(head.node, 0)]
        seen.add(id(head.node))
        while stack:
            node, position = stack[-1]
            if position < len(node.inputs):
                stack[-1] = (node, position + 1)
                child = node.inputs[position].node
                if id(child) not in seen:
                    seen.add(id(child))
                    stack.append((child, 0))
            else:
                stack.pop()
                order.append(node)
    return order


def aux_variables(order: Sequence[Node]) -> set[int]:
    """Ids of the variable nodes used as auxiliary states by some operator."""
    aux: set[int] = set()
    for node in order:
        for position in node.aux_input_indices():
            aux.add(id(node.inputs[position].node))
    return aux


def copy_graph(heads: Sequence[Entry], binding: Mapping[int, Entry], prefix: str = "") -> list[Entry]:
    """A copy of the graph of ``heads`` whose variables are replaced: ``binding`` maps a
    variable node's id to the entry that takes its place (variables not in it stay). The
    copied operator nodes are named ``prefix + name``; returns the copied heads."""
    copies: dict[int, Node] = {}

    def resolve(entry: Entry) -> Entry:
        if entry.node.is_variable:
            return binding.get(id(entry.node), entry)
        return Entry(copies[id(entry.node)], entry.index)

    for node in topo_order(heads):
        if not node.is_variable:
            copies[id(node)] = Node(node.op, prefix + node.name, node.attrs, [resolve(e) for e in node.inputs],
                                    params=node.params)
    return [resolve(h) for h in heads]


__all__ = ["Entry", "Node", "aux_variables", "copy_graph", "known_attributes", "op_params", "topo_order"]
