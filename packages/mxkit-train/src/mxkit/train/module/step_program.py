"""A training step prepared once and replayed by ``fit``: :class:`StepProgram`.

``BaseModule.fit`` runs every batch through ``forward``, ``backward``, ``update`` and
``update_metric``, and each of those re-derives, per step, what cannot change while the
module stays bound: it checks the module's state, compares the batch's shapes with the
bound ones, dispatches through the executor group's per-device loops, rebuilds the
updater's index/gradient/weight lists and looks up the metric's label and output names.
On a small network that bookkeeping is a visible share of the step.

A :class:`StepProgram` resolves all of that once per bind, for every device count and way
of agreeing on the parameters (no store, a ``local`` or ``device`` store, a distributed
one such as ``dist_sync``, the optimizer run by the store or by the module's updater).
Each step is then: copy the batch (each device's slice of it) into the executors' bound
input arrays, every executor's forward and backward, the update, and the metric update.
The update is the one ``Module.update`` makes, over lists resolved at bind: for one
device and no store one call of the updater with all the parameters (the aggregated
update MXNet's ``_update_params`` makes), otherwise ``_update_params`` (gradients summed
over the devices or through the store, then the updater per device) or
``_update_params_on_kvstore`` (the store updates and every device pulls; one pushpull
of every key per step for a distributed store). The engine operations pushed, their
order and their arguments are those of the step-by-step path, so the weights and metric
values are the same to the bit.

A batch made of host arrays (``host_data``/``host_label``: NDArrayIter's
:class:`~mxkit.io.databatch.HostDataBatch`) of the bound shapes and dtypes is copied from
them (each device's slice) straight into the bound inputs, without converting it to
NDArrays first: one copy of the batch per step instead of two (the iterator fills the
bound buffers, as MXNet's prefetcher did). Its labels are not converted either: the
metric reads the bound label inputs, which then hold the batch's labels bit for bit,
when it is one of ``mx.metric``'s (they read their arguments during ``update``; a
metric of the user's own might keep them, so it gets the batch's own arrays).

A padded batch (the short last batch of ``last_batch_handle='pad'``) has the bound
shapes and is replayed like any other: ``fit`` trains on its padding, as the
step-by-step path (and MXNet) does. :meth:`StepProgram.run` returns False, having done
nothing, for a batch it does not cover (another shape, a pre-sliced list, no labels);
``fit`` then takes the general path for that batch. A re-bind (``reshape``) is noticed by
the executors' identity and the program re-resolves its arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mxkit.ndarray.transfer import copy_from_host
from mxkit.train.module.executor_group import _slice_along


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
    if not module._update_on_kvstore and not isinstance(module._updater, Updater):
        return "the updater is not mxkit's Updater"
    group = module._exec_group
    if group is None or not group.execs:
        return "the module has no executor"
    if row_sparse_parameters(module.symbol, group.param_names):
        return "row_sparse parameters get row_sparse gradients and lazy updates"
    return None


def row_sparse_parameters(symbol: Any, param_names: Any) -> set[int]:
    """The positions among ``param_names`` of the variables declared ``stype='row_sparse'``
    (their gradients are row_sparse, as MXNet's executor infers for them)."""
    attrs = symbol.attr_dict()
    return {index for index, name in enumerate(param_names)
            if attrs.get(name, {}).get("__storage_type__") == "1"}


class _BoundInputs:
    """One side of a batch (data or labels) and where it goes: for every input, its
    whole-batch shape, its batch axis and, per device, the slice of the batch and the bound
    array it is copied into (what ``DataParallelExecutorGroup._load`` walks per step)."""

    def __init__(self, descs: list, axes: list[int], execs: list, slices: list[slice]) -> None:
        self.shapes = [tuple(desc.shape) for desc in descs]
        self.dtypes = [np.dtype(execs[0].arg_dict[desc.name].dtype) for desc in descs]
        # the whole batch goes to a single device's input as it is, as the general path copies it
        self.inputs = [(axis, len(execs) == 1 and axis == 0,
                        [(part, executor.arg_dict[desc.name]) for part, executor in zip(slices, execs)])
                       for desc, axis in zip(descs, axes)]
        self.per_device = [[pieces[k][1] for _, _, pieces in self.inputs] for k in range(len(execs))]

    def host_arrays(self, host: Any) -> list | None:
        """``host`` (a batch's host arrays of this side) when they have exactly the bound
        whole-batch shapes and dtypes (copied in as they are), else None."""
        if host is None or len(host) != len(self.shapes):
            return None
        for array, shape, dtype in zip(host, self.shapes, self.dtypes):
            if not isinstance(array, np.ndarray) or array.shape != shape or array.dtype != dtype:
                return None
        return list(host)

    def fits(self, arrays: Any) -> bool:
        """Whether the batch arrays ``arrays`` have the bound whole-batch shapes."""
        if arrays is None or len(arrays) != len(self.shapes):
            return False
        return all(tuple(getattr(array, "shape", ())) == shape for array, shape in zip(arrays, self.shapes))

    def same_values(self, arrays: Any) -> bool:
        """Whether copying ``arrays`` (of the bound shapes) into the bound inputs keeps their
        values bit for bit: NDArrays of the bound dtypes (no cast on the way in)."""
        return all(hasattr(array, "asnumpy") and np.dtype(array.dtype) == dtype
                   for array, dtype in zip(arrays, self.dtypes))

    def load_host(self, host: list) -> None:
        """Copy host arrays (which the batch keeps unchanged: no snapshot) into the bound inputs."""
        for array, (axis, whole, pieces) in zip(host, self.inputs):
            for part, target in pieces:
                copy_from_host(target, array if whole else _slice_along(array, axis, part))

    def load(self, arrays: Any) -> None:
        """Copy batch arrays into the bound inputs, as ``DataParallelExecutorGroup._load`` does;
        nothing for an array that is its bound input already."""
        for array, (axis, whole, pieces) in zip(arrays, self.inputs):
            for part, target in pieces:
                piece = array if whole else _slice_along(array, axis, part)
                if piece is target:
                    continue
                if hasattr(piece, "copyto"):
                    piece.copyto(target)
                else:
                    target[:] = piece


class StepProgram:
    """One training step of a :class:`~mxkit.train.module.Module`, resolved once per bind.

    Parameters
    ----------
    module : Module
        A module for which :func:`step_program_blocker` returns None.
    """

    def __init__(self, module: Any) -> None:
        self._module = module
        self._group: Any = None
        self._execs: list = []  # the group's list itself: a re-bind replaces it
        self._resolve()

    def _resolve(self) -> None:
        """Look up, once per set of executors, everything a step touches."""
        module = self._module
        group = module._exec_group
        execs = group.execs
        self._group = group
        self._execs = execs
        self._data = _BoundInputs(group.data_shapes, group.data_layouts, execs, group.slices)
        label_descs = list(group.label_shapes or [])
        if not all(desc.name in execs[0].arg_dict for desc in label_descs):
            # a label the symbol does not take: the general path pairs names and arrays by
            # position and copies none of them (a symbol without labels)
            label_descs = []
        self._labels = _BoundInputs(label_descs, group.label_layouts[:len(label_descs)], execs, group.slices)
        self._label_names = list(group.label_names)
        self._output_names = list(group.output_names)
        self._update = self._resolve_update(module, group)

    @staticmethod
    def _resolve_update(module: Any, group: Any) -> Any:
        """The update of ``Module.update`` with its lists resolved now: a function of no arguments."""
        from mxkit.train.model.kvstore_sync import _update_params, _update_params_on_kvstore

        param_arrays, grad_arrays, param_names = group.param_arrays, group.grad_arrays, group.param_names
        kvstore = module._kvstore
        if module._update_on_kvstore:
            return lambda: _update_params_on_kvstore(param_arrays, grad_arrays, kvstore, param_names)
        updater = module._updater
        num_device = len(group.execs)
        if kvstore is not None or num_device > 1:
            return lambda: _update_params(param_arrays, grad_arrays, updater=updater, num_device=num_device,
                                          kvstore=kvstore, param_names=param_names)
        # one device, no store: _update_params's calls with the parameters that have a gradient (index i * 1 + 0)
        updates = [(index, grads[0], params[0])
                   for index, (params, grads) in enumerate(zip(param_arrays, grad_arrays)) if grads[0] is not None]
        indices = [index for index, _, _ in updates]
        grads = [grad for _, grad, _ in updates]
        weights = [weight for _, _, weight in updates]
        if not updates:
            return lambda: None
        if updater.aggregate_updates:
            # fresh lists per call: the updater may keep or change what it is given
            return lambda: updater(list(indices), list(grads), list(weights))

        def one_by_one() -> None:
            for index, grad, weight in updates:
                updater(index, grad, weight)

        return one_by_one

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
        if group is not self._group or group.execs is not self._execs:
            if group is None or not group.execs:
                return False
            self._resolve()
        if isinstance(data_batch, list | tuple) and not hasattr(data_batch, "data"):
            return False
        # host arrays first: reading .data or .label of a HostDataBatch converts it
        host_data = self._data.host_arrays(getattr(data_batch, "host_data", None))
        if host_data is None and not self._data.fits(data_batch.data):
            return False
        host_labels = self._labels.host_arrays(getattr(data_batch, "host_label", None))
        labels = None if host_labels is not None else getattr(data_batch, "label", None)
        if host_labels is None and labels is None:  # the general path decides what a label-less batch means
            return False
        load_labels = bool(self._labels.shapes) and (host_labels is not None or bool(labels))
        if load_labels and host_labels is None and not self._labels.fits(labels):
            return False
        # the order of the step-by-step path: data, labels, forward, backward, update, metric
        if host_data is not None:
            self._data.load_host(host_data)
        else:
            self._data.load(data_batch.data)
        if load_labels:
            if host_labels is not None:
                self._labels.load_host(host_labels)
            else:
                self._labels.load(labels)
        execs = self._execs
        for executor in execs:
            executor.forward(is_train=True)
        for executor in execs:
            executor.backward()
        module._params_dirty = True
        self._update()
        if load_labels and (host_labels is not None or self._labels.same_values(labels)) \
                and reads_arguments_at_update(eval_metric):
            # the bound label inputs hold the batch's labels (each device its slice) bit for bit
            for executor, bound in zip(execs, self._labels.per_device):
                _update_metric(eval_metric, bound, self._label_names, self._output_names, executor.outputs)
        else:
            group.update_metric(eval_metric, data_batch.label)
        return True


def reads_arguments_at_update(metric: Any) -> bool:
    """Whether ``metric`` is done with the arrays it is given when ``update`` returns (the
    metrics of ``mx.metric`` are: they read them, or push an engine operation that reads
    them, at once), so that it can be given the bound label inputs, which the next step
    overwrites. A metric class of the user's own might keep them."""
    from mxkit.train.metric import CompositeEvalMetric

    home = type(metric).__module__
    if home != "mxkit.train.metric" and not home.startswith("mxkit.train.metric."):
        return False
    if isinstance(metric, CompositeEvalMetric):
        return all(reads_arguments_at_update(child) for child in metric.metrics)
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
