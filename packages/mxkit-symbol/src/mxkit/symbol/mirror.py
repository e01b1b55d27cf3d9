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
  ``mirror_segment_mb``); the next node that cuts the graph (no earlier result is read
  past it: a residual unit's output, not a node inside the unit) ends the segment and is
  kept. With budget 0 the budget is searched as Chen's ``search_plan`` does, minimising
  the bytes kept plus the largest segment (about sqrt(n) segments of about sqrt(n)
  nodes on a uniform chain).
- ``cheap``: MXNet's ``MXNET_BACKWARD_DO_MIRROR`` policy: keep the results of expensive
  operators (convolution, fully connected, dot products, concat, losses) and recompute
  every cheap one (activations, pooling, normalisation, elementwise).

The choice itself is made by :func:`mxkit.memplan.sublinear.select_checkpoints` over the
forward nodes' sizes and flags (or by the selection of the recomputing memory planner the
bind uses: config ``memplan = "sublinear"`` turns this pass on); this module does the
rewrite. Either way a node with the attribute ``__force_mirroring__="True"`` is recomputed and one
with ``"False"`` kept; random operators (Dropout) are never recomputed, since a second
draw would differ; outputs and gradients the bind writes are kept. Operators with
auxiliary states (BatchNorm) are recomputed on copies of those states, so the moving
statistics are updated once, by the forward pass.

Turn it on with ``graph_passes = ["prune", "mirror", "fuse"]``, config
``backward_do_mirror`` (environment ``MXKIT_BACKWARD_DO_MIRROR=1``), or the memory planner
``sublinear`` (``bind(..., memplan="sublinear")``, config ``memplan``, ``MXKIT_MEMPLAN``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from mxkit.memplan.sublinear import RecomputeCandidate, select_checkpoints
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


def recompute_candidates(graph: PassGraph, forward: list[Node]) -> list[RecomputeCandidate]:
    """``forward`` as checkpoint selection sees it (named ``"<position>:<node name>"``)."""
    from mxkit.core.dtypes import itemsize

    root_nodes = {id(r.node) for r in graph.roots}

    def nbytes(node: Node) -> int:
        return sum(math.prod(graph.shapes[(id(node), i)]) * itemsize(graph.dtypes[(id(node), i)])
                   for i in range(node.num_outputs()))

    names = {id(node): f"{position}:{node.name}" for position, node in enumerate(forward)}
    return [RecomputeCandidate(names[id(node)], nbytes(node),
                               inputs=tuple(names[id(e.node)] for e in node.inputs if id(e.node) in names),
                               recomputable=_may_recompute(node) and id(node) not in root_nodes,
                               forced=_forced(node), expensive=node.op.name in EXPENSIVE_OPERATORS)
            for node in forward]


def choose_checkpoints(graph: PassGraph, forward: list[Node], policy: str, segment_bytes: float,
                       select: Callable[..., Any] | None = None) -> set[int]:
    """Ids of the forward nodes whose results stay alive for backward (the rest are recomputed).

    ``select`` is the selection of a recomputing memory planner (default: the ``sublinear``
    planner's :func:`mxkit.memplan.sublinear.select_checkpoints`).
    """
    candidates = recompute_candidates(graph, forward)
    kept = (select or select_checkpoints)(candidates, policy, segment_bytes)
    return {id(node) for node, candidate in zip(forward, candidates) if candidate.name in kept}


def mirror(graph: PassGraph) -> None:
    """The ``mirror`` pass (see the module docstring)."""
    from mxkit.core import config

    forward = [n for n in graph.nodes if graph.is_forward(n)]
    backward = [n for n in graph.nodes if not graph.is_forward(n)]
    if not backward or not forward:
        return
    kept = choose_checkpoints(graph, forward, config.get("mirror_policy"), config.get("mirror_segment_mb") * 2**20,
                              graph.select_checkpoints)
    forward_ids = {id(n) for n in forward}
    dropped = {id(n) for n in forward} - kept
    if not dropped:
        return
    copy_op = get_registry().get("_copy")
    recomputed: dict[Any, Entry] = {}
    order: list[Node] = list(forward)

    def emit(node: Node) -> Node:
        order.append(node)
        graph.recomputed_ids.add(id(node))
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

__all__ = ["EXPENSIVE_OPERATORS", "choose_checkpoints", "mirror", "recompute_candidates"]
