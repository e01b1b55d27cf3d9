"""``mx.sym.contrib.foreach``: a loop over the first axis of its data, in a graph.

``foreach(body, data, init_states)`` traces ``body(step_data, states) -> (outputs, new_states)``
once on placeholder variables into a body graph, and makes one ``_foreach`` node whose inputs
are the data, the initial states and the body's free variables (its parameters). Its outputs
are the per-step outputs stacked along a new first axis, then the final states, as MXNet's.

Shape and dtype inference look through the node into the body graph (so a parameter of the
body gets its shape from the data, for Gluon's deferred initialisation). The number of steps
is the data's first dimension, known only when the graph is bound: :func:`expand_loops`
(called by the executor's graph builder before anything else) then replaces every
``_foreach`` node by its body repeated once per step: a split of the data, the step
subgraphs chained through their states, and a stack of the outputs. The executor differentiates
and memory-plans that graph like any other, so a loop trains with the same gradients and
memory planning as a hand-unrolled one. (MXNet 1.x runs its ``_foreach`` subgraph step by
step instead; the values and gradients are the same.)

A loop's graph cannot be written to MXNet JSON here (MXNet stores the body as a subgraph,
which this format does not carry): :func:`mxkit.symbol.json_format` refuses it clearly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mxkit.core.errors import MXKitError, ShapeError
from mxkit.ndarray.control_flow import flatten_nested
from mxkit.ndarray.control_flow import regroup_nested as _regroup
from mxkit.ndarray.registry import OpDef
from mxkit.symbol.graph import Entry, Node, aux_variables, copy_graph, topo_order

__all__ = ["LoopError", "expand_loops", "foreach", "is_loop"]

FOREACH = "_foreach"


class LoopError(MXKitError):
    """A control-flow operator was misused (a body with the wrong kind of result, no steps...)."""


def _flatten(value: Any, what: str, kind: type) -> tuple[list[Any], Any]:
    """Flat list of ``kind`` objects and the nesting format (0: one object, list: a list)."""
    return flatten_nested(value, what, kind, LoopError)


# -- the node ----------------------------------------------------------------------------


def _body_parts(params: dict) -> tuple[list[Node], list[Node], list[Node], list[Entry]]:
    """(data placeholders, state placeholders, free variables, body heads) of a loop node."""
    return params["_data_vars"], params["_state_vars"], params["_free_vars"], params["_heads"]


def _body_known(params: dict, in_values: Sequence[Any], step: bool) -> dict[tuple[int, int], Any]:
    data_vars, state_vars, free_vars, _ = _body_parts(params)
    known = {}
    for position, var in enumerate(data_vars + state_vars + free_vars):
        value = in_values[position] if position < len(in_values) else None
        if value is None:
            continue
        if step and position < len(data_vars):
            value = tuple(value)[1:]  # one step's slice of the data
        known[(id(var), 0)] = value
    return known


def _infer_shape(params: dict, in_shapes: list) -> list:
    from mxkit.symbol.infer import infer_shapes

    data_vars, state_vars, _, heads = _body_parts(params)
    if any(len(tuple(s)) == 0 for s in in_shapes[:len(data_vars)]):
        raise ShapeError(f"foreach: data must have a first axis to loop over, got shapes "
                         f"{[tuple(s) for s in in_shapes[:len(data_vars)]]}")
    steps = {int(next(iter(s))) for s in in_shapes[:len(data_vars)]}
    if len(steps) != 1:
        raise ShapeError(f"foreach: every data array needs the same number of steps (first dimension), got "
                         f"{[tuple(s) for s in in_shapes[:len(data_vars)]]}")
    (count,) = steps
    shapes = infer_shapes(params["_order"], _body_known(params, in_shapes, step=True))
    out = []
    for position, head in enumerate(heads):
        shape = shapes.get((id(head.node), head.index))
        if shape is None:
            raise ShapeError(f"foreach: the body's output {position} has an unknown shape")
        out.append((count, *tuple(shape)) if position < params["num_outputs"] else tuple(shape))
    for position in range(len(state_vars)):
        new = tuple(out[params["num_outputs"] + position])
        if tuple(in_shapes[len(data_vars) + position]) != new:
            raise ShapeError(f"foreach: state {position} enters the body with shape "
                             f"{tuple(in_shapes[len(data_vars) + position])} and leaves it with {new}; a "
                             f"state must keep its shape")
    return out


def input_shapes_rule(params: dict, ins: list, outs: list) -> dict[int, tuple]:
    """Shapes of a loop's inputs from the others: the free variables' from the body graph
    (a parameter's shape from the data's), the states' from the outputs."""
    from mxkit.symbol.infer import infer_shapes

    data_vars, state_vars, free_vars, _ = _body_parts(params)
    known = _body_known(params, ins, step=True)
    for position, var in enumerate(state_vars):
        state_out = outs[params["num_outputs"] + position] if len(outs) > params["num_outputs"] + position else None
        if (id(var), 0) not in known and state_out is not None:
            known[(id(var), 0)] = tuple(state_out)
    try:
        shapes = infer_shapes(params["_order"], known)
    except MXKitError:
        return {}
    found = {}
    first = len(data_vars)
    for position, var in enumerate(state_vars + free_vars):
        shape = shapes.get((id(var), 0))
        if shape is not None and ins[first + position] is None:
            found[first + position] = tuple(shape)
    return found


def _infer_dtype(params: dict, in_dtypes: list) -> list:
    from mxkit.symbol.infer import infer_dtypes

    _, _, _, heads = _body_parts(params)
    dtypes = infer_dtypes(params["_order"], _body_known(params, in_dtypes, step=False))
    fallback = next((d for d in in_dtypes if d is not None), "float32")
    return [dtypes.get((id(h.node), h.index), fallback) for h in heads]


def _no_kernel(*_args: Any) -> None:
    raise LoopError("a _foreach node runs only inside a bound graph, where it is unrolled; bind the symbol "
                    "(simple_bind, eval) or call mx.nd.contrib.foreach on NDArrays")


_FOREACH_OP = OpDef(
    name=FOREACH, infer_shape=_infer_shape, kernel=_no_kernel,
    num_inputs=lambda p: p["num_data"] + p["num_states"] + len(p["_free_vars"]),
    num_outputs=lambda p: p["num_outputs"] + p["num_states"],
    input_names=lambda p: tuple([f"data{i}" for i in range(p["num_data"])]
                                + [f"state{i}" for i in range(p["num_states"])]
                                + [v.name for v in p["_free_vars"]]),
    output_names=lambda p: tuple([f"output{i}" for i in range(p["num_outputs"])]
                                 + [f"state{i}" for i in range(p["num_states"])]),
    infer_dtype=_infer_dtype,
    doc="A loop over the first axis of the data (mx.sym.contrib.foreach); unrolled when bound.",
)


def is_loop(node: Node) -> bool:
    """Whether ``node`` is a ``_foreach`` loop."""
    return node.op is _FOREACH_OP


def foreach(body: Callable[[Any, Any], tuple[Any, Any]], data: Any, init_states: Any, name: str = "foreach") -> Any:
    """Run ``body`` over the first axis of ``data`` in a graph (MXNet's ``mx.sym.contrib.foreach``).

    Parameters
    ----------
    body : callable
        ``body(step_data, states) -> (outputs, new_states)`` on Symbols: ``step_data`` is one
        slice of ``data`` along its first axis (a list of slices when ``data`` is a list);
        ``states`` has the structure of ``init_states``, and ``new_states`` must too.
    data : Symbol or list of Symbol
        The sequence(s); all with the same first dimension (the number of steps).
    init_states : Symbol or (nested) list of Symbol
        The states the first step receives.
    name : str
        The loop node's name.

    Returns
    -------
    (outputs, states)
        ``outputs``: each output of ``body`` stacked along a new first axis (the structure of
        ``body``'s outputs); ``states``: the last step's states (the structure of ``init_states``).
    """
    from mxkit.symbol import Symbol, var

    flat_data, data_fmt = _flatten(data, "data", Symbol)
    flat_states, state_fmt = _flatten(init_states, "init_states", Symbol)
    data_inputs = [_single(s, "data") for s in flat_data]
    state_inputs = [_single(s, "init_states") for s in flat_states]
    data_vars = [var(f"{name}_data{i}") for i in range(len(flat_data))]
    state_vars = [var(f"{name}_state{i}") for i in range(len(flat_states))]
    step_data, _ = _regroup(list(data_vars), data_fmt)
    states_in, _ = _regroup(list(state_vars), state_fmt)
    result = body(step_data, states_in)
    if not isinstance(result, (list, tuple)) or len(result) != 2:
        raise LoopError(f"foreach: body must return (outputs, new_states), got {type(result).__name__}")
    outputs, new_states = result
    flat_out, out_fmt = _flatten(outputs, "the body's outputs", Symbol)
    flat_new, _ = _flatten(new_states, "the body's new states", Symbol)
    if len(flat_new) != len(flat_states):
        raise LoopError(f"foreach: body returned {len(flat_new)} states for {len(flat_states)} initial states; "
                        f"it must return one new state per state")
    heads = [_single(s, "the body's outputs") for s in flat_out + flat_new]
    order = topo_order(heads)
    placeholders = {id(v._outputs[0].node) for v in data_vars + state_vars}
    aux_ids = aux_variables(order)
    if any(n.is_variable and id(n) in aux_ids for n in order):
        raise LoopError("foreach: the body uses operators with auxiliary states (BatchNorm's moving statistics); "
                        "a loop body may not update auxiliary states")
    free_vars = [n for n in order if n.is_variable and id(n) not in placeholders]
    free_inputs = [Entry(n, 0) for n in free_vars]
    params = {
        "num_data": len(flat_data), "num_states": len(flat_states), "num_outputs": len(flat_out),
        "_data_vars": [v._outputs[0].node for v in data_vars], "_state_vars": [v._outputs[0].node for v in state_vars],
        "_free_vars": free_vars, "_heads": heads, "_order": order,
    }
    attrs = {"num_data": str(len(flat_data)), "num_states": str(len(flat_states)),
             "num_outputs": str(len(flat_out))}
    node = Node(_FOREACH_OP, name, attrs, data_inputs + state_inputs + free_inputs, params=params)
    out_symbols = [Symbol([Entry(node, i)]) for i in range(len(flat_out))]
    state_symbols = [Symbol([Entry(node, len(flat_out) + i)]) for i in range(len(flat_states))]
    outputs, _ = _regroup(out_symbols, out_fmt)
    states, _ = _regroup(state_symbols, state_fmt)
    return outputs, states


def _single(symbol: Any, what: str) -> Entry:
    if len(symbol._outputs) != 1:
        raise LoopError(f"foreach: each of {what} must be a Symbol of one output, got one of "
                        f"{len(symbol._outputs)} (index or split a grouped Symbol first)")
    return symbol._outputs[0]


# -- unrolling at bind ---------------------------------------------------------------------


def expand_loops(heads: list[Entry], shapes: Mapping[str, Any]) -> list[Entry]:
    """``heads`` with every ``_foreach`` node replaced by its body once per step (the step count
    from the shapes the variables are bound with); the heads themselves when there is none."""
    from mxkit.symbol.infer import infer_shapes, variable_shapes

    order = topo_order(heads)
    if not any(is_loop(n) for n in order):
        return heads
    inferred = infer_shapes(order, variable_shapes(order, shapes))
    mapped: dict[tuple[int, int], Entry] = {}
    rebuilt: dict[int, Node] = {}

    def entry_of(entry: Entry) -> Entry:
        return mapped.get((id(entry.node), entry.index), entry)

    for node in order:
        if node.is_variable:
            continue
        inputs = [entry_of(e) for e in node.inputs]
        if is_loop(node):
            data_shape = inferred.get((id(node.inputs[0].node), node.inputs[0].index))
            if data_shape is None or not data_shape or int(data_shape[0]) <= 0:
                raise ShapeError(f"foreach {node.name!r}: the number of steps (the data's first dimension) is not "
                                 f"known from the bound shapes (got {data_shape}); give the data's shape")
            for index, entry in enumerate(_unroll(node, inputs, int(data_shape[0]))):
                mapped[(id(node), index)] = entry
            continue
        if any(new is not old for new, old in zip(inputs, node.inputs)):
            copy = Node(node.op, node.name, node.attrs, inputs, params=node.params)
            rebuilt[id(node)] = copy
            for index in range(node.num_outputs()):
                mapped[(id(node), index)] = Entry(copy, index)
    expanded = [entry_of(h) for h in heads]
    return expand_loops(expanded, shapes)  # a loop inside a body is unrolled in the next round


def _unroll(node: Node, inputs: list[Entry], steps: int) -> list[Entry]:
    from mxkit.ndarray.registry import get_op

    params = node.params
    data_vars, state_vars, free_vars, heads = _body_parts(params)
    num_data, num_states, num_outputs = params["num_data"], params["num_states"], params["num_outputs"]
    split_op, stack_op, reshape_op = get_op("split"), get_op("stack"), get_op("Reshape")
    slices = []
    for position in range(num_data):
        if steps == 1:
            # split of one piece is the input itself: drop the axis with a reshape instead
            # (Reshape's -3 merges the first two axes: (1, B, ...) -> (B, ...))
            shaped = Node(reshape_op, f"{node.name}_data{position}_step", {"shape": "(-3, -2)"}, [inputs[position]])
            slices.append([Entry(shaped, 0)])
            continue
        attrs = {"num_outputs": str(steps), "axis": "0", "squeeze_axis": "True"}
        split = Node(split_op, f"{node.name}_data{position}_split", attrs, [inputs[position]])
        slices.append([Entry(split, step) for step in range(steps)])
    states = inputs[num_data:num_data + num_states]
    free = dict(zip((id(v) for v in free_vars), inputs[num_data + num_states:]))
    per_step_outputs: list[list[Entry]] = [[] for _ in range(num_outputs)]
    for step in range(steps):
        binding = {id(v): slices[i][step] for i, v in enumerate(data_vars)}
        binding.update({id(v): states[i] for i, v in enumerate(state_vars)})
        binding.update(free)
        results = copy_graph(heads, binding, f"{node.name}_t{step}_")
        for i in range(num_outputs):
            per_step_outputs[i].append(results[i])
        states = results[num_outputs:]
    stacked = []
    for i, entries in enumerate(per_step_outputs):
        stack = Node(stack_op, f"{node.name}_output{i}", {"axis": "0", "num_args": str(steps)}, entries)
        stacked.append(Entry(stack, 0))
    return stacked + list(states)
