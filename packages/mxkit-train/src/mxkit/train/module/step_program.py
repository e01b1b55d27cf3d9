"""A training step prepared once and replayed by ``fit``: :class:`StepProgram`.

``BaseModule.fit`` runs every batch through ``forward``, ``backward``, ``update`` and
``update_metric``, and each of those re-derives, per step, what cannot change while the
module stays bound: it checks the module's state, compares the batch's shapes with the
bound ones, dispatches through the executor group's per-device loops, rebuilds the
updater's index/gradient/weight lists and looks up the metric's label and output names.
On a small network that bookkeeping is a visible share of the step.

A :class:`StepProgram` resolves all of that once, for the case that needs none of the
general machinery: one device, no store or a ``local`` one that a single device does not
use (no gradient aggregation), no monitor, no sparse row pulls, and a batch whose arrays
have exactly the bound shapes and no padding. Each step is then: copy the batch into the
executor's bound input arrays (skipped for an array that *is* the bound one), the
executor's forward and backward, one call of the updater with the lists prepared at bind
time (the aggregated update MXNet's ``_update_params`` makes for one device), and the
metric update. The engine operations pushed, their order and their arguments are those of
the step-by-step path, so the weights and metric values are the same to the bit.

A batch made of host arrays (``host_data``/``host_label``: NDArrayIter's
:class:`~mxkit.io.databatch.HostDataBatch`) of the bound shapes and dtypes is copied from
them straight into the bound inputs, without converting it to NDArrays first: one copy of
the batch per step instead of two (the iterator fills the bound buffers, as MXNet's
prefetcher did). The bound inputs then hold the same bits either way.

:meth:`StepProgram.run` returns False, having done nothing, for a batch it does not cover
(another shape, padding, a pre-sliced list); ``fit`` then takes the general path for that
batch. A re-bind (``reshape``) is noticed by the executor's identity and the program
re-resolves its arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mxkit.ndarray.transfer import copy_from_host


def step_program_blocker(module: Any, monitor: Any = None, sparse_row_id_fn: Any = None) -> str | None:
    """Why ``module`` cannot train through a :class:`StepProgram` (None when it can).

    Parameters
    ----------
    module : Module
        Bound, initialised, with an optimizer.
    monitor, sparse_row_id_fn
        ``fit``'s arguments of the same names: either one needs the general path.
    """
    from mxkit.train.optimizer.updater import Updater

    if monitor is not None:
        return "a monitor inspects every executor step"
    if sparse_row_id_fn is not None:
        return "sparse row ids are pulled per batch"
    if not (module.binded and module.for_training and module.params_initialized and module.optimizer_initialized):
        return "the module is not bound for training with parameters and an optimizer"
    if len(module._context) != 1:
        return "several devices aggregate gradients per step"
    if module._kvstore is not None or module._update_on_kvstore:
        return "a KVStore pushes and pulls every gradient"
    if not isinstance(module._updater, Updater):
        return "the updater is not mxkit's Updater"
    group = module._exec_group
    if group is None or len(group.execs) != 1:
        return "the module has no single executor"
    if row_sparse_parameters(module.symbol, group.param_names):
        return "row_sparse parameters get row_sparse gradients and lazy updates"
    return None


def row_sparse_parameters(symbol: Any, param_names: Any) -> set[int]:
    """The positions among ``param_names`` of the variables declared ``stype='row_sparse'``
    (their gradients are row_sparse, as MXNet's executor infers for them)."""
    attrs = symbol.attr_dict()
    return {index for index, name in enumerate(param_names)
            if attrs.get(name, {}).get("__storage_type__") == "1"}


class StepProgram:
    """One training step of a single-device :class:`~mxkit.train.module.Module`, resolved once.

    Parameters
    ----------
    module : Module
        A module for which :func:`step_program_blocker` returns None.
    """

    def __init__(self, module: Any) -> None:
        self._module = module
        self._executor: Any = None
        self._resolve()

    def _resolve(self) -> None:
        """Look up, once per executor, everything a step touches."""
        module = self._module
        group = module._exec_group
        executor = group.execs[0]
        self._group = group
        self._executor = executor
        self._data_targets = [executor.arg_dict[name] for name in group.data_names]
        self._data_shapes = [tuple(array.shape) for array in self._data_targets]
        self._label_targets = [executor.arg_dict[name] for name in group.label_names if name in executor.arg_dict]
        self._label_shapes = [tuple(array.shape) for array in self._label_targets]
        self._label_names = list(group.label_names)
        self._output_names = list(group.output_names)
        # _update_params for one device and no store: the parameters with a gradient, index i * 1 + 0
        updates = [(index, grads[0], params[0])
                   for index, (params, grads) in enumerate(zip(group.param_arrays, group.grad_arrays))
                   if grads[0] is not None]
        self._indices = [index for index, _, _ in updates]
        self._grads = [grad for _, grad, _ in updates]
        self._weights = [weight for _, _, weight in updates]

    def _fits(self, sources: Any, shapes: list[tuple]) -> bool:
        if len(sources) != len(shapes):
            return False
        for source, shape in zip(sources, shapes):
            if tuple(getattr(source, "shape", ())) != shape:
                return False
        return True

    def run(self, data_batch: Any, eval_metric: Any) -> bool:
        """Train on ``data_batch`` and update ``eval_metric``; False (nothing done) when the batch
        needs the general path.

        Parameters
        ----------
        data_batch : DataBatch
        eval_metric : EvalMetric
        """
        module = self._module
        group = module._exec_group
        if group is not self._group or group.execs[0] is not self._executor:
            if group is None or len(group.execs) != 1:
                return False
            self._resolve()
        if isinstance(data_batch, list | tuple) and not hasattr(data_batch, "data"):
            return False
        if getattr(data_batch, "pad", None):
            return False
        labels = getattr(data_batch, "label", None)
        if labels is None:  # the general path decides what a label-less training batch means
            return False
        host_data = _host_arrays(data_batch, "host_data", self._data_targets)
        if host_data is None and not self._fits(data_batch.data, self._data_shapes):
            return False
        load_labels = bool(self._label_targets) and bool(labels)
        host_labels = _host_arrays(data_batch, "host_label", self._label_targets) if load_labels else None
        if load_labels and host_labels is None and not self._fits(labels, self._label_shapes):
            return False
        # the order of the step-by-step path: data, labels, forward, backward, update, metric
        _load(host_data, data_batch.data if host_data is None else None, self._data_targets)
        if load_labels:
            _load(host_labels, labels, self._label_targets)
        executor = self._executor
        executor.forward(is_train=True)
        executor.backward()
        module._params_dirty = True
        updater = module._updater
        if updater.aggregate_updates:
            if self._indices:
                updater(list(self._indices), list(self._grads), list(self._weights))
        else:
            for index, grad, weight in zip(self._indices, self._grads, self._weights):
                updater(index, grad, weight)
        _update_metric(eval_metric, labels, self._label_names, self._output_names, executor.outputs)
        return True


class BucketingStepProgram:
    """The step of a :class:`~mxkit.train.module.BucketingModule`: the batch's bucket module's
    :class:`StepProgram` (one per bucket, prepared on its first batch).

    A batch of a bucket not bound yet, or of a bucket module that cannot train through a
    program, takes the general path (which binds the bucket and lends it the optimizer).

    Parameters
    ----------
    module : BucketingModule
    """

    def __init__(self, module: Any) -> None:
        self._module = module
        self._programs: dict[Any, StepProgram | None] = {}

    def run(self, data_batch: Any, eval_metric: Any) -> bool:
        """:meth:`StepProgram.run` on the module of ``data_batch.bucket_key`` (made current)."""
        module = self._module
        key = getattr(data_batch, "bucket_key", None)
        key = module._default_bucket_key if key is None else key
        bucket = module._buckets.get(key)
        if bucket is None or not bucket.optimizer_initialized:
            return False
        if key not in self._programs:
            blocked = step_program_blocker(bucket) is not None
            self._programs[key] = None if blocked else StepProgram(bucket)
        program = self._programs[key]
        if program is None:
            return False
        # what BucketingModule.forward's switch_bucket does for a bound bucket
        module._curr_module = bucket
        module._curr_bucket_key = key
        if not program.run(data_batch, eval_metric):
            return False
        module._params_dirty = True
        return True


def _host_arrays(data_batch: Any, side: str, targets: list) -> list | None:
    """The batch's host arrays of ``side`` (``host_data``/``host_label``) when it has them with
    exactly the shapes and dtypes of the bound ``targets`` (copied in as they are), else None."""
    host = getattr(data_batch, side, None)
    if host is None or len(host) != len(targets):
        return None
    for array, target in zip(host, targets):
        if not isinstance(array, np.ndarray) or array.shape != tuple(target.shape) or array.dtype != target.dtype:
            return None
    return host


def _load(host: list | None, arrays: Any, targets: list) -> None:
    """Copy one side of a batch into the bound ``targets``: its ``host`` arrays (which the batch
    keeps unchanged: no snapshot), or else its batch ``arrays``."""
    if host is not None:
        for source, target in zip(host, targets):
            copy_from_host(target, source)
        return
    for source, target in zip(arrays, targets):
        _copy_in(source, target)


def _copy_in(source: Any, target: Any) -> None:
    """Copy a batch array into a bound input array; nothing when it is that array already."""
    if source is target:
        return
    if hasattr(source, "copyto"):
        source.copyto(target)
    else:
        target[:] = source


def _update_metric(eval_metric: Any, labels: Any, label_names: list[str], output_names: list[str],
                   outputs: list) -> None:
    """What ``DataParallelExecutorGroup.update_metric`` does for one device."""
    labels = list(labels)
    update_dict = getattr(eval_metric, "update_dict", None)
    if update_dict is not None and label_names:
        update_dict(dict(zip(label_names, labels)), dict(zip(output_names, outputs)))
    else:
        eval_metric.update(labels, list(outputs))


__all__ = ["BucketingStepProgram", "StepProgram", "step_program_blocker"]
