"""``mx.viz``: a layer table (:func:`print_summary`) and a graph drawing (:func:`plot_network`).

``plot_network`` builds a :class:`graphviz.Digraph` (the ``graphviz`` Python package, an
optional dependency imported only here); rendering it to a file also needs Graphviz's
``dot`` program, and graphviz raises ``ExecutableNotFound`` naming it when it is missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod
from typing import Any

from mxkit.core.errors import MissingComponentError, ShapeError
from mxkit.symbol.graph import Entry, Node, aux_variables, topo_order
from mxkit.symbol.infer import infer_shapes, key, variable_shapes

FUSED_OPERATOR = "_FusedElemwise"
_PARAMETER_SUFFIXES = ("_weight", "_bias", "_gamma", "_beta", "_moving_mean", "_moving_var", "_running_mean",
                       "_running_var")


def _entry_shapes(symbol: Any, shape: Mapping[str, Any] | None) -> dict:
    order = topo_order(symbol._outputs)
    if not shape:
        return {}
    return infer_shapes(order, variable_shapes(order, shape))


def _layer_label(node: Node) -> str:
    params = node.params
    name = node.op.name
    if name == "FullyConnected":
        return f"FullyConnected\n{params.get('num_hidden')}"
    if name == "Convolution":
        kernel = "x".join(str(k) for k in params.get("kernel", ()))
        stride = "x".join(str(s) for s in (params.get("stride") or ())) or "1"
        return f"Convolution\n{kernel}/{stride}, {params.get('num_filter')}"
    if name in ("Activation", "LeakyReLU"):
        return f"{name}\n{params.get('act_type')}"
    if name == FUSED_OPERATOR:
        from mxkit.symbol.fusion import fused_expression

        return f"{FUSED_OPERATOR}\n{fused_expression(node)}"
    if name == "Pooling":
        kernel = "x".join(str(k) for k in params.get("kernel", ()))
        return f"Pooling\n{params.get('pool_type')}, {kernel}"
    return name


def print_summary(symbol: Any, shape: Mapping[str, Any] | None = None, line_length: int = 120,
                  positions: Sequence[float] = (0.44, 0.64, 0.74, 1.0)) -> str:
    """Print (and return) a table of the layers: name (type), output shape, parameters, inputs.

    Parameters
    ----------
    symbol : Symbol
    shape : dict of str to tuple, optional
        Input shapes (e.g. ``{"data": (1, 784)}``); needed for output shapes and counts.
    line_length : int
        Width of the table.
    positions : sequence of float
        Right edges of the four columns, as fractions of ``line_length``.

    Returns
    -------
    str
        The printed table; its last line before the rule is ``Total params: N``.
    """
    shapes = _entry_shapes(symbol, shape)
    given = set(shape or {})
    edges = [int(line_length * p) for p in positions]
    lines: list[str] = []

    def row(fields: Sequence[str]) -> None:
        text = ""
        for field, edge in zip(fields, edges):
            text = (text + field)[:edge - 1].ljust(edge)
        lines.append(text.rstrip())

    lines.append("_" * line_length)
    row(["Layer (type)", "Output Shape", "Param #", "Previous Layer"])
    lines.append("=" * line_length)
    total = 0
    order = topo_order(symbol._outputs)
    aux = aux_variables(order)
    for node in order:
        if node.is_variable and node.name not in given:
            continue
        out_shape = shapes.get((id(node), 0))
        shown = "x".join(str(d) for d in out_shape[1:]) if out_shape else ""
        params = 0
        previous = []
        for entry in node.inputs:
            source = entry.node
            if source.is_variable and source.name not in given:
                # trainable parameters only, as MXNet counts them: no labels, no auxiliary states
                if id(source) not in aux and not source.name.endswith("label"):
                    params += prod(shapes.get(key(entry), (0,)))
            else:
                previous.append(source.name)
        total += params
        kind = "null" if node.is_variable else node.op.name
        row([f"{node.name}({kind})", shown, str(params), previous[0] if previous else ""])
        for extra in previous[1:]:
            row(["", "", "", extra])
        lines.append("_" * line_length)
    lines.append(f"Total params: {total}")
    lines.append("_" * line_length)
    text = "\n".join(lines)
    print(text)
    return text


def _import_graphviz() -> Any:
    try:
        import graphviz
    except ImportError:
        raise MissingComponentError("plot_network needs the 'graphviz' Python package: pip install graphviz "
                                    "(rendering to a file also needs Graphviz's 'dot' program)") from None
    return graphviz


_FILL = {"FullyConnected": "#fb8072", "Convolution": "#fb8072", "Activation": "#ffffb3", "LeakyReLU": "#ffffb3",
         "BatchNorm": "#bebada", "Pooling": "#80b1d3", "Concat": "#fdb462", "Flatten": "#fdb462",
         "Reshape": "#fdb462", "SoftmaxOutput": "#b3de69", FUSED_OPERATOR: "#ccebc5"}


# one colour per storage buffer (ColorBrewer Set3 and Pastel1: light enough for black labels)
# (Set3's first colour, the variables' fill, comes last so buffer 0 does not look like an input)
_BUFFER_COLOURS = ("#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5", "#d9d9d9",
                   "#bc80bd", "#ccebc5", "#ffed6f", "#fbb4ae", "#decbe4", "#fed9a6", "#e5d8bd", "#8dd3c7")


def _plan_of(symbol: Any, memplan: Any, shape: Mapping[str, Any] | None, dtype: Any) -> Any:
    """``memplan`` as a MemoryPlan: planned now (for prediction) when it is a strategy name."""
    if isinstance(memplan, str):
        if not shape:
            raise ShapeError(f"plot_network(memplan={memplan!r}) plans the network, which needs the input shapes: "
                             f"pass shape={{'data': (1, 3, 224, 224)}} too")
        type_dict = None if dtype is None else (dtype if isinstance(dtype, Mapping) else
                                                {name: dtype for name in shape})
        return symbol.plan_memory(for_training=False, memplan=memplan, type_dict=type_dict, **dict(shape))
    if not isinstance(getattr(memplan, "storage", None), Mapping):
        raise ShapeError(f"plot_network: memplan= takes a strategy name ('greedy') or a MemoryPlan from "
                         f"symbol.plan_memory(...), got {type(memplan).__name__}")
    return memplan


def storage_ids(order: Sequence[Node], plan: Any) -> dict[tuple[int, int], int | None]:
    """Per operator output ``(id(node), index)``: its buffer number in ``plan``, or None when
    the plan places it nowhere (memory the caller owns, like the network's outputs).

    Buffers are numbered 0, 1, ... in order of first use; two outputs with one number share
    memory (one pool at one offset).
    """
    # the plan names entries "<position>:<output name>"; the first (forward) one is the node's
    by_label: dict[str, Any] = {}
    for entry_name, storage in plan.storage.items():
        by_label.setdefault(entry_name.partition(":")[2] or entry_name, storage)
    numbers: dict[Any, int] = {}
    ids: dict[tuple[int, int], int | None] = {}
    for node in order:
        if node.is_variable:
            continue
        for index, label in enumerate(node.output_names()):
            storage = by_label.get(label)
            ids[(id(node), index)] = (None if storage is None else
                                      numbers.setdefault((storage.pool, storage.offset), len(numbers)))
    return ids


def plot_network(symbol: Any, title: str = "plot", save_format: str = "pdf", shape: Mapping[str, Any] | None = None,
                 dtype: Any = None, node_attrs: Mapping[str, str] | None = None, hide_weights: bool = True,
                 memplan: Any = None) -> Any:
    """A :class:`graphviz.Digraph` of the network: one box per layer, edges from inputs.

    A fused node (from ``symbol.optimize(**shapes)`` / ``mx.sym.fuse``) is labelled with its
    expression in C over its inputs' names, e.g. ``((data * fc_weight) + 1.0f)``; its box
    is not fixed in size, so the expression fits.

    Parameters
    ----------
    symbol : Symbol
    title : str
        The graph name.
    save_format : str
        The format ``render()`` writes.
    shape : dict of str to tuple, optional
        Input shapes; edges are then labelled with the shapes (batch axis left out).
    node_attrs : dict, optional
        Graphviz attributes for every node. Boxes are at least MXNet's size (1.3 x 0.8 inches)
        and grow to fit their label; ``{"fixedsize": "true"}`` gives MXNet's fixed boxes, which
        clip long labels.
    hide_weights : bool
        Leave out parameter variables (``*_weight``, ``*_bias``, ``*_gamma``...).
    memplan : str or MemoryPlan, optional
        Colour each operator by the memory-plan buffer its (first) output lives in, so shared
        buffers are visible: boxes of one colour and one ``buffer k`` line reuse one block of
        memory (in place, or after the earlier value died). A strategy name (``"mxnet"``,
        ``"greedy"``) plans the network for prediction with ``shape``; a plan from
        ``symbol.plan_memory(...)`` (training plans too) is used as given. Outputs the plan
        places nowhere (the network's outputs, which the caller owns) are white, dashed and
        marked ``not planned``.

    Raises
    ------
    MissingComponentError
        When the ``graphviz`` package is not installed.
    ShapeError
        When ``memplan`` names a strategy but no ``shape`` is given, or is neither a name nor a plan.
    """
    graphviz = _import_graphviz()
    # MXNet's box size, as a minimum: with fixedsize=false Graphviz grows a node whose label is
    # wider ("FullyConnected", "softmax_label") instead of clipping the text at the border
    style = {"shape": "box", "fixedsize": "false", "width": "1.3", "height": "0.8034", "style": "filled"}
    style.update(node_attrs or {})
    dot = graphviz.Digraph(name=title, format=save_format)
    shapes = _entry_shapes(symbol, shape)
    order = topo_order(symbol._outputs)
    hidden: set[int] = set()
    buffers = storage_ids(order, _plan_of(symbol, memplan, shape, dtype)) if memplan is not None else {}
    ids = {id(node): f"node{i}" for i, node in enumerate(order)}
    for node in order:
        if node.is_variable:
            if hide_weights and node.name.endswith(_PARAMETER_SUFFIXES):
                hidden.add(id(node))
                continue
            dot.node(name=ids[id(node)], label=node.name, **dict(style, fillcolor="#8dd3c7", shape="oval"))
            continue
        attrs = dict(style, fillcolor=_FILL.get(node.op.name, "#fccde5"))
        label = _layer_label(node)
        if (id(node), 0) in buffers:
            buffer = buffers[(id(node), 0)]
            if buffer is None:
                attrs.update(fillcolor="white", style="filled,dashed")
                label += "\nnot planned"
            else:
                attrs["fillcolor"] = _BUFFER_COLOURS[buffer % len(_BUFFER_COLOURS)]
                label += f"\nbuffer {buffer}"
        dot.node(name=ids[id(node)], label=label, **attrs)
    for node in order:
        for entry in node.inputs:
            if id(entry.node) in hidden:
                continue
            attrs = {"dir": "back", "arrowtail": "open"}
            edge_shape = shapes.get(key(Entry(entry.node, entry.index)))
            if edge_shape:
                attrs["label"] = "x".join(str(d) for d in edge_shape[1:])
            dot.edge(tail_name=ids[id(node)], head_name=ids[id(entry.node)], **attrs)
    return dot


__all__ = ["plot_network", "print_summary", "storage_ids"]
