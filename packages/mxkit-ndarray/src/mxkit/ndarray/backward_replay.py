"""Replaying a backward pass: a tape of the shape seen before runs the same backward operators
without the gradient functions' Python.

A training loop records the same tape every step: the same operators with the same parameters
on arrays of the same shapes. Its backward pass then applies the same backward operators, in
the same order, with the same parameters; only the arrays differ. The first pass over a tape
runs the general walk of :mod:`mxkit.ndarray.autograd` and *captures* every operator call it
makes (``invoke`` and the elementwise fast path report each call to the :class:`Capture` that
autograd's thread state holds during the pass), naming each
array by its *slot*: its position on the tape (a node's input or output, a head, a head
gradient, a variable's grad buffer) or the call that made it. Later passes over a tape of the
same :func:`signature` replay the captured calls through ``invoke`` on the new tape's arrays,
which skips the gradient functions, the operator applier, parameter parsing and the walk's
bookkeeping; the operators, kernels, parameters and order are the captured ones, so the
gradients are the same bits. A captured call that reads no array (the ones of a head given no
gradient) makes the same values every pass: the plan keeps the first replay's arrays and hands
them to the later ones, when nothing in the pass can change them (``_constant_steps``).

A tape's signature holds everything the walk's calls depend on: each node's operator, gradient
function and parameters, each array's shape, dtype and role (a constant, a variable with its ``grad_req``
and grad buffer, which output of which node), which positions hold one array and which arrays
share one engine var, and the pass's flags. A pass is captured only when everything it does is
replayable: registry operators only (no :class:`~mxkit.ndarray.autograd.Function`, no
hybridized block's graph, no ``Custom`` or random operator), plain dense NDArrays on one
device, every call reading only slots, and nothing pushed but operator calls (a view or a raw
push spoils the capture; that tape keeps the general walk).
"""

from __future__ import annotations

from typing import Any

#: signature -> _Plan, or None for a tape whose pass could not be captured
_plans: dict[tuple, _Plan | None] = {}
_PLANS_LIMIT = 64
#: id(op) -> whether a node of that operator may be replayed (registry operators live forever)
_replayable_ops: dict[int, bool] = {}
_NDArray: Any = None
_VARIABLE: Any = None


class _Plan:
    """The captured calls of one tape's backward pass."""

    __slots__ = ("constant_steps", "constants", "drops", "leaves", "releases", "size", "steps")

    def __init__(self, steps: list, size: int, leaves: list, step_nodes: list, order: list) -> None:
        #: (op, params, input slots, out slots or None, result slots)
        self.steps = steps
        self.size = size
        #: (variable slot, gradient slot), in the order the general walk found them
        self.leaves = leaves
        #: steps that make the same constant every pass (the head gradient's ones), and their
        #: arrays once made, per device (tapes of one signature may run on several): see
        #: _constant_steps
        self.constant_steps = _constant_steps(steps, leaves)
        self.constants: dict[Any, dict[int, list]] = {}
        # after each step, the slots nothing later reads: a spent activation or gradient goes as
        # the walk drops it, not when the pass ends
        last_use: dict[int, int] = {}
        for index, (_, _, inputs, outs, results) in enumerate(steps):
            for slot in (*inputs, *(s for s in outs or () if s is not None), *results):
                last_use[slot] = index
        for variable, gradient in leaves:
            last_use[variable] = last_use[gradient] = len(steps)
        self.drops: list[tuple[int, ...]] = [() for _ in steps]
        for slot, index in last_use.items():
            if index < len(steps):
                self.drops[index] += (slot,)
        # the nodes (positions in the walk's order) whose gradient is done before each step and
        # after the last one: the walk releases a node's arrays once it is past it
        self.releases: list[tuple[int, ...]] = [() for _ in range(len(steps) + 1)]
        last_step = {position: index for index, position in enumerate(step_nodes)}
        done_after = -1
        for position in order:
            done_after = max(done_after, last_step.get(position, -1))
            self.releases[done_after + 1] += (position,)


def _constant_steps(steps: list, leaves: list) -> frozenset[int]:
    """The steps whose arrays one replay may hand to the next instead of making them again.

    Such a step reads no array (its output depends on its parameters alone: ``ones`` for a head
    given no gradient; random operators are never captured) and makes fresh outputs, and nothing
    can change them afterwards: no later step writes into them (``out=``) or reads them as an
    operator that updates auxiliary states in place, and none is a gradient handed to the caller.
    """
    written = {slot for _, _, _, outs, _ in steps for slot in outs or () if slot is not None}
    written.update(grad_slot for _, grad_slot in leaves)
    for op, _, inputs, _, _ in steps:
        if inputs and (callable(op.aux_names) or op.aux_names):
            written.update(inputs)
    return frozenset(index for index, (_, _, inputs, outs, results) in enumerate(steps)
                     if not inputs and outs is None and not written.intersection(results))


class Capture:
    """The operator calls of one backward pass, named by slots (see the module docstring)."""

    __slots__ = ("ctx", "keep", "node", "ok", "order", "slots", "step_nodes", "steps")

    def __init__(self, arrays: list, ctx: Any) -> None:
        self.keep = arrays  # alive until the plan is made: ids stay unique
        self.slots = {id(array): index for index, array in enumerate(arrays)}
        self.steps: list[tuple] = []
        self.step_nodes: list[int] = []  # the position of the node whose gradient made each step
        self.order: list[int] = []  # node positions in the order the walk visits them
        self.node = -1
        self.ok = True
        self.ctx = ctx

    def visit(self, position: int) -> None:
        """The walk turns to the node at ``position`` (of the signature's order)."""
        self.node = position
        self.order.append(position)

    def spoil(self) -> None:
        """Something the replay would not repeat happened (a view, a raw push)."""
        self.ok = False

    def invoked(self, op: Any, inputs: Any, params: dict, out: Any, ctx: Any, outputs: list) -> None:
        """Note one operator call (from ``invoke`` or the elementwise fast path)."""
        if not self.ok:
            return
        if op.async_kernel is not None or op.needs_rng or ctx is not self.ctx:
            self.ok = False
            return
        slots = self.slots
        ndarray = _NDArray
        in_slots = []
        for array in inputs:
            slot = slots.get(id(array))
            if slot is None or type(array) is not ndarray:
                self.ok = False
                return
            in_slots.append(slot)
        out_slots = None
        if out is not None:
            targets = list(out) if isinstance(out, (list, tuple)) else [out]
            out_slots = []
            for target in targets:
                slot = None if target is None else slots.get(id(target), -1)
                if slot == -1:
                    self.ok = False
                    return
                out_slots.append(slot)
            out_slots = tuple(out_slots)
        results = []
        for array in outputs:
            if type(array) is not ndarray:
                self.ok = False
                return
            slot = slots.get(id(array))
            if slot is None:
                slot = slots[id(array)] = len(self.keep)
                self.keep.append(array)
            results.append(slot)
        self.steps.append((op, params, tuple(in_slots), out_slots, tuple(results)))
        self.step_nodes.append(self.node)

    def plan(self, leaf_grads: dict) -> _Plan | None:
        """The plan of this pass, whose gradients are ``leaf_grads`` (``{id(var): (var, grad)}``), or
        None when it cannot be replayed."""
        if not self.ok:
            return None
        leaves = []
        for variable, grad in leaf_grads.values():
            var_slot, grad_slot = self.slots.get(id(variable)), self.slots.get(id(grad))
            if var_slot is None or grad_slot is None:
                return None
            leaves.append((var_slot, grad_slot))
        return _Plan(self.steps, len(self.keep), leaves, self.step_nodes, self.order)


def _op_replayable(op: Any) -> bool:
    found = _replayable_ops.get(id(op))
    if found is None:
        from mxkit.ndarray.registry import OpDef, get_registry

        registry = get_registry()
        # a Function or a hybridized block's graph is no registry operator; asked by membership, not
        # by get(), whose error for an unknown name searches every name for close matches (ms a call)
        registered = registry.get(op.name) if isinstance(op, OpDef) and op.name in registry else None
        found = registered is op and op.async_kernel is None and not op.needs_rng and op.gradient is not None
        if registered is op:  # (registry operators live as long as the process: their ids stay theirs)
            _replayable_ops[id(op)] = found
    return found


def signature(heads: list, head_grads: list, nodes: list, flags: tuple) -> tuple[tuple, list, Any] | None:
    """``(signature, slot arrays, device)`` of a tape (``nodes`` in the walk's order), or None
    when it cannot be replayed.

    The signature is one flat tuple (it is built every step, so it is built cheaply): per node its
    operator's id and gradient function, its parameters, then per input and per output either the
    slot of an array met before or, for a new slot, ``(shape, dtype, first slot of its engine var,
    role)``; markers separate the parts."""
    global _NDArray, _VARIABLE
    if _NDArray is None:
        from mxkit.ndarray.autograd import VARIABLE
        from mxkit.ndarray.ndarray import NDArray

        _NDArray, _VARIABLE = NDArray, VARIABLE
    ndarray, variable_mark = _NDArray, _VARIABLE
    ctx = heads[0]._ctx
    arrays: list = []
    index: dict[int, int] = {}
    var_index: dict[int, int] = {}
    node_index: dict[int, int] | None = None
    key: list = [flags]
    append = key.append
    variables = []
    replayable = _replayable_ops
    for position, node in enumerate(nodes):
        op = node.op
        if not (replayable.get(id(op)) or _op_replayable(op)):
            return None
        # the gradient function itself (held by the key, so its id stays its own): a replaced
        # gradient makes another key
        append(id(op))
        append(op.gradient)
        append(_params_key(node.params))
        for group in (node.inputs, node.outputs):
            append(-1)
            for array in group:
                found = index.get(id(array))
                if found is not None:
                    append(found)
                    continue
                if type(array) is not ndarray or array._ctx is not ctx:
                    return None
                slot = index[id(array)] = len(arrays)
                arrays.append(array)
                data = array._data
                ag = array._ag
                if ag is None:
                    role: Any = 0
                elif ag is variable_mark:
                    role = 1
                    variables.append(array)
                elif ag[0] is node:
                    role = (position, ag[1])
                else:  # an array a later node wrote (out=): which node's output it is counts
                    if node_index is None:
                        node_index = {id(other): at for at, other in enumerate(nodes)}
                    at = node_index.get(id(ag[0]))
                    if at is None:
                        return None
                    role = (at, ag[1])
                append((data.shape, data.dtype, var_index.setdefault(id(array._var), slot), role))
    append(-2)
    for group in (heads, [grad for grad in head_grads if grad is not None], [v._grad for v in variables]):
        for array in group:
            found = index.get(id(array))
            if found is None:
                if type(array) is not ndarray or array._ctx is not ctx or array._ag is not None:
                    return None
                found = index[id(array)] = len(arrays)
                arrays.append(array)
                data = array._data
                append((data.shape, data.dtype, var_index.setdefault(id(array._var), found)))
            else:
                append(found)
        append(-3)
    for grad in head_grads:
        append(grad is None)
    for variable in variables:
        append(variable._grad_req)
    return tuple(key), arrays, ctx


def _params_key(params: dict) -> tuple:
    """The parameters as a key; floats by their bits (``-0.0`` is not ``0.0`` to a kernel)."""
    key = tuple(params.items())
    for value in params.values():
        if type(value) is float:
            return tuple((name, value.hex() if type(value) is float else value) for name, value in key)
    return key


def lookup(found: tuple) -> Any:
    """The plan stored for a signature: a :class:`_Plan`, None (not replayable: also a signature
    that cannot be a key, with an unhashable parameter value), or ``...`` (never seen)."""
    try:
        return _plans.get(found, ...)
    except TypeError:
        return None


def store(found: tuple, plan: _Plan | None) -> None:
    """Keep ``plan`` for tapes of signature ``found`` (a bounded store: it empties when full)."""
    if len(_plans) >= _PLANS_LIMIT:
        _plans.clear()
    _plans[found] = plan


def clear() -> None:
    """Forget every plan (tests compare replayed passes with the general walk)."""
    _plans.clear()


def replay(plan: _Plan, slots: list, ctx: Any, nodes: list | None, invoke: Any, release: Any) -> dict:
    """Run ``plan`` on a tape's slot arrays (the list becomes the replay's slots, emptied as they
    are spent); return ``{id(var): (var, grad)}`` as the walk does. ``nodes``: the tape's nodes,
    each passed to ``release`` once the pass is past it (None: the graph is retained)."""
    leaves = [(slots[var_slot], grad_slot) for var_slot, grad_slot in plan.leaves]
    slots.extend([None] * (plan.size - len(slots)))
    releases = plan.releases
    constant_steps = plan.constant_steps
    constants = plan.constants.get(ctx) if constant_steps else None
    if constant_steps and constants is None:
        constants = plan.constants.setdefault(ctx, {})
    for index, (op, params, inputs, outs, results) in enumerate(plan.steps):
        if nodes is not None:
            for position in releases[index]:
                release(nodes[position])
        outputs = constants.get(index) if constants is not None and index in constant_steps else None
        if outputs is None:
            args = [slots[slot] for slot in inputs]
            out = None if outs is None else [None if slot is None else slots[slot] for slot in outs]
            outputs = invoke(op, args, params, out, None if args else ctx)
            if constants is not None and index in constant_steps:
                constants[index] = outputs
        for slot, array in zip(results, outputs):
            slots[slot] = array
        for slot in plan.drops[index]:
            slots[slot] = None
    if nodes is not None:
        for position in releases[len(plan.steps)]:
            release(nodes[position])
    leaf_grads = {}
    for variable, grad_slot in leaves:
        leaf_grads[id(variable)] = (variable, slots[grad_slot])
    return leaf_grads


__all__ = ["Capture", "clear", "lookup", "replay", "signature", "store"]
