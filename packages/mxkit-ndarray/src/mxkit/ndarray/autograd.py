"""Imperative automatic differentiation, MXNet 1.x style (``mx.autograd``).

While :func:`record` is active, every operator applied to an array that depends on a
variable (an array after :meth:`NDArray.attach_grad`) is remembered with its inputs and
outputs. :func:`backward` walks that record from the heads in reverse, asking each
operator's registered gradient for its inputs' gradients; the gradient functions apply
registered (backward) operators, so the backward pass runs on the engine like the
forward pass, and can itself be recorded (``create_graph=True``) for higher orders.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import Any

from mxkit.core.errors import MXKitError
from mxkit.ndarray import backward_replay as _replay
from mxkit.ndarray.registry import OpDef


class AutogradError(MXKitError):
    """autograd was misused: no variables, no recorded graph, mismatched head gradients..."""


class _State(threading.local):
    def __init__(self) -> None:
        self.recording = False
        self.training = False
        #: serial number of the running backward() call (0: none, or grad() runs)
        self.storing = 0
        #: the backward_replay.Capture noting the running pass's operator calls, or None
        self.capture = None


_state = _State()
#: replay the backward pass of a tape seen before (see mxkit.ndarray.backward_replay); tests
#: turn it off to compare with the general walk
replay_backward = True
_GRAD_REQS = ("write", "add", "null")
_pass_numbers = itertools.count(1)  # numbers backward() calls for storing_pass()


class _Node:
    """One recorded operator application."""

    __slots__ = ("freed", "inputs", "op", "outputs", "params")

    def __init__(self, op: OpDef, params: dict, inputs: Sequence[Any], outputs: Sequence[Any]):
        self.op = op
        self.params = params
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.freed = False  # differentiated once without retain_graph: MXNet frees it then


class _Variable:
    """Marks an array as a leaf whose gradient is stored in its grad buffer."""

    __slots__ = ()


VARIABLE = _Variable()


def record_op(op: OpDef, params: dict, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
    """Remember an operator application if any input takes part in differentiation."""
    if not any(array._ag is not None for array in inputs):
        return
    node = _Node(op, params, inputs, outputs)
    for index, array in enumerate(outputs):
        array._ag = (node, index)


def requires_grad(array: Any) -> bool:
    """Whether ``array`` takes part in differentiation: a variable (``attach_grad``) or an array
    computed from one while recording. Code that records its own nodes with :func:`record_op`
    (a hybridized Gluon block) asks this to skip gradients nobody needs."""
    return array._ag is not None


def storing_pass() -> int:
    """The serial number (from 1) of the running :func:`backward` call, whose results are only
    copied into the variables' grad buffers, never handed to the caller; 0 when no gradient
    computation runs, or when :func:`grad` runs (it returns its results).

    A gradient function asks this to decide whether it may return arrays it keeps and
    overwrites on a later call (a hybridized block's executor gradients) instead of copies:
    during one ``backward`` pass they are consumed before the pass ends, so only a second
    use of the same arrays within the same pass must be avoided.
    """
    return _state.storing


# ---- scopes ----------------------------------------------------------------------------

def is_recording() -> bool:
    """Whether operations are being recorded."""
    return _state.recording


def is_training() -> bool:
    """Whether operators run in training mode (Dropout, BatchNorm)."""
    return _state.training


def set_recording(is_recording: bool) -> bool:
    """Turn recording on or off; return the previous state."""
    previous = _state.recording
    _state.recording = bool(is_recording)
    return previous


def set_training(train_mode: bool) -> bool:
    """Turn training mode on or off; return the previous state."""
    previous = _state.training
    _state.training = bool(train_mode)
    return previous


class _Scope:
    def __init__(self, recording: bool | None, training: bool | None):
        self._recording = recording
        self._training = training
        self._saved: tuple[bool, bool] | None = None

    def __enter__(self) -> _Scope:
        self._saved = (_state.recording, _state.training)
        if self._recording is not None:
            _state.recording = self._recording
        if self._training is not None:
            _state.training = self._training
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._saved is not None
        _state.recording, _state.training = self._saved


def record(train_mode: bool = True) -> _Scope:
    """Record operations in this block (``with mx.autograd.record():``), in training mode by default."""
    return _Scope(True, train_mode)


def pause(train_mode: bool = False) -> _Scope:
    """Stop recording in this block."""
    return _Scope(False, train_mode)


def train_mode() -> _Scope:
    """Training mode in this block (recording unchanged)."""
    return _Scope(None, True)


def predict_mode() -> _Scope:
    """Inference mode in this block (recording unchanged)."""
    return _Scope(None, False)


# ---- variables ----------------------------------------------------------------------------

def mark_variables(variables: Any, gradients: Any, grad_reqs: str | Sequence[str] = "write") -> None:
    """Make ``variables`` leaves of differentiation whose gradients go into ``gradients``."""
    from mxkit.ndarray.creation import zeros
    from mxkit.ndarray.ndarray import NDArray
    from mxkit.ndarray.sparse_base import BaseSparseNDArray

    arrays = (NDArray, BaseSparseNDArray)
    variables = [variables] if isinstance(variables, arrays) else list(variables)
    gradients = [gradients] if isinstance(gradients, arrays) else list(gradients)
    reqs = [grad_reqs] * len(variables) if isinstance(grad_reqs, str) else list(grad_reqs)
    if not len(variables) == len(gradients) == len(reqs):
        raise AutogradError(f"mark_variables got {len(variables)} variables, {len(gradients)} gradients and "
                            f"{len(reqs)} grad_reqs; they must match")
    for variable, gradient, req in zip(variables, gradients, reqs):
        if req not in _GRAD_REQS:
            raise AutogradError(f"grad_req must be one of {', '.join(_GRAD_REQS)}, got {req!r}")
        if tuple(gradient.shape) != tuple(variable.shape):
            raise AutogradError(f"gradient buffer shape {gradient.shape} differs from variable shape "
                                f"{variable.shape}")
        if isinstance(variable, BaseSparseNDArray):
            # a sparse variable is differentiated through its dense values (its "shadow")
            variable = variable.autograd_shadow(create=True)
        sparse_gradient = None
        if isinstance(gradient, BaseSparseNDArray):
            # backward writes the dense buffer and then the sparse form the caller holds
            sparse_gradient = gradient
            gradient = zeros(variable.shape, ctx=variable.context, dtype=variable.dtype)
        variable._ag = VARIABLE
        variable._grad = gradient
        variable._grad_req = req
        variable._sparse_grad = sparse_gradient


# ---- backward -----------------------------------------------------------------------------

class _Applier:
    """The operator applier handed to gradient functions: ``F("op", *inputs, **params)``.

    ``backward`` names the node's backward operator, of one output per input of the node (its
    input gradients, in order), or is None. A call of that operator then gets, when ``req`` is
    given, MXNet's OpReqType in ``params["_req"]`` ("null" for the inputs whose gradient nothing
    needs: data, labels, constants), so a kernel that honours it skips them, as in the executor
    (a first layer's data gradient is the largest product of an MLP); and, on its first call,
    writes the gradients that ``targets`` names (a variable's grad buffer, or None) straight
    into them, as the executor's backward writes its gradient arrays (``grad_req="write"``),
    instead of into fresh arrays copied into the buffers afterwards. :attr:`written` maps
    ``id(buffer)`` to the input whose gradient was written there.
    """

    def __init__(self, backward: str | None = None, req: tuple[str, ...] | None = None,
                 targets: tuple[Any, ...] | None = None) -> None:
        self.backward = backward
        self.req = req
        self.targets = targets
        self.written: dict[int, int] = {}

    def __call__(self, op_name: str, *inputs: Any, **params: Any) -> Any:
        from mxkit.ndarray import invoke as dispatch

        if self.backward is None or op_name != self.backward:
            return dispatch.invoke_by_name(op_name, *inputs, **params)
        op = _registry().get(op_name)
        typed = dispatch.parsed_params(op, params)
        invoke = dispatch.invoke
        out = None
        width = len(self.req if self.req is not None else self.targets or ())
        if op.count_outputs(typed) == width:
            if self.req is not None:
                typed["_req"] = self.req
            if self.targets is not None:
                out = self._fitting_targets(op, typed, inputs)
                self.targets = None  # one call writes them: a second would overwrite the first's
        outputs = invoke(op, list(inputs), typed, out=out)
        return outputs[0] if len(outputs) == 1 else outputs

    def _fitting_targets(self, op: OpDef, typed: dict, inputs: Sequence[Any]) -> list | None:
        """The targets whose shape and dtype are those of the outputs they stand for (the others
        are allocated), or None when none is."""
        from mxkit.ndarray.invoke import inferred_outputs, numpy_dtype

        assert self.targets is not None
        try:
            shapes, dtypes = inferred_outputs(op, typed, inputs)
        except MXKitError:
            return None  # invoke raises it with the call named
        out: list[Any] = [None] * len(shapes)
        for index, (target, shape, dtype) in enumerate(zip(self.targets, shapes, dtypes)):
            if target is not None and target._data.shape == shape and target._data.dtype == numpy_dtype(dtype) and \
                    target.context == inputs[0].context:
                out[index] = target
                self.written[id(target)] = index
        return out if self.written else None

    def __getattr__(self, op_name: str) -> Any:
        if op_name.startswith("__"):
            raise AttributeError(op_name)
        return lambda *inputs, **params: self(op_name, *inputs, **params)


_APPLIER = _Applier()


def _registry() -> Any:
    global _registry
    from mxkit.ndarray.registry import get_registry

    _registry = get_registry  # later calls go straight to it
    return get_registry()


def _applier_for(node: _Node, create_graph: bool, targets: dict[int, Any]) -> _Applier:
    """The applier for ``node``'s gradient: it marks the gradients of inputs that reach no
    variable as unneeded (not while recording the gradient itself, which a second
    differentiation may read), and writes those that ``targets`` (``id(variable)`` -> grad
    buffer, see :func:`_direct_targets`) names into their buffers."""
    if create_graph:
        return _APPLIER
    req = []
    buffers = []
    skips = found = False
    for array in node.inputs:
        if array._ag is None:
            req.append("null")
            buffers.append(None)
            skips = True
            continue
        req.append("write")
        buffer = targets.get(id(array)) if targets else None
        buffers.append(buffer)
        found = found or buffer is not None
    if not skips and not found:
        return _APPLIER
    return _Applier(f"_backward_{node.op.name}", tuple(req) if skips else None, tuple(buffers) if found else None)


def _direct_targets(heads: Sequence[Any], head_grads: Sequence[Any], nodes: list[_Node]) -> dict[int, Any]:
    """``id(variable)`` -> its grad buffer, for the variables of a :func:`backward` pass whose
    gradient the backward operator may write straight into the buffer: ``grad_req="write"``,
    one gradient only (an input of one node, once; not a head), a buffer that is no other
    variable's and that nothing of the pass reads or writes (a graph may read ``x.grad``)."""
    uses: dict[int, int] = {}
    variables: dict[int, Any] = {}
    touched: set[int] = set()  # ids of the engine vars the pass reads or writes
    for array in (*heads, *head_grads):
        if array is not None:
            touched.add(id(array._var))
            if array._ag is VARIABLE:
                uses[id(array)] = 2
    for node in nodes:
        for array in node.inputs:
            touched.add(id(array._var))
            if array._ag is VARIABLE:
                uses[id(array)] = uses.get(id(array), 0) + 1
                variables[id(array)] = array
        for array in node.outputs:
            touched.add(id(array._var))
    buffers: dict[int, int] = {}
    for variable in variables.values():
        buffer = getattr(variable, "_grad", None)
        if buffer is not None:
            buffers[id(buffer._var)] = buffers.get(id(buffer._var), 0) + 1
    targets = {}
    for key, variable in variables.items():
        buffer = getattr(variable, "_grad", None)
        if uses[key] == 1 and getattr(variable, "_grad_req", None) == "write" and buffer is not None and \
                getattr(buffer, "stype", None) == "default" and id(buffer._var) not in touched and \
                buffers[id(buffer._var)] == 1:
            targets[key] = buffer
    return targets


def _topological_nodes(heads: Sequence[Any]) -> list[_Node]:
    order: list[_Node] = []
    seen: set[int] = set()
    stack: list[tuple[_Node, bool]] = []
    for head in heads:
        if isinstance(head._ag, tuple):
            stack.append((head._ag[0], False))
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for array in node.inputs:
            if isinstance(array._ag, tuple) and id(array._ag[0]) not in seen:
                stack.append((array._ag[0], False))
    return order


def _accumulate(store: dict, key: Any, grad: Any) -> None:
    previous = store.get(key)
    store[key] = grad if previous is None else previous + grad


def _compute(heads: Sequence[Any], head_grads: Sequence[Any] | None, create_graph: bool,
             train: bool, retain_graph: bool = True, storing: bool = False) -> dict[int, tuple[Any, Any]]:
    """Gradients of ``heads`` w.r.t. every reached variable: ``{id(var): (var, grad)}``.

    Without ``retain_graph`` the recorded nodes are spent, as MXNet frees them: a second
    differentiation through them is an error rather than a silent repeat. ``storing``: the
    gradients go to the variables' buffers (``backward``), see :func:`storing_pass`.
    """
    from mxkit.ndarray.creation import ones
    from mxkit.ndarray.ndarray import NDArray

    heads = [heads] if isinstance(heads, NDArray) else list(heads)
    if head_grads is None:
        head_grads = [None] * len(heads)
    elif isinstance(head_grads, NDArray):
        head_grads = [head_grads]
    if len(head_grads) != len(heads):
        raise AutogradError(f"got {len(head_grads)} head gradients for {len(heads)} heads")
    if not any(head._ag is not None for head in heads):
        raise AutogradError("cannot differentiate: no head was computed from a variable while recording; "
                            "call attach_grad() on the inputs and compute the heads inside "
                            "`with mx.autograd.record():`")
    entry_grads: dict[tuple[int, int], Any] = {}
    leaf_grads: dict[int, tuple[Any, Any]] = {}
    saved = (_state.recording, _state.training, _state.storing, _state.capture)
    _state.recording, _state.training = create_graph, train
    _state.storing = next(_pass_numbers) if storing else 0
    if _state.capture is not None:
        _state.capture.spoil()  # a pass inside a captured one: its calls would be missing from the replay
    _state.capture = None
    tape = None
    try:
        nodes = _topological_nodes(heads)
        if not create_graph and replay_backward:
            for head, grad in zip(heads, head_grads):
                if grad is not None and grad.shape != head.shape:
                    raise AutogradError(f"head gradient shape {grad.shape} differs from head shape {head.shape}")
            tape = _replay.signature(heads, head_grads, nodes, (train, retain_graph, storing))
            if tape is not None:
                plan = _replay.lookup(tape[0])
                if plan is not None and plan is not ...:
                    _check_unspent(nodes, retain_graph)
                    from mxkit.ndarray.invoke import invoke

                    _, arrays, ctx = tape
                    tape = None  # (the replay empties the slots as they are spent: hold no other list)
                    return _replay.replay(plan, arrays, ctx, None if retain_graph else nodes, invoke, _release_node)
                if plan is None:
                    tape = None  # seen before and not replayable
                else:
                    _state.capture = _replay.Capture(tape[1], tape[2])
        for head, grad in zip(heads, head_grads):
            if grad is None:
                grad = ones(head.shape, ctx=head.context, dtype=head._data.dtype)
            elif grad.shape != head.shape:
                raise AutogradError(f"head gradient shape {grad.shape} differs from head shape {head.shape}")
            if head._ag is VARIABLE:
                _accumulate_leaf(leaf_grads, head, grad)
            elif head._ag is not None:
                node, index = head._ag
                _accumulate(entry_grads, (id(node), index), grad)
        _check_unspent(nodes, retain_graph)
        targets = _direct_targets(heads, head_grads, nodes) if storing and not create_graph else {}
        capture = _state.capture
        positions = {id(node): position for position, node in enumerate(nodes)} if capture is not None else None
        for node in reversed(nodes):
            if capture is not None:
                capture.visit(positions[id(node)])
            out_grads = [entry_grads.pop((id(node), i), None) for i in range(len(node.outputs))]
            if all(g is None for g in out_grads):
                if not retain_graph:
                    _release_node(node)
                continue
            if node.op.gradient is None:
                raise AutogradError(f"operator {node.op.name} is not differentiable, but a gradient flows "
                                    f"through it; compute it outside autograd.record() or detach() its input")
            out_grads = [g if g is not None else _zeros_like(o) for g, o in zip(out_grads, node.outputs)]
            applier = _applier_for(node, create_graph, targets)
            in_grads = node.op.gradient(applier, node.params, node.inputs, node.outputs, out_grads)
            in_grads = list(in_grads) if isinstance(in_grads, (list, tuple)) else [in_grads]
            if applier.written:
                _own_buffers(in_grads, applier.written)
            for array, grad in zip(node.inputs, in_grads):
                if grad is None or array._ag is None:
                    continue
                if array._ag is VARIABLE:
                    _accumulate_leaf(leaf_grads, array, grad)
                else:
                    child, index = array._ag
                    _accumulate(entry_grads, (id(child), index), grad)
            if not retain_graph:
                # the node's gradient is computed and nothing differentiates it again: its inputs and
                # outputs (the forward pass's intermediates) go now, not when the heads are collected
                in_grads = out_grads = None
                _release_node(node)
        if capture is not None and tape is not None:
            _replay.store(tape[0], capture.plan(leaf_grads))
    finally:
        _state.recording, _state.training, _state.storing, _state.capture = saved
    return leaf_grads


def _check_unspent(nodes: list[_Node], retain_graph: bool) -> None:
    """Refuse a graph already differentiated without ``retain_graph``; mark it spent unless retained."""
    spent = next((node for node in nodes if node.freed), None)
    if spent is not None:
        raise AutogradError(f"the recorded graph through {spent.op.name} was already differentiated without "
                            f"retain_graph=True and is freed; pass retain_graph=True to every backward but "
                            f"the last to differentiate a graph more than once")
    if not retain_graph:
        for node in nodes:
            node.freed = True


def _own_buffers(in_grads: list, written: dict[int, int]) -> None:
    """A gradient function is expected to return its backward operator's outputs as the
    gradients of the inputs they stand for; one that returned a grad buffer written for input
    ``i`` as the gradient of another input gets a copy instead, so that storing input ``i``'s
    gradient later cannot change it."""
    for index, grad in enumerate(in_grads):
        owner = written.get(id(grad)) if grad is not None else None
        if owner is not None and owner != index:
            in_grads[index] = grad.copy()


def _release_node(node: _Node) -> None:
    """Drop what a spent node holds (MXNet frees a graph as its backward pass goes): the arrays
    it kept for its gradient are released as soon as the pass is past it, so the peak of a
    backward pass is not every intermediate of the forward pass plus every gradient."""
    node.inputs = []
    node.outputs = []
    node.params = {}


def _zeros_like(array: Any) -> Any:
    from mxkit.ndarray.creation import zeros

    return zeros(array.shape, ctx=array.context, dtype=array._data.dtype)


def _accumulate_leaf(store: dict, array: Any, grad: Any) -> None:
    previous = store.get(id(array))
    store[id(array)] = (array, grad if previous is None else previous[1] + grad)


def backward(heads: Any, head_grads: Any = None, retain_graph: bool = False, train_mode: bool = True) -> None:
    """Compute gradients of ``heads`` and store them in the variables' grad buffers.

    ``grad_req="write"`` overwrites the buffer, ``"add"`` adds to it, ``"null"`` skips it.
    """
    heads, head_grads = _dense_heads(heads, head_grads)
    for variable, grad in _compute(heads, head_grads, False, train_mode, retain_graph, storing=True).values():
        if variable._grad_req == "write":
            if grad is not variable._grad:  # an operator may have written the buffer itself
                variable._grad[:] = grad
        elif variable._grad_req == "add":
            variable._grad += grad
        else:
            continue
        if variable._sparse_grad is not None:
            variable._sparse_grad[:] = variable._grad
        variable._fresh_grad = True


def _dense_heads(heads: Any, head_grads: Any) -> tuple[Any, Any]:
    """Heads and head gradients with sparse arrays replaced by their dense forms (a sparse
    head by the recorded dense values it was computed as)."""
    BaseSparseNDArray = _sparse_type or _load_sparse_type()
    if type(heads) is list and (head_grads is None or type(head_grads) is list) and \
            not any(isinstance(array, BaseSparseNDArray) for array in heads) and \
            (head_grads is None or not any(isinstance(array, BaseSparseNDArray) for array in head_grads)):
        return heads, head_grads  # (NDArray.backward's call: nothing to replace)

    def dense_head(head: Any) -> Any:
        if not isinstance(head, BaseSparseNDArray):
            return head
        shadow = head.autograd_shadow()
        if shadow is None:
            raise AutogradError(f"this {head.stype} array was not computed under autograd.record(); there is "
                                f"nothing to differentiate")
        return shadow

    def dense_grad(grad: Any) -> Any:
        return grad.tostype("default") if isinstance(grad, BaseSparseNDArray) else grad

    if isinstance(heads, BaseSparseNDArray):
        heads = dense_head(heads)
    elif isinstance(heads, (list, tuple)):
        heads = [dense_head(h) for h in heads]
    if isinstance(head_grads, BaseSparseNDArray):
        head_grads = dense_grad(head_grads)
    elif isinstance(head_grads, (list, tuple)):
        head_grads = [dense_grad(g) for g in head_grads]
    return heads, head_grads


_sparse_type: Any = None


def _load_sparse_type() -> Any:
    global _sparse_type
    from mxkit.ndarray.sparse_base import BaseSparseNDArray

    _sparse_type = BaseSparseNDArray
    return _sparse_type


def grad(heads: Any, variables: Any, head_grads: Any = None, retain_graph: bool | None = None,
         create_graph: bool = False, train_mode: bool = True) -> list[Any]:
    """The gradients of ``heads`` with respect to ``variables``, returned (not stored).

    With ``create_graph=True`` the gradient computation is itself recorded, so the result
    can be differentiated again.
    """
    from mxkit.ndarray.ndarray import NDArray

    single = isinstance(variables, NDArray)
    variables = [variables] if single else list(variables)
    for variable in variables:
        if variable._ag is not VARIABLE:
            raise AutogradError("grad() needs variables marked with attach_grad() (or mark_variables) "
                                f"before recording; got an unmarked array of shape {variable.shape}")
    retain = create_graph if retain_graph is None else retain_graph  # MXNet's default
    computed = _compute(heads, head_grads, create_graph, train_mode, retain)
    results = []
    for variable in variables:
        entry = computed.get(id(variable))
        results.append(entry[1] if entry is not None else _zeros_like(variable))
    return results


def recorded_origin(array: Any) -> tuple[str, Any]:
    """How autograd knows ``array``, for exporters of the recorded graph (``mx.autograd.get_symbol``).

    Returns
    -------
    tuple
        ``("variable", None)`` for an array marked with ``attach_grad``/``mark_variables``;
        ``("operator", (op, params, inputs, index, operation))`` for output ``index`` of a
        recorded operation (``op`` its :class:`~mxkit.ndarray.registry.OpDef`, or an object
        with a ``function`` attribute for an :class:`Function` call; ``inputs`` the NDArrays
        it read; ``operation`` an opaque object, the same for every output of one operation);
        ``("none", None)`` for an array outside the recorded graph.
    """
    info = getattr(array, "_ag", None)
    if info is None:
        return "none", None
    if info is VARIABLE:
        return "variable", None
    node, index = info
    return "operator", (node.op, node.params, list(node.inputs), index, node)


def get_symbol(x: Any) -> Any:
    """The recorded graph that computed ``x`` as a Symbol: needs mxkit-symbol, through
    ``mx.autograd.get_symbol`` (mxkit-ndarray alone has no Symbol type)."""
    raise AutogradError("autograd.get_symbol needs mxkit-symbol: call mx.autograd.get_symbol (from mxkit import mx) "
                        "or mxkit.symbol.recorded.get_symbol")


class _FunctionOp:
    """The recorded "operator" of one :class:`Function` call: its gradient is the call's ``backward``."""

    __slots__ = ("function", "name")

    def __init__(self, function: Function):
        self.function = function
        self.name = f"_Function_{type(function).__name__}"

    def gradient(self, F: Any, params: dict, inputs: list, outputs: list, out_grads: list) -> list:
        from mxkit.ndarray.ndarray import NDArray

        with pause(train_mode=is_training()):
            grads = self.function.backward(*out_grads)
        grads = [grads] if isinstance(grads, NDArray) else list(grads)
        if len(grads) != len(inputs):
            raise AutogradError(f"{type(self.function).__name__}.backward returned {len(grads)} gradients for "
                                f"{len(inputs)} inputs; return one NDArray per input of forward")
        return grads


class Function:
    """A differentiable function with a hand-written gradient (MXNet's ``autograd.Function``).

    Subclass it, define ``forward(self, *inputs)`` and ``backward(self, *output_grads)`` on
    NDArrays, and call an instance like a function inside ``record()``; ``backward`` returns
    one gradient per input. Both run with recording paused. Keep what ``backward`` needs
    with :meth:`save_for_backward`. An instance is used for one call, as in MXNet.

    >>> class Sigmoid(mx.autograd.Function):
    ...     def forward(self, x):
    ...         y = 1 / (1 + mx.nd.exp(-x))
    ...         self.save_for_backward(y)
    ...         return y
    ...     def backward(self, dy):
    ...         y, = self.saved_tensors
    ...         return dy * y * (1 - y)
    """

    def __init__(self) -> None:
        self._saved_tensors: tuple = ()

    def save_for_backward(self, *args: Any) -> None:
        """Keep ``args`` for :meth:`backward` (as :attr:`saved_tensors`)."""
        self._saved_tensors = args

    @property
    def saved_tensors(self) -> tuple:
        """What :meth:`save_for_backward` kept."""
        return self._saved_tensors

    def forward(self, *inputs: Any) -> Any:
        """The outputs (an NDArray or a tuple of them) from the inputs."""
        raise NotImplementedError(f"{type(self).__name__} must define forward(self, *inputs)")

    def backward(self, *output_grads: Any) -> Any:
        """The gradients of the inputs, one per input, from the gradients of the outputs."""
        raise NotImplementedError(f"{type(self).__name__} must define backward(self, *output_grads)")

    def __call__(self, *inputs: Any) -> Any:
        from mxkit.ndarray.ndarray import NDArray

        for i, array in enumerate(inputs):
            if not isinstance(array, NDArray):
                raise AutogradError(f"{type(self).__name__}: input {i} is {type(array).__name__}; a Function takes "
                                    f"NDArrays")
        with pause(train_mode=is_training()):
            outputs = self.forward(*inputs)
        listed = [outputs] if isinstance(outputs, NDArray) else list(outputs)
        if any(any(out is array for array in inputs) for out in listed):
            raise AutogradError(f"{type(self).__name__}.forward returned one of its inputs; return a new array "
                                f"(x.copy()) so that its gradient has a node of its own")
        if is_recording():
            record_op(_FunctionOp(self), {}, inputs, listed)  # type: ignore[arg-type]
        return outputs


__all__ = ["AutogradError", "Function", "backward", "get_symbol", "grad", "is_recording", "is_training",
           "mark_variables", "pause", "predict_mode", "record", "record_op", "recorded_origin", "requires_grad",
           "set_recording", "set_training", "storing_pass", "train_mode"]
