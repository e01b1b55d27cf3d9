"""Optimizers whose update is one fused operator per weight, and aggregated updates.

A :class:`FusedOptimizer` describes its update of one weight as a plan, ``(operator name,
state arrays, parameters)``; :meth:`FusedOptimizer.update` turns plans into engine work.
One weight is one operator call through the registry (``mx.nd.sgd_mom_update(...,
out=weight)``). A list of weights, which is how MXNet 1.x's ``_update_params`` calls the
updater (once per device), becomes one engine operation per device that runs the same
kernels one after the other: the per-operation cost of the engine (tens of microseconds)
is paid once per device instead of once per weight, which matters for networks of many
small parameters. The arithmetic is the same either way.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mxkit.core.errors import DeviceError, ShapeError
from mxkit.ndarray.backend import backend_of
from mxkit.ndarray.invoke import OperatorError, invoke, push_raw
from mxkit.ndarray.ops.optimizer_update import UPDATE_OPS
from mxkit.ndarray.sparse_update import LAZY_UPDATE_OPS, involves_sparse, sparse_update
from mxkit.train._registry import TrainingValueError
from mxkit.train.optimizer.base import Optimizer, cast_to

Plan = tuple[str, list[Any], dict[str, Any]]

#: how many weights one aggregated update takes at most (MXNet's MXNET_OPTIMIZER_AGGREGATION_SIZE)
DEFAULT_AGGREGATE_NUM = 64


def as_lists(index: Any, weight: Any, grad: Any, state: Any) -> tuple[list, list, list, list]:
    """MXNet's aggregated form (lists of indices, weights...) or one parameter, as lists."""
    if isinstance(index, (list, tuple)):
        indices, weights, grads, states = list(index), list(weight), list(grad), list(state)
        if not len(indices) == len(weights) == len(grads) == len(states):
            raise TrainingValueError(f"an aggregated update needs as many weights, gradients and states as indices; "
                                     f"got {len(indices)} indices, {len(weights)} weights, {len(grads)} gradients and "
                                     f"{len(states)} states")
        return indices, weights, grads, states
    return [index], [weight], [grad], [state]


class FusedOptimizer(Optimizer):
    """An :class:`Optimizer` whose subclasses implement :meth:`_plan` instead of :meth:`update`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.aggregate_num = DEFAULT_AGGREGATE_NUM

    def _plan(self, index: Any, weight: Any, grad: Any, state: Any, lr: float, wd: float) -> Plan:
        """``(operator, states, parameters)`` updating ``weight`` (after counting the update)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _plan")

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """Update one weight, or lists of them (one engine operation per device)."""
        indices, weights, grads, states = as_lists(index, weight, grad, state)
        for w, g in zip(weights, grads):
            self._check_arrays(w, g)
        self._update_count(indices)
        lrs, wds = self._get_lrs(indices), self._get_wds(indices)
        plans = [(w, g, self._plan(idx, w, g, s, lr, wd))
                 for idx, w, g, s, lr, wd in zip(indices, weights, grads, states, lrs, wds)]
        if involves_sparse(weights, grads) or any(involves_sparse(plan[2][1]) for plan in plans):
            # row_sparse gradients (or sparse weights/states): one update each, lazily where MXNet's is
            for w, g, (op_name, plan_states, params) in plans:
                sparse_update(UPDATE_OPS[op_name], w, g, plan_states, params, lazy=self._lazy_rows(op_name, g))
            return
        if len(plans) == 1:
            w, g, (op_name, plan_states, params) = plans[0]
            invoke(UPDATE_OPS[op_name], [w, g, *plan_states], params, out=w)
            return
        _push_aggregated(plans)

    def _lazy_rows(self, op_name: str, grad: Any) -> bool:
        """Whether a row_sparse ``grad`` updates only its rows (MXNet's lazy update): where the
        operator has MXNet's lazy form and the optimizer's ``lazy_update`` (if it has one) is on."""
        if getattr(grad, "stype", "default") != "row_sparse" or op_name not in LAZY_UPDATE_OPS:
            return False
        return bool(getattr(self, "lazy_update", True))

    def update_multi_precision(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """:meth:`update`, through float32 master copies of float16 weights when
        ``multi_precision`` is on (those are updated one by one)."""
        indices, weights, grads, states = as_lists(index, weight, grad, state)
        if not (self.multi_precision and any(w.dtype == np.float16 for w in weights)):
            self.update(index, weight, grad, state)
            return
        for idx, w, g, s in zip(indices, weights, grads, states):
            if w.dtype == np.float16:
                master, inner = self._split_master_state(s)
                self.update(idx, master, g.astype(np.float32), inner)
                cast_to(master, w)
            else:
                self.update(idx, w, g, s)

    def _split_master_state(self, state: Any) -> tuple[Any, Any]:
        """``(float32 master copy, the optimizer's own state)`` of a multi-precision state."""
        master, inner = state
        return master, inner


def _push_aggregated(plans: list[tuple[Any, Any, Plan]]) -> None:
    """Push the plans as one engine operation per device, in the given order."""
    by_device: dict[int, tuple[Any, list[tuple[Any, Any, Plan]]]] = {}
    for item in plans:
        ctx = item[0].context
        # keyed by identity first: hashing a Context runs Python code, and one device's arrays share one
        entry = by_device.get(id(ctx))
        if entry is None:
            entry = by_device[id(ctx)] = (ctx, [])
        entry[1].append(item)
    if len(by_device) > 1:  # equal contexts that are distinct objects belong together
        merged: dict[Any, tuple[Any, list]] = {}
        for ctx, group in by_device.values():
            merged.setdefault(ctx, (ctx, []))[1].extend(group)
        groups = list(merged.values())
    else:
        groups = list(by_device.values())
    for ctx, group in groups:
        _push_group(ctx, group)


def _push_group(ctx: Any, group: list[tuple[Any, Any, Plan]]) -> None:
    backend = backend_of(ctx)
    jobs = []
    nbytes = 0
    reads: list[Any] = []
    writes: list[Any] = []
    for weight, grad, (op_name, states, params) in group:
        op = UPDATE_OPS[op_name]
        weight_data = weight.storage
        shape = weight_data.shape
        inputs = [weight_data]
        for position, array in enumerate((grad, *states), start=1):
            array_ctx, data = array.context, array.storage  # properties: read each once per step
            if array_ctx is not ctx and array_ctx != ctx:
                raise DeviceError(f"{op_name}: the weight is on {ctx} but an input is on {array_ctx}; "
                                  f"gradients and states must live with their weight")
            if data.shape != shape:
                raise ShapeError(f"{op_name}: input {position} has shape {array.shape}, the weight has shape "
                                 f"{shape}; gradients and states must be shaped like the weight")
            inputs.append(data)
        for data in inputs:
            nbytes += data.nbytes
        kernel = op.kernels.get(backend.name) or op.kernel_for(backend.name)
        jobs.append((op, kernel, inputs, [weight_data], params))
        reads.append(grad)
        writes.append(weight)
        writes.extend(states)
    xp = backend.xp

    def run() -> None:
        for op, kernel, inputs, outputs, params in jobs:
            try:
                kernel(xp, inputs, outputs, params)
            except Exception as exc:
                shapes = [tuple(array.shape) for array in inputs]
                raise OperatorError(f"{op.describe_call(params, shapes)} failed: {type(exc).__name__}: {exc}") \
                    from exc

    # pushed as a kernel of its bytes: a small model's update (an MLP's, ~1 MB) may then run on
    # the calling thread when nothing is pending, and the next forward pass starts granted
    # instead of behind a hand-over to a worker (see mxkit.ndarray.invoke.push_kernel)
    push_raw(run, reads, writes, ctx, f"aggregated_{group[0][2][0]}", nbytes=nbytes)


__all__ = ["DEFAULT_AGGREGATE_NUM", "FusedOptimizer", "as_lists"]
