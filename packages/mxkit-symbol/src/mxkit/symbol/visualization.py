"""``mx.viz``: a layer table (:func:`print_summary`) and a graph drawing (:func:`plot_network`).

``plot_network`` builds a :class:`graphviz.Digraph` (the ``graphviz`` Python package, an
optional dependency imported only here); rendering it to a file also needs Graphviz's
``dot`` program, and graphviz raises ``ExecutableNotFound`` naming it when it is missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod
from typing import Any

from mxkit.core.errors import MissingComponentError
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


def plot_network(symbol: Any, title: str = "plot", save_format: str = "pdf", shape: Mapping[str, Any] | None = None,
                 dtype: Any = None, node_attrs: Mapping[str, str] | None = None, hide_weights: bool = True) -> Any:
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
        Graphviz attributes for every node (``{"fixedsize": "false"}``).
    hide_weights : bool
        Leave out parameter variables (``*_weight``, ``*_bias``, ``*_gamma``...).

    Raises
    ------
    MissingComponentError
        When the ``graphviz`` package is not installed.
    """
    graphviz = _import_graphviz()
    style = {"shape": "box", "fixedsize": "true", "width": "1.3", "height": "0.8034", "style": "filled"}
    style.update(node_attrs or {})
    dot = graphviz.Digraph(name=title, format=save_format)
    shapes = _entry_shapes(symbol, shape)
    order = topo_order(symbol._outputs)
    hidden: set[int] = set()
    ids = {id(node): f"node{i}" for i, node in enumerate(order)}
    for node in order:
        if node.is_variable:
            if hide_weights and node.name.endswith(_PARAMETER_SUFFIXES):
                hidden.add(id(node))
                continue
            dot.node(name=ids[id(node)], label=node.name, **dict(style, fillcolor="#8dd3c7", shape="oval"))
            continue
        attrs = dict(style, fillcolor=_FILL.get(node.op.name, "#fccde5"))
        if node.op.name == FUSED_OPERATOR:
            attrs["fixedsize"] = "false"
        dot.node(name=ids[id(node)], label=_layer_label(node), **attrs)
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


__all__ = ["plot_network", "print_summary"]
