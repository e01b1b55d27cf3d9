"""MXNet 1.x symbol JSON, both ways.

The format (nnvm's graph JSON): ``nodes`` in topological order, each with ``op``
(``"null"`` for a variable), ``name``, string ``attrs`` and ``inputs`` as ``[node, output,
version]``; ``arg_nodes`` (indices of the variables); ``node_row_ptr`` (prefix sums of the
output counts); ``heads`` (the symbol's outputs) and ``attrs.mxnet_version``. Files from
older MXNet releases (0.8's ``param``/``attr`` keys, two-element inputs, missing auxiliary
states) are upgraded on load as MXNet 1.9.1 upgrades them (:mod:`mxkit.symbol.json_legacy`).
"""

from __future__ import annotations

import json
from typing import Any

from mxkit.core.errors import FormatError, MXKitError
from mxkit.core.shape_mode import is_np_shape
from mxkit.ndarray.registry import UnknownOperatorError, get_registry
from mxkit.symbol.graph import Entry, Node, topo_order
from mxkit.symbol.json_legacy import merge_node_attributes, upgrade
from mxkit.symbol.symbol import Symbol

MXNET_VERSION = 10901  # the MXNet release whose files we write (1.9.1)


def to_dict(symbol: Symbol) -> dict[str, Any]:
    """The JSON object of ``symbol``."""
    order = topo_order(symbol._outputs)
    index = {id(node): i for i, node in enumerate(order)}
    nodes = []
    row_ptr = [0]
    from mxkit.symbol.control_flow import LoopError, is_loop

    for node in order:
        if is_loop(node):
            raise LoopError(f"node {node.name!r} is a foreach loop, whose body MXNet's JSON keeps as a subgraph, "
                            f"which mxkit does not write; save the parameters (save_parameters) and rebuild the "
                            f"network in code instead of exporting its graph")
        item: dict[str, Any] = {"op": node.op_name, "name": node.name}
        if node.attrs:
            item["attrs"] = dict(node.attrs)
        # MXNet versions mutable inputs: an auxiliary state an operator updates reads as version 1
        aux = set(node.aux_input_indices())
        item["inputs"] = [[index[id(e.node)], e.index, int(i in aux)] for i, e in enumerate(node.inputs)]
        nodes.append(item)
        row_ptr.append(row_ptr[-1] + node.num_outputs())
    attrs: dict[str, list] = {"mxnet_version": ["int", MXNET_VERSION]}
    if is_np_shape():
        # MXNet 1.6+ marks files written under NumPy shape semantics (0 is a size, not "unknown")
        attrs["is_np_shape"] = ["int", 1]
    return {
        "nodes": nodes,
        "arg_nodes": [i for i, node in enumerate(order) if node.is_variable],
        "node_row_ptr": row_ptr,
        "heads": [[index[id(e.node)], e.index, 0] for e in symbol._outputs],
        "attrs": attrs,
    }


def to_json(symbol: Symbol) -> str:
    """``symbol`` as an MXNet JSON string."""
    return json.dumps(to_dict(symbol), indent=2)


def from_json(text: str) -> Symbol:
    """The symbol of an MXNet JSON string.

    Raises
    ------
    FormatError
        When the text is not a symbol JSON (naming what is missing or malformed).
    UnknownOperatorError
        Naming every operator of the file the registry does not know, with their nodes.
    """
    try:
        graph = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(f"symbol JSON does not parse at offset {exc.pos} (line {exc.lineno}, column "
                          f"{exc.colno}): {exc.msg}") from None
    except RecursionError:
        raise FormatError("symbol JSON nests arrays or objects deeper than the parser allows; a symbol JSON "
                          "is a flat list of nodes") from None
    except (ValueError, TypeError) as exc:  # e.g. an integer of more digits than Python converts
        raise FormatError(f"symbol JSON holds a value that cannot be read: {exc}") from None
    _check_layout(graph)
    try:
        return _build(graph)
    except MXKitError:
        raise
    except RecursionError:
        raise FormatError("symbol JSON nests deeper than the loader allows") from None
    except Exception as exc:  # a layout _check_layout did not foresee: still the file's fault
        raise FormatError(f"malformed symbol JSON: {type(exc).__name__}: {exc}") from None


def _check_layout(graph: Any) -> None:
    """The shape of a symbol JSON (types of nodes, heads, inputs), before anything uses it."""
    if not isinstance(graph, dict) or not isinstance(graph.get("nodes"), list) or "heads" not in graph:
        keys = sorted(graph) if isinstance(graph, dict) else type(graph).__name__
        raise FormatError(f"not a symbol JSON: expected an object with 'nodes' and 'heads', got {keys}")
    if not isinstance(graph["heads"], list):
        raise FormatError(f"symbol JSON 'heads' must be a list of [node, output, version] entries, got "
                          f"{_short(graph['heads'])}")
    for position, item in enumerate(graph["nodes"]):
        if not isinstance(item, dict):
            raise FormatError(f"symbol JSON node {position} must be an object with 'op', 'name' and 'inputs', "
                              f"got {_short(item)}")
        if not isinstance(item.get("op"), str) or not isinstance(item.get("name"), str):
            raise FormatError(f"symbol JSON node {position} needs 'op' and 'name' strings, got {_short(item)}")
        if not isinstance(item.get("inputs", []), list):
            raise FormatError(f"symbol JSON node {position} ({item['name']!r}): 'inputs' must be a list, got "
                              f"{_short(item['inputs'])}")
    for key in ("arg_nodes", "node_row_ptr"):
        if key in graph and not isinstance(graph[key], list):
            raise FormatError(f"symbol JSON {key!r} must be a list, got {_short(graph[key])}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _build(graph: dict) -> Symbol:
    registry = get_registry()
    items = graph["nodes"]
    unknown = [(item.get("op"), item.get("name")) for item in items
               if item.get("op") not in ("null", None) and item.get("op") not in registry]
    if unknown:
        listed = ", ".join(f"{op} (node {name!r})" for op, name in unknown)
        raise UnknownOperatorError(f"the symbol JSON uses operators this installation does not register: {listed}; "
                                   f"install the package that provides them")
    graph = upgrade(graph, registry)
    items = graph["nodes"]
    nodes: list[Node] = []
    for position, item in enumerate(items):
        nodes.append(_load_node(item, position, nodes, registry))
    heads = [_entry(head, nodes, "heads") for head in graph["heads"]]
    return Symbol(heads)


def _load_node(item: dict, position: int, nodes: list[Node], registry: Any) -> Node:
    name = item.get("name")
    op_name = item.get("op")
    if not isinstance(name, str) or op_name is None:
        raise FormatError(f"symbol JSON node {position} needs 'op' and 'name', got {item!r}")
    attrs = merge_node_attributes(item)
    inputs = [_entry(raw, nodes, f"node {name!r} inputs") for raw in item.get("inputs", [])]
    if op_name == "null":
        return Node(None, name, attrs, inputs)
    op = registry.get(op_name)
    try:
        return Node(op, name, attrs, inputs)
    except MXKitError as exc:
        raise FormatError(f"symbol JSON node {name!r} (operator {op_name}): {exc}") from None


def _entry(raw: Any, nodes: list[Node], where: str) -> Entry:
    if not isinstance(raw, list) or len(raw) not in (2, 3):
        raise FormatError(f"symbol JSON {where}: an entry is [node, output, version], got {raw!r}")
    node_index, output = raw[0], raw[1]
    if not isinstance(node_index, int) or not 0 <= node_index < len(nodes):
        raise FormatError(f"symbol JSON {where}: entry {raw!r} refers to node {node_index}, but only nodes "
                          f"0..{len(nodes) - 1} come before it")
    node = nodes[node_index]
    if not isinstance(output, int) or not 0 <= output < node.num_outputs():
        raise FormatError(f"symbol JSON {where}: entry {raw!r} asks for output {output} of node {node.name!r}, "
                          f"which has {node.num_outputs()}")
    return Entry(node, output)


def load(fname: str) -> Symbol:
    """The symbol stored in file ``fname``.

    Raises
    ------
    FormatError
        If the file cannot be read, is not UTF-8 or not a symbol JSON; the message starts
        with the file's name.
    """
    try:
        with open(fname, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise FormatError(f"cannot read symbol file {fname!r}: {exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"symbol file {fname!r} is not UTF-8 text (byte offset {exc.start}: {exc.reason})") \
            from None
    try:
        return from_json(text)
    except FormatError as exc:
        raise FormatError(f"symbol file {fname!r}: {exc}") from None


__all__ = ["MXNET_VERSION", "from_json", "load", "to_dict", "to_json"]
