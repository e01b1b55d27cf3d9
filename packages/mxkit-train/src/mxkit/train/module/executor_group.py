"""Data parallelism over a list of devices: one executor per device, each on a slice of the batch.

MXNet's ``DataParallelExecutorGroup``: the batch is split along its batch axis by
``work_load_list`` (a device with twice the work load gets twice the samples), every
device binds the same symbol to its slice, parameters live once per device (kept equal by
the updates), and outputs, input gradients and metrics are merged back in batch order.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
from mxkit.core.errors import MXKitError, ShapeError

#: input shapes whose reshaped executors a group keeps (least recently used first out)
MAX_RESHAPED = 4


class ModuleError(MXKitError, ValueError):
    """A module was used in a state or with inputs it cannot handle."""


def split_input_slice(batch_size: int, work_load_list: Sequence[float]) -> list[slice]:
    """Split ``batch_size`` samples into one contiguous slice per device, proportional to work load.

    Parameters
    ----------
    batch_size : int
        Samples in a batch.
    work_load_list : list of float
        Relative work load of each device.

    Returns
    -------
    list of slice

    Raises
    ------
    ModuleError
        When a device would get no sample (more devices than samples).
    """
    total = float(sum(work_load_list))
    if total <= 0 or any(w < 0 for w in work_load_list):
        raise ModuleError(f"work_load_list must hold non-negative loads with a positive sum, got "
                          f"{list(work_load_list)}")
    counts = [round(w * batch_size / total) for w in work_load_list]
    if sum(counts) < batch_size:
        counts[-1] += batch_size - sum(counts)
    slices, end = [], 0
    for count in counts:
        begin = min(end, batch_size)
        end = min(begin + count, batch_size)
        if begin >= end:
            raise ModuleError(f"a batch of {batch_size} samples cannot be split over {len(work_load_list)} devices "
                              f"with work loads {list(work_load_list)}: a device would get no sample; use a "
                              f"larger batch or fewer devices")
        slices.append(slice(begin, end))
    return slices


def prepare_group2ctxs(group2ctxs: Any, count: int) -> list[dict | None]:
    """``group2ctxs`` as one ``{group: Context}`` per device (MXNet's ``_prepare_group2ctxs``).

    Parameters
    ----------
    group2ctxs : None, dict or list of dict
        None; a list with one dict per device; or one dict whose values are a Context (every
        device's group goes there), a list of one Context, or a list of one per device.
    count : int
        The number of devices (data-parallel executors).

    Raises
    ------
    ModuleError
        For a list of the wrong length or a value that is neither a Context nor a list of them.
    """
    from mxkit.core.context import Context

    if group2ctxs is None:
        return [None] * count
    if isinstance(group2ctxs, list | tuple):
        if len(group2ctxs) != count:
            raise ModuleError(f"group2ctxs has {len(group2ctxs)} dicts for {count} contexts; give one dict per "
                              f"context, or one dict for all")
        return [dict(g) if g is not None else None for g in group2ctxs]
    if not isinstance(group2ctxs, dict):
        raise ModuleError(f"group2ctxs must be a dict of ctx_group name to Context (or list of Contexts), or a "
                          f"list of such dicts, one per context; got {type(group2ctxs).__name__}")
    per_device: list[dict | None] = [{} for _ in range(count)]
    for group, value in group2ctxs.items():
        if isinstance(value, Context):
            devices = [value] * count
        elif isinstance(value, list | tuple) and len(value) == 1:
            devices = list(value) * count
        elif isinstance(value, list | tuple) and len(value) == count:
            devices = list(value)
        else:
            raise ModuleError(f"group2ctxs[{group!r}] is {value!r}; give a Context, or a list of 1 or {count} "
                              f"Contexts (one per context)")
        for i, device in enumerate(devices):
            per_device[i][group] = device  # type: ignore[index]
    return per_device


def _batch_axis(desc: Any) -> int:
    from mxkit.io import DataDesc

    return DataDesc.get_batch_axis(getattr(desc, "layout", None))


def _dtype_name(dtype: Any) -> str:
    return np.dtype(dtype).name


def _slice_along(array: Any, axis: int, part: slice) -> Any:
    """``array[part]`` along ``axis`` (a view when the axis is 0)."""
    if axis == 0:
        return array[part]
    if hasattr(array, "slice_axis"):  # an NDArray (a batch axis other than 0, e.g. layout 'TNC') stays one
        stop = array.shape[axis] if part.stop is None else part.stop
        return array.slice_axis(axis=axis, begin=part.start or 0, end=stop)
    index = [slice(None)] * np.ndim(array)
    index[axis] = part
    return np.asarray(array)[tuple(index)]


def _merge_multi_context(outputs: list[list[Any]], axes: list[int]) -> list[Any]:
    """One array per output: the devices' pieces concatenated along the batch axis."""
    from mxkit.ndarray import concatenate

    merged = []
    for pieces, axis in zip(outputs, axes):
        if any(p is None for p in pieces):  # no gradient array (grad_req "null")
            merged.append(None)
        elif len(pieces) == 1:
            merged.append(pieces[0])
        elif axis >= 0:
            target = pieces[0].context
            merged.append(concatenate([p.as_in_context(target) for p in pieces], axis=axis))
        else:  # no batch axis: every device holds the whole value
            merged.append(pieces[0])
    return merged


class DataParallelExecutorGroup:
    """The executors of one module, one per device.

    Parameters
    ----------
    symbol : Symbol
    contexts : list of Context
    workload : list of float
        Relative work load per device (how the batch is split).
    data_shapes, label_shapes : list of DataDesc
        Whole-batch shapes of the inputs.
    param_names : list of str
        Arguments that are parameters (the rest are inputs).
    for_training : bool
        Whether gradients are needed.
    inputs_need_grad : bool
        Whether the data inputs get gradients too.
    shared_group : DataParallelExecutorGroup, optional
        A group whose parameter arrays this one shares (MXNet's bucketing).
    fixed_param_names : list of str, optional
        Parameters that are not updated (no gradient).
    grad_req : str, list or dict
        ``write``, ``add`` or ``null``.
    state_names : list of str, optional
        Inputs that are states (no gradient, kept across batches).
    memplan : str, optional
        The memory-planning strategy of the executors.
    group2ctxs : dict or list of dict, optional
        Model parallelism: devices of the ``ctx_group`` attributes, per device of
        ``contexts`` (see :func:`prepare_group2ctxs`).
    """

    def __init__(self, symbol: Any, contexts: list[Any], workload: list[float], data_shapes: list[Any],
                 label_shapes: list[Any] | None, param_names: list[str], for_training: bool,
                 inputs_need_grad: bool, shared_group: DataParallelExecutorGroup | None = None,
                 logger: logging.Logger = logging, fixed_param_names: list[str] | None = None,  # type: ignore[assignment]
                 grad_req: Any = "write", state_names: list[str] | None = None, memplan: str | None = None,
                 group2ctxs: Any = None) -> None:
        self.group2ctxs = prepare_group2ctxs(group2ctxs, len(contexts))
        self.param_names = list(param_names)
        self.arg_names = symbol.list_arguments()
        self.aux_names = symbol.list_auxiliary_states()
        self.symbol = symbol
        self.contexts = list(contexts)
        self.workload = list(workload)
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self.logger = logger
        self.memplan = memplan
        self.fixed_param_names = list(fixed_param_names or [])
        self.state_names = list(state_names or [])
        self.data_names = [d.name for d in data_shapes]
        self.label_names = [d.name for d in label_shapes] if label_shapes else []
        self.grad_req = self._grad_req_per_argument(grad_req)
        self.shared_group = shared_group
        self.output_names = symbol.list_outputs()
        self.execs: list[Any] = []
        self.batch_size = 0
        self.slices: list[slice] = []
        #: the executors each reshape made, by input shapes (see :meth:`bind_exec`)
        self._reshaped: OrderedDict[tuple, list[Any]] = OrderedDict()
        self._monitor: Any = None
        self.bind_exec(data_shapes, label_shapes, shared_group)

    def _grad_req_per_argument(self, grad_req: Any) -> dict[str, str]:
        if not self.for_training:
            return {name: "null" for name in self.arg_names}
        if isinstance(grad_req, dict):
            return {name: grad_req.get(name, "null") for name in self.arg_names}
        if isinstance(grad_req, list | tuple):
            if len(grad_req) != len(self.arg_names):
                raise ModuleError(f"grad_req has {len(grad_req)} entries for {len(self.arg_names)} arguments "
                                  f"({', '.join(self.arg_names)})")
            return dict(zip(self.arg_names, grad_req))
        reqs = {}
        for name in self.arg_names:
            if name in self.param_names:
                reqs[name] = "null" if name in self.fixed_param_names else grad_req
            elif name in self.data_names:
                reqs[name] = grad_req if self.inputs_need_grad else "null"
            else:
                reqs[name] = "null"
        return reqs

    # -- binding ------------------------------------------------------------------------

    def decide_slices(self, data_shapes: list[Any]) -> list[int]:
        """Set :attr:`batch_size` and :attr:`slices` from the data shapes; the batch axis of each."""
        axes = [_batch_axis(desc) for desc in data_shapes]
        for desc, axis in zip(data_shapes, axes):
            if axis < 0:
                continue
            size = desc.shape[axis]
            if self.batch_size and size != self.batch_size:
                raise ShapeError(f"all data inputs must have the same batch size: {desc.name!r} has {size} along "
                                 f"axis {axis}, the others {self.batch_size}")
            self.batch_size = size
        self.slices = split_input_slice(self.batch_size, self.workload)
        return axes

    def _sliced_shapes(self, shapes: list[Any], part: slice, axes: list[int]) -> list[tuple[str, tuple]]:
        out = []
        for desc, axis in zip(shapes, axes):
            shape = list(desc.shape)
            if axis >= 0:
                shape[axis] = part.stop - part.start
            out.append((desc.name, tuple(shape)))
        return out

    def bind_exec(self, data_shapes: list[Any], label_shapes: list[Any] | None,
                  shared_group: DataParallelExecutorGroup | None = None, reshape: bool = False) -> None:
        """Bind (or, with ``reshape``, re-bind for new shapes) one executor per device."""
        self.batch_size = 0
        self.data_layouts = self.decide_slices(data_shapes)
        self.label_layouts = [_batch_axis(desc) for desc in label_shapes] if label_shapes else []
        self.data_shapes = list(data_shapes)
        self.label_shapes = list(label_shapes) if label_shapes else None
        inputs = list(data_shapes) + list(label_shapes or [])
        axes = self.data_layouts + self.label_layouts
        types = {desc.name: _dtype_name(getattr(desc, "dtype", np.float32)) for desc in inputs}
        shapes_key = tuple((desc.name, tuple(desc.shape)) for desc in inputs)
        # A loop that alternates two batch sizes (training, then scoring with the validation
        # iterator's) reshapes back and forth every epoch: the executors a reshape made are
        # kept, by input shapes, and taken again instead of planning and compiling anew. Made
        # from one another, they share their memory pools (a smaller plan reuses a larger
        # one's), their parameters and gradients, and the engine var that orders their runs.
        # Those of the first bind are not kept: up-sized from, they would hold pools of their own.
        new_execs = self._reshaped.get(shapes_key) if reshape else None
        if new_execs is not None:
            self._reshaped.move_to_end(shapes_key)
        else:
            new_execs = []
            for i, ctx in enumerate(self.contexts):
                shapes = dict(self._sliced_shapes(inputs, self.slices[i], axes))
                if reshape:
                    new_execs.append(self.execs[i].reshape(allow_up_sizing=True, **shapes))
                else:
                    new_execs.append(self._bind_ith_exec(i, ctx, shapes, types, shared_group))
            if reshape:
                self._reshaped[shapes_key] = new_execs
                while len(self._reshaped) > MAX_RESHAPED:
                    self._reshaped.popitem(last=False)
            else:
                self._reshaped.clear()  # (a new bind: earlier executors share nothing with these)
            if self._monitor is not None:  # (executors made since it was installed report to it too)
                for executor in new_execs:
                    self._monitor.install(executor)
        self.execs = new_execs
        self._collect_arrays()

    def _bind_ith_exec(self, i: int, ctx: Any, shapes: dict, types: dict, shared_group: Any) -> Any:
        if shared_group is None:
            return self.symbol.simple_bind(ctx, grad_req=self.grad_req, type_dict=types, memplan=self.memplan,
                                           group2ctx=self.group2ctxs[i], **shapes)
        # share the parameter (and gradient) arrays of the shared group's executor on this device
        from mxkit.ndarray import zeros

        shared = shared_group.execs[i]
        groups = self.group2ctxs[i] or {}
        attributes = self.symbol.attr_dict()

        def device_of(name: str) -> Any:
            return groups.get(attributes.get(name, {}).get("__ctx_group__", ""), ctx)

        arg_shapes, _, aux_shapes = self.symbol.infer_shape(**shapes)
        if arg_shapes is None:
            raise ShapeError(f"the input shapes {shapes} do not determine every argument of the symbol")
        args, grads = {}, {}
        for name, shape in zip(self.arg_names, arg_shapes):
            dtype = types.get(name, "float32")
            old = shared.arg_dict.get(name)
            reuse = name in self.param_names and old is not None and tuple(old.shape) == tuple(shape)
            args[name] = old if reuse else zeros(shape, ctx=device_of(name), dtype=dtype)
            if self.grad_req[name] != "null":
                old_grad = shared.grad_dict.get(name)
                grads[name] = (old_grad if reuse and old_grad is not None
                               else zeros(shape, ctx=device_of(name), dtype=dtype))
        aux = [shared.aux_dict[name] if name in shared.aux_dict else zeros(shape, ctx=device_of(name))
               for name, shape in zip(self.aux_names, aux_shapes)]
        return self.symbol.bind(ctx, args, args_grad=grads, grad_req=self.grad_req, aux_states=aux,
                                memplan=self.memplan, shared_exec=shared, group2ctx=self.group2ctxs[i])

    def _collect_arrays(self) -> None:
        execs = self.execs
        self.data_arrays = [[(part, e.arg_dict[name]) for part, e in zip(self.slices, execs)]
                            for name in self.data_names]
        self.state_arrays = [[e.arg_dict[name] for e in execs] for name in self.state_names]
        self.label_arrays = [[(part, e.arg_dict[name]) for part, e in zip(self.slices, execs)]
                             for name in self.label_names if name in execs[0].arg_dict]
        self.param_arrays = [[e.arg_dict[name] for e in execs] for name in self.param_names]
        if self.for_training:
            self.grad_arrays = [[e.grad_dict.get(name) for e in execs] for name in self.param_names]
        else:
            self.grad_arrays = [[None] * len(execs) for _ in self.param_names]
        self.aux_arrays = [[e.aux_dict[name] for e in execs] for name in self.aux_names]
        if self.inputs_need_grad:
            # an input bound with grad_req "null" has no gradient array: None, as in MXNet
            self.input_grad_arrays = [[e.grad_dict.get(name) for e in execs] for name in self.data_names]
        else:
            self.input_grad_arrays = []
        self.output_layouts = [self.data_layouts[0] if self.data_layouts else 0] * len(self.output_names)

    def reshape(self, data_shapes: list[Any], label_shapes: list[Any] | None) -> None:
        """Re-bind for new input shapes, keeping the parameter arrays."""
        if [tuple(d.shape) for d in data_shapes] == [tuple(d.shape) for d in self.data_shapes] and \
                [tuple(d.shape) for d in label_shapes or []] == [tuple(d.shape) for d in self.label_shapes or []]:
            return
        self.bind_exec(data_shapes, label_shapes, reshape=True)

    # -- parameters ---------------------------------------------------------------------

    def set_params(self, arg_params: dict, aux_params: dict, allow_extra: bool = False) -> None:
        """Copy parameters into every device's executor."""
        for executor in self.execs:
            executor.copy_params_from(arg_params, aux_params, allow_extra_params=allow_extra)

    def get_params(self, arg_params: dict, aux_params: dict) -> None:
        """Write the devices' parameters, averaged, into ``arg_params`` and ``aux_params`` (in place)."""
        from mxkit.core.context import cpu

        for names, blocks, target in ((self.param_names, self.param_arrays, arg_params),
                                      (self.aux_names, self.aux_arrays, aux_params)):
            for name, block in zip(names, blocks):
                if len(block) == 1:
                    value = block[0]
                else:  # equal on every device after synchronous updates; the mean also covers aux stats
                    value = sum((w.as_in_context(cpu()) for w in block[1:]), block[0].copyto(cpu())) / len(block)
                if name in target:
                    target[name][:] = value.astype(target[name].dtype) if value.dtype != target[name].dtype else value
                else:
                    target[name] = value.copyto(cpu())

    # -- running ------------------------------------------------------------------------

    def _load(self, sources: Sequence[Any], targets: list, axes: list[int], what: str) -> None:
        for name, source, pieces, axis in zip(self.data_names if what == "data" else self.label_names,
                                              sources, targets, axes):
            for part, target in pieces:
                piece = source if len(pieces) == 1 and axis == 0 else _slice_along(source, axis, part)
                shape = tuple(getattr(piece, "shape", np.shape(piece)))
                if shape != tuple(target.shape):
                    raise ShapeError(f"{what} {name!r}: a slice of shape {shape} does not fit the executor's "
                                     f"{tuple(target.shape)}")
                if hasattr(piece, "copyto"):
                    piece.copyto(target)  # NDArray to NDArray: the direct copy, no indexing machinery
                else:
                    target[:] = piece

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Copy the batch's slices to the devices and run forward on each."""
        self._load(data_batch.data, self.data_arrays, self.data_layouts, "data")
        if is_train is None:
            is_train = self.for_training
        labels = getattr(data_batch, "label", None)  # a batch may be any object with .data, as in MXNet
        if self.label_arrays and labels:
            self._load(labels, self.label_arrays, self.label_layouts, "label")
        for executor in self.execs:
            executor.forward(is_train=is_train)

    def backward(self, out_grads: Any = None) -> None:
        """Run backward on every device (``out_grads`` sliced like the batch)."""
        if not self.for_training:
            raise ModuleError("backward needs a module bound with for_training=True")
        if out_grads is not None and not isinstance(out_grads, list | tuple):
            out_grads = [out_grads]
        for i, (executor, part) in enumerate(zip(self.execs, self.slices)):
            grads = None
            if out_grads is not None:
                grads = [_slice_along(g, axis, part).as_in_context(self.contexts[i])
                         if hasattr(g, "as_in_context") else _slice_along(g, axis, part)
                         for g, axis in zip(out_grads, self.output_layouts)]
            executor.backward(out_grads=grads)

    def get_outputs(self, merge_multi_context: bool = True, begin: int = 0, end: int | None = None) -> list:
        """Outputs, merged over devices (or one list of per-device arrays per output)."""
        end = len(self.output_names) if end is None else end
        outputs = [[e.outputs[i] for e in self.execs] for i in range(begin, end)]
        if merge_multi_context:
            return _merge_multi_context(outputs, self.output_layouts[begin:end])
        return outputs

    def get_input_grads(self, merge_multi_context: bool = True) -> list:
        """Gradients of the data inputs (``inputs_need_grad=True``)."""
        if not self.inputs_need_grad:
            raise ModuleError("get_input_grads needs a module bound with inputs_need_grad=True")
        if merge_multi_context:
            return _merge_multi_context(self.input_grad_arrays, self.data_layouts)
        return self.input_grad_arrays

    def get_states(self, merge_multi_context: bool = True) -> list:
        """The state inputs' arrays."""
        if merge_multi_context:
            return _merge_multi_context(self.state_arrays, [-1] * len(self.state_arrays))
        return self.state_arrays

    def set_states(self, states: list | None = None, value: float | None = None) -> None:
        """Set the states from per-device arrays, or all to ``value``."""
        if states is not None:
            for targets, sources in zip(self.state_arrays, states):
                for target, source in zip(targets, sources):
                    target[:] = source
        else:
            for targets in self.state_arrays:
                for target in targets:
                    target[:] = value

    def update_metric(self, eval_metric: Any, labels: Sequence[Any], pre_sliced: bool = False) -> None:
        """Update ``eval_metric`` with every device's outputs against its slice of ``labels``."""
        for index, (executor, part) in enumerate(zip(self.execs, self.slices)):
            if pre_sliced:
                labels_slice = labels[index]
            elif len(self.execs) == 1:
                labels_slice = list(labels)
            else:
                layouts = self.label_layouts or [0] * len(labels)
                labels_slice = [label if axis < 0 else _slice_along(label, axis, part)
                                for label, axis in zip(labels, layouts)]
            update_dict = getattr(eval_metric, "update_dict", None)
            if update_dict is not None and self.label_names:
                update_dict(dict(zip(self.label_names, labels_slice)), dict(zip(self.output_names, executor.outputs)))
            else:
                eval_metric.update(list(labels_slice), list(executor.outputs))

    def install_monitor(self, monitor: Any) -> None:
        """Install ``monitor`` (anything with ``install(executor)``) on every executor, and on
        those a reshape makes later."""
        self._monitor = monitor
        self._reshaped.clear()  # (executors kept for other shapes would run without it)
        for executor in self.execs:
            monitor.install(executor)


__all__ = ["DataParallelExecutorGroup", "ModuleError", "split_input_slice"]
