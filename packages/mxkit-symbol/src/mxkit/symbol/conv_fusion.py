"""The graph pass ``fuse_conv``: in a prediction bind, a convolution and the relu and residual
addition after it become one ``_FusedConvolution`` node.

Two shapes of graph fuse (after ``fold_batchnorm`` removed the BatchNorm between them)::

    Convolution -> Activation(relu)                                  (a ResNet block's inner layers)
    Convolution -> elemwise_add(., residual) [-> Activation(relu)]   (its end: y = relu(conv(x) + shortcut))

A kernel plugin computes the node in one pass over the output: oneDNN applies the addition and
the relu to each block of the convolution's result while it is in cache (its post-ops), where
the unfused graph reads and writes the whole output twice more. The node's generic kernel runs
the unfused operations in the same order, so the result does not depend on whether a plugin
serves it beyond the convolution's own rounding.

A group fuses only when that is exact and cannot grow the plan:

- the bind has no backward pass (every ``grad_req`` is ``null``);
- each intermediate (the convolution's output, the sum) is read by the next node of the group
  alone and is not itself an output of the bind;
- the convolution's layout is channel-first, every entry is float32, and the residual has the
  sum's shape (no broadcasting);
- some backend registered a kernel for ``_FusedConvolution``: without one (mxkit-cpu alone) the
  graph stays as it was.

The fused node takes the name of the group's last node, so outputs and monitors keep their
names; :attr:`PassGraph.notes` records what it replaced. Config ``fuse_conv`` (default on)
enables the pass; it runs after ``fold_batchnorm`` and before ``fuse`` (which would otherwise
take the addition and the relu into an elementwise group).
"""

from __future__ import annotations

from typing import Any

from mxkit.ndarray.ops.nn_conv_fused import FUSED_CONVOLUTION
from mxkit.ndarray.registry import get_registry
from mxkit.symbol.folding import CHANNEL_FIRST_LAYOUTS
from mxkit.symbol.graph import Entry, Node
from mxkit.symbol.infer import key
from mxkit.symbol.passes import PassGraph, register_pass

_ADDITIONS = ("elemwise_add", "_Plus", "_plus", "broadcast_add")


def _is(node: Node, *names: str) -> bool:
    return node.op is not None and node.op.name in names


def _only_reader(graph: PassGraph, entry: Entry, readers: dict, root_keys: set) -> Node | None:
    """The one forward node reading ``entry``, or None (several, none, or the entry is an output)."""
    reading = readers.get(key(entry), [])
    if key(entry) in root_keys or len(reading) != 1 or not graph.is_forward(reading[0]):
        return None
    return reading[0]


def _is_relu(node: Node) -> bool:
    return _is(node, "Activation") and node.params.get("act_type") == "relu"


def fusible_group(graph: PassGraph, conv: Node, readers: dict, root_keys: set) -> tuple[list[Node], Entry | None]:
    """The nodes that fuse with ``conv`` (itself first) and the residual entry (or None); ``[conv]`` alone when
    nothing does."""
    if not _is(conv, "Convolution") or not graph.is_forward(conv) or conv.params.get("layout") not in \
            CHANNEL_FIRST_LAYOUTS:
        return [conv], None
    out = Entry(conv, 0)
    if graph.dtypes.get(key(out)) != "float32" or any(graph.dtypes.get(key(e)) != "float32" for e in conv.inputs):
        return [conv], None
    group, residual = [conv], None
    reader = _only_reader(graph, out, readers, root_keys)
    if reader is not None and _is(reader, *_ADDITIONS) and len(reader.inputs) == 2:
        other = reader.inputs[1] if key(reader.inputs[0]) == key(out) else reader.inputs[0]
        if key(other) != key(out) and graph.shapes.get(key(other)) == graph.shapes[key(out)] and \
                graph.dtypes.get(key(other)) == "float32":
            group, residual = [conv, reader], other
            reader = _only_reader(graph, Entry(reader, 0), readers, root_keys)
    if reader is not None and _is_relu(reader):
        group.append(reader)
    return group, residual


def _fused_node(graph: PassGraph, group: list[Node], residual: Entry | None) -> Node:
    conv, last = group[0], group[-1]
    params = dict(conv.params, act_type="relu" if _is_relu(last) else None, with_sum=residual is not None)
    dunders = {k: v for k, v in last.attrs.items() if k.startswith("__") and k.endswith("__")}
    attrs = {**{k: v for k, v in conv.attrs.items() if not (k.startswith("__") and k.endswith("__"))}, **dunders,
             "act_type": str(params["act_type"]), "with_sum": str(params["with_sum"])}
    inputs = [*conv.inputs, *([residual] if residual is not None else [])]
    fused = Node(get_registry().get(FUSED_CONVOLUTION), last.name, attrs, inputs, params)
    graph.shapes[(id(fused), 0)] = graph.shapes[(id(last), 0)]
    graph.dtypes[(id(fused), 0)] = graph.dtypes[(id(last), 0)]
    return fused


def fuse_conv(graph: PassGraph) -> None:
    """The ``fuse_conv`` pass over ``graph`` (see the module docstring); a no-op in a bind with a backward
    pass or where no backend has a kernel for ``_FusedConvolution``."""
    if any(not graph.is_forward(n) for n in graph.nodes) or not get_registry().get(FUSED_CONVOLUTION).kernels:
        return
    readers = graph.readers()
    root_keys = {key(r) for r in graph.roots}
    inserted: dict[int, list[Node]] = {}
    removed: set[int] = set()
    replacements: dict[Any, Entry] = {}
    for node in graph.nodes:
        group, residual = fusible_group(graph, node, readers, root_keys)
        if len(group) == 1 or any(id(member) in removed for member in group):
            continue
        fused = _fused_node(graph, group, residual)
        # in the place of the group's last node: the residual is computed by then
        inserted[id(group[-1])] = [fused]
        removed.update(id(member) for member in group)
        replacements[(id(group[-1]), 0)] = Entry(fused, 0)
        graph.forward_ids.add(id(fused))
        # after what an earlier pass made the convolution from (fold_batchnorm's note), if anything
        earlier = [graph.notes[id(m)] for m in group if id(m) in graph.notes]
        graph.notes[id(fused)] = "; ".join([*earlier, "fused: " + " + ".join(f"{m.name} ({m.op.name})"
                                                                               for m in group)])
    if inserted:
        graph.splice(inserted, removed, replacements)


register_pass("fuse_conv", fuse_conv, rewrites=True)

__all__ = ["fusible_group", "fuse_conv"]
