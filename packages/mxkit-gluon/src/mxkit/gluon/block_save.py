"""``Block.save`` / ``Block.load``: MXNet 1.9.1's whole-model files, ``<prefix>-model.json``
(the block tree: each block's name, its children's keys, whether it was hybridized) and
``<prefix>-model.params`` (``save_parameters``).

The tree is walked in order and each block keyed by its class name and its position, so a
model built again by the same code finds its entries even though its automatic names differ
(``dense2`` where the saved one was ``dense0``): :func:`load_model` gives each block its saved
name, renames the children keys that contained the old names, and then loads the parameters by
their structural names. A hybridized block that has run is saved with its graph (``symbol``,
``inputs``, ``in_format``, ``out_format``, which MXNet's ``load`` reads); here it comes back
hybridized and its graph is traced again on the first call (the same code gives the same graph),
so no Symbol is read from the file. No block tree deeper than :data:`MAX_DEPTH` is walked.
"""

from __future__ import annotations

import json
from typing import Any

from mxkit.gluon.parameter import GluonError

#: the deepest block tree a model file may describe
MAX_DEPTH = 256


def _describe(block: Any, index: list[int], structure: dict, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise GluonError(f"Block.save: the block tree is deeper than {MAX_DEPTH} levels")
    entry: dict[str, Any] = {"orig_name": block.name}
    structure[type(block).__name__.lower() + str(index[0])] = entry
    if hasattr(block, "_active"):
        # as MXNet writes it: a hybridized block that has run carries its graph and nesting formats
        graph = block._cached_graph if block._active else None
        entry["hybridized"] = graph is not None
        if graph is not None:
            inputs, sym = graph
            entry.update(in_format=block._graph_in_fmt, out_format=block._out_fmt,
                         inputs=[s.tojson() for s in inputs], symbol=sym.tojson())
    children: dict[str, str] = {}
    entry["children"] = children
    for key, child in block._children.items():
        index[0] += 1
        children[child.name] = key
        _describe(child, index, entry, depth + 1)


def save_model(block: Any, prefix: str) -> None:
    """Write ``<prefix>-model.json`` and ``<prefix>-model.params`` for ``block``."""
    from mxkit.core.files import atomic_write

    model: dict[str, Any] = {}
    _describe(block, [0], model, 0)
    atomic_write(f"{prefix}-model.json", json.dumps(model))
    block.save_parameters(f"{prefix}-model.params")


def _restore(block: Any, index: list[int], structure: dict, filename: str, depth: int) -> None:
    key = type(block).__name__.lower() + str(index[0])
    entry = structure.get(key) if isinstance(structure, dict) else None
    if not isinstance(entry, dict) or not isinstance(entry.get("orig_name"), str) \
            or not isinstance(entry.get("children"), dict):
        raise GluonError(f"Block.load: {filename!r} has no entry {key!r} for this {type(block).__name__}; the model "
                         f"must be built by the same code, in the same order, as the saved one")
    if depth > MAX_DEPTH:
        raise GluonError(f"Block.load: {filename!r} describes a block tree deeper than {MAX_DEPTH} levels")
    block._name = entry["orig_name"]
    if entry.get("hybridized") and hasattr(block, "_active"):
        block.hybridize(True)
    for child in list(block._children.values()):
        index[0] += 1
        _restore(child, index, entry, filename, depth + 1)
    saved_keys = entry["children"]
    renamed = {}
    for child in block._children.values():
        if child.name not in saved_keys:
            raise GluonError(f"Block.load: {filename!r} has no child named {child.name!r} under "
                             f"{entry['orig_name']!r}; it has {sorted(saved_keys)}")
        renamed[saved_keys[child.name]] = child
    block._children.clear()
    block._children.update(renamed)


def load_model(block: Any, prefix: str) -> None:
    """Give ``block`` (built by the code that built the saved one) the saved names and
    parameters of ``<prefix>-model.json`` / ``<prefix>-model.params``."""
    filename = f"{prefix}-model.json"
    with open(filename, encoding="utf-8") as f:
        try:
            model = json.load(f)
        except json.JSONDecodeError as exc:
            raise GluonError(f"Block.load: {filename!r} is not a model file written by Block.save: {exc}") from None
    _restore(block, [0], model, filename, 0)
    block.load_parameters(f"{prefix}-model.params")


__all__ = ["MAX_DEPTH", "load_model", "save_model"]
