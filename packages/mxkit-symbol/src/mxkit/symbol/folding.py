"""The graph pass ``fold_batchnorm``: in a prediction bind, BatchNorm folds into the convolution before it.

In inference BatchNorm is an affine map per channel, ``y = (x - mean) * s + beta`` with
``s = gamma / sqrt(var + eps)`` (``gamma`` taken as 1 under ``fix_gamma``), so a
``Convolution -> BatchNorm`` pair is one convolution with derived parameters (MXNet's MKLDNN
backend folds the same way)::

    w' = w * s            (per output channel)
    b' = (b - mean) * s + beta      (b = 0 without bias)

The derived ``w'`` and ``b'`` are computed by ordinary nodes of the graph (``_plus_scalar``,
``rsqrt``, ``elemwise_*``, ``Reshape``, ``broadcast_mul``) that read the bound parameter
and auxiliary arrays, placed just before the convolution: the user's parameters are never
changed, the derived arrays are planned memory that lives only until the convolution has read
them, and they are recomputed by every forward, so ``set_params``, ``copy_params_from`` or
an in-place write to a parameter is always seen. Their cost is one pass over the
convolution's weights, where the BatchNorm it replaces was a pass over the activations
(``batch`` times larger for a ResNet).

A pair folds only when that is exact:

- the bind has no backward pass (every ``grad_req`` is ``null``); the executor's
  ``forward(is_train=True)``, where BatchNorm uses batch statistics, runs an unfolded twin;
- the convolution's output is read by the BatchNorm alone and is not itself an output;
- BatchNorm normalizes axis 1 (the convolution's channels, layout ``NC...``) and does not
  output its mean and variance (``output_mean_var``);
- everything computes in float32 or float64;
- the weights have no more elements than the convolution's output: deriving them reads and
  writes the weights, where the BatchNorm read and wrote the output, so a larger weight (a
  late layer of a small batch) would make the forward slower and the plan larger (``w'`` is
  live beside the convolution's input and output).

The folded convolution takes the BatchNorm's name, so outputs and monitors keep their names;
:attr:`PassGraph.notes` records what it replaced (the executor's ``debug_str`` shows it).
Config ``fold_batchnorm`` (default on) enables the pass.
"""

from __future__ import annotations

from math import prod
from typing import Any

from mxkit.symbol.autodiff import GraphApplier
from mxkit.symbol.graph import Entry, Node
from mxkit.symbol.infer import key
from mxkit.symbol.passes import PassGraph, register_pass

FOLDABLE_DTYPES = ("float32", "float64")
#: the convolution layouts whose channel axis is 1 (what the passes over convolutions handle)
CHANNEL_FIRST_LAYOUTS = (None, "NCW", "NCHW", "NCDHW")


def foldable_pair(graph: PassGraph, bn: Node, readers: dict[Any, list[Node]], root_keys: set) -> Node | None:
    """The convolution ``bn`` folds into, or None when folding it would not be exact."""
    if bn.op is None or bn.op.name != "BatchNorm" or bn.num_outputs() != 1 or bn.params.get("output_mean_var"):
        return None
    source = bn.inputs[0]
    conv = source.node
    if conv.op is None or conv.op.name != "Convolution" or source.index != 0 or not graph.is_forward(conv):
        return None
    if conv.params.get("layout") not in CHANNEL_FIRST_LAYOUTS:
        return None
    ndim = len(graph.shapes[key(source)])
    axis = bn.params.get("axis", 1)
    if axis % ndim != 1:
        return None
    if key(source) in root_keys or [id(n) for n in readers.get(key(source), [])] != [id(bn)]:
        return None  # the unnormalized convolution output is needed too
    entries = [source, *bn.inputs[1:5], *conv.inputs[1:]]
    if any(graph.dtypes.get(key(e)) != graph.dtypes[key(source)] for e in entries):
        return None
    if graph.dtypes[key(source)] not in FOLDABLE_DTYPES:
        return None
    if prod(graph.shapes[key(conv.inputs[1])]) > prod(graph.shapes[key(source)]):
        return None  # deriving the weights would cost more than the normalization it saves
    return conv


def _fold_one(graph: PassGraph, conv: Node, bn: Node) -> tuple[list[Node], Node]:
    """The nodes computing the derived weight and bias, and the folded convolution."""
    made: list[Node] = []
    F = GraphApplier(f"{bn.name}_fold", graph.shapes, graph.dtypes)

    def apply(op_name: str, *inputs: Entry, **params: Any) -> Entry:
        entry = F(op_name, *inputs, **params)
        made.append(entry.node)
        return entry

    gamma, beta, mean, var = bn.inputs[1:5]
    data, weight = conv.inputs[0], conv.inputs[1]
    scale = apply("rsqrt", apply("_plus_scalar", var, scalar=float(bn.params["eps"])))
    if not bn.params["fix_gamma"]:
        scale = apply("elemwise_mul", gamma, scale)
    weight_shape = graph.shapes[key(weight)]
    per_channel = apply("Reshape", scale, shape=(weight_shape[0],) + (1,) * (len(weight_shape) - 1))
    folded_weight = apply("broadcast_mul", weight, per_channel)
    if conv.params.get("no_bias"):
        shift = apply("elemwise_mul", mean, scale)
        folded_bias = apply("elemwise_sub", beta, shift)
    else:
        centred = apply("elemwise_sub", conv.inputs[2], mean)
        folded_bias = apply("elemwise_add", apply("elemwise_mul", centred, scale), beta)
    params = dict(conv.params, no_bias=False)
    dunders = {k: v for k, v in bn.attrs.items() if k.startswith("__") and k.endswith("__")}
    attrs = {**{k: v for k, v in conv.attrs.items() if not (k.startswith("__") and k.endswith("__"))},
             **dunders, "no_bias": "False"}
    folded = Node(conv.op, bn.name, attrs, [data, folded_weight, folded_bias], params)
    graph.shapes[(id(folded), 0)] = graph.shapes[(id(bn), 0)]
    graph.dtypes[(id(folded), 0)] = graph.dtypes[(id(bn), 0)]
    return made, folded


def fold_batchnorm(graph: PassGraph) -> None:
    """The ``fold_batchnorm`` pass over ``graph`` (see the module docstring); a no-op in a
    bind with a backward pass."""
    if any(not graph.is_forward(n) for n in graph.nodes):
        return  # training: BatchNorm normalizes with batch statistics and has a gradient
    readers = graph.readers()
    root_keys = {key(r) for r in graph.roots}
    replacements: dict[Any, Entry] = {}
    at_conv: dict[int, list[Node]] = {}
    removed: set[int] = set()
    for bn in graph.nodes:
        conv = foldable_pair(graph, bn, readers, root_keys)
        if conv is None:
            continue
        made, folded = _fold_one(graph, conv, bn)
        at_conv[id(conv)] = [*made, folded]
        removed.update((id(conv), id(bn)))
        replacements[(id(bn), 0)] = Entry(folded, 0)
        graph.notes[id(folded)] = f"folded: {conv.name} (Convolution) + {bn.name} (BatchNorm)"
        for node in made:
            graph.unmonitored_ids.add(id(node))
        for node in at_conv[id(conv)]:
            graph.forward_ids.add(id(node))
    if at_conv:
        graph.splice(at_conv, removed, replacements)


register_pass("fold_batchnorm", fold_batchnorm, rewrites=True)

__all__ = ["FOLDABLE_DTYPES", "fold_batchnorm", "foldable_pair"]
