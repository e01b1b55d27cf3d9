"""``Module``: a symbol bound over one or several devices, with parameters and an optimizer."""

from __future__ import annotations

import logging
import warnings
from typing import Any

from mxkit.train.module.base_module import BaseModule, _check_input_names, _parse_data_desc
from mxkit.train.module.executor_group import DataParallelExecutorGroup, ModuleError, prepare_group2ctxs
from mxkit.train.module.optimizing import OptimizingMixin


def _contexts(context: Any) -> list:
    from mxkit.core.context import Context, cpu

    if context is None:
        return [cpu()]
    if isinstance(context, Context):
        return [context]
    contexts = list(context)
    if not contexts or not all(isinstance(c, Context) for c in contexts):
        raise ModuleError(f"context must be a Context or a non-empty list of Contexts (mx.cpu(0), mx.gpu(1)), got "
                          f"{context!r}")
    return contexts


def _with_batch_size(desc: Any, batch_size: int) -> tuple:
    from mxkit.io import DataDesc

    shape = list(desc.shape)
    axis = DataDesc.get_batch_axis(getattr(desc, "layout", None))
    if 0 <= axis < len(shape):
        shape[axis] = batch_size
    return tuple(shape)


def _batch_size_of(desc: Any) -> int:
    from mxkit.io import DataDesc

    axis = DataDesc.get_batch_axis(getattr(desc, "layout", None))
    return int(desc.shape[max(axis, 0)])


class Module(OptimizingMixin, BaseModule):
    """A symbol with its parameters, trained data-parallel over ``context`` (MXNet's ``mx.mod.Module``).

    Parameters
    ----------
    symbol : Symbol
        The network.
    data_names, label_names : list of str
        Names of the data and label inputs (default ``('data',)`` and ``('softmax_label',)``).
    logger : logging.Logger
    context : Context or list of Context
        The devices; a batch is split over them.
    work_load_list : list of float, optional
        Relative work load per device (default: equal).
    fixed_param_names : list of str, optional
        Parameters that are not trained.
    state_names : list of str, optional
        Inputs that are states (kept across batches, no gradient).
    group2ctxs : dict or list of dict, optional
        Model parallelism: the devices of the symbol's ``ctx_group`` attributes, one dict for
        every context or one per context (as in MXNet; groups go to devices that share host
        memory, see :mod:`mxkit.symbol.placement`).
    compression_params : dict, optional
        Gradient compression for the KVStore (``{'type': '2bit', 'threshold': 0.5}``).
    memplan : str, optional
        The executors' memory-planning strategy (default: config ``memplan``).
    """

    def __init__(self, symbol: Any, data_names: Any = ("data",), label_names: Any = ("softmax_label",),
                 logger: Any = logging, context: Any = None, work_load_list: Any = None,
                 fixed_param_names: Any = None, state_names: Any = None, group2ctxs: Any = None,
                 compression_params: dict | None = None, memplan: str | None = None) -> None:
        super().__init__(logger=logger)
        self._context = _contexts(context)
        if work_load_list is None:
            work_load_list = [1] * len(self._context)
        if len(work_load_list) != len(self._context):
            raise ModuleError(f"work_load_list has {len(work_load_list)} entries for {len(self._context)} contexts; "
                              f"give one load per context")
        self._group2ctxs = prepare_group2ctxs(group2ctxs, len(self._context))
        self._work_load_list = list(work_load_list)
        self._symbol = symbol
        self._data_names = list(data_names) if data_names is not None else []
        self._label_names = list(label_names) if label_names is not None else []
        self._state_names = list(state_names) if state_names is not None else []
        self._fixed_param_names = list(fixed_param_names) if fixed_param_names is not None else []
        _check_input_names(symbol, self._data_names, "data", True)
        _check_input_names(symbol, self._label_names, "label", False)
        _check_input_names(symbol, self._state_names, "state", True)
        _check_input_names(symbol, self._fixed_param_names, "fixed_param", True)
        inputs = set(self._data_names + self._label_names + self._state_names)
        self._param_names = [name for name in symbol.list_arguments() if name not in inputs]
        self._aux_names = symbol.list_auxiliary_states()
        self._output_names = symbol.list_outputs()
        self._compression_params = compression_params
        self._memplan = memplan
        self._arg_params: dict | None = None
        self._aux_params: dict | None = None
        self._params_dirty = False
        self._optimizer: Any = None
        self._kvstore: Any = None
        self._update_on_kvstore = False
        self._updater: Any = None
        self._preload_opt_states: str | None = None
        self._grad_req: Any = None
        self._exec_group: DataParallelExecutorGroup | None = None
        self._data_shapes: list | None = None
        self._label_shapes: list | None = None

    # -- checkpoints --------------------------------------------------------------------

    @staticmethod
    def load(prefix: str, epoch: int, load_optimizer_states: bool = False, **kwargs: Any) -> Module:
        """A module from a checkpoint (``prefix-symbol.json``, ``prefix-%04d.params``).

        ``kwargs`` go to :class:`Module` (``context``, ``data_names``...). With
        ``load_optimizer_states``, ``init_optimizer`` restores ``prefix-%04d.states``.
        """
        from mxkit.train.model.checkpoint import load_checkpoint

        symbol, args, auxs = load_checkpoint(prefix, epoch)
        module = Module(symbol=symbol, **kwargs)
        module._arg_params = args
        module._aux_params = auxs
        module.params_initialized = True
        if load_optimizer_states:
            module._preload_opt_states = f"{prefix}-{int(epoch):04d}.states"
        return module

    def save_checkpoint(self, prefix: str, epoch: int, save_optimizer_states: bool = False,
                        remove_amp_cast: bool = True) -> None:
        """Write ``prefix-symbol.json``, ``prefix-%04d.params`` (and ``.states`` if asked)."""
        from mxkit.train.model.checkpoint import save_checkpoint

        arg_params, aux_params = self.get_params()
        save_checkpoint(prefix, epoch, self._symbol, arg_params, aux_params)
        if save_optimizer_states:
            self.save_optimizer_states(f"{prefix}-{int(epoch):04d}.states")

    # -- properties ---------------------------------------------------------------------

    @property
    def data_names(self) -> list[str]:
        return self._data_names

    @property
    def label_names(self) -> list[str]:
        return self._label_names

    @property
    def output_names(self) -> list[str]:
        return self._output_names

    @property
    def data_shapes(self) -> list:
        self._require(bound=True, what="data_shapes")
        return self._data_shapes  # type: ignore[return-value]

    @property
    def label_shapes(self) -> list | None:
        self._require(bound=True, what="label_shapes")
        return self._label_shapes

    @property
    def output_shapes(self) -> list[tuple[str, tuple]]:
        self._require(bound=True, what="output_shapes")
        assert self._exec_group is not None
        outputs = self._exec_group.get_outputs()
        return [(name, tuple(out.shape)) for name, out in zip(self._output_names, outputs)]

    # -- parameters ---------------------------------------------------------------------

    def get_params(self) -> tuple[dict, dict]:
        """``(arg_params, aux_params)``: copies on the CPU, synced from the devices when they changed."""
        self._require(bound=True, initialized=True, what="get_params")
        if self._params_dirty:
            self._sync_params_from_devices()
        return self._arg_params, self._aux_params  # type: ignore[return-value]

    def init_params(self, initializer: Any = None, arg_params: dict | None = None, aux_params: dict | None = None,
                    allow_missing: bool = False, force_init: bool = False, allow_extra: bool = False) -> None:
        """Initialise parameters: copied from ``arg_params``/``aux_params`` where given, else by ``initializer``.

        Raises
        ------
        ModuleError
            When a parameter is in neither ``arg_params`` nor covered by ``allow_missing``.
        """
        if self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. init_params call ignored.",
                          stacklevel=2)
            return
        self._require(bound=True, what="init_params")
        if initializer is None and (arg_params is None or allow_missing):
            from mxkit.train.module.base_module import _default_initializer

            initializer = _default_initializer()

        def initialise(name: str, array: Any, cache: dict | None, attrs: dict) -> None:
            if cache is not None and name in cache:
                source = cache[name]
                if source is not array:
                    if tuple(source.shape) != tuple(array.shape):
                        from mxkit.core.errors import ShapeError

                        raise ShapeError(f"parameter {name!r} has shape {tuple(source.shape)} in the given "
                                         f"params, the module needs {tuple(array.shape)}")
                    array[:] = source
                return
            if cache is not None and not allow_missing:
                raise ModuleError(f"parameter {name!r} is not in the given params (which have "
                                  f"{', '.join(sorted(cache)) or 'nothing'}); pass allow_missing=True to "
                                  f"initialise it with the initializer")
            if initializer is not None:
                from mxkit.train.initializer import InitDesc

                initializer(InitDesc(name, attrs.get(name)), array)

        attrs = self._symbol.attr_dict()
        for name, array in sorted(self._arg_params.items()):  # type: ignore[union-attr]
            initialise(name, array, arg_params, attrs)
        for name, array in sorted(self._aux_params.items()):  # type: ignore[union-attr]
            initialise(name, array, aux_params, attrs)
        self.params_initialized = True
        self._params_dirty = False
        assert self._exec_group is not None
        self._exec_group.set_params(self._arg_params, self._aux_params, allow_extra=allow_extra)  # type: ignore[arg-type]

    def set_params(self, arg_params: dict, aux_params: dict, allow_missing: bool = False, force_init: bool = True,
                   allow_extra: bool = False) -> None:
        """Set parameters (MXNet's ``Module.set_params``)."""
        if not allow_missing:
            self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                             allow_missing=allow_missing, force_init=force_init, allow_extra=allow_extra)
            return
        if self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. set_params call ignored.",
                          stacklevel=2)
            return
        assert self._exec_group is not None
        self._exec_group.set_params(arg_params, aux_params, allow_extra=allow_extra)
        self._params_dirty = True
        self.params_initialized = True

    # -- binding ------------------------------------------------------------------------

    def bind(self, data_shapes: Any, label_shapes: Any = None, for_training: bool = True,
             inputs_need_grad: bool = False, force_rebind: bool = False, shared_module: Module | None = None,
             grad_req: Any = "write") -> None:
        """Bind executors on every device for the given input shapes.

        Parameters
        ----------
        data_shapes, label_shapes : list of DataDesc or (name, shape)
            Whole-batch shapes (``train_iter.provide_data``).
        for_training : bool
            Allocate gradients.
        inputs_need_grad : bool
            Gradients of the data inputs too (``get_input_grads``).
        force_rebind : bool
            Bind again even if bound.
        shared_module : Module, optional
            A bound, initialised module whose parameter arrays are shared.
        grad_req : str, list or dict
        """
        if force_rebind:
            self._reset_bind()
        if self.binded:
            self.logger.warning("Already bound, ignoring bind()")
            return
        if not for_training and inputs_need_grad:
            raise ModuleError("inputs_need_grad=True needs for_training=True")
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._grad_req = grad_req
        self._data_shapes, self._label_shapes = _parse_data_desc(self._data_names, self._label_names,
                                                                 data_shapes, label_shapes)
        shared_group = None
        if shared_module is not None:
            if not (isinstance(shared_module, Module) and shared_module.binded and shared_module.params_initialized):
                raise ModuleError("shared_module must be a bound Module with initialised parameters")
            shared_group = shared_module._exec_group
        self._exec_group = DataParallelExecutorGroup(
            self._symbol, self._context, self._work_load_list, self._data_shapes, self._label_shapes,
            self._param_names, for_training, inputs_need_grad, shared_group, logger=self.logger,
            fixed_param_names=self._fixed_param_names, grad_req=grad_req, state_names=self._state_names,
            memplan=self._memplan, group2ctxs=self._group2ctxs)
        self.binded = True
        if shared_module is not None:
            self.params_initialized = True
            self._arg_params = shared_module._arg_params
            self._aux_params = shared_module._aux_params
        elif self.params_initialized:
            # parameters loaded before binding (Module.load): copy them onto the devices
            self._exec_group.set_params(self._arg_params, self._aux_params)  # type: ignore[arg-type]
        else:
            from mxkit.core.context import cpu
            from mxkit.ndarray import zeros

            self._arg_params = {name: zeros(block[0].shape, ctx=cpu(), dtype=block[0].dtype)
                                for name, block in zip(self._param_names, self._exec_group.param_arrays)}
            self._aux_params = {name: zeros(block[0].shape, ctx=cpu(), dtype=block[0].dtype)
                                for name, block in zip(self._aux_names, self._exec_group.aux_arrays)}
        if shared_module is not None and shared_module.optimizer_initialized:
            self.borrow_optimizer(shared_module)

    def _reset_bind(self) -> None:
        self.binded = False
        self._exec_group = None
        self._data_shapes = None
        self._label_shapes = None

    def reshape(self, data_shapes: Any, label_shapes: Any = None) -> None:
        """Re-bind for new input shapes (a new batch size), keeping parameters and optimizer."""
        self._require(bound=True, what="reshape")
        self._data_shapes, self._label_shapes = _parse_data_desc(self._data_names, self._label_names,
                                                                 data_shapes, label_shapes)
        assert self._exec_group is not None
        self._exec_group.reshape(self._data_shapes, self._label_shapes)

    # -- computation --------------------------------------------------------------------

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Forward on every device; re-binds first when the batch's shapes differ from the bound ones.

        Raises
        ------
        ShapeError
            When the new shapes would change a parameter's shape.
        """
        from mxkit.core.errors import ShapeError
        from mxkit.io import DataDesc

        self._require(bound=True, initialized=True, what="forward")
        # a namedtuple with a data field (MXNet accepts any object with .data) is one batch
        if isinstance(data_batch, list | tuple) and not hasattr(data_batch, "data"):
            raise ModuleError(f"forward got a list of {len(data_batch)} DataBatch (pre-sliced per device), which "
                              f"this Module does not take; pass one DataBatch and it is split over the devices "
                              f"by work_load_list")
        batch = data_batch
        if len(batch.data) != len(self._data_shapes):  # type: ignore[arg-type]
            raise ModuleError(f"the batch has {len(batch.data)} data arrays; the module takes "
                              f"{len(self._data_shapes)} ({', '.join(self._data_names)})")  # type: ignore[arg-type]
        current = tuple(tuple(desc.shape) for desc in self._data_shapes)  # type: ignore[union-attr]
        new = tuple(tuple(array.shape) for array in batch.data)
        if current != new:  # any axis may change, as in MXNet: the executors re-bind, parameters kept
            if getattr(batch, "provide_data", None):
                new_dshape = batch.provide_data
            else:
                new_dshape = [DataDesc(d.name, shape, d.dtype, d.layout)
                              for d, shape in zip(self._data_shapes, new)]  # type: ignore[arg-type]
            if getattr(batch, "provide_label", None):
                new_lshape = batch.provide_label
            elif getattr(batch, "label", None) and self._label_shapes:
                new_lshape = [DataDesc(d.name, tuple(array.shape), d.dtype, d.layout)
                              for d, array in zip(self._label_shapes, batch.label)]
            elif self._label_shapes:
                # no labels in the batch (prediction): keep the label inputs in step with the new batch size
                new_lshape = [DataDesc(d.name, _with_batch_size(d, _batch_size_of(new_dshape[0])), d.dtype, d.layout)
                              for d in self._label_shapes]
            else:
                new_lshape = None
            try:
                self.reshape(new_dshape, new_lshape)
            except ShapeError as exc:
                raise ShapeError(f"the batch's data shapes {list(new)} differ from the bound {list(current)}, and the "
                                 f"module cannot re-bind for them: {exc}") from None
        assert self._exec_group is not None
        self._exec_group.forward(batch, is_train)

    def backward(self, out_grads: Any = None) -> None:
        """Backward on every device."""
        self._require(bound=True, initialized=True, what="backward")
        assert self._exec_group is not None
        self._exec_group.backward(out_grads=out_grads)

    def get_outputs(self, merge_multi_context: bool = True) -> list:
        """The outputs of the last forward (merged over devices by default)."""
        self._require(bound=True, initialized=True, what="get_outputs")
        assert self._exec_group is not None
        return self._exec_group.get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context: bool = True) -> list:
        """Gradients of the data inputs (bind with ``inputs_need_grad=True``)."""
        self._require(bound=True, initialized=True, what="get_input_grads")
        assert self._exec_group is not None
        return self._exec_group.get_input_grads(merge_multi_context=merge_multi_context)

    def get_states(self, merge_multi_context: bool = True) -> list:
        """The state inputs' arrays."""
        self._require(bound=True, initialized=True, what="get_states")
        assert self._exec_group is not None
        return self._exec_group.get_states(merge_multi_context=merge_multi_context)

    def set_states(self, states: Any = None, value: Any = None) -> None:
        """Set the state inputs from arrays or to a value."""
        self._require(bound=True, initialized=True, what="set_states")
        assert self._exec_group is not None
        self._exec_group.set_states(states, value)

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        """Update ``eval_metric`` with the last outputs against ``labels``."""
        assert self._exec_group is not None
        self._exec_group.update_metric(eval_metric, labels, pre_sliced)

    def _sync_params_from_devices(self) -> None:
        assert self._exec_group is not None
        self._exec_group.get_params(self._arg_params, self._aux_params)  # type: ignore[arg-type]
        self._params_dirty = False

    def _make_step_program(self, monitor: Any = None, sparse_row_id_fn: Any = None) -> Any:
        """A :class:`~mxkit.train.module.step_program.StepProgram` when this module can train
        through one (config ``module_step_program``), else None."""
        from mxkit.core import config
        from mxkit.train.module.step_program import StepProgram, step_program_blocker

        if not config.get("module_step_program"):
            return None
        if step_program_blocker(self, monitor, sparse_row_id_fn) is not None:
            return None
        return StepProgram(self)

    def install_monitor(self, mon: Any) -> None:
        """Install a monitor on every executor."""
        self._require(bound=True, what="install_monitor")
        assert self._exec_group is not None
        self._exec_group.install_monitor(mon)


__all__ = ["Module"]
