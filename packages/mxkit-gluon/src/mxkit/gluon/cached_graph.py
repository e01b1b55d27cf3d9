"""Running a hybridized block: its traced Symbol bound through the executor.

The graph is traced once (``HybridBlock._get_graph``) and bound once per input
signature (shapes, dtypes, context, which inputs need a gradient), with the
parameters' own arrays as the executor's arguments and auxiliary states, so the
optimizer's in-place updates and BatchNorm's running statistics need no copying. The
memory of the intermediates is planned by the configured planner at bind.

Inside ``autograd.record()`` the call is recorded as one autograd node (MXNet's
``CachedOp``): its gradient runs the executor's backward pass and hands the gradients
of the inputs and parameters back to autograd, which writes or adds them to the
parameters' gradient buffers as their ``grad_req`` says. To keep a hybridized step
within the memory of one set of gradients, the first executor of a block is bound with
the parameters' own grad buffers (``grad_req`` "write") as its gradient arrays, and
within ``autograd.backward`` the node hands autograd the executor's arrays rather than
copies (for those buffers the final copy is then skipped). Where that could overwrite
gradients not yet consumed (``autograd.grad``, which must leave the buffers alone; a
second executor of the pass writing the same buffers; an executor that this pass already
used) the node runs on an executor with arrays of its own.

An executor holds the state of one call until that call's backward pass, so a call made
while every executor of its signature is held (a shared encoder applied twice in one
record) binds another one: each node differentiates its own forward pass, Dropout masks
included. An executor is released by its node's backward pass, or when the node is
collected without one. Should a node be differentiated again after its executor ran
another call (``retain_graph``), its forward pass is replayed first.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any

from mxkit.gluon.parameter import GluonError

_run_ids = itertools.count(1)


class _Binding:
    """One executor for one input signature, and what its autograd nodes need."""

    def __init__(self, exe: Any, input_names: list[str], param_names: list[str], params: list[Any]) -> None:
        self.exe = exe
        self.input_names = input_names
        self.param_names = param_names  # arguments that are parameters with a gradient
        self.params = params
        self.last_run = 0
        #: held by a recorded call whose backward pass has not run yet
        self.in_flight = False
        #: the backward() pass (autograd.storing_pass) that holds this executor's gradient
        #: arrays, lent to it instead of copies
        self.lent_to = 0
        #: (parameter, its grad buffer) where that buffer is this executor's gradient array
        #: (grad_req "write" at bind)
        self.aliased: list[tuple[Any, Any]] = []
        #: an executor with gradient arrays of its own, for grad() (which must leave the grad
        #: buffers alone) on an executor whose gradients are the parameters' buffers
        self.private: _Binding | None = None


class HybridRunner:
    """The executors of one hybridized block, one per input signature."""

    def __init__(self, block: Any) -> None:
        self.block = block
        self.bindings: dict[tuple, list[_Binding]] = {}
        self.last: _Binding | None = None
        self._by_name: dict[str, Any] | None = None

    def memory_plan(self) -> Any:
        return None if self.last is None else self.last.exe.memory_plan

    def binding(self, args: tuple, ctx: Any, input_grads: tuple[bool, ...], fresh: bool = False) -> _Binding:
        """An idle executor for the signature of ``args``, bound now if there is none; with
        ``fresh``, a new one that no later call will reuse."""
        from mxkit.symbol import binding as sym_binding

        inputs, sym = self.block._get_graph(*args)
        by_name = self._by_name
        if by_name is None:
            # collected once per runner (a new graph gets a new runner): walking the block tree
            # on every call costs more than the rest of a small network's dispatch
            all_params = self.block.collect_params()
            if not all(p.is_initialized for p in all_params.values()):
                self.block._deferred_infer_shape(*args)
                for param in all_params.values():
                    param._finish_deferred_init()
            by_name = self._by_name = {p.name: p for p in all_params.values()}
        versions = tuple(p.version for p in by_name.values())
        key = (tuple((a.shape, a.dtype) for a in args), ctx, input_grads, versions)
        candidates = list(self.bindings.get(key, []))
        if not any(input_grads):
            # a call that needs no input gradient (inference, or data without attach_grad) can run on
            # any executor of the signature: validation between training steps binds nothing new
            candidates += [b for k, pool in self.bindings.items() if k[:2] == key[:2] and k[3] == versions
                           and k != key for b in pool]
        found = next((b for b in candidates if not b.in_flight), None)
        if found is not None and not fresh:
            return found
        self.bindings = {k: pool for k, pool in self.bindings.items() if k[3] == versions}  # stale arrays
        input_names = [s.name for s in inputs]
        from mxkit.ndarray import zeros

        # one executor per runner writes the parameters' gradients straight into their grad buffers
        # (no gradient array of its own); another one of the same block (a second call in one
        # record, another batch shape) has arrays of its own, which autograd adds or copies in
        alias = not fresh and not any(b.aliased for pool in self.bindings.values() for b in pool)
        arg_arrays, grad_arrays, reqs, param_names, grad_params, aliased = [], [], {}, [], [], []
        for name in sym.list_arguments():
            if name in input_names:
                arg = args[input_names.index(name)]
                arg_arrays.append(zeros(arg.shape, ctx=ctx, dtype=arg.dtype))
                wants = input_grads[input_names.index(name)]
            elif name in by_name:
                param = by_name[name]
                arg_arrays.append(param.data(ctx))
                wants = param.grad_req != "null"
                if wants:
                    param_names.append(name)
                    grad_params.append(param)
            else:
                raise GluonError(f"{type(self.block).__name__}: the traced graph needs {name!r}, which is neither "
                                 f"an input ({input_names}) nor a parameter of the block")
            if wants and alias and name in by_name and by_name[name].grad_req == "write":
                grad_arrays.append(by_name[name].grad(ctx))
                aliased.append((by_name[name], grad_arrays[-1]))
            else:
                grad_arrays.append(zeros(arg_arrays[-1].shape, ctx=ctx, dtype=arg_arrays[-1].dtype) if wants else None)
            reqs[name] = "write" if wants else "null"
        aux = []
        for name in sym.list_auxiliary_states():
            if name not in by_name:
                raise GluonError(f"the traced graph needs auxiliary state {name!r}, which is not a parameter")
            aux.append(by_name[name].data(ctx))
        if not any(g is not None for g in grad_arrays):
            grad_arrays = [None] * len(arg_arrays)
        exe = sym_binding.bind(sym, ctx, arg_arrays, grad_arrays, reqs, aux, memplan=self.block._flags.get("memplan"))
        found = _Binding(exe, input_names, param_names, grad_params)
        found.aliased = aliased
        if not fresh:
            self.bindings.setdefault(key, []).append(found)
        return found


def _gradient(F: Any, params: dict, inputs: list, outputs: list, out_grads: list) -> list:
    """The autograd gradient of a hybridized call: the executor's backward pass."""
    from mxkit.ndarray import autograd

    binding: _Binding = params["binding"]
    count = len(binding.input_names)
    args = inputs[:count]
    storing = autograd.storing_pass()
    with autograd.pause():
        if binding.aliased and not storing:
            # grad() must not write the parameters' grad buffers
            if binding.private is None:
                binding.private = params["runner"].binding(tuple(args), args[0].context, params["input_grads"],
                                                           fresh=True)
            binding = binding.private
            binding.last_run = 0
        elif storing and (binding.lent_to == storing or not _may_overwrite(binding.aliased, storing)):
            # this pass already holds this executor's gradients (a retained graph's node whose
            # executor a later call reused), or the parameters' grad buffers it writes (another
            # block sharing them), or a buffer's grad_req is no longer "write": differentiate
            # this node on an executor with gradient arrays of its own
            binding = params["runner"].binding(tuple(args), args[0].context, params["input_grads"], fresh=True)
            binding.last_run = 0
        exe = binding.exe
        if binding.last_run != params["run"]:
            # another call ran this executor since: replay this node's forward first
            exe.forward(is_train=params["train"], **dict(zip(binding.input_names, args)))
            binding.last_run = params["run"]
        exe.backward(list(out_grads))
        binding.in_flight = False
        # backward() copies every gradient into its variable's grad buffer before anything can run
        # this executor again, so it gets the executor's own arrays instead of copies (a gradient-
        # sized copy of every parameter less at the peak); grad() returns them: it gets copies
        lend = storing != 0
        if lend:
            binding.lent_to = storing
            _lend_buffers(binding.aliased, storing)
        grads = []
        for name in binding.input_names:
            grad = exe.grad_dict.get(name)
            grads.append(None if grad is None else grad if lend else grad.copy())
        grads.extend(exe.grad_dict[name] if lend else exe.grad_dict[name].copy() for name in binding.param_names)
    return grads


# the grad buffers that executors wrote in the running backward() pass: (pass, ids of the arrays)
_lent_buffers: tuple[int, set[int]] = (0, set())


def _may_overwrite(aliased: list, storing: int) -> bool:
    """Whether an executor may write the grad buffers of parameters ``aliased`` in pass
    ``storing``: no other executor lent them to it yet, and each is still overwritten
    (``grad_req`` "write": autograd adds to an "add" buffer, which must not be the source)."""
    lent_pass, lent_ids = _lent_buffers
    for param, buffer in aliased:
        if param.grad_req != "write":
            return False
        if lent_pass == storing and id(buffer) in lent_ids:
            return False
    return True


def _lend_buffers(aliased: list, storing: int) -> None:
    global _lent_buffers
    if _lent_buffers[0] != storing:
        _lent_buffers = (storing, set())
    _lent_buffers[1].update(id(buffer) for _param, buffer in aliased)


def _release(binding: _Binding, run: int) -> None:
    if binding.last_run == run:
        binding.in_flight = False


def _cached_op_def() -> Any:
    from mxkit.ndarray.registry import OpDef

    def no_shape(params: dict, in_shapes: list) -> list:
        raise GluonError("_CachedOp nodes are made by hybridized blocks only")

    return OpDef(name="_CachedOp", infer_shape=no_shape, gradient=_gradient,
                 doc="a hybridized Gluon block's call, recorded as one autograd node")


_CACHED_OP = None
_CACHED_OP_SYMBOL = None

#: MXNet's default ``hybridize(inline_limit=...)``: a graph of at most this many operators shows
#: its operators in autograd.get_symbol, a larger one shows as one _CachedOp node
INLINE_LIMIT = 2


def _symbolizer(block: Any, binding: _Binding) -> Any:
    """How autograd.get_symbol writes this call: the block's graph (at most ``inline_limit``
    operators, MXNet's inlining) with the recorded inputs in place of its variables, or one
    ``_CachedOp`` node of those inputs (a node that MXNet JSON readers other than MXNet's do
    not know; mxkit reads it back as an unknown operator)."""
    _, sym = block._cached_graph

    def symbolize(input_symbols: list, name: str) -> Any:
        global _CACHED_OP_SYMBOL
        from mxkit.symbol import Group, Symbol
        from mxkit.symbol.graph import Entry, Node, copy_graph, topo_order

        outputs = list(sym._outputs)
        entries = [s._outputs[0] for s in input_symbols]
        count = len(binding.input_names)
        operators = [n for n in topo_order(outputs) if not n.is_variable]
        limit = block._flags.get("inline_limit", INLINE_LIMIT)
        if len(operators) <= int(limit):
            by_name = dict(zip(binding.input_names, entries[:count]))
            by_name.update(zip(binding.param_names, entries[count:]))
            mapping = {id(n): by_name[n.name] for n in topo_order(outputs) if n.is_variable and n.name in by_name}
            heads = copy_graph(outputs, mapping, prefix=f"{name}_")
        else:
            if _CACHED_OP_SYMBOL is None:
                from mxkit.ndarray.registry import OpDef

                _CACHED_OP_SYMBOL = OpDef(
                    name="_CachedOp", infer_shape=lambda p, s: list(p["_shapes"]),
                    num_inputs=lambda p: p["num_inputs"], num_outputs=lambda p: p["num_outputs"],
                    input_names=lambda p: tuple(f"data{i}" for i in range(p["num_inputs"])),
                    doc="a hybridized Gluon block's call as autograd recorded it (autograd.get_symbol)")
            node = Node(_CACHED_OP_SYMBOL, name, {}, entries,
                        params={"num_inputs": len(entries), "num_outputs": len(outputs), "_shapes": ()})
            heads = [Entry(node, i) for i in range(len(outputs))]
        return Symbol(heads[:1]) if len(heads) == 1 else Group([Symbol([h]) for h in heads])

    return symbolize


def run_hybridized(block: Any, args: tuple) -> Any:
    """Call hybridized ``block`` on NDArrays ``args``; returns what ``hybrid_forward`` returns."""
    global _CACHED_OP
    from mxkit.ndarray import NDArray, autograd

    for index, arg in enumerate(args):
        if not isinstance(arg, NDArray):
            raise GluonError(f"a hybridized {type(block).__name__} takes NDArrays only; argument {index} is "
                             f"{type(arg).__name__}")
    ctx = args[0].context
    recording = autograd.is_recording()
    input_grads = tuple(recording and autograd.requires_grad(a) for a in args)
    if block._cached_runner is None:
        block._cached_runner = HybridRunner(block)
    runner = block._cached_runner
    binding = runner.binding(args, ctx, input_grads)
    runner.last = binding
    train = autograd.is_training()
    run = next(_run_ids)
    hook = block._op_hook
    binding.exe.register_op_hook(*(hook if hook is not None else (None, False)))
    with autograd.pause():
        outputs = binding.exe.forward(is_train=train, **dict(zip(binding.input_names, args)))
        outputs = [o.copy() for o in outputs]
    binding.last_run = run
    if recording and (binding.param_names or any(input_grads)):
        if _CACHED_OP is None:
            _CACHED_OP = _cached_op_def()
        params = [p.data(ctx) for p in binding.params]
        autograd.record_op(_CACHED_OP, {"binding": binding, "run": run, "train": train, "runner": runner,
                                        "input_grads": input_grads, "_symbolize": _symbolizer(block, binding)},
                           [*args, *params], outputs)
        binding.in_flight = True
        # the node keeps its outputs alive: when the first is collected, the node is gone
        weakref.finalize(outputs[0], _release, binding, run)
    return outputs[0] if block._out_single else outputs
