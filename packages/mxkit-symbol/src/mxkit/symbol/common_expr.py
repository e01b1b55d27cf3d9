"""The graph pass ``eliminate_common_expr``: forward nodes that compute the same thing run once.

Two operator nodes are the same computation when they call one operator with the same
attributes on the same input entries: ``(a + b) * (a + b)`` computes ``a + b`` once, and
``((a + b) + c) + ((a + b) + c)`` then computes ``(a + b) + c`` once too (MXNet's
``MXNET_ELIMINATE_COMMON_EXPR``, on by default there as here: config ``eliminate_common_expr``
adds the pass after ``prune``).

A node is never merged when running it twice is not the same as running it once:

- it draws random numbers (``Dropout``, the samplers): two draws differ;
- it updates auxiliary states in place (``BatchNorm``'s moving statistics, an optimizer
  update's momentum): merging would apply the update once;
- its kernel is user code run off the engine (``Custom``), which may keep state;
- it has no inputs (creation operators), as MXNet leaves them.

Attributes compare as given (``scalar="1"`` and ``scalar="1.0"`` differ), so a merge is
never wrong, at worst missed. Only forward nodes merge, as in MXNet, whose pass runs before
the gradient is built; backward nodes that read a merged node read the one kept. When two
outputs of the symbol become the same entry, the later one reads an ``_copy`` of it (named
``<node>_<k>_copy`` as in MXNet), so each output keeps an array of its own.
"""

from __future__ import annotations

from typing import Any

from mxkit.ndarray.registry import get_registry
from mxkit.symbol.graph import Entry, Node
from mxkit.symbol.infer import key
from mxkit.symbol.passes import PassGraph, register_pass


def has_side_effects(node: Node) -> bool:
    """Whether running ``node`` twice differs from running it once (or it makes values from nothing)."""
    op = node.op
    return (op is None or op.needs_rng or op.async_kernel is not None or not node.inputs
            or bool(op.list_aux(node.params)))


def _signature(node: Node, inputs: list[Entry]) -> tuple:
    params = tuple(sorted((k, repr(v)) for k, v in node.params.items()))
    return node.op.name, tuple(sorted(node.attrs.items())), params, tuple(key(e) for e in inputs)


def eliminate_common_expr(graph: PassGraph) -> None:
    """Merge the forward nodes of ``graph`` that compute the same thing (module docstring)."""
    kept: dict[tuple, Node] = {}
    replacements: dict[Any, Entry] = {}
    removed: set[int] = set()
    for node in graph.nodes:
        if not graph.is_forward(node) or has_side_effects(node):
            continue
        # inputs as they read once earlier merges are applied, so chains merge in one sweep
        inputs = [replacements.get(key(e), e) for e in node.inputs]
        signature = _signature(node, inputs)
        survivor = kept.setdefault(signature, node)
        if survivor is node:
            continue
        removed.add(id(node))
        for i in range(node.num_outputs()):
            replacements[(id(node), i)] = Entry(survivor, i)
    if not removed:
        return
    heads_before = [key(r) for r in graph.roots]
    graph.splice({}, removed, replacements)
    _separate_merged_outputs(graph, heads_before)


def _separate_merged_outputs(graph: PassGraph, roots_before: list[Any]) -> None:
    """Give each root that merging made equal to an earlier one a copy of its own."""
    copy_op = get_registry().get("_copy")
    first: dict[Any, int] = {}
    copies: list[Node] = []
    counts: dict[Any, int] = {}
    for position, (root, before) in enumerate(zip(list(graph.roots), roots_before)):
        k = key(root)
        earlier = first.setdefault(k, position)
        if earlier == position or roots_before[earlier] == before or root.node.is_variable:
            continue
        count = counts.get(k, 0)
        counts[k] = count + 1
        copy = Node(copy_op, f"{root.node.name}_{count}_copy", {}, [root], copy_op.parse_params({}))
        graph.shapes[(id(copy), 0)] = graph.shapes[k]
        graph.dtypes[(id(copy), 0)] = graph.dtypes[k]
        if graph.is_forward(root.node):
            graph.forward_ids.add(id(copy))
        graph.roots[position] = Entry(copy, 0)
        copies.append(copy)
    if copies:
        # after every forward node: the copies read outputs and nothing reads the copies
        at = next((i for i, n in enumerate(graph.nodes) if not graph.is_forward(n)), len(graph.nodes))
        forward = [c for c in copies if graph.is_forward(c)]
        backward = [c for c in copies if not graph.is_forward(c)]
        graph.nodes = graph.nodes[:at] + forward + graph.nodes[at:] + backward


register_pass("eliminate_common_expr", eliminate_common_expr, rewrites=True)

__all__ = ["eliminate_common_expr", "has_side_effects"]
