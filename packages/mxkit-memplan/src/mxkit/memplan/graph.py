"""The plain-Python graph description that every planner reads.

A :class:`Graph` is a list of :class:`Node` in execution order over named :class:`Entry`
values (MXNet's node entries: one output of one operator). Memory planning needs to know
nothing about operators, only:

- each entry's byte size and device, and whether it is *external*: arguments,
  parameters, gradients of arguments, auxiliary states and requested outputs live in
  memory the caller owns, so the plan gives them no storage and never writes over them;
- each node's input and output entries, the inputs it ignores (MXNet's
  ``FIgnoreInputs``: a dependency, not a read, so it does not keep the entry alive) and its
  in-place options ``(input index, output index, identity)`` (MXNet's ``FInplaceOption``
  and ``FInplaceIdentity``).

The constructor validates everything once and builds integer indices, so planners work
on lists of ints, not names.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mxkit.memplan.errors import GraphError

DEFAULT_DEVICE = "cpu(0)"


@dataclass(frozen=True)
class Entry:
    """One value of the graph: an operator output or an external array.

    Parameters
    ----------
    name : str
        Unique name of the entry (``"conv1_output"``, ``"fc1_weight"``).
    size : int
        Bytes it needs (``elements * itemsize``); zero is allowed and takes no memory.
    device : str
        The device its memory lives on (``"cpu(0)"``, ``"gpu(1)"``); memory is only shared
        between entries of one device.
    external : bool
        True for memory the caller owns (arguments, parameters, gradients, auxiliary
        states, requested outputs): the plan gives it no storage and never reuses it.
    """

    name: str
    size: int
    device: str = DEFAULT_DEVICE
    external: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise GraphError(f"an entry name must be a non-empty string, got {self.name!r}")
        if isinstance(self.size, bool) or not isinstance(self.size, int):
            raise GraphError(
                f"entry {self.name!r} has size {self.size!r} of type {type(self.size).__name__}; "
                f"a size is a whole number of bytes (int >= 0)"
            )
        if self.size < 0:
            raise GraphError(f"entry {self.name!r} has negative size {self.size}; a size is a byte count >= 0")
        device = str(self.device) if not isinstance(self.device, str) else self.device
        if not device:
            raise GraphError(f"entry {self.name!r} has an empty device; use e.g. {DEFAULT_DEVICE!r}")
        object.__setattr__(self, "device", device)
        if not isinstance(self.external, bool):
            raise GraphError(f"entry {self.name!r}: external must be True or False, got {self.external!r}")


@dataclass(frozen=True)
class InplaceOption:
    """A node may write output ``output_index`` into the memory of input ``input_index``.

    With ``identity`` the output holds exactly the input's bytes (a reshape, a copy, an
    identity op), so it may share the input's memory even while the input is still read
    later; without it the output overwrites the input, which is only legal at the input's
    last read.
    """

    input_index: int
    output_index: int
    identity: bool = False


@dataclass(frozen=True)
class Node:
    """One operator invocation, in execution order.

    Parameters
    ----------
    name : str
        Unique node name.
    inputs, outputs : sequence of str
        Names of the entries it reads and writes (an entry may be read twice, ``b * b``).
    inplace : sequence of InplaceOption or (int, int) or (int, int, bool)
        The in-place options the operator allows.
    ignored_inputs : sequence of int
        Indices of inputs the operator does not actually read (e.g. the forward input of
        the backward of ``relu`` when it reads the output instead).
    """

    # any sequences are accepted; __post_init__ stores tuples, InplaceOptions and a frozenset
    name: str
    inputs: Sequence[str] = ()
    outputs: Sequence[str] = ()
    inplace: Sequence[Any] = ()
    ignored_inputs: Collection[int] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise GraphError(f"a node name must be a non-empty string, got {self.name!r}")
        for attr in ("inputs", "outputs"):
            value = getattr(self, attr)
            if isinstance(value, str) or not isinstance(value, Iterable):
                raise GraphError(
                    f"node {self.name!r}: {attr} must be a sequence of entry names, got {value!r}"
                )
            names = tuple(value)
            for item in names:
                if not isinstance(item, str):
                    raise GraphError(f"node {self.name!r}: {attr} holds {item!r}; expected entry names (str)")
            object.__setattr__(self, attr, names)
        if len(set(self.outputs)) != len(self.outputs):
            raise GraphError(f"node {self.name!r} lists an output twice: {list(self.outputs)}")
        object.__setattr__(self, "inplace", tuple(self._option(o) for o in self.inplace))
        ignored = frozenset(self.ignored_inputs)
        for index in ignored:
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self.inputs):
                raise GraphError(
                    f"node {self.name!r}: ignored input index {index!r} is out of range; "
                    f"it has {len(self.inputs)} inputs (valid 0..{len(self.inputs) - 1})"
                )
        object.__setattr__(self, "ignored_inputs", ignored)
        for option in self.inplace:
            if option.input_index in ignored:
                raise GraphError(
                    f"node {self.name!r}: in-place option {tuple(option.__dict__.values())} names input "
                    f"{option.input_index}, which the node ignores; an ignored input is not read, "
                    f"so its memory cannot be taken in place"
                )

    def _option(self, option: Any) -> InplaceOption:
        if isinstance(option, InplaceOption):
            parts: tuple[Any, ...] = (option.input_index, option.output_index, option.identity)
        elif isinstance(option, Sequence) and not isinstance(option, str) and len(option) in (2, 3):
            parts = (*tuple(option), False)[:3]
        else:
            raise GraphError(
                f"node {self.name!r}: in-place option {option!r} must be (input_index, output_index) or "
                f"(input_index, output_index, identity)"
            )
        input_index, output_index, identity = parts
        for what, index, limit in (("input", input_index, len(self.inputs)),
                                   ("output", output_index, len(self.outputs))):
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < limit:
                raise GraphError(
                    f"node {self.name!r}: in-place option {option!r} has {what} index {index!r}; "
                    f"the node has {limit} {what}s (valid 0..{limit - 1})"
                )
        if not isinstance(identity, bool):
            raise GraphError(f"node {self.name!r}: in-place option {option!r}: identity must be a bool")
        return InplaceOption(input_index, output_index, identity)


class Graph:
    """A validated graph description: entries and nodes in execution order.

    Parameters
    ----------
    nodes : iterable of Node
        In execution order; every input must be produced by an earlier node or be an
        external entry that no node produces (a graph input).
    entries : iterable of Entry, or mapping of name to Entry
        Every entry the nodes mention.

    Raises
    ------
    GraphError
        For unknown or duplicated names, an entry produced twice, a non-external entry
        that no node produces, an entry read before it is produced, or a cycle.

    Notes
    -----
    Integer views for the planners (``entry_size``, ``node_inputs``...) are built here once;
    lifetimes are computed on first use by :func:`mxkit.memplan.liveness.lifetimes`.
    """

    def __init__(self, nodes: Iterable[Node], entries: Iterable[Entry] | Mapping[str, Entry]):
        if isinstance(entries, Mapping):
            entries = entries.values()
        self.entries: tuple[Entry, ...] = tuple(entries)
        self.nodes: tuple[Node, ...] = tuple(nodes)
        for entry in self.entries:
            if not isinstance(entry, Entry):
                raise GraphError(f"graph entries must be mxkit.memplan.Entry objects, got {entry!r}")
        for node in self.nodes:
            if not isinstance(node, Node):
                raise GraphError(f"graph nodes must be mxkit.memplan.Node objects, got {node!r}")
        self.entry_index: dict[str, int] = {}
        for index, entry in enumerate(self.entries):
            if entry.name in self.entry_index:
                raise GraphError(f"entry name {entry.name!r} is used twice; entry names must be unique")
            self.entry_index[entry.name] = index
        self.node_index: dict[str, int] = {}
        for index, node in enumerate(self.nodes):
            if node.name in self.node_index:
                raise GraphError(f"node name {node.name!r} is used twice; node names must be unique")
            self.node_index[node.name] = index
        self.entry_size = [e.size for e in self.entries]
        self.entry_external = [e.external for e in self.entries]
        self.entry_device = [e.device for e in self.entries]
        self.node_inputs = [[self._lookup(n, name, "input") for name in n.inputs] for n in self.nodes]
        self.node_outputs = [[self._lookup(n, name, "output") for name in n.outputs] for n in self.nodes]
        self.node_ignored = [n.ignored_inputs for n in self.nodes]
        self.node_options = [
            [(o.input_index, o.output_index, o.identity) for o in n.inplace] for n in self.nodes
        ]
        self.producer = self._producers()
        self._check_order()
        self._cache: dict[str, Any] = {}  # what liveness and the planners derive once per graph

    # -- validation -------------------------------------------------------------------

    def _lookup(self, node: Node, name: str, role: str) -> int:
        try:
            return self.entry_index[name]
        except KeyError:
            raise GraphError(
                f"node {node.name!r} names {role} entry {name!r}, which is not among the graph's "
                f"{len(self.entries)} entries; add Entry({name!r}, size) to the graph"
            ) from None

    def _producers(self) -> list[int]:
        producer = [-1] * len(self.entries)
        for step, outputs in enumerate(self.node_outputs):
            for entry in outputs:
                if producer[entry] >= 0:
                    raise GraphError(
                        f"entry {self.entries[entry].name!r} is produced by node "
                        f"{self.nodes[producer[entry]].name!r} and again by node {self.nodes[step].name!r}; "
                        f"each entry has exactly one producer"
                    )
                producer[entry] = step
        for entry, step in enumerate(producer):
            if step < 0 and not self.entry_external[entry]:
                raise GraphError(
                    f"entry {self.entries[entry].name!r} is not external but no node produces it; "
                    f"mark it external=True (an argument or parameter) or add the node that writes it"
                )
        return producer

    def _check_order(self) -> None:
        for step, inputs in enumerate(self.node_inputs):
            for entry in inputs:
                made_at = self.producer[entry]
                if made_at >= step:
                    cycle = find_cycle(self.nodes, self.node_inputs, self.producer)
                    if cycle is not None:
                        path = " -> ".join(self.nodes[i].name for i in cycle)
                        raise GraphError(
                            f"the graph has a cycle: {path}; a dataflow graph must be acyclic"
                        )
                    raise GraphError(
                        f"entry {self.entries[entry].name!r} is consumed by node {self.nodes[step].name!r} "
                        f"(step {step}) before it is produced by node {self.nodes[made_at].name!r} "
                        f"(step {made_at}); list the nodes in execution order or build the graph with "
                        f"Graph.from_unordered(nodes, entries)"
                    )

    # -- constructors and views ---------------------------------------------------------

    @classmethod
    def from_unordered(cls, nodes: Iterable[Node], entries: Iterable[Entry] | Mapping[str, Entry]) -> Graph:
        """Build a graph from nodes in any order, sorted topologically.

        Ties keep the given order (Kahn's algorithm with a FIFO of ready nodes), so an
        already ordered list comes back unchanged.

        Raises
        ------
        GraphError
            If the nodes form a cycle (the message names one), or for any error of
            :class:`Graph`.
        """
        nodes = list(nodes)
        entry_list = list(entries.values() if isinstance(entries, Mapping) else entries)
        entry_id = {getattr(e, "name", None): i for i, e in enumerate(entry_list)}
        producer = [-1] * len(entry_list)
        for index, node in enumerate(nodes):
            for name in node.outputs:
                if name in entry_id and producer[entry_id[name]] < 0:
                    producer[entry_id[name]] = index
        # unknown names are left to Graph() to report
        node_inputs = [[entry_id[n] for n in node.inputs if n in entry_id] for node in nodes]
        users: list[list[int]] = [[] for _ in nodes]
        waiting = [0] * len(nodes)
        for index, inputs in enumerate(node_inputs):
            for pred in {producer[e] for e in inputs if producer[e] >= 0}:
                users[pred].append(index)
                waiting[index] += 1
        ready = [i for i, w in enumerate(waiting) if w == 0]
        heapq.heapify(ready)
        order: list[int] = []
        while ready:
            current = heapq.heappop(ready)
            order.append(current)
            for user in users[current]:
                waiting[user] -= 1
                if waiting[user] == 0:
                    heapq.heappush(ready, user)
        if len(order) < len(nodes):
            cycle = find_cycle(nodes, node_inputs, producer) or []
            path = " -> ".join(nodes[i].name for i in cycle)
            raise GraphError(f"the graph has a cycle: {path}; a dataflow graph must be acyclic")
        return cls([nodes[i] for i in order], entry_list)

    @property
    def num_steps(self) -> int:
        """Number of nodes (execution steps)."""
        return len(self.nodes)

    def devices(self) -> list[str]:
        """The devices of the planned (non-external) entries, in first-seen order."""
        seen: dict[str, None] = {}
        for entry in self.entries:
            if not entry.external:
                seen.setdefault(entry.device, None)
        return list(seen)

    def planned_bytes(self) -> int:
        """Sum of the sizes of the non-external entries: what strategy ``none`` uses."""
        return sum(e.size for e in self.entries if not e.external)

    def __repr__(self) -> str:
        external = sum(self.entry_external)
        return (f"Graph({len(self.nodes)} nodes, {len(self.entries)} entries of which {external} external, "
                f"{self.planned_bytes()} planned bytes)")


def find_cycle(nodes: Sequence[Any], node_inputs: Sequence[Sequence[int]],
               producer: Sequence[int]) -> list[int] | None:
    """One cycle of the node dependency graph as node indices (first repeated at the end).

    ``node_inputs[i]`` are entry ids read by node ``i`` and ``producer[e]`` the node writing
    entry ``e`` (-1 for none). Iterative DFS, so deep graphs do not hit the recursion limit.
    """
    preds = [[producer[e] for e in inputs if producer[e] >= 0] for inputs in node_inputs]
    state = [0] * len(nodes)  # 0 new, 1 on the stack, 2 done
    for root in range(len(nodes)):
        if state[root]:
            continue
        stack: list[tuple[int, int]] = [(root, 0)]
        path: list[int] = [root]
        state[root] = 1
        while stack:
            node, child = stack[-1]
            if child < len(preds[node]):
                stack[-1] = (node, child + 1)
                nxt = preds[node][child]
                if state[nxt] == 1:
                    cycle = [*path[path.index(nxt):], nxt]
                    cycle.reverse()  # producer before consumer reads naturally
                    return cycle
                if state[nxt] == 0:
                    state[nxt] = 1
                    stack.append((nxt, 0))
                    path.append(nxt)
            else:
                state[node] = 2
                stack.pop()
                path.pop()
    return None


__all__ = ["DEFAULT_DEVICE", "Entry", "Graph", "InplaceOption", "Node", "find_cycle"]
