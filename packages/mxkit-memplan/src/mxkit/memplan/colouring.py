"""Colouring nodes by repeated longest paths (the co-share strategy of the MXNet paper).

Nodes on one dependency path can never run in parallel, so letting them share memory
costs no parallelism. Each round finds the path through the DAG that covers the most
uncoloured nodes (dynamic programming over the execution order, as MXNet's
``ColorNodeGroup`` does) and gives its uncoloured nodes the next colour; already
coloured nodes may lie on the path but keep their colour. Every colour is therefore a
chain: an earlier node of a colour is an ancestor of every later one.
"""

from __future__ import annotations

from mxkit.memplan.graph import Graph


def node_predecessors(graph: Graph) -> list[frozenset[int]]:
    """Per node, the nodes producing its inputs (ignored inputs are still dependencies)."""
    producer = graph.producer
    return [frozenset(producer[e] for e in inputs if producer[e] >= 0) for inputs in graph.node_inputs]


def colour_by_longest_paths(graph: Graph, max_colours: int | None = None,
                            predecessors: list[frozenset[int]] | None = None) -> tuple[list[int], int]:
    """Colour the nodes of ``graph``; return ``(colour per node, number of path colours)``.

    Rounds stop when every node is coloured or after ``max_colours`` rounds; each node
    still uncoloured then gets a colour of its own (it shares with nobody, so planning
    still removes no parallelism). One round is O(nodes + edges) from the first
    uncoloured node on.
    """
    preds = [sorted(p) for p in (predecessors if predecessors is not None else node_predecessors(graph))]
    steps = graph.num_steps
    colour = [-1] * steps
    reward = [0] * steps
    via = [-1] * steps
    first = 0
    rounds = 0
    while first < steps and (max_colours is None or rounds < max_colours):
        for node in range(first, steps):
            pred_list = preds[node]
            if not pred_list:
                reward[node], via[node] = int(colour[node] < 0), -1
                continue
            # the first predecessor of the largest reward (max keeps the first), none if 0
            best_pred = pred_list[0] if len(pred_list) == 1 else max(pred_list, key=reward.__getitem__)
            best = reward[best_pred]
            reward[node] = best + (colour[node] < 0)
            via[node] = best_pred if best > 0 else -1
        end = max(range(first, steps), key=reward.__getitem__)
        node = end
        while node >= 0:
            if colour[node] < 0:
                colour[node] = rounds
            node = via[node]
        rounds += 1
        # coloured nodes weigh nothing; rewards before ``first`` stay 0 (all coloured)
        for node in range(first, steps):
            reward[node] = 0
        while first < steps and colour[first] >= 0:
            first += 1
    next_colour = rounds
    for node in range(steps):
        if colour[node] < 0:
            colour[node] = next_colour
            next_colour += 1
    return colour, rounds


__all__ = ["colour_by_longest_paths", "node_predecessors"]
