"""``mx.nd.CachedOp``'s implementation: a Symbol bound once per input signature and called on
NDArrays, differentiable through autograd.

Each signature (input shapes and dtypes, device, which inputs need a gradient) gets executors
of its own; a call copies its inputs into one, runs ``forward`` and returns copies of the
outputs. Inside ``autograd.record()`` the call is recorded as one node whose gradient is the
executor's ``backward``. An executor holds its call's state until that node's backward pass,
so a call made while every executor of its signature is held binds another; a node
differentiated again after its executor ran another call (``retain_graph``) replays its
forward pass first. Auxiliary states (BatchNorm's moving statistics) are the caller's arrays:
they are copied in before the forward pass and back after it, so updates reach them.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any

from mxkit.symbol.executor import ExecutorError

_run_ids = itertools.count(1)


class _Binding:
    def __init__(self, exe: Any) -> None:
        self.exe = exe
        self.last_run = 0
        self.in_flight = False


class SymbolCachedOp:
    """``mx.nd.CachedOp(sym, flags)`` (see :class:`mxkit.ndarray.cached_op.CachedOp`).

    Parameters
    ----------
    sym : Symbol
        The graph; its inputs are ``sym.list_inputs()``.
    flags : sequence of (str, value) pairs or dict, optional
        MXNet's CachedOp flags (``static_alloc``, ``static_shape``...): accepted; every
        signature is bound once with a static memory plan anyway.
    """

    def __init__(self, sym: Any, flags: Any = ()) -> None:
        from mxkit.symbol.symbol import Symbol

        if not isinstance(sym, Symbol):
            raise ExecutorError(f"CachedOp takes a Symbol, got {type(sym).__name__}")
        try:
            self.flags = dict(flags)
        except (TypeError, ValueError):
            raise ExecutorError(f"CachedOp flags are (name, value) pairs or a dict, got {flags!r}") from None
        self._symbol = sym
        self._inputs = sym.list_inputs()
        self._aux = sym.list_auxiliary_states()
        self._bindings: dict[tuple, list[_Binding]] = {}

    def __repr__(self) -> str:
        return f"<CachedOp {self._symbol!r}: inputs {self._inputs}>"

    def _binding(self, args: tuple, need: tuple[bool, ...], fresh: bool = False) -> _Binding:
        from mxkit.ndarray import zeros

        ctx = args[0].context
        key = (tuple((tuple(a.shape), str(a.dtype)) for a in args), ctx, need)
        pool = self._bindings.setdefault(key, [])
        idle = next((b for b in pool if not b.in_flight), None)
        if idle is not None and not fresh:
            return idle
        by_name = dict(zip(self._inputs, args))
        arguments = {n: zeros(a.shape, ctx=ctx, dtype=a.dtype) for n, a in by_name.items() if n not in self._aux}
        grads = {n: zeros(by_name[n].shape, ctx=ctx, dtype=by_name[n].dtype)
                 for n, wanted in zip(self._inputs, need) if wanted}
        aux = [zeros(by_name[n].shape, ctx=ctx, dtype=by_name[n].dtype) for n in self._aux]
        reqs = {n: "write" if n in grads else "null" for n in arguments}
        exe = self._symbol.bind(ctx, arguments, args_grad=grads or None, grad_req=reqs, aux_states=aux)
        binding = _Binding(exe)
        if not fresh:
            pool.append(binding)
        return binding

    def _run(self, binding: _Binding, args: tuple, train: bool) -> list:
        exe = binding.exe
        for name, array in zip(self._inputs, args):
            target = exe.aux_dict[name] if name in exe.aux_dict else exe.arg_dict[name]
            target[:] = array
        outputs = exe.forward(is_train=train)
        for name, array in zip(self._inputs, args):
            if name in exe.aux_dict:
                array[:] = exe.aux_dict[name]  # the moving statistics a training pass updated
        return outputs

    def __call__(self, *args: Any, out: Any = None, default_ctx: Any = None) -> Any:
        """Run the graph on ``args`` (one NDArray per ``sym.list_inputs()``).

        Raises
        ------
        ExecutorError
            For a wrong number of inputs or an input that is not an NDArray.
        """
        from mxkit.ndarray import NDArray, autograd

        if len(args) != len(self._inputs):
            raise ExecutorError(f"CachedOp takes {len(self._inputs)} inputs ({', '.join(self._inputs)}), "
                                f"got {len(args)}")
        for name, array in zip(self._inputs, args):
            if not isinstance(array, NDArray):
                raise ExecutorError(f"CachedOp input {name!r} is {type(array).__name__}, expected an NDArray")
        recording = autograd.is_recording()
        need = tuple(recording and n not in self._aux and autograd.requires_grad(a)
                     for n, a in zip(self._inputs, args))
        train = autograd.is_training()
        binding = self._binding(args, need)
        run = next(_run_ids)
        with autograd.pause():
            outputs = [o.copy() for o in self._run(binding, args, train)]
        binding.last_run = run
        if any(need):
            params = {"op": self, "binding": binding, "run": run, "train": train, "need": need}
            autograd.record_op(_operator(), params, list(args), outputs)
            binding.in_flight = True
            weakref.finalize(outputs[0], _release, binding, run)
        if out is not None:
            targets = out if isinstance(out, list | tuple) else [out]
            if len(targets) != len(outputs):
                raise ExecutorError(f"CachedOp out= has {len(targets)} arrays for {len(outputs)} outputs")
            for target, value in zip(targets, outputs):
                target[:] = value
            return out
        return outputs[0] if len(outputs) == 1 else outputs


def _release(binding: _Binding, run: int) -> None:
    if binding.last_run == run:
        binding.in_flight = False


def _gradient(F: Any, params: dict, inputs: list, outputs: list, out_grads: list) -> list:
    from mxkit.ndarray import autograd

    op: SymbolCachedOp = params["op"]
    binding: _Binding = params["binding"]
    with autograd.pause():
        if binding.last_run != params["run"]:
            # the executor ran another call since: replay this one's forward pass first
            op._run(binding, tuple(inputs), params["train"])
            binding.last_run = params["run"]
        binding.exe.backward(list(out_grads))
        binding.in_flight = False
        grads = binding.exe.grad_dict
        return [grads[name].copy() if wanted else None for name, wanted in zip(op._inputs, params["need"])]


_OPERATOR = None


def _operator() -> Any:
    global _OPERATOR
    if _OPERATOR is None:
        from mxkit.ndarray.registry import OpDef

        def no_shape(params: dict, in_shapes: list) -> list:
            raise ExecutorError("_CachedOp nodes are recorded by mx.nd.CachedOp calls only")

        _OPERATOR = OpDef(name="_CachedOp", infer_shape=no_shape, gradient=_gradient,
                          doc="a mx.nd.CachedOp call, recorded as one autograd node")
    return _OPERATOR


def _register() -> None:
    from mxkit.ndarray.cached_op import register_cached_op

    register_cached_op(SymbolCachedOp)


_register()

__all__ = ["SymbolCachedOp"]
