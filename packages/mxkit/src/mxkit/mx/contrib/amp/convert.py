"""``convert_symbol`` and ``convert_model`` for ``target_dtype="bfloat16"``: a graph with casts inserted so that
the convolutions and inner products run in bfloat16 and the precision-sensitive operators in float32.

The rewrite reads and writes the graph as MXNet's JSON (``Symbol.tojson`` / ``mx.sym.load_json``), in the
graph's topological order. For each operator node, by :mod:`~mxkit.mx.contrib.amp.lists_bf16`:

- bfloat16 operators get ``amp_cast(dtype="bfloat16")`` on every input;
- float32 operators (those in no list, the excluded names, a conditional one whose parameter matches) get
  ``amp_cast(dtype="float32")`` on every input;
- widest-type operators, and dtype-neutral ones with several data inputs (``Concat``), get one
  ``amp_multicast`` over their inputs;
- dtype-neutral operators take their inputs as they are; BatchNorm's gamma, beta and statistics are
  declared float32 (``__dtype__``), as MXNet keeps them.

A cast is inserted once per (entry, dtype) and left out where the entry's dtype, followed through the
rewrite, is already the one wanted (the output of a bfloat16 convolution feeding the next one); the
graph's outputs are cast back to float32. Casts are named as MXNet 1.9.1 names them
(``<entry>_amp_cast_<dtype>``): on ResNet-50 v1 the rewrite inserts the casts MXNet's does, name for name.
"""

from __future__ import annotations

import json
from typing import Any

from mxkit.core.dtypes import DTYPE_FLAGS, dtype_from_flag
from mxkit.mx.contrib.amp import lists_bf16

BF16, F32 = "bfloat16", "float32"

_FLOATS = ("bfloat16", "float16", "float32", "float64")

#: the operators whose outputs MXNet 1.9.1 names (``FListOutputNames``), which its casts' names use
NAMED_OUTPUTS = {"Convolution": ("output",), "Deconvolution": ("output",), "FullyConnected": ("output",),
                 "Pooling": ("output",), "BatchNorm": ("output", "mean", "var"), "LRN": ("output", "tmp_norm"),
                 "Dropout": ("output", "mask"), "Activation": ("output",)}


def _category(op: str, name: str, attrs: dict[str, Any], target_ops: set[Any], fp32_ops: set[Any],
              conditional: list[Any], excluded: set[Any]) -> str:
    if name in excluded or op in fp32_ops:
        return "fp32"
    for cond_op, param, values in conditional:
        if op == cond_op and attrs.get(param) in values:
            return "fp32"
    if op in target_ops:
        return "target"
    if op in lists_bf16.WIDEST_TYPE_CASTS:
        return "widest"
    if op in lists_bf16.BF16_FP32_FUNCS or any(op == cond[0] for cond in conditional):
        return "neutral"
    return "fp32"


def _widest(dtypes: list[str | None]) -> str | None:
    floats = [d for d in dtypes if d in _FLOATS]
    if len(floats) != len(dtypes) or not floats:
        return None
    return max(floats, key=_FLOATS.index)


def convert_graph(graph: dict[str, Any], target_ops: set[Any], fp32_ops: set[Any], conditional: list[Any],
                  excluded: set[Any], data_names: set[Any], cast_optional_params: bool) -> dict[str, Any]:
    """The MXNet JSON graph ``graph`` (a dict) rewritten as the module's docstring says."""
    nodes = graph["nodes"]
    row_ptr = graph.get("node_row_ptr")
    outputs_of = [row_ptr[i + 1] - row_ptr[i] for i in range(len(nodes))] if row_ptr else [1] * len(nodes)
    consumers: dict[int, list[tuple[dict[str, Any], int]]] = {}
    for node in nodes:
        for position, (source, _, _) in enumerate(node["inputs"]):
            consumers.setdefault(source, []).append((node, position))

    def category(node: dict[str, Any]) -> str:
        return _category(node["op"], node["name"], node.get("attrs", {}), target_ops, fp32_ops, conditional, excluded)

    # variables that stay float32 (BatchNorm's parameters and statistics) or, with cast_optional_params,
    # are stored in bfloat16 (those read only by bfloat16 operators)
    fixed_dtype: dict[int, str] = {}
    for index, node in enumerate(nodes):
        if node["op"] != "null" or node["name"] in data_names:
            continue
        users = consumers.get(index, [])
        if any(user["op"] in lists_bf16.BF16_USE_FP32_PARAMS and position > 0 and category(user) != "fp32"
               for user, position in users):
            fixed_dtype[index] = F32
        elif cast_optional_params and users and all(category(user) == "target" for user, _ in users):
            fixed_dtype[index] = BF16

    new_nodes: list[dict[str, Any]] = []
    new_outputs: list[int] = []
    dtype_of: dict[tuple[int, int], str | None] = {}
    mapping: dict[int, int] = {}
    casts: dict[tuple[int, int, str], int] = {}
    names = {node["name"] for node in nodes}

    def add(node: dict[str, Any], count: int) -> int:
        new_nodes.append(node)
        new_outputs.append(count)
        return len(new_nodes) - 1

    def unique(name: str) -> str:
        candidate, suffix = name, 0
        while candidate in names:
            suffix += 1
            candidate = f"{name}{suffix}"
        names.add(candidate)
        return candidate

    def cast(entry: list[Any], dtype: str) -> list[Any]:
        source, index, version = entry
        if dtype_of.get((source, index)) == dtype:
            return entry
        key = (source, index, dtype)
        if key not in casts:
            # MXNet's names: ``<entry>_amp_cast_<dtype>``, the entry a variable's name or an operator's output,
            # ``<node>_<output name>`` for the operators that name their outputs, ``<node>_<index>`` for the others
            entry_name = new_nodes[source]["name"]
            op = new_nodes[source]["op"]
            if op != "null":
                names = NAMED_OUTPUTS.get(op)
                entry_name += f"_{names[index]}" if names and index < len(names) else f"_{index}"
            name = unique(f"{entry_name}_amp_cast_{dtype}")
            casts[key] = add({"op": "amp_cast", "name": name, "attrs": {"dtype": dtype},
                              "inputs": [[source, index, version]]}, 1)
            dtype_of[(casts[key], 0)] = dtype
        return [casts[key], 0, 0]

    def multicast(entries: list[Any], name: str) -> list[Any]:
        dtypes = [dtype_of.get((source, index)) for source, index, _ in entries]
        if len(set(dtypes)) == 1 and dtypes[0] is not None:
            return entries  # one dtype already
        node = add({"op": "amp_multicast", "name": unique(f"{name}_amp_multicast"),
                    "attrs": {"num_outputs": str(len(entries))}, "inputs": [list(e) for e in entries]}, len(entries))
        widest = _widest(dtypes)
        for j in range(len(entries)):
            dtype_of[(node, j)] = widest
        return [[node, j, 0] for j in range(len(entries))]

    for index, node in enumerate(nodes):
        copy = {key: value for key, value in node.items() if key != "inputs"}
        if node["op"] == "null":
            attrs = dict(node.get("attrs", {}))
            if index in fixed_dtype:
                attrs["__dtype__"] = str(DTYPE_FLAGS[fixed_dtype[index]])
            if attrs:
                copy["attrs"] = attrs
            copy["inputs"] = []
            mapping[index] = add(copy, 1)
            flag = attrs.get("__dtype__")
            dtype_of[(mapping[index], 0)] = dtype_from_flag(int(flag)) if flag is not None else F32
            continue
        inputs = [[mapping[source], idx, version] for source, idx, version in node["inputs"]]
        kind = category(node)
        if kind == "target":
            inputs = [cast(entry, BF16) for entry in inputs]
            out_dtype: str | None = BF16
        elif kind == "fp32":
            inputs = [cast(entry, F32) for entry in inputs]
            out_dtype = F32
        elif kind == "widest" and len(inputs) > 1:
            inputs = multicast(inputs, node["name"])
            out_dtype = dtype_of.get((inputs[0][0], inputs[0][1]))
        elif node["op"] in lists_bf16.BF16_USE_FP32_PARAMS or len(inputs) <= 1:
            out_dtype = dtype_of.get((inputs[0][0], inputs[0][1])) if inputs else None
        else:  # a dtype-neutral operator of several data inputs (Concat): one dtype for all of them
            inputs = multicast(inputs, node["name"])
            out_dtype = dtype_of.get((inputs[0][0], inputs[0][1]))
        copy["inputs"] = inputs
        mapping[index] = add(copy, outputs_of[index])
        for j in range(outputs_of[index]):
            dtype_of[(mapping[index], j)] = out_dtype

    # the network's outputs are float32, as the float32 network's were (MXNet casts them back too)
    heads = [cast([mapping[source], idx, version], F32) if dtype_of.get((mapping[source], idx)) == BF16
             else [mapping[source], idx, version] for source, idx, version in graph["heads"]]
    result = dict(graph)
    result["nodes"] = new_nodes
    result["arg_nodes"] = [i for i, node in enumerate(new_nodes) if node["op"] == "null"]
    result["node_row_ptr"] = [0]
    for count in new_outputs:
        result["node_row_ptr"].append(result["node_row_ptr"][-1] + count)
    result["heads"] = heads
    return result


def convert_symbol_bf16(sym: Any, target_dtype_ops: list[Any] | None = None, fp32_ops: list[Any] | None = None,
                        conditional_fp32_ops: list[Any] | None = None, excluded_sym_names: list[Any] | None = None,
                        data_names: list[Any] | None = None, cast_optional_params: bool = False) -> Any:
    """``sym`` with the casts of a bfloat16 conversion (see the module's docstring)."""
    from mxkit.mx import sym as symbol_module

    target = set(lists_bf16.BF16_FUNCS if target_dtype_ops is None else target_dtype_ops)
    fp32 = set(() if fp32_ops is None else fp32_ops)
    common = target & fp32
    if common:
        from mxkit.core.errors import MXKitError

        raise MXKitError(f"amp.convert_symbol: operators in both target_dtype_ops and fp32_ops: {sorted(common)}")
    conditional = [(op, param, tuple(values)) for op, param, values in
                   (lists_bf16.CONDITIONAL_FP32_FUNCS if conditional_fp32_ops is None else conditional_fp32_ops)]
    graph = json.loads(sym.tojson())
    converted = convert_graph(graph, target, fp32, conditional, set(excluded_sym_names or ()),
                              set(data_names or ()), cast_optional_params)
    return symbol_module.load_json(json.dumps(converted))


__all__ = ["convert_graph", "convert_symbol_bf16"]
