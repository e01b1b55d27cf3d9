"""Optimizer updates with a row_sparse gradient: MXNet 1.x's lazy and standard semantics.

A row_sparse gradient names the rows a batch touched (an embedding's looked-up rows, the
features a sparse linear model saw). MXNet's update operators then have two meanings:

- **lazy** (``lazy_update=True`` for ``sgd_update``, ``sgd_mom_update`` and ``adam_update``;
  always for ``ftrl_update`` and AdaGrad's sparse update): only the rows present in the
  gradient are updated -- their weight, weight decay and states (momentum, Adam's mean and
  variance...). Rows absent from the gradient keep their weight *and* their states, so a
  momentum does not keep moving rows that a batch did not touch.
- **standard** (``lazy_update=False``): the update of the dense gradient, whose absent rows
  are zero: every row decays and every momentum moves.

The lazy update gathers the present rows of the weight and states, runs the dense update
operator on those rows (the same kernel, so the arithmetic per row is exactly the dense
one), and scatters them back. Weights or states that are themselves row_sparse (MXNet's
optimizers make states of a row_sparse weight row_sparse) are updated through their dense
values and keep row_sparse storage.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mxkit.core.errors import ShapeError
from mxkit.ndarray.ndarray import NDArray
from mxkit.ndarray.sparse_base import BaseSparseNDArray, SparseStorageError

#: update operators with MXNet's lazy row_sparse form; the value says whether it takes lazy_update
#: (False: lazy whenever the gradient is row_sparse)
LAZY_UPDATE_OPS: dict[str, bool] = {
    "sgd_update": True, "sgd_mom_update": True, "adam_update": True, "ftrl_update": False,
    "_adagrad_update": False,
}


def _dense_of(value: Any) -> NDArray:
    return value.tostype("default") if isinstance(value, BaseSparseNDArray) else value


def sparse_update(op: Any, weight: Any, grad: Any, states: list[Any], params: dict[str, Any],
                  lazy: bool | None = None) -> Any:
    """Run update operator ``op`` (an OpDef) on ``weight`` in place, where the gradient or
    the weight/states may be sparse (see the module docstring). A csr gradient, as in MXNet,
    is used through its dense values.

    ``lazy`` None: the operator's own rule (its ``lazy_update`` parameter where it has one).
    """
    from mxkit.ndarray.invoke import invoke

    if tuple(grad.shape) != tuple(weight.shape):
        raise ShapeError(f"{op.name}: the gradient has shape {tuple(grad.shape)}, the weight {tuple(weight.shape)}")
    if lazy is None:
        takes_flag = LAZY_UPDATE_OPS.get(op.name)
        lazy = op.name in LAZY_UPDATE_OPS and (not takes_flag or bool(params.get("lazy_update", True)))
    dense_weight = _dense_of(weight)
    dense_states = [_dense_of(s) for s in states]
    if lazy and isinstance(grad, BaseSparseNDArray) and grad.stype == "row_sparse":
        _lazy_rows(op, dense_weight, grad, dense_states, params)
    else:
        invoke(op, [dense_weight, _dense_of(grad), *dense_states], params, out=dense_weight)
    # sparse containers take their updated dense values back, keeping their storage
    for container, dense in zip([weight, *states], [dense_weight, *dense_states]):
        if isinstance(container, BaseSparseNDArray):
            container._assign_from(dense)
    return weight


def _lazy_rows(op: Any, weight: NDArray, grad: Any, states: list[NDArray], params: dict[str, Any]) -> None:
    from mxkit.ndarray.invoke import invoke, invoke_by_name

    rows = grad.indices
    if rows.shape[0] == 0:
        return  # no row present: nothing changes
    host_rows = rows.asnumpy().astype(np.int64)
    if host_rows.min() < 0 or host_rows.max() >= weight.shape[0]:
        raise SparseStorageError(f"{op.name}: gradient rows {host_rows.tolist()[:8]} fall outside the weight's "
                                 f"{weight.shape[0]} rows")
    picked_weight = invoke_by_name("take", weight, rows, axis=0)
    picked_states = [invoke_by_name("take", s, rows, axis=0) for s in states]
    invoke(op, [picked_weight, grad.data.astype(weight.dtype, copy=False), *picked_states], params,
           out=picked_weight)
    weight[rows] = picked_weight
    for state, picked in zip(states, picked_states):
        state[rows] = picked


def involves_sparse(*values: Any) -> bool:
    """Whether any of ``values`` (or of the lists among them) is a sparse array."""
    for value in values:
        if isinstance(value, (list, tuple)):
            if any(isinstance(v, BaseSparseNDArray) for v in value):
                return True
        elif isinstance(value, BaseSparseNDArray):
            return True
    return False


__all__ = ["LAZY_UPDATE_OPS", "involves_sparse", "sparse_update"]
