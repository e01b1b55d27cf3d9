"""The graph pass ``mirror``: recompute forward results in backward instead of keeping them.

Chen, Xu, Zhang and Guestrin 2016, "Training Deep Nets with Sublinear Memory Cost": the
backward pass reads most forward results, so without recomputation every one of them
lives until backward reaches it. This pass keeps only some forward results (the
*checkpoints*) and makes the backward graph recompute the others from them: a copy of
each dropped node runs in backward right before the first backward node that reads it
(its inputs recomputed the same way, back to checkpoints), so one segment's recomputed
values are alive at a time. Memory falls from O(n) to about O(sqrt(n)) forward results
for one extra forward computation.

Which results are checkpoints (config ``mirror_policy``):

- ``sqrt`` (default): Chen's greedy segmentation. Walking forward in order, results
  accumulate into the current segment until their bytes pass a budget (config
  ``mirror_segment_mb``; 0 chooses total / sqrt(n), giving about sqrt(n) segments of
  about sqrt(n) nodes); the node that passes it ends the segment and is kept.
- ``cheap``: MXNet's ``MXNET_BACKWARD_DO_MIRROR`` policy: keep the results of expensive
  operators (convolution, fully connected, dot products, concat, losses) and recompute
  every cheap one (activations, pooling, normalisation, elementwise).

Either way a node with the attribute ``__force_mirroring__="True"`` is recomputed and one
with ``"False"`` kept; random operators (Dropout) are never recomputed, since a second
draw would differ; outputs and gradients the bind writes are kept. Operators with
auxiliary states (BatchNorm) are recomputed on copies of those states, so the moving
statistics are updated once, by the forward pass.

Turn it on with ``graph_passes = ["prune", "mirror", "fuse"]`` or config
``backward_do_mirror`` (environment ``MXKIT_BACKWARD_DO_MIRROR=1``).
"""

from __future__ import annotations

import math
from typing import Any

from mxkit.ndarray.registry import get_registry
from mxkit.symbol.graph import Entry, Node
from mxkit.symbol.infer import key
from mxkit.symbol.passes import PassGraph, register_pass

# Operators whose results the 'cheap' policy keeps (MXNet's need_mirror list, plus the dot products).
EXPENSIVE_OPERATORS = frozenset({"Convolution", "Deconvolution", "FullyConnected", "dot", "batch_dot",
                                 "_linalg_gemm2", "Concat", "SoftmaxOutput", "RNN", "Embedding"})


def _forced(node: Node) -> bool | None:
    value = node.attrs.get("__force_mirroring__")
    if value is None:
        return None
    return value.strip().lower() in ("true", "1")


def _may_recompute(node: Node) -> bool:
    # a random operator would draw again; everything else recomputes bit for bit
    return node.op is not None and not node.op.needs_rng


def choose_checkpoints(graph: PassGraph, forward: list[Node], policy: str, segment_bytes: float) -> set[int]:
    """Ids of the forward nodes whose results stay alive for backward (the rest are recomputed)."""
    root_nodes = {id(r.node) for r in graph.roots}

    def nbytes(node: Node) -> int:
        from mxkit.core.dtypes import itemsize

        return sum(math.prod(graph.shapes[(id(node), i)]) * itemsize(graph.dtypes[(id(node), i)])
                   for i in range(node.num_outputs()))

    kept: set[int] = set()
    sizes = {id(n): nbytes(n) for n in forward}
    if policy == "sqrt" and not segment_bytes:
        segment_bytes = sum(sizes.values()) / max(1.0, math.sqrt(len(forward)))
    accumulated = 0.0
    for node in forward:
        forced = _forced(node)
        if not _may_recompute(node) or id(node) in root_nodes or forced is False:
            kept.add(id(node))
            accumulated = 0.0
            continue
        if forced:
            continue
        if policy == "cheap":
            if node.op.name in EXPENSIVE_OPERATORS:
                kept.add(id(node))
            continue
        accumulated += sizes[id(node)]
        if accumulated > segment_bytes:
            kept.add(id(node))
            accumulated = 0.0
    return kept


def mirror(graph: PassGraph) -> None:
    """The ``mirror`` pass (see the module docstring)."""
    from mxkit.core import config

    forward = [n for n in graph.nodes if graph.is_forward(n)]
    backward = [n for n in graph.nodes if not graph.is_forward(n)]
    if not backward or not forward:
        return
    kept = choose_checkpoints(graph, forward, config.get("mirror_policy"), config.get("mirror_segment_mb") * 2**20)
    forward_ids = {id(n) for n in forward}
    dropped = {id(n) for n in forward} - kept
    if not dropped:
        return
    copy_op = get_registry().get("_copy")
    recomputed: dict[Any, Entry] = {}
    order: list[Node] = list(forward)

    def emit(node: Node) -> Node:
        order.append(node)
        return node

    def clone(source: Node) -> None:
        """Emit the recomputation of ``source`` (its dropped inputs are recomputed already)."""
        inputs = []
        aux = set(source.aux_input_indices())
        for position, item in enumerate(source.inputs):
            if position in aux:
                # recompute on a copy of the auxiliary state: the forward pass alone updates it
                state = emit(Node(copy_op, f"{source.name}_mirror_aux{position}", {}, [item], {}))
                graph.shapes[(id(state), 0)] = graph.shapes[key(item)]
                graph.dtypes[(id(state), 0)] = graph.dtypes[key(item)]
                inputs.append(Entry(state, 0))
            else:
                inputs.append(recomputed.get(key(item), item))
        attrs = {k: v for k, v in source.attrs.items() if k != "__force_mirroring__"}
        copy = emit(Node(source.op, f"{source.name}_mirror", attrs, inputs, source.params))
        for i in range(source.num_outputs()):
            graph.shapes[(id(copy), i)] = graph.shapes[(id(source), i)]
            graph.dtypes[(id(copy), i)] = graph.dtypes[(id(source), i)]
            recomputed[(id(source), i)] = Entry(copy, i)

    def recompute(entry: Entry) -> Entry:
        # iterative depth-first walk back to the checkpoints: a segment may be thousands of nodes long
        stack = [(entry.node, False)]
        while stack:
            source, inputs_done = stack.pop()
            if (id(source), 0) in recomputed:
                continue
            if inputs_done:
                clone(source)
                continue
            stack.append((source, True))
            for item in source.inputs:
                if id(item.node) in dropped and key(item) not in recomputed:
                    stack.append((item.node, False))
        return recomputed[key(entry)]

    for node in backward:
        if any(id(e.node) in dropped and id(e.node) in forward_ids for e in node.inputs):
            # backward nodes belong to this bind: rewire them in place
            node.inputs = [recompute(e) if id(e.node) in dropped else e for e in node.inputs]
        order.append(node)
    graph.nodes = order


register_pass("mirror", mirror, rewrites=True)

__all__ = ["EXPENSIVE_OPERATORS", "choose_checkpoints", "mirror"]
