"""The executor: a symbol bound to arrays, run as a static plan on the engine.

Binding infers every shape and dtype, builds the backward nodes when gradients are asked
for, asks the memory planner (config ``memplan`` or ``memplan=``) where each intermediate
lives, verifies that plan, allocates its pools once and compiles every node to a
``(kernel, inputs, outputs, params)`` step over fixed arrays. ``forward`` and ``backward``
then push those steps to the engine in bulk segments of config ``exec_bulk_size`` nodes
(read at bind; one engine operation each), reading the argument arrays' vars and writing the output and
gradient arrays' vars, so NDArray code before and after orders itself around them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod
from typing import Any

import numpy as np
from mxkit.core import config
from mxkit.core.dtypes import to_numpy
from mxkit.core.errors import MXKitError, ShapeError
from mxkit.symbol.exec_graph import ExecGraph, build_exec_graph
from mxkit.symbol.graph import Entry, Node
from mxkit.symbol.infer import key
from mxkit.symbol.monitor_names import monitor_input_names
from mxkit.symbol.recording import PhaseRecording


class ExecutorError(MXKitError):
    """An executor was bound or called with arrays it cannot use."""


class UnknownParameterError(ExecutorError, ValueError):
    """A parameter was given that the executor does not have (a ``ValueError``, as in MXNet)."""


def _nd():
    from mxkit.ndarray import invoke, ndarray

    return invoke, ndarray.NDArray


def _new_array(ctx: Any, shape: tuple, dtype: str, zero: bool = True) -> Any:
    invoke, NDArray = _nd()
    backend = invoke.backend_of(ctx)
    data = invoke.allocate(backend, tuple(shape), invoke.numpy_dtype(dtype), ctx, "a bound array")
    if zero:
        data[...] = 0
    return NDArray.from_storage(data, ctx)


class _Step:
    """One node compiled against fixed arrays."""

    __slots__ = ("bound", "ctx", "inputs", "kernel", "name", "node", "outputs", "params", "predict_params")

    def __init__(self, node: Node, kernel: Any, inputs: list, outputs: list, params: dict, predict: dict,
                 ctx: Any = None) -> None:
        self.node = node
        self.ctx = ctx
        self.name = node.name
        self.kernel = kernel
        self.inputs = inputs
        self.outputs = outputs
        self.params = params
        self.predict_params = predict
        #: (training, prediction): the kernel bound to this step's arrays (the registry's optional
        #: ``kernel.bind``), made at the step's first run in that mode; a plain call where it has none
        self.bound: list[Any] = [None, None]

    def call(self, xp: Any, train: bool) -> None:
        mode = 0 if train else 1
        bound = self.bound[mode]
        if bound is None:
            params = self.params if train else self.predict_params
            bind = getattr(self.kernel, "bind", None)
            bound = bind(xp, self.inputs, self.outputs, params) if bind is not None else None
            if bound is None:
                kernel, inputs, outputs = self.kernel, self.inputs, self.outputs

                def bound() -> None:
                    kernel(xp, inputs, outputs, params)

            self.bound[mode] = bound
        bound()


def _run_steps(steps: Sequence[_Step], xp: Any, train: bool) -> None:
    for step in steps:
        try:
            step.call(xp, train)
        except Exception as exc:
            call = step.node.op.describe_call(step.node.params, [tuple(a.shape) for a in step.inputs])
            raise ExecutorError(f"node {step.name!r}: {call} failed: {type(exc).__name__}: {exc}") from exc


class Executor:
    """A bound symbol (MXNet's ``Executor``); made by ``Symbol.simple_bind`` and ``Symbol.bind``.

    Attributes
    ----------
    arg_arrays, grad_arrays, aux_arrays : list of NDArray
        In ``list_arguments`` / ``list_auxiliary_states`` order (``None`` for no gradient).
    arg_dict, grad_dict, aux_dict, output_dict : dict of str to NDArray
    outputs : list of NDArray
        The heads' arrays, rewritten by every ``forward``.
    memory_plan : MemoryPlan
        Where the intermediates live (verified at bind).

    With ``group2ctx`` (MXNet's model parallelism), nodes run on the devices of their
    ``ctx_group`` (:mod:`mxkit.symbol.placement`).
    """

    def __init__(self, symbol: Any, ctx: Any, graph: ExecGraph, args: list, grads: list, aux: list,
                 shared_exec: Executor | None = None, output_memory: list | None = None,
                 group2ctx: Any = None) -> None:
        from mxkit.symbol.placement import normalize_group2ctx, place_nodes

        invoke, _ = _nd()
        self._symbol = symbol
        self._ctx = ctx
        self._graph = graph
        self._engine = invoke.engine()
        self._backend = invoke.backend_of(ctx)
        self._group2ctx = normalize_group2ctx(group2ctx, ctx)
        self._placement: dict[int, Any] = {}
        if self._group2ctx:
            bound = {id(n): a.context for n, a in zip(graph.arg_nodes + graph.aux_nodes, args + aux)}
            self._placement = place_nodes(graph, ctx, self._group2ctx, bound)
        self.arg_arrays = args
        self.grad_arrays = grads
        self.aux_arrays = aux
        names = [n.name for n in graph.arg_nodes]
        self.arg_dict = dict(zip(names, args))
        self.grad_dict = {n: g for n, g in zip(names, grads) if g is not None}
        self.aux_dict = dict(zip([n.name for n in graph.aux_nodes], aux))
        self._grad_req = dict(graph.grad_req)
        self._monitor = None
        self._monitor_all = False
        self._monitor_op_names = False  # an op hook: callback(name, op name, array)
        # read once at bind, as MXNet reads MXNET_EXEC_BULK_*: a config lookup per forward costs more
        # than a small network's kernels
        # (``mx.engine.bulk(n)`` around the bind overrides it for that thread, as in MXNet)
        from mxkit.engine.bulk import bulk_size

        thread_size = bulk_size()
        self._bulk_size = config.get("exec_bulk_size") if thread_size is None else max(thread_size, 1)
        # the var every run writes: it orders runs that use the pools. Executors that share
        # pools (shared_exec, reshape) share it too, or the engine would run one's forward
        # beside another's on the same memory (a Module bound with shared_module got
        # corrupted outputs that way)
        self._internal_var = shared_exec._internal_var if shared_exec is not None else self._engine.new_var()
        self._plan_and_allocate(shared_exec, output_memory)
        self._compile()

    # -- binding --------------------------------------------------------------------------

    def _plan_and_allocate(self, shared_exec: Executor | None, output_memory: list | None = None) -> None:
        graph = self._graph
        # the planner the graph was built for (resolved once, at bind)
        self._memory_graph, self.memory_plan = graph.plan_memory(str(self._ctx))
        shared = shared_exec._pools if shared_exec is not None else []
        self._pools = []
        for pool in self.memory_plan.pools:
            reuse = next((p for p in shared if p.size >= pool.size and all(p is not q for q in self._pools)), None)
            self._pools.append(reuse if reuse is not None else self._new_pool(max(pool.size, 1)))
        pool_index = {pool.id: i for i, pool in enumerate(self.memory_plan.pools)}
        self._arrays: dict[Any, Any] = {}
        for node, array in zip(graph.arg_nodes, self.arg_arrays):
            self._arrays[(id(node), 0)] = array.storage
        for node, array in zip(graph.aux_nodes, self.aux_arrays):
            self._arrays[(id(node), 0)] = array.storage
        # outputs: executor-owned arrays (a variable head is its argument's array)
        self.outputs = []
        for position, head in enumerate(graph.heads):
            k = key(head)
            if k not in self._arrays:
                earlier = output_memory[position] if output_memory and position < len(output_memory) else None
                array = _view_within(earlier, graph.shapes[k], graph.dtypes[k])
                if array is None:
                    array = _new_array(self._placement.get(id(head.node), self._ctx), graph.shapes[k],
                                       graph.dtypes[k], zero=False)
                self._arrays[k] = array.storage
                self.outputs.append(array)
            else:
                self.outputs.append(self._array_of_variable(head.node))
        self._output_bytes = sum(o.storage.nbytes for o, h in zip(self.outputs, graph.heads)
                                 if not h.node.is_variable)
        for name, writer in graph.grad_writers.items():
            self._arrays[key(writer)] = self.grad_dict[name].storage
        for name, current in graph.grad_inputs.items():
            self._arrays[(id(current), 0)] = self.grad_dict[name].storage
        self._head_grads: list[Any] = []
        for variable in graph.head_grad_nodes:
            if variable is None:
                self._head_grads.append(None)
                continue
            k = (id(variable), 0)
            array = _new_array(self._placement.get(id(variable), self._ctx), graph.shapes[k], graph.dtypes[k],
                               zero=False)
            array.storage[...] = 1
            self._arrays[k] = array.storage
            self._head_grads.append(array)
        # a head gradient no backward node reads (a head nothing is differentiated through:
        # shape_array, argsort) is never copied in, so its shape is not checked, as in MXNet
        read = {key(e) for node in graph.backward_nodes for e in node.inputs}
        self._unread_head_grads = {i for i, v in enumerate(graph.head_grad_nodes)
                                   if v is not None and (id(v), 0) not in read}
        entry_names = self._entry_names()
        for node in graph.forward_nodes + graph.backward_nodes:
            for i in range(node.num_outputs()):
                k = (id(node), i)
                if k in self._arrays:
                    continue
                storage = self.memory_plan.storage[entry_names[k]]
                pool = self._pools[pool_index[storage.pool]]
                dtype = to_numpy(graph.dtypes[k])  # bfloat16 is ml_dtypes', unknown to np.dtype by name
                count = prod(graph.shapes[k])
                if storage.offset % dtype.itemsize:
                    raise ExecutorError(f"memory plan {self.memory_plan.strategy!r} placed {entry_names[k]!r} at "
                                        f"byte {storage.offset}, not a multiple of its itemsize {dtype.itemsize}")
                raw = pool[storage.offset:storage.offset + count * dtype.itemsize]
                self._arrays[k] = raw.view(dtype).reshape(graph.shapes[k])

    def _new_pool(self, nbytes: int) -> Any:
        from mxkit.engine.profiler import memory_state, track_buffer
        from mxkit.ndarray.invoke import allocate

        pool = allocate(self._backend, (nbytes,), np.uint8, self._ctx, "the executor's memory pool")
        if memory_state.on:  # profile_memory: bytes in use until the pool is collected
            track_buffer(pool, nbytes, str(self._ctx), "executor_pool")
        return pool

    def _entry_names(self) -> dict[Any, str]:
        # memory_graph names entries "<n>:<label>" in first-use order; rebuild that mapping
        names: dict[Any, str] = {}
        counter = 0
        for node in self._graph.forward_nodes + self._graph.backward_nodes:
            for entry in list(node.inputs) + [Entry(node, i) for i in range(node.num_outputs())]:
                k = key(entry)
                if k not in names:
                    names[k] = f"{counter}:{entry.node.output_names()[entry.index]}"
                    counter += 1
        return names

    def _array_of_variable(self, node: Node) -> Any:
        for variable, array in zip(self._graph.arg_nodes, self.arg_arrays):
            if variable is node:
                return array
        for variable, array in zip(self._graph.aux_nodes, self.aux_arrays):
            if variable is node:
                return array
        raise ExecutorError(f"variable {node.name!r} is not bound")

    def _compile(self) -> None:
        graph = self._graph
        backend_name = self._backend.name
        self._consumed = {key(e) for n in graph.forward_nodes + graph.backward_nodes for e in n.inputs}
        self._consumed.update(key(h) for h in graph.heads)
        self._consumed.update(key(w) for w in graph.grad_writers.values())
        self._forward_steps = [self._compile_node(n, backend_name, train=True) for n in graph.forward_nodes]
        self._backward_steps = [self._compile_node(n, backend_name, train=True) for n in graph.backward_nodes]
        self._forward_segments = _segments(self._forward_steps, self._bulk_size)
        self._backward_segments = _segments(self._backward_steps, self._bulk_size)
        self._uses_rng = any(n.op.needs_rng for n in graph.forward_nodes + graph.backward_nodes)
        from mxkit.ndarray.backend import Backend

        # a recording replays the same kernels on the same buffers: random draws would repeat,
        # asynchronous operators run off the device's queue, and other devices record apart
        self._recordings: dict[tuple[str, bool], PhaseRecording] = {}
        self._may_record = (bool(config.get("exec_record")) and type(self._backend).record is not Backend.record
                            and not self._uses_rng and not self._placement
                            and all(s.node.op.async_kernel is None for s in self._forward_steps + self._backward_steps))
        arg_vars = [a.var for a in self.arg_arrays]
        aux_vars = [a.var for a in self.aux_arrays]
        out_vars = _unique([o.var for o, h in zip(self.outputs, graph.heads) if not h.node.is_variable])
        grad_vars = _unique([self.grad_dict[name].var for name in graph.grad_writers])
        head_grad_vars = [g.var for g in self._head_grads if g is not None]
        # A var both read and written is updated in place: an error on it (a failed earlier
        # run) skips the run and stays. Outputs, intermediates written by forward and
        # gradients with grad_req 'write' are overwritten whole: a good run clears them.
        accumulated = _unique([self.grad_dict[name].var for name in graph.grad_writers
                               if self._grad_req.get(name) == "add"])
        self._forward_writes = _unique([self._internal_var, *out_vars, *aux_vars])
        self._forward_reads = _unique([*arg_vars, *aux_vars])
        self._backward_writes = _unique([self._internal_var, *grad_vars])
        self._backward_reads = _unique([*arg_vars, *aux_vars, *out_vars, *head_grad_vars, self._internal_var,
                                        *accumulated])

    def _compile_node(self, node: Node, backend_name: str, train: bool) -> _Step:
        inputs = [self._arrays[key(e)] for e in node.inputs]
        outputs = [self._arrays[(id(node), i)] for i in range(node.num_outputs())]
        params = dict(node.params, _is_train=True)
        predict = dict(node.params)
        # MXNet's OpReqType: outputs nothing reads (the data gradient of a first layer) are marked
        # "null" so a kernel that honours params["_req"] can skip computing them
        req = tuple("write" if (id(node), i) in self._consumed else "null" for i in range(node.num_outputs()))
        if "null" in req:
            params["_req"] = predict["_req"] = req
        if node.op.needs_rng:
            from mxkit.ndarray.random import generator_state

            proxy = generator_state(self._ctx).generator_proxy()
            params["_rng"] = predict["_rng"] = proxy
        return _Step(node, node.op.kernel_for(backend_name), inputs, outputs, params, predict,
                     self._placement.get(id(node), self._ctx))

    # -- running --------------------------------------------------------------------------

    def _push_segments(self, segments: list[Sequence[_Step]], train: bool, reads: list, writes: list,
                       what: str) -> None:
        if not segments:
            return
        if self._may_record and self._monitor is None:
            recording = self._recordings.get((what, train))
            if recording is None:
                mode = "training" if train else "prediction"
                recording = self._recordings[(what, train)] = PhaseRecording(f"{what} ({mode})")
            if not recording.refused:
                recording.runs += 1
                if recording.runs > 1:  # the first run warms up: kernels compiled, algorithms searched
                    self._push_recorded(recording, segments, train, reads, writes, what)
                    return
        xp = self._backend.xp
        invoke, _ = _nd()
        if self._uses_rng:
            from mxkit.ndarray.random import generator_state

            writes = _unique([*writes, generator_state(self._ctx).var])
        for index, segment in enumerate(segments):
            if index == 1:
                # later segments read what the earlier ones left in the intermediates: a
                # failure there must skip them (the first one overwrites them whole); built
                # here, not per call, since a small graph is one segment and never needs it
                reads = _unique([*reads, self._internal_var])
            if segment[0].node.op.async_kernel is not None:
                self._push_async_step(segment[0], train, reads, writes, what)
                continue

            ctx = segment[0].ctx

            def run(segment: Sequence[_Step] = segment) -> None:
                _run_steps(segment, xp, train)

            backend = self._backend if ctx == self._ctx else invoke.backend_of(ctx)
            # (a GPU's phase only queues kernels: it may run on this thread when it can start)
            invoke.push_kernel(self._engine, invoke.on_device(ctx, backend, run), reads, writes, ctx,
                               f"{what}[{segment[0].name}..{segment[-1].name}]", None)

    def _push_recorded(self, recording: PhaseRecording, segments: list[Sequence[_Step]], train: bool, reads: list,
                       writes: list, what: str) -> None:
        """Push a phase as one engine operation that replays the backend's recordings of its steps
        (made by the operation's first run: :mod:`mxkit.symbol.recording`)."""
        steps = [step for segment in segments for step in segment]
        backend = self._backend
        xp = backend.xp
        invoke, _ = _nd()

        def run_steps(chunk: Sequence[_Step]) -> None:
            _run_steps(chunk, xp, train)

        def run() -> None:
            recording.run(backend.record, steps, run_steps)

        invoke.push_kernel(self._engine, invoke.on_device(self._ctx, backend, run), reads, writes, self._ctx,
                           f"{what}[recorded {len(steps)} nodes]", None)

    @property
    def recorded_phases(self) -> list[str]:
        """The phases (``"forward (training)"``, ``"forward (prediction)"``, ``"backward (training)"``)
        that replay the device's recordings of their kernels (config ``exec_record``: CUDA graphs on
        a GPU), wholly or in part (:attr:`unrecorded_nodes`); empty on devices that cannot record."""
        return [r.phase for r in self._recordings.values() if r.recorded]

    @property
    def unrecorded_nodes(self) -> list[str]:
        """``"phase: node (operator)"`` for each node that runs as usual in a phase whose other
        nodes replay recordings, or in a phase the device refused to record at all."""
        return [f"{r.phase}: {step.name} ({step.node.op.name})" for r in self._recordings.values()
                for step in r.unrecorded()]

    def _push_async_step(self, step: _Step, train: bool, reads: list, writes: list, what: str) -> None:
        """Push a node whose operator runs off the engine's workers (``Custom``) as its own
        asynchronous operation, ordered with the segments by the executor's vars."""
        start = step.node.op.async_kernel
        params = step.params if train else step.predict_params
        ctx = step.ctx

        def run_async(on_complete: Any) -> None:
            start(ctx, step.inputs, step.outputs, params, on_complete)

        self._engine.push_async(run_async, reads, writes, ctx, 0, f"{what}[{step.name}]")

    def forward(self, is_train: bool = False, **kwargs: Any) -> list:
        """Run the forward nodes; ``kwargs`` (name to NDArray or array-like) are copied in first.

        Returns
        -------
        list of NDArray
            :attr:`outputs`.
        """
        for name, value in kwargs.items():
            if name not in self.arg_dict:
                raise ExecutorError(f"forward got {name!r}, which is not an argument; the arguments are: "
                                    f"{', '.join(self.arg_dict)}")
            target = self.arg_dict[name]
            shape = tuple(getattr(value, "shape", np.shape(value)))
            if shape != target.shape:
                raise ShapeError(f"forward: {name!r} has shape {shape}, the executor was bound with "
                                 f"{target.shape}; use exe.reshape({name}={shape}) to change it")
            target[:] = value
        self._last_train = is_train
        if is_train and self._graph.notes:
            # a prediction bind with folded BatchNorms: training mode normalizes with batch
            # statistics (and updates the moving ones), which only the unfolded graph does
            twin = self._training_twin()
            twin._monitor, twin._monitor_all = self._monitor, self._monitor_all
            twin._monitor_op_names = self._monitor_op_names
            twin.forward(is_train=True)
            for mine, theirs in zip(self.outputs, twin.outputs):
                if mine is not theirs:
                    mine[:] = theirs
            return self.outputs
        self._push_segments(self._forward_segments, is_train, self._forward_reads, self._forward_writes, "forward")
        if self._monitor is not None:
            self._run_monitor(self._graph.forward_nodes)
        return self.outputs

    def backward(self, out_grads: Any = None, is_train: bool = True) -> None:
        """Run the backward nodes, writing (or adding to) the gradient arrays.

        Parameters
        ----------
        out_grads : NDArray or list of NDArray, optional
            Gradients of the heads that are not loss layers (default: ones), or one per
            output; as in MXNet, gradients after the last output are ignored, and so is the
            gradient of an output nothing is differentiated through (its shape unchecked).

        With ``grad_req='null'`` for every argument there is nothing to compute, and
        ``backward`` returns at once, as MXNet's does.
        """
        if not any(req != "null" for req in self._grad_req.values()):
            return  # nothing to differentiate: a no-op, as in MXNet (grad_req='null' everywhere)
        if out_grads is not None:
            grads = [out_grads] if not isinstance(out_grads, list | tuple) else list(out_grads)
            takers = [i for i, g in enumerate(self._head_grads) if g is not None]
            # MXNet reads one gradient per output and ignores any after them
            grads = grads[:len(self.outputs)]
            if len(grads) not in (len(takers), len(self.outputs)):
                raise ExecutorError(f"backward got {len(grads)} out_grads; the executor has {len(self.outputs)} "
                                    f"outputs, {len(takers)} of which take a head gradient")
            if len(grads) == len(self.outputs):
                grads = [g for g, h in zip(grads, self._head_grads) if h is not None]
            for i, grad in zip(takers, grads):
                if i in self._unread_head_grads:
                    continue
                target = self._head_grads[i]
                shape = tuple(getattr(grad, "shape", np.shape(grad)))
                if shape != target.shape:
                    raise ShapeError(f"backward: out_grads[{i}] has shape {shape}, output {i} has {target.shape}")
                target[:] = grad
        for name, req in self._grad_req.items():
            if req == "write" and name not in self._graph.grad_writers and name in self.grad_dict:
                self.grad_dict[name][:] = 0  # no head depends on it: its gradient is zero
        self._push_segments(self._backward_segments, is_train, self._backward_reads, self._backward_writes,
                            "backward")
        if self._monitor is not None:
            self._run_monitor(self._graph.backward_nodes)

    def _training_twin(self) -> Executor:
        """The unfolded executor over the same arrays (made on first use), for ``forward(is_train=True)``
        of a bind whose graph passes rewrote nodes for prediction only."""
        twin = getattr(self, "_twin", None)
        if twin is None:
            shapes = {n: tuple(a.shape) for n, a in self.arg_dict.items()}
            dtypes = {n: str(a.dtype.__name__) for n, a in self.arg_dict.items()}
            with config.override(fold_batchnorm=False):
                graph = build_exec_graph(self._symbol, shapes, dtypes, self._grad_req, for_training=True,
                                         memplan=self._graph.planner)
            twin = Executor(self._symbol, self._ctx, graph, self.arg_arrays, self.grad_arrays, self.aux_arrays,
                            shared_exec=self, group2ctx=self._group2ctx)
            self._twin = twin
        return twin

    # -- dictionaries and helpers ---------------------------------------------------------

    def get_optimized_symbol(self) -> Any:
        """The forward graph this executor runs, after the graph passes, as a Symbol.

        It shows what the passes changed in MXNet's operators (merged common expressions,
        pruned nodes, folded BatchNorms); elementwise fusion is shown by ``mx.sym.fuse``, since
        its nodes are mxkit's own and a file of them would not load in MXNet.
        """
        from mxkit.symbol.symbol import Symbol

        return Symbol(list(self._graph.portable_heads or self._graph.heads))

    @property
    def output_dict(self) -> dict[str, Any]:
        """Output name to NDArray."""
        return dict(zip(self._symbol.list_outputs(), self.outputs))

    def copy_params_from(self, arg_params: Mapping[str, Any], aux_params: Mapping[str, Any] | None = None,
                         allow_extra_params: bool = False) -> None:
        """Copy parameter arrays into the bound arrays of the same names.

        Raises
        ------
        UnknownParameterError
            For a name that is not bound, unless ``allow_extra_params`` (an ``ExecutorError``
            and a ``ValueError``, which MXNet raises here).
        """
        for source, targets, what in ((arg_params, self.arg_dict, "argument"),
                                      (aux_params or {}, self.aux_dict, "auxiliary state")):
            for name, value in source.items():
                if name not in targets:
                    if allow_extra_params:
                        continue
                    raise UnknownParameterError(
                        f"copy_params_from: {name!r} is not an {what} of the executor; its {what}s are: "
                        f"{', '.join(targets) or 'none'} (allow_extra_params=True skips extras)")
                targets[name][:] = value

    def set_monitor_callback(self, callback: Any, monitor_all: bool = False) -> None:
        """Call ``callback(name, NDArray)`` with every node output after each forward/backward
        (``monitor_all``: inputs too)."""
        self._monitor = callback
        self._monitor_all = monitor_all
        self._monitor_op_names = False

    def register_op_hook(self, callback: Any, monitor_all: bool = False) -> None:
        """MXNet's CachedOp op hook: call ``callback(name, op_name, NDArray)`` with every node
        output after each forward/backward, named ``<node>_<output>``; with ``monitor_all``
        each node's inputs first, named ``<node>_<argument>`` (variables are not reported
        under their own names, unlike :meth:`set_monitor_callback`). ``None`` removes it."""
        self._monitor = callback
        self._monitor_all = monitor_all
        self._monitor_op_names = callback is not None

    def _run_monitor(self, nodes: list[Node]) -> None:
        from mxkit.ndarray import array

        self._engine.wait_for_var(self._internal_var)
        op_names = self._monitor_op_names

        def report(name: str, node: Node, value: Any) -> None:
            copy = array(np.array(value), ctx=self._ctx)
            if op_names:
                self._monitor(name, node.op.name, copy)
            else:
                self._monitor(name, copy)

        for node in nodes:
            if id(node) in self._graph.unmonitored_ids:
                continue
            if self._monitor_all:
                # as MXNet names them: a variable input under its own name (not for an op hook),
                # then every input as "<node>_<argument>" (conv_data, conv_weight), or
                # "<node>_input<i>" for the operators that register no argument names (relu)
                names = monitor_input_names(node.op, node.params)
                for position, entry in enumerate(node.inputs):
                    value = self._arrays[key(entry)]
                    if entry.node.is_variable and not op_names:
                        self._monitor(entry.node.name, array(np.array(value), ctx=self._ctx))
                    argument = names[position] if position < len(names) else f"input{position}"
                    report(f"{node.name}_{argument}", node, value)
            for i, label in enumerate(node.output_names()):
                report(label, node, self._arrays[(id(node), i)])

    def reshape(self, partial_shaping: bool = False, allow_up_sizing: bool = False, **shapes: Any) -> Executor:
        """A new executor for new input shapes, sharing this one's arrays where they fit.

        Arrays whose shape stays are shared; smaller ones are views of the old memory; a
        larger one needs ``allow_up_sizing=True`` (it is then allocated anew).
        """
        given = {n: tuple(a.shape) for n, a in self.arg_dict.items()}
        given.update({n: tuple(s) for n, s in shapes.items()})
        graph = build_exec_graph(self._symbol, given, {n: str(a.dtype.__name__) for n, a in self.arg_dict.items()},
                                 self._grad_req, for_training=True, memplan=self._graph.planner)
        args, grads, aux = [], [], []
        for node, old in zip(graph.arg_nodes, self.arg_arrays):
            new_shape = graph.shapes[(id(node), 0)]
            args.append(self._fit(old, new_shape, node.name, allow_up_sizing, partial_shaping or node.name in shapes))
            old_grad = self.grad_dict.get(node.name)
            grads.append(None if old_grad is None else
                         self._fit(old_grad, new_shape, node.name, allow_up_sizing, True))
        for node, old in zip(graph.aux_nodes, self.aux_arrays):
            aux.append(self._fit(old, graph.shapes[(id(node), 0)], node.name, allow_up_sizing, True))
        # outputs that fit in this executor's are views of them, as MXNet's reshaped executor
        # writes into the memory of the one it came from
        earlier = [None if h.node.is_variable else o for o, h in zip(self.outputs, self._graph.heads)]
        return Executor(self._symbol, self._ctx, graph, args, grads, aux, shared_exec=self,
                        output_memory=earlier if len(earlier) == len(graph.heads) else None,
                        group2ctx=self._group2ctx)

    def _fit(self, old: Any, shape: tuple, name: str, allow_up_sizing: bool, may_change: bool) -> Any:
        _, NDArray = _nd()
        if tuple(old.shape) == tuple(shape):
            return old
        if not may_change:
            raise ShapeError(f"reshape: the shape of {name!r} changes from {old.shape} to {shape} though it was "
                             f"not given; pass partial_shaping=True to allow it")
        count = prod(shape)
        if count > old.storage.size:
            if not allow_up_sizing:
                raise ShapeError(f"reshape: {name!r} grows from {old.shape} to {shape}; pass allow_up_sizing=True "
                                 f"to allocate new memory for it")
            return _new_array(old.context, shape, np.dtype(old.storage.dtype).name)
        return NDArray.from_storage(old.storage.reshape(-1)[:count].reshape(shape), old.context, old.var)

    def debug_str(self) -> str:
        """The execution plan: nodes with inputs and storage, ending ``Total N MB allocated``."""
        graph = self._graph
        names = self._entry_names()
        lines = ["Symbol Outputs:"]
        lines += [f"\toutput[{i}]={h.node.name}({h.index})" for i, h in enumerate(graph.heads)]
        plan = self.memory_plan
        for node in graph.arg_nodes + graph.aux_nodes:
            lines.append(f"Variable:{node.name}")
        for node in graph.forward_nodes + graph.backward_nodes:
            lines.append("--------------------")
            lines.append(f"Op:{node.op.name}, Name={node.name}")
            if node.op.name == "_FusedElemwise":
                from mxkit.symbol.fusion import describe_fused

                lines.append(f"Fused: {describe_fused(node)}")
            if id(node) in graph.notes:
                lines.append(f"Rewritten: {graph.notes[id(node)]}")
            lines.append("Inputs:")
            lines += [f"\targ[{i}]={e.node.name}({e.index}) version=0" for i, e in enumerate(node.inputs)]
            for i in range(node.num_outputs()):
                k = (id(node), i)
                storage = plan.storage.get(names.get(k, ""))
                where = f"pool {storage.pool} offset {storage.offset}" if storage else "external"
                lines.append(f"\toutput[{i}]={node.output_names()[i]} shape={graph.shapes[k]} {where}")
        total = plan.total_bytes + self._output_bytes
        lines.append(f"Total {total >> 20} MB allocated")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Executor {self._symbol!r} on {self._ctx}, {len(self._forward_steps)} forward and " \
               f"{len(self._backward_steps)} backward nodes>"


def _view_within(earlier: Any, shape: tuple, dtype: str) -> Any:
    """An array of ``shape`` over the start of ``earlier``'s memory (sharing its var), or None
    when ``earlier`` is missing, of another dtype or too small."""
    if earlier is None or np.dtype(earlier.storage.dtype).name != to_numpy(dtype).name:
        return None
    count = prod(shape)
    if count > earlier.storage.size:
        return None
    _, NDArray = _nd()
    return NDArray.from_storage(earlier.storage.reshape(-1)[:count].reshape(shape), earlier.context, earlier.var)


def _segments(steps: Sequence[_Step], bulk: int) -> list[Sequence[_Step]]:
    """Runs of at most ``bulk`` steps on one device; a step with an asynchronous operator stands alone."""
    segments: list[Sequence[_Step]] = []
    current: list[_Step] = []
    for step in steps:
        if current and step.ctx != current[0].ctx:
            segments.append(current)
            current = []
        if step.node.op.async_kernel is not None:
            if current:
                segments.append(current)
                current = []
            segments.append([step])
            continue
        current.append(step)
        if len(current) == bulk:
            segments.append(current)
            current = []
    if current:
        segments.append(current)
    return segments


def _unique(values: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        if all(value is not v for v in out):
            out.append(value)
    return out


__all__ = ["Executor", "ExecutorError", "UnknownParameterError"]
