"""Graph passes: plain functions over the executor's graph, chosen by config ``graph_passes``.

A pass is ``pass(roots, nodes) -> nodes``: ``roots`` are the entries the bind must produce
(the outputs and the nodes writing gradient arrays), ``nodes`` the forward and backward
operator nodes in execution order. Passes run at every bind, after the backward graph is
built, in the order config lists them, so new ones (fusion, recompute) slot in by
registering a function under a name with :func:`register_pass`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

from mxkit.core.errors import ConfigError
from mxkit.symbol.graph import Entry, Node, topo_order

GraphPass = Callable[[list[Entry], list[Node]], list[Node]]
_PASSES: dict[str, GraphPass] = {}
# Names the default configuration lists that no pass implements yet: skipped with one warning.
_PLANNED = {"fuse": "elementwise fusion", "mirror": "recomputation (mirror)"}
_warned: set[str] = set()


def register_pass(name: str, function: GraphPass) -> None:
    """Make ``function(roots, nodes) -> nodes`` available as pass ``name``."""
    _PASSES[name.strip().lower()] = function


def prune(roots: list[Entry], nodes: list[Node]) -> list[Node]:
    """Keep only the nodes the roots depend on (feature extraction runs no later layer, and a
    gradient nobody asked for is not computed)."""
    needed = {id(n) for n in topo_order(roots)}
    return [n for n in nodes if id(n) in needed]


register_pass("prune", prune)


def run_passes(roots: list[Entry], nodes: list[Node], names: Sequence[str] | None = None) -> list[Node]:
    """Run the passes ``names`` (default: config ``graph_passes``) over ``nodes``.

    Raises
    ------
    ConfigError
        For a name no pass is registered under (listing the registered ones).
    """
    if names is None:
        from mxkit.core import config

        names = config.get("graph_passes")
    for raw in names:
        name = raw.strip().lower()
        function = _PASSES.get(name)
        if function is None:
            if name in _PLANNED:
                if name not in _warned:
                    _warned.add(name)
                    warnings.warn(f"graph pass {name!r} ({_PLANNED[name]}) is not implemented yet; skipped",
                                  stacklevel=3)
                continue
            raise ConfigError(f"graph_passes lists {raw!r}, which is not a graph pass; registered passes: "
                              f"{', '.join(sorted(_PASSES))}")
        nodes = function(roots, nodes)
    return nodes


__all__ = ["prune", "register_pass", "run_passes"]
