"""Synthetic graphs for tests and benchmarks: chains, residual stacks, inception-style
branches, random DAGs, and the backward pass of any of them.

They stand in for real networks until the symbol package can export those; sizes are in
bytes and the shapes are only as realistic as the arguments make them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from mxkit.memplan.graph import Entry, Graph, Node


def chain(num_nodes: int, size: int = 4096, sizes: Sequence[int] | None = None,
          inplace: bool = True) -> Graph:
    """``x -> f1 -> f2 -> ... -> fn`` with the input external and the last output requested.

    Every node may write its output over its input (``inplace``). ``sizes`` gives each
    output's size (default ``size`` for all).
    """
    sizes = list(sizes) if sizes is not None else [size] * num_nodes
    entries = [Entry("x", sizes[0] if sizes else size, external=True)]
    nodes = []
    previous = "x"
    for i in range(num_nodes):
        name = f"y{i}"
        entries.append(Entry(name, sizes[i], external=(i == num_nodes - 1)))
        nodes.append(Node(f"f{i}", (previous,), (name,), ((0, 0),) if inplace else ()))
        previous = name
    return Graph(nodes, entries)


def residual_stack(num_blocks: int, size: int = 1 << 20, bottleneck: int = 4) -> Graph:
    """ResNet-style blocks: ``y = relu(x + conv(relu(conv(x))))``, a wide-narrow-wide body.

    Convolutions read an external weight and cannot run in place; relu and the add can.
    """
    entries = [Entry("data", size, external=True)]
    nodes = []
    x = "data"
    for b in range(num_blocks):
        narrow = max(size // bottleneck, 1)
        parts = [
            (f"b{b}_conv1", (x, f"b{b}_w1"), f"b{b}_c1", narrow, ()),
            (f"b{b}_relu1", (f"b{b}_c1",), f"b{b}_r1", narrow, ((0, 0),)),
            (f"b{b}_conv2", (f"b{b}_r1", f"b{b}_w2"), f"b{b}_c2", size, ()),
            (f"b{b}_add", (x, f"b{b}_c2"), f"b{b}_sum", size, ((0, 0), (1, 0))),
            (f"b{b}_relu2", (f"b{b}_sum",), f"b{b}_out", size, ((0, 0),)),
        ]
        entries += [Entry(f"b{b}_w1", 4096, external=True), Entry(f"b{b}_w2", 4096, external=True)]
        for node_name, inputs, output, out_size, options in parts:
            entries.append(Entry(output, out_size))
            nodes.append(Node(node_name, inputs, (output,), options))
        x = f"b{b}_out"
    entries[-1] = Entry(entries[-1].name, entries[-1].size, external=True)
    return Graph(nodes, entries)


def inception(num_modules: int, size: int = 1 << 20, branches: int = 4) -> Graph:
    """Inception-style modules: ``branches`` parallel paths of 1-3 convolutions, concatenated."""
    entries = [Entry("data", size, external=True)]
    nodes = []
    x = "data"
    for m in range(num_modules):
        outs = []
        branch_size = max(size // branches, 1)
        for br in range(branches):
            current = x
            for depth in range(1 + br % 3):
                out = f"m{m}_b{br}_c{depth}"
                weight = f"{out}_w"
                entries += [Entry(weight, 4096, external=True), Entry(out, branch_size)]
                nodes.append(Node(f"{out}_conv", (current, weight), (out,)))
                relu = f"{out}_relu"
                entries.append(Entry(relu, branch_size))
                nodes.append(Node(f"{relu}_op", (out,), (relu,), ((0, 0),)))
                current = relu
            outs.append(current)
        concat = f"m{m}_concat"
        entries.append(Entry(concat, branch_size * branches))
        nodes.append(Node(concat, tuple(outs), (concat,)))
        x = concat
    entries[-1] = Entry(entries[-1].name, entries[-1].size, external=True)
    return Graph(nodes, entries)


def random_dag(num_nodes: int, seed: int = 0, window: int = 16, max_inputs: int = 3,
               max_outputs: int = 2, inplace_probability: float = 0.5,
               identity_probability: float = 0.1, external_probability: float = 0.02,
               size_range: tuple[int, int] = (1, 1 << 16)) -> Graph:
    """A random DAG in execution order; each node reads 1..``max_inputs`` entries among the
    outputs of the last ``window`` nodes (or the external input), like layers of a network.

    In-place options, identity options, ignored inputs and requested (external) outputs
    are sprinkled with the given probabilities.
    """
    rng = random.Random(seed)
    entries = [Entry("input", rng.randint(*size_range), external=True)]
    nodes = []
    recent: list[list[str]] = [["input"]]
    for i in range(num_nodes):
        pool = [name for outs in recent[-window:] for name in outs]
        inputs = tuple(rng.choice(pool) for _ in range(rng.randint(1, max_inputs)))
        outputs = []
        for k in range(rng.randint(1, max_outputs)):
            name = f"n{i}_out{k}"
            entries.append(Entry(name, rng.randint(*size_range), external=rng.random() < external_probability))
            outputs.append(name)
        options = []
        for slot in range(len(inputs)):
            if rng.random() < inplace_probability:
                options.append((slot, rng.randrange(len(outputs)), rng.random() < identity_probability))
        option_slots = {o[0] for o in options}
        ignored = frozenset(s for s in range(len(inputs)) if s not in option_slots and rng.random() < 0.05)
        nodes.append(Node(f"n{i}", inputs, tuple(outputs), tuple(options), ignored))
        recent.append(outputs)
    return Graph(nodes, entries)


def with_backward(forward: Graph) -> Graph:
    """The forward graph followed by its backward pass, as an executor for training runs.

    For each forward node, in reverse, a backward node reads the gradients of its outputs
    and its forward inputs and writes one gradient per input; an entry read by several
    nodes gets its partial gradients summed by an ``add_n`` node (in place). Gradients of
    external inputs (parameters, data) are external: the caller keeps them. Requested
    forward outputs get an external head gradient.
    """
    entries = {e.name: e for e in forward.entries}
    nodes = list(forward.nodes)
    partials: dict[str, list[str]] = {}
    for entry in forward.entries:
        if entry.external and forward.producer[forward.entry_index[entry.name]] >= 0:
            head = f"{entry.name}@head_grad"
            entries[head] = Entry(head, entry.size, entry.device, external=True)
            partials[entry.name] = [head]
    for step in range(len(forward.nodes) - 1, -1, -1):
        node = forward.nodes[step]
        grads_in = []
        for output in node.outputs:
            grad = _gradient(output, partials, entries, nodes)
            if grad is not None:
                grads_in.append(grad)
        if not grads_in:
            continue  # nothing downstream needs this node's gradient
        outputs = []
        for name in node.inputs:
            partial = f"{name}@grad{len(partials.get(name, []))}_{node.name}"
            source = entries[name]
            entries[partial] = Entry(partial, source.size, source.device)
            partials.setdefault(name, []).append(partial)
            outputs.append(partial)
        options = tuple((0, k) for k in range(min(1, len(outputs)))
                        if entries[outputs[k]].size <= entries[grads_in[0]].size)
        nodes.append(Node(f"{node.name}_backward", (*grads_in, *node.inputs), tuple(outputs), options))
    for name, entry in list(entries.items()):
        if "@" in name or not entry.external or forward.producer[forward.entry_index[name]] >= 0:
            continue
        grad = _gradient(name, partials, entries, nodes)
        if grad is not None:
            entries[grad] = Entry(grad, entries[grad].size, entries[grad].device, external=True)
    return Graph(nodes, entries)


def _gradient(name: str, partials: dict[str, list[str]], entries: dict[str, Entry],
              nodes: list[Node]) -> str | None:
    """The single gradient of ``name``, summing its partial gradients if there are several."""
    parts = partials.get(name)
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    total = f"{name}@grad"
    source = entries[parts[0]]
    entries[total] = Entry(total, source.size, source.device)
    nodes.append(Node(f"{name}@add_n", tuple(parts), (total,), ((0, 0),)))
    partials[name] = [total]
    return total


def benchmark_suite(large: bool = True) -> list[tuple[str, Callable[[], Graph]]]:
    """``(name, factory)`` of the graphs of ``benchmarks/memplan.py``: seven of about 1k
    nodes, then (with ``large``) eight of 5.5k to 100k nodes.

    The plans of every strategy on them are recorded in the package's test fixtures, so a
    faster planner can be checked to plan exactly as before.
    """
    small: list[tuple[str, Callable[[], Graph]]] = [
        ("chain 1k", lambda: chain(1_000)),
        ("residual 1k", lambda: residual_stack(200)),
        ("inception 1k", lambda: inception(56)),
        ("random DAG 1k", lambda: random_dag(1_000, seed=1)),
        ("residual train 1.1k", lambda: with_backward(residual_stack(100))),
        ("inception train 1.2k", lambda: with_backward(inception(30))),
        ("random train 2.1k", lambda: with_backward(random_dag(1_000, seed=3))),
    ]
    big: list[tuple[str, Callable[[], Graph]]] = [
        ("chain 10k", lambda: chain(10_000)),
        ("random DAG 10k", lambda: random_dag(10_000, seed=1)),
        ("residual 10k", lambda: residual_stack(2_000)),
        ("residual train 5.5k", lambda: with_backward(residual_stack(500))),
        ("chain 100k", lambda: chain(100_000)),
        ("residual 100k", lambda: residual_stack(20_000)),
        ("inception 100k", lambda: inception(5_600)),
        ("random DAG 100k", lambda: random_dag(100_000, seed=1)),
    ]
    return small + big if large else small


__all__ = ["benchmark_suite", "chain", "inception", "random_dag", "residual_stack", "with_backward"]
