"""A small helper to describe a graph node by node."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from mxkit.memplan.errors import GraphError
from mxkit.memplan.graph import DEFAULT_DEVICE, Entry, Graph, Node


class GraphBuilder:
    """Describe a graph in execution order, then :meth:`build` it.

    Examples
    --------
    The MXNet paper's example ``b = a * 2; c = b * a; d = c + 1``::

        g = GraphBuilder()
        g.node("ones", outputs=[("a", 400)])
        g.node("mul2", inputs=["a"], outputs=[("b", 400)], inplace=[(0, 0)])
        g.node("mul", inputs=["b", "a"], outputs=[("c", 400)], inplace=[(0, 0), (1, 0)])
        g.node("add1", inputs=["c"], outputs=[("d", 400)], inplace=[(0, 0)])
        graph = g.build()
    """

    def __init__(self, device: str = DEFAULT_DEVICE) -> None:
        self.device = device
        self._entries: dict[str, Entry] = {}
        self._nodes: list[Node] = []

    def external(self, name: str, size: int, device: str | None = None) -> str:
        """Declare a graph input living outside the plan (argument, parameter); returns its name."""
        self._add(Entry(name, size, device or self.device, external=True))
        return name

    def node(self, name: str, inputs: Sequence[str] = (), outputs: Iterable[tuple[str, int] | Entry] = (),
             inplace: Sequence[Any] = (), ignored_inputs: Sequence[int] = ()) -> list[str]:
        """Append a node; ``outputs`` are ``(name, size)`` pairs or :class:`Entry` objects.

        Returns the output names.
        """
        names = []
        for output in outputs:
            entry = output if isinstance(output, Entry) else Entry(output[0], output[1], self.device)
            self._add(entry)
            names.append(entry.name)
        self._nodes.append(Node(name, tuple(inputs), tuple(names), tuple(inplace), frozenset(ignored_inputs)))
        return names

    def mark_external(self, *names: str) -> None:
        """Make entries external (requested outputs, gradients the caller keeps)."""
        for name in names:
            if name not in self._entries:
                raise GraphError(f"cannot mark {name!r} external: no such entry; known: {sorted(self._entries)[:10]}")
            entry = self._entries[name]
            self._entries[name] = Entry(entry.name, entry.size, entry.device, external=True)

    def build(self) -> Graph:
        """The validated :class:`Graph`."""
        return Graph(self._nodes, self._entries)

    def _add(self, entry: Entry) -> None:
        if entry.name in self._entries:
            raise GraphError(f"entry name {entry.name!r} is declared twice; entry names must be unique")
        self._entries[entry.name] = entry


__all__ = ["GraphBuilder"]
