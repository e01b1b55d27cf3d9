"""Upgrading symbol JSON written by older MXNet releases, as MXNet 1.9.1 does on load.

MXNet records its version in ``attrs.mxnet_version`` (``["int", 10901]``); a file without
it comes from MXNet 0.8 or earlier. Loading applies, in order, each upgrade newer than the
file (``src/nnvm/legacy_json_util.cc`` of MXNet 1.9.1):

- before 0.8's graphs became nnvm graphs, a node kept operator parameters under ``param``
  and other attributes under ``attr``, inputs were ``[node, output]`` pairs and each node
  carried a ``backward_source_id``: the keys are merged into ``attrs`` and the rest ignored;
- (any version before 1.9.1) the hidden keys ``ctx_group``, ``lr_mult``, ``wd_mult``,
  ``force_mirroring`` and ``mirror_stage`` become ``__key__``; ``<input>_<key>`` on an
  operator (``weight_lr_mult`` on ``fc1``) moves to that input's variable as ``__key__``;
- (before 0.9.0) auxiliary states were not stored: missing trailing inputs become new
  variables ``<node>_<input>`` that copy the node's attributes (BatchNorm's moving mean
  and variance);
- (before 0.9.4) variables get the initializer their operator asks for when composed:
  BatchNorm's moving mean ``["zero", {}]`` and variance ``["one", {}]``, LeakyReLU's
  gamma ``["Constant", {"value": 0.25}]``;
- (before 0.9.5) ``argmax``/``argmin`` with ``axis=-1`` meant "no axis": the key is dropped.

The result is checked against MXNet 1.9.1's own upgrade of the same files in the tests.
"""

from __future__ import annotations

import json
from typing import Any

from mxkit.core.errors import FormatError

#: attributes MXNet stores as ``__key__`` (``kHiddenKeys`` of MXNet 1.9.1)
HIDDEN_KEYS = ("ctx_group", "lr_mult", "wd_mult", "force_mirroring", "mirror_stage")
#: the version of a file without ``mxnet_version`` (MXNet 0.8.0)
LEGACY_VERSION = 800
CURRENT_VERSION = 10901
_ADD_AUX_INPUTS_BEFORE = 900
_SET_VARIABLE_INIT_BEFORE = 904
_DROP_ARGMAX_AXIS_BEFORE = 905

#: the initializers operators give the variables they are composed with (MXNet's
#: FSetInputVarAttrOnCompose): input position -> ``__init__``, unless the variable has one
COMPOSE_INITIALIZERS = {
    "BatchNorm": {3: '["zero", {}]', 4: '["one", {}]'},
    "LeakyReLU": {1: '["Constant", {"value": 0.25}]'},
}


def file_version(graph: dict[str, Any]) -> int:
    """The MXNet version that wrote ``graph`` (``major * 10000 + minor * 100 + patch``)."""
    raw = (graph.get("attrs") or {}).get("mxnet_version")
    if raw is None:
        return LEGACY_VERSION
    if isinstance(raw, list) and len(raw) == 2 and raw[0] == "int" and isinstance(raw[1], int):
        return raw[1]
    raise FormatError(f"symbol JSON attrs.mxnet_version is {raw!r}; expected [\"int\", <version>] such as "
                      f"[\"int\", {CURRENT_VERSION}]")


def merge_node_attributes(item: dict[str, Any]) -> dict[str, str]:
    """A node's ``param``, ``attr`` and ``attrs`` tables as one string dict (values JSON-encoded if not strings)."""
    merged: dict[str, str] = {}
    for field in ("param", "attr", "attrs"):
        table = item.get(field) or {}
        if not isinstance(table, dict):
            raise FormatError(f"symbol JSON node {item.get('name')!r}: {field!r} must be an object, got {table!r}")
        for key, value in table.items():
            merged[key] = value if isinstance(value, str) else json.dumps(value)
    return merged


def _hidden_key(key: str) -> tuple[str, str] | None:
    """``(prefix, hidden)`` when ``key`` is a hidden key (prefix "") or ends in ``_<hidden>``."""
    for hidden in HIDDEN_KEYS:
        if key == hidden:
            return "", hidden
        if key.endswith("_" + hidden) and len(key) > len(hidden) + 1:
            return key[: -len(hidden) - 1], hidden
    return None


class LegacyGraph:
    """The nodes of a JSON graph as plain dicts, upgraded in place by the ``upgrade_*`` steps."""

    def __init__(self, graph: dict[str, Any], registry: Any) -> None:
        self.registry = registry
        self.nodes: list[dict[str, Any]] = []
        for position, item in enumerate(graph["nodes"]):
            if not isinstance(item, dict):
                raise FormatError(f"symbol JSON node {position} must be an object, got {item!r}")
            self.nodes.append({"op": item.get("op"), "name": item.get("name"), "attrs": merge_node_attributes(item),
                               "inputs": [list(raw[:2]) if isinstance(raw, list) else raw
                                          for raw in item.get("inputs", [])]})
        self.heads = graph["heads"]

    def _input_names(self, node: dict[str, Any]) -> list[str] | None:
        from mxkit.symbol.graph import op_params

        if node["op"] in ("null", None) or node["op"] not in self.registry:
            return None
        op = self.registry.get(node["op"])
        try:
            params = op.parse_params(op_params({k: v for k, v in node["attrs"].items() if _hidden_key(k) is None}))
        except Exception:  # reported with the node's name when the node itself is built
            return None
        return list(op.list_inputs(params)) + list(op.list_aux(params))

    def _variable_input(self, node: dict[str, Any], index: int) -> dict[str, Any] | None:
        if index >= len(node["inputs"]):
            return None
        raw = node["inputs"][index]
        if not (isinstance(raw, list) and raw and isinstance(raw[0], int) and 0 <= raw[0] < len(self.nodes)):
            return None
        source = self.nodes[raw[0]]
        return source if source["op"] == "null" else None

    def upgrade_hidden_keys(self) -> None:
        """``lr_mult`` -> ``__lr_mult__``; ``weight_lr_mult`` on an operator -> ``__lr_mult__`` on its weight."""
        for node in self.nodes:
            moved: dict[str, str] = {}
            for key in [k for k in node["attrs"] if _hidden_key(k) is not None]:
                prefix, hidden = _hidden_key(key)  # type: ignore[misc]
                if not prefix:
                    moved[f"__{hidden}__"] = node["attrs"].pop(key)
                    continue
                names = self._input_names(node)
                if names is None or prefix not in names:
                    continue  # kept as it is, as MXNet keeps it
                variable = self._variable_input(node, names.index(prefix))
                if variable is not None:
                    variable["attrs"][f"__{hidden}__"] = node["attrs"].pop(key)
            node["attrs"].update(moved)

    def upgrade_missing_inputs(self) -> None:
        """Before 0.9.0 auxiliary states were not stored: add them as variables ``<node>_<input>``."""
        upgraded: list[dict[str, Any]] = []
        new_index: dict[int, int] = {}
        for position, node in enumerate(self.nodes):
            node["inputs"] = [[new_index.get(raw[0], raw[0]), *raw[1:]] if isinstance(raw, list) and raw else raw
                              for raw in node["inputs"]]
            names = self._input_names(node)
            if names is not None and len(node["inputs"]) < len(names):
                for name in names[len(node["inputs"]):]:
                    upgraded.append({"op": "null", "name": f"{node['name']}_{name}", "attrs": dict(node["attrs"]),
                                     "inputs": []})
                    node["inputs"].append([len(upgraded) - 1, 0])
            new_index[position] = len(upgraded)
            upgraded.append(node)
        self.heads = [[new_index.get(raw[0], raw[0]), *raw[1:]] if isinstance(raw, list) and raw else raw
                      for raw in self.heads]
        self.nodes = upgraded

    def upgrade_variable_initializers(self) -> None:
        """Before 0.9.4: the ``__init__`` an operator gives the variables it is composed with."""
        for node in self.nodes:
            for index, init in COMPOSE_INITIALIZERS.get(node["op"], {}).items():
                variable = self._variable_input(node, index)
                if variable is not None:
                    variable["attrs"].setdefault("__init__", init)

    def upgrade_argmax_axis(self) -> None:
        """Before 0.9.5 ``axis=-1`` of argmax/argmin meant no axis."""
        for node in self.nodes:
            if node["op"] in ("argmax", "argmin") and node["attrs"].get("axis") == "-1":
                del node["attrs"]["axis"]

    def to_graph(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "heads": self.heads,
                "attrs": {"mxnet_version": ["int", CURRENT_VERSION]}}


def upgrade(graph: dict[str, Any], registry: Any) -> dict[str, Any]:
    """``graph`` (a parsed symbol JSON of any MXNet version) in MXNet 1.9.1's form.

    Nodes come back with one ``attrs`` table and inputs as ``[node, output]``; a graph that
    is already current is returned unchanged.
    """
    version = file_version(graph)
    legacy_keys = any(isinstance(item, dict) and ("param" in item or "attr" in item) for item in graph["nodes"])
    if version >= CURRENT_VERSION and not legacy_keys:
        return graph
    nodes = LegacyGraph(graph, registry)
    if version < CURRENT_VERSION:
        nodes.upgrade_hidden_keys()
    if version < _ADD_AUX_INPUTS_BEFORE:
        nodes.upgrade_missing_inputs()
    if version < _SET_VARIABLE_INIT_BEFORE:
        nodes.upgrade_variable_initializers()
    if version < _DROP_ARGMAX_AXIS_BEFORE:
        nodes.upgrade_argmax_axis()
    return nodes.to_graph()


__all__ = ["CURRENT_VERSION", "HIDDEN_KEYS", "LEGACY_VERSION", "file_version", "merge_node_attributes", "upgrade"]
