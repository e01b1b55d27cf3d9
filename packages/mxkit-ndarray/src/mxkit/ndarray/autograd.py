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
from mxkit.ndarray.registry import OpDef


class AutogradError(MXKitError):
    """autograd was misused: no variables, no recorded graph, mismatched head gradients..."""


class _State(threading.local):
    def __init__(self) -> None:
        self.recording = False
        self.training = False
        #: serial number of the running backward() call (0: none, or grad() runs)
        self.storing = 0


_state = _State()
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

    ``skip`` is ``(backward operator name, req)`` when some inputs of the node being
    differentiated need no gradient (data, labels, constants): a call of that operator whose
    outputs are the node's input gradients, one each, then gets MXNet's OpReqType in
    ``params["_req"]`` ("null" for the unneeded ones), so a kernel that honours it skips
    them, as in the executor (a first layer's data gradient is the largest product of an MLP).
    """

    def __init__(self, skip: tuple[str, tuple[str, ...]] | None = None) -> None:
        self.skip = skip

    def __call__(self, op_name: str, *inputs: Any, **params: Any) -> Any:
        from mxkit.ndarray.invoke import invoke, invoke_by_name
        from mxkit.ndarray.registry import get_registry

        if self.skip is None or op_name != self.skip[0]:
            return invoke_by_name(op_name, *inputs, **params)
        op = get_registry().get(op_name)
        typed = op.parse_params(params)
        req = self.skip[1]
        if op.count_outputs(typed) == len(req):
            typed["_req"] = req
        outputs = invoke(op, list(inputs), typed)
        return outputs[0] if len(outputs) == 1 else outputs

    def __getattr__(self, op_name: str) -> Any:
        if op_name.startswith("__"):
            raise AttributeError(op_name)
        return lambda *inputs, **params: self(op_name, *inputs, **params)


_APPLIER = _Applier()


def _applier_for(node: _Node, create_graph: bool) -> _Applier:
    """The applier for ``node``'s gradient: it marks the gradients of inputs that reach no
    variable as unneeded (not while recording the gradient itself, which a second
    differentiation may read)."""
    if create_graph:
        return _APPLIER
    req = tuple("write" if array._ag is not None else "null" for array in node.inputs)
    if "null" not in req:
        return _APPLIER
    return _Applier(skip=(f"_backward_{node.op.name}", req))


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
    saved = (_state.recording, _state.training, _state.storing)
    _state.recording, _state.training = create_graph, train
    _state.storing = next(_pass_numbers) if storing else 0
    try:
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
        nodes = _topological_nodes(heads)
        spent = next((node for node in nodes if node.freed), None)
        if spent is not None:
            raise AutogradError(f"the recorded graph through {spent.op.name} was already differentiated without "
                                f"retain_graph=True and is freed; pass retain_graph=True to every backward but "
                                f"the last to differentiate a graph more than once")
        if not retain_graph:
            for node in nodes:
                node.freed = True
        for node in reversed(nodes):
            out_grads = [entry_grads.pop((id(node), i), None) for i in range(len(node.outputs))]
            if all(g is None for g in out_grads):
                if not retain_graph:
                    _release_node(node)
                continue
            if node.op.gradient is None:
                raise AutogradError(f"operator {node.op.name} is not differentiable, but a gradient flows "
                                    f"through it; compute it outside autograd.record() or detach() its input")
            out_grads = [g if g is not None else _zeros_like(o) for g, o in zip(out_grads, node.outputs)]
            in_grads = node.op.gradient(_applier_for(node, create_graph), node.params, node.inputs, node.outputs,
                                        out_grads)
            in_grads = list(in_grads) if isinstance(in_grads, (list, tuple)) else [in_grads]
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
    finally:
        _state.recording, _state.training, _state.storing = saved
    return leaf_grads


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
    from mxkit.ndarray.sparse_base import BaseSparseNDArray

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
