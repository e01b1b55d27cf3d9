"""Graph passes: functions over the executor's graph, chosen by config ``graph_passes``.

Passes run at every bind, after the backward graph is built, in the order config lists
them (default ``prune,fuse``; config ``eliminate_common_expr``, on by default, adds
``eliminate_common_expr`` right after ``prune``: :mod:`mxkit.symbol.common_expr`;
config ``backward_do_mirror`` adds ``mirror`` after
``prune``, and so does a recomputing memory planner, config ``memplan = "sublinear"``;
in a bind without a backward pass, config ``fold_batchnorm``, on by default, adds
``fold_batchnorm`` after ``prune``: :mod:`mxkit.symbol.folding`, and config ``fuse_conv``, on by
default, ``fuse_conv`` after it: :mod:`mxkit.symbol.conv_fusion`).
Two kinds are registered with :func:`register_pass`:

- a *selecting* pass is ``pass(roots, nodes) -> nodes``: ``roots`` are the entries the
  bind must produce (the outputs, then the entries writing gradient arrays), ``nodes``
  the forward and backward operator nodes in execution order (``prune``);
- a *rewriting* pass (``rewrites=True``) is ``pass(graph)`` over a :class:`PassGraph`:
  it may add and remove nodes and move roots, recording the shape and dtype of every
  entry it makes (``fuse``: :mod:`mxkit.symbol.fusion`; ``mirror``: :mod:`mxkit.symbol.mirror`).

The forward nodes are shared with the Symbol that was bound, so a rewriting pass never
changes them: :meth:`PassGraph.replace_entries` gives a node whose inputs change a
private copy. Backward nodes are made anew by every bind and may be changed in place.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mxkit.core.errors import ConfigError
from mxkit.symbol.graph import Entry, Node, topo_order
from mxkit.symbol.infer import key

GraphPass = Callable[[list[Entry], list[Node]], list[Node]]
_PASSES: dict[str, GraphPass] = {}
_REWRITING: set[str] = set()
# Rewriting passes whose result uses operators MXNet does not have (``_FusedElemwise``).
_NOT_PORTABLE: set[str] = set()
# Names a configuration may list that no pass implements yet: skipped with one warning.
_PLANNED: dict[str, str] = {}
_warned: set[str] = set()


@dataclass
class PassGraph:
    """The executor's graph as rewriting passes see and change it.

    Attributes
    ----------
    nodes : list of Node
        Forward and backward operator nodes in execution order.
    roots : list of Entry
        The outputs, then the entries that write gradient arrays (same order as given).
    shapes, dtypes : dict
        Entry key ``(id(node), index)`` to shape / dtype name; a pass adds its new entries.
    forward_ids : set of int
        Ids of the nodes that run in ``forward`` (the others run in ``backward``).
    shared_ids : set of int
        Ids of the nodes shared with the Symbol (never changed in place).
    retired : list of Node
        Nodes a pass removed, kept alive for the bind so that no new node reuses their id
        while ``shapes`` still has their keys.
    select_checkpoints : callable or None
        The checkpoint selection of the recomputing memory planner the bind uses (see
        :func:`mxkit.memplan.sublinear.recompute_selector`); ``mirror`` uses it.
    recomputed_ids : set of int
        Ids of the nodes that recompute forward results (made by ``mirror``; a fused node
        that absorbs one is one too).
    notes : dict of int to str
        Node id to what a pass made it from (``fold_batchnorm``'s folded convolutions), for
        the executor's ``debug_str``.
    unmonitored_ids : set of int
        Ids of nodes a pass added that MXNet's graph does not have (a monitor skips them).
    portable_roots : list of Entry or None
        The roots over a copy of the forward graph as it stood before the first pass that
        brings in operators MXNet does not have (``fuse``), or after the last pass when none
        does: the graph ``Executor.get_optimized_symbol`` shows (set by :func:`optimize_graph`).
    """

    nodes: list[Node]
    roots: list[Entry]
    shapes: dict[Any, tuple] = field(default_factory=dict)
    dtypes: dict[Any, str] = field(default_factory=dict)
    forward_ids: set[int] = field(default_factory=set)
    shared_ids: set[int] = field(default_factory=set)
    retired: list[Node] = field(default_factory=list)
    select_checkpoints: Callable[..., Any] | None = None
    recomputed_ids: set[int] = field(default_factory=set)
    notes: dict[int, str] = field(default_factory=dict)
    unmonitored_ids: set[int] = field(default_factory=set)
    portable_roots: list[Entry] | None = None

    def is_forward(self, node: Node) -> bool:
        return id(node) in self.forward_ids

    def readers(self) -> dict[Any, list[Node]]:
        """Entry key -> the nodes that read the entry (once per input that names it)."""
        readers: dict[Any, list[Node]] = {}
        for node in self.nodes:
            for entry in node.inputs:
                readers.setdefault(key(entry), []).append(node)
        return readers

    def snapshot_forward(self) -> list[Entry]:
        """The roots over a copy of the forward nodes they depend on (variables shared), which
        later passes, changing private nodes in place, cannot alter."""
        copies: dict[int, Node] = {}
        for node in topo_order([r for r in self.roots if self.is_forward(r.node) or r.node.is_variable]):
            if node.is_variable:
                continue
            inputs = [Entry(copies.get(id(e.node), e.node), e.index) for e in node.inputs]
            copies[id(node)] = Node(node.op, node.name, node.attrs, inputs, node.params)
        return [Entry(copies.get(id(r.node), r.node), r.index) for r in self.roots]

    def splice(self, inserted: dict[int, list[Node]], removed: set[int], replacements: dict[Any, Entry]) -> None:
        """Rewrite the node list: ``inserted[id(n)]`` go just before node ``n`` (new nodes take
        the place of the ones they stand for), nodes whose id is in ``removed`` are retired, and
        readers of the entry keys in ``replacements`` read the new entries
        (:meth:`replace_entries`)."""
        kept: list[Node] = []
        for node in self.nodes:
            kept.extend(inserted.get(id(node), ()))
            if id(node) in removed:
                self.retired.append(node)
            else:
                kept.append(node)
        self.nodes = kept
        self.replace_entries(replacements)

    def replace_entries(self, replacements: dict[Any, Entry]) -> None:
        """Make every reader of entry key ``k`` (nodes and roots) read ``replacements[k]``.

        A shared node whose inputs change is replaced by a private copy, and the readers of
        its outputs then read the copy's, and so on downstream.
        """
        mapping = dict(replacements)

        def resolve(entry: Entry) -> Entry:
            # a replacement may itself be replaced later in this sweep (a kept node whose
            # inputs changed gets a private copy): follow the chain to its end
            while (id(entry.node), entry.index) in mapping:
                entry = mapping[(id(entry.node), entry.index)]
            return entry

        rewired: list[Node] = []
        for node in self.nodes:
            if any((id(e.node), e.index) in mapping for e in node.inputs):
                inputs = [resolve(e) for e in node.inputs]
                if id(node) in self.shared_ids:
                    copy = Node(node.op, node.name, node.attrs, inputs, node.params)
                    for i in range(node.num_outputs()):
                        self.shapes[(id(copy), i)] = self.shapes[(id(node), i)]
                        self.dtypes[(id(copy), i)] = self.dtypes[(id(node), i)]
                        mapping[(id(node), i)] = Entry(copy, i)
                    if id(node) in self.forward_ids:
                        self.forward_ids.add(id(copy))
                    self.retired.append(node)
                    node = copy
                else:
                    node.inputs = inputs
            rewired.append(node)
        self.nodes = rewired
        self.roots = [resolve(r) for r in self.roots]


def register_pass(name: str, function: Callable, rewrites: bool = False, portable: bool = True) -> None:
    """Make ``function`` available as pass ``name``.

    Parameters
    ----------
    name : str
        The name config ``graph_passes`` lists.
    function : callable
        ``function(roots, nodes) -> nodes``, or with ``rewrites=True`` ``function(graph)``
        changing the :class:`PassGraph` in place.
    portable : bool
        False for a rewriting pass whose nodes are operators MXNet does not have: the
        optimized symbol an executor shows is the forward graph before it.
    """
    normalized = name.strip().lower()
    _PASSES[normalized] = function
    _PLANNED.pop(normalized, None)
    if portable:
        _NOT_PORTABLE.discard(normalized)
    else:
        _NOT_PORTABLE.add(normalized)
    if rewrites:
        _REWRITING.add(normalized)
    else:
        _REWRITING.discard(normalized)


def prune(roots: list[Entry], nodes: list[Node]) -> list[Node]:
    """Keep only the nodes the roots depend on (feature extraction runs no later layer, and a
    gradient nobody asked for is not computed)."""
    needed = {id(n) for n in topo_order(roots)}
    return [n for n in nodes if id(n) in needed]


register_pass("prune", prune)


def configured_passes(recompute: bool = False, inference: bool = False) -> list[str]:
    """Config ``graph_passes``, with ``mirror`` after ``prune`` when ``backward_do_mirror`` is on
    or ``recompute`` (the bind's memory planner is a recomputing one, ``sublinear``),
    ``eliminate_common_expr`` right after ``prune`` when config ``eliminate_common_expr`` is on
    (:mod:`mxkit.symbol.common_expr`), and, for an ``inference`` bind (no backward pass),
    ``fold_batchnorm`` after ``prune`` when config ``fold_batchnorm`` is on and ``fuse_conv`` after
    those when config ``fuse_conv`` is on."""
    from mxkit.core import config

    names = [n.strip().lower() for n in config.get("graph_passes")]
    if (recompute or config.get("backward_do_mirror")) and "mirror" not in names:
        names.insert(names.index("prune") + 1 if "prune" in names else 0, "mirror")
    if inference and config.get("fold_batchnorm") and "fold_batchnorm" not in names:
        names.insert(names.index("prune") + 1 if "prune" in names else 0, "fold_batchnorm")
    # first after prune: merging before the other passes leaves them less to do
    if config.get("eliminate_common_expr") and "eliminate_common_expr" not in names:
        names.insert(names.index("prune") + 1 if "prune" in names else 0, "eliminate_common_expr")
    if inference and config.get("fuse_conv") and "fuse_conv" not in names:
        # after the folding (which leaves convolution -> add -> relu) and before ``fuse`` (which would take the
        # add and the relu into an elementwise group)
        after = max((names.index(n) + 1 for n in ("prune", "fold_batchnorm") if n in names), default=0)
        names.insert(after, "fuse_conv")
    return names


def run_passes(roots: list[Entry], nodes: list[Node], names: Sequence[str] | None = None) -> list[Node]:
    """Run the selecting passes ``names`` (default: config) over ``nodes``; rewriting ones need
    :func:`optimize_graph` (shapes and dtypes) and are skipped here."""
    graph = PassGraph(list(nodes), list(roots))
    _run(graph, names, rewriting=False)
    return graph.nodes


def optimize_graph(graph: PassGraph, names: Sequence[str] | None = None) -> PassGraph:
    """Run the passes ``names`` (default: :func:`configured_passes`) over ``graph`` in place.

    Raises
    ------
    ConfigError
        For a name no pass is registered under (listing the registered ones).
    """
    _run(graph, names, rewriting=True)
    return graph


def _ensure_builtin_passes() -> None:
    # the rewriting passes live in their own modules, which register themselves at import
    import mxkit.symbol.common_expr
    import mxkit.symbol.conv_fusion
    import mxkit.symbol.folding
    import mxkit.symbol.fusion
    import mxkit.symbol.mirror  # noqa: F401


def _run(graph: PassGraph, names: Sequence[str] | None, rewriting: bool) -> None:
    _ensure_builtin_passes()
    if names is None:
        names = configured_passes()
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
        if name in _REWRITING:
            if rewriting:
                if name in _NOT_PORTABLE and graph.portable_roots is None:
                    graph.portable_roots = graph.snapshot_forward()
                function(graph)
        else:
            graph.nodes = function(graph.roots, graph.nodes)
    if rewriting and graph.portable_roots is None:
        graph.portable_roots = graph.snapshot_forward()


__all__ = ["PassGraph", "configured_passes", "optimize_graph", "prune", "register_pass", "run_passes"]
