"""``BucketingModule``: one Module per bucket key (a sequence length), sharing parameters.

MXNet 1.x trains variable-length models this way: ``sym_gen(bucket_key)`` builds the
network unrolled to that length; the default bucket (the longest) is bound first, and each
other bucket is bound on demand with the default bucket's module as its ``shared_module``,
so every bucket reads and updates the same parameter and gradient arrays (and its executor
draws intermediate memory from the default one's). Batches say which bucket they need with
``bucket_key`` and their own ``provide_data``/``provide_label``.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Any

from mxkit.train.module.base_module import BaseModule, _check_input_names
from mxkit.train.module.executor_group import ModuleError, prepare_group2ctxs
from mxkit.train.module.module import Module, _contexts


class BucketingModule(BaseModule):
    """A module whose network depends on the batch's bucket key (MXNet's ``mx.mod.BucketingModule``).

    Parameters
    ----------
    sym_gen : callable
        ``sym_gen(bucket_key) -> (symbol, data_names, label_names)``.
    default_bucket_key : hashable
        The bucket bound first and whose parameters every other bucket shares (the largest).
    logger : logging.Logger
    context : Context or list of Context
    work_load_list : list of float, optional
    fixed_param_names : list of str, optional
        Parameters that are not trained.
    state_names : list of str, optional
        Inputs that are states.
    group2ctxs : dict or list of dict, optional
        Model parallelism, as for :class:`Module`.
    compression_params : dict, optional
        Gradient compression for the KVStore.
    """

    def __init__(self, sym_gen: Callable[[Any], tuple], default_bucket_key: Any = None, logger: Any = logging,
                 context: Any = None, work_load_list: Any = None, fixed_param_names: Any = None,
                 state_names: Any = None, group2ctxs: Any = None, compression_params: dict | None = None) -> None:
        super().__init__(logger=logger)
        if default_bucket_key is None:
            raise ModuleError("BucketingModule needs default_bucket_key, the bucket bound first (the largest)")
        self._default_bucket_key = default_bucket_key
        self._sym_gen = sym_gen
        symbol, data_names, label_names = self._call_sym_gen(default_bucket_key)
        self._fixed_param_names = list(fixed_param_names) if fixed_param_names is not None else []
        self._state_names = list(state_names) if state_names is not None else []
        _check_input_names(symbol, list(data_names or []), "data", True)
        _check_input_names(symbol, list(label_names or []), "label", False)
        _check_input_names(symbol, self._state_names, "state", True)
        _check_input_names(symbol, self._fixed_param_names, "fixed_param", True)
        self._default_param_names = self._param_names_of(symbol, data_names, label_names)
        self._compression_params = compression_params
        self._context = _contexts(context)
        self._work_load_list = work_load_list
        self._group2ctxs = prepare_group2ctxs(group2ctxs, len(self._context))
        self._buckets: dict[Any, Module] = {}
        self._curr_module: Module | None = None
        self._curr_bucket_key: Any = None
        self._params_dirty = False
        self._monitor: Any = None
        self._grad_req: Any = None
        self._arg_params: dict | None = None
        self._aux_params: dict | None = None

    @staticmethod
    def load(prefix: str, epoch: int, sym_gen: Callable[[Any], tuple] | None = None,
             default_bucket_key: Any = None, **kwargs: Any) -> BucketingModule:
        """A module with the parameters of ``prefix-%04d.params`` (from :meth:`save_checkpoint`).

        ``sym_gen`` and ``default_bucket_key`` are required (symbols are rebuilt, not read);
        ``kwargs`` go to the constructor. Bind it before use.
        """
        from mxkit.train.model.checkpoint import load_params

        if sym_gen is None or default_bucket_key is None:
            raise ModuleError("BucketingModule.load needs sym_gen and default_bucket_key to rebuild the buckets")
        module = BucketingModule(sym_gen, default_bucket_key=default_bucket_key, **kwargs)
        module._arg_params, module._aux_params = load_params(prefix, epoch)
        module.params_initialized = True
        return module

    def _call_sym_gen(self, bucket_key: Any) -> tuple[Any, list[str], list[str]]:
        from mxkit.symbol.name import NameManager

        # a fresh name manager per call, as MXNet's: an unnamed Embedding is embedding0 in
        # every bucket, so the buckets share its parameters
        with NameManager():
            result = self._sym_gen(bucket_key)
        if not isinstance(result, tuple) or len(result) != 3:
            raise ModuleError(f"sym_gen({bucket_key!r}) must return (symbol, data_names, label_names), got "
                              f"{type(result).__name__}")
        symbol, data_names, label_names = result
        return symbol, list(data_names or []), list(label_names or [])

    def _param_names_of(self, symbol: Any, data_names: Any, label_names: Any) -> list[str]:
        inputs = set(list(data_names or []) + list(label_names or []) + self._state_names)
        return [name for name in symbol.list_arguments() if name not in inputs]

    def _reset_bind(self) -> None:
        self.binded = False
        self._buckets = {}
        self._curr_module = None
        self._curr_bucket_key = None

    def _new_module(self, bucket_key: Any) -> Module:
        symbol, data_names, label_names = self._call_sym_gen(bucket_key)
        names = self._param_names_of(symbol, data_names, label_names)
        extra = [name for name in names if name not in self._default_param_names]
        if extra:
            raise ModuleError(f"bucket key {bucket_key!r}: sym_gen gives parameters {extra} that the default bucket "
                              f"{self._default_bucket_key!r} does not have ({self._default_param_names}); every "
                              f"bucket must use the default bucket's parameter names (make the default bucket "
                              f"the largest, and name layers the same in every bucket)")
        return Module(symbol, data_names, label_names, logger=self.logger, context=self._context,
                      work_load_list=self._work_load_list, fixed_param_names=self._fixed_param_names,
                      state_names=self._state_names, compression_params=self._compression_params,
                      group2ctxs=self._group2ctxs)

    # -- properties -----------------------------------------------------------------------

    @property
    def default_bucket_key(self) -> Any:
        """The default bucket's key."""
        return self._default_bucket_key

    @property
    def data_names(self) -> list[str]:
        """The current bucket's data names (the default bucket's before binding)."""
        if self.binded:
            return self._curr_module.data_names  # type: ignore[union-attr]
        return self._call_sym_gen(self._default_bucket_key)[1]

    @property
    def output_names(self) -> list[str]:
        """The current bucket's output names."""
        if self.binded:
            return self._curr_module.output_names  # type: ignore[union-attr]
        return self._call_sym_gen(self._default_bucket_key)[0].list_outputs()

    @property
    def data_shapes(self) -> list:
        self._require(bound=True, what="data_shapes")
        return self._curr_module.data_shapes  # type: ignore[union-attr]

    @property
    def label_shapes(self) -> list | None:
        self._require(bound=True, what="label_shapes")
        return self._curr_module.label_shapes  # type: ignore[union-attr]

    @property
    def output_shapes(self) -> list:
        self._require(bound=True, what="output_shapes")
        return self._curr_module.output_shapes  # type: ignore[union-attr]

    @property
    def symbol(self) -> Any:
        """The current bucket's symbol."""
        self._require(bound=True, what="symbol")
        return self._curr_module.symbol  # type: ignore[union-attr]

    # -- parameters -----------------------------------------------------------------------

    def get_params(self) -> tuple[dict, dict]:
        """``(arg_params, aux_params)`` shared by every bucket."""
        self._require(bound=True, initialized=True, what="get_params")
        module = self._curr_module
        assert module is not None
        module._params_dirty = module._params_dirty or self._params_dirty
        params = module.get_params()
        self._params_dirty = False
        return params

    def init_params(self, initializer: Any = None, arg_params: dict | None = None, aux_params: dict | None = None,
                    allow_missing: bool = False, force_init: bool = False, allow_extra: bool = False) -> None:
        """Initialise the (shared) parameters through the current bucket's module."""
        if self.params_initialized and not force_init:
            return
        self._require(bound=True, what="init_params")
        assert self._curr_module is not None
        self._curr_module.init_params(initializer=initializer, arg_params=arg_params, aux_params=aux_params,
                                      allow_missing=allow_missing, force_init=force_init, allow_extra=allow_extra)
        self._params_dirty = False
        self.params_initialized = True

    def set_params(self, arg_params: dict, aux_params: dict, allow_missing: bool = False, force_init: bool = True,
                   allow_extra: bool = False) -> None:
        """Set the shared parameters."""
        if not allow_missing:
            self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                             allow_missing=allow_missing, force_init=force_init, allow_extra=allow_extra)
            return
        if self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. set_params call ignored.",
                          stacklevel=2)
            return
        assert self._curr_module is not None
        self._curr_module.set_params(arg_params, aux_params, allow_missing=allow_missing, force_init=force_init,
                                     allow_extra=allow_extra)
        self._params_dirty = True
        self.params_initialized = True

    def get_states(self, merge_multi_context: bool = True) -> list:
        self._require(bound=True, initialized=True, what="get_states")
        return self._curr_module.get_states(merge_multi_context=merge_multi_context)  # type: ignore[union-attr]

    def set_states(self, states: Any = None, value: Any = None) -> None:
        self._require(bound=True, initialized=True, what="set_states")
        self._curr_module.set_states(states, value)  # type: ignore[union-attr]

    # -- binding ----------------------------------------------------------------------------

    def bind(self, data_shapes: Any, label_shapes: Any = None, for_training: bool = True,
             inputs_need_grad: bool = False, force_rebind: bool = False, shared_module: Any = None,
             grad_req: Any = "write") -> None:
        """Bind the default bucket for ``data_shapes`` (the iterator's ``provide_data``)."""
        if self.params_initialized:
            # keep parameters set before (loaded, or from an earlier binding) for the new executors
            arg_params, aux_params = self.get_params() if self.binded else (self._arg_params, self._aux_params)
        if force_rebind:
            self._reset_bind()
        if self.binded:
            self.logger.warning("Already bound, ignoring bind()")
            return
        if shared_module is not None:
            raise ModuleError("shared_module is not supported by BucketingModule (its buckets share among "
                              "themselves); pass shared_module=None")
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._grad_req = grad_req
        module = self._new_module(self._default_bucket_key)
        module.bind(data_shapes, label_shapes, for_training, inputs_need_grad, force_rebind=False,
                    shared_module=None, grad_req=grad_req)
        self.binded = True
        self._curr_module = module
        self._curr_bucket_key = self._default_bucket_key
        self._buckets[self._default_bucket_key] = module
        if self.params_initialized:
            self.set_params(arg_params, aux_params)

    def switch_bucket(self, bucket_key: Any, data_shapes: Any, label_shapes: Any = None) -> None:
        """Make ``bucket_key``'s module current, binding it (sharing the default bucket's) when new."""
        self._require(bound=True, what="switch_bucket")
        if bucket_key not in self._buckets:
            default = self._buckets[self._default_bucket_key]
            if not default.params_initialized:
                raise ModuleError(f"bucket {bucket_key!r} can be bound only after the parameters are initialised "
                                  f"(init_params), since it shares them with the default bucket")
            module = self._new_module(bucket_key)
            module.bind(data_shapes, label_shapes, self._curr_module.for_training,  # type: ignore[union-attr]
                        self._curr_module.inputs_need_grad, force_rebind=False,  # type: ignore[union-attr]
                        shared_module=default, grad_req=self._grad_req)
            self._check_shared_shapes(bucket_key, module, default)
            if self._monitor is not None:
                module.install_monitor(self._monitor)
            self._buckets[bucket_key] = module
        self._curr_module = self._buckets[bucket_key]
        self._curr_bucket_key = bucket_key

    def _check_shared_shapes(self, bucket_key: Any, module: Module, default: Module) -> None:
        # a parameter of another shape would get fresh arrays of its own and silently stop being shared
        mine = dict(zip(module._exec_group.param_names, module._exec_group.param_arrays))  # type: ignore[union-attr]
        theirs = dict(zip(default._exec_group.param_names, default._exec_group.param_arrays))  # type: ignore[union-attr]
        for name, blocks in mine.items():
            shape, wanted = tuple(blocks[0].shape), tuple(theirs[name][0].shape)
            if shape != wanted:
                raise ModuleError(f"bucket key {bucket_key!r}: parameter {name!r} has shape {shape}, but the default "
                                  f"bucket {self._default_bucket_key!r} has {wanted}; parameters must have one shape "
                                  f"in every bucket")

    # -- computation ------------------------------------------------------------------------

    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),), force_init: bool = False) -> None:
        """Create the optimizer on the current bucket and lend it to every other bucket."""
        self._require(bound=True, initialized=True, what="init_optimizer")
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring.")
            return
        assert self._curr_module is not None
        self._curr_module.init_optimizer(kvstore, optimizer, optimizer_params, force_init=force_init)
        for module in self._buckets.values():
            if module is not self._curr_module:
                module.borrow_optimizer(self._curr_module)
        self.optimizer_initialized = True

    def prepare(self, data_batch: Any, sparse_row_id_fn: Any = None) -> None:
        """Bind the batch's bucket ahead of time (the current bucket stays current)."""
        self._require(bound=True, initialized=True, what="prepare")
        original = self._curr_bucket_key
        self.switch_bucket(data_batch.bucket_key, data_batch.provide_data, data_batch.provide_label)
        self._curr_module.prepare(data_batch, sparse_row_id_fn=sparse_row_id_fn)  # type: ignore[union-attr]
        self.switch_bucket(original, None, None)

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Forward on the module of ``data_batch.bucket_key`` (the default bucket when it has none)."""
        self._require(bound=True, initialized=True, what="forward")
        key = getattr(data_batch, "bucket_key", None)
        key = self._default_bucket_key if key is None else key
        data_shapes = getattr(data_batch, "provide_data", None)
        label_shapes = getattr(data_batch, "provide_label", None)
        if key not in self._buckets and data_shapes is None:
            raise ModuleError(f"a batch for the new bucket {key!r} must carry provide_data (and provide_label) so "
                              f"that its module can be bound")
        self.switch_bucket(key, data_shapes, label_shapes)
        if self.optimizer_initialized and not self._curr_module.optimizer_initialized:  # type: ignore[union-attr]
            self._curr_module.borrow_optimizer(self._buckets[self._default_bucket_key])  # type: ignore[union-attr]
        self._curr_module.forward(data_batch, is_train=is_train)  # type: ignore[union-attr]

    def backward(self, out_grads: Any = None) -> None:
        """Backward on the current bucket."""
        self._require(bound=True, initialized=True, what="backward")
        self._curr_module.backward(out_grads=out_grads)  # type: ignore[union-attr]

    def update(self) -> None:
        """One optimizer step on the shared parameters, from the current bucket's gradients."""
        self._require(bound=True, initialized=True, optimizer=True, what="update")
        self._params_dirty = True
        self._curr_module.update()  # type: ignore[union-attr]

    def get_outputs(self, merge_multi_context: bool = True) -> list:
        self._require(bound=True, initialized=True, what="get_outputs")
        return self._curr_module.get_outputs(merge_multi_context=merge_multi_context)  # type: ignore[union-attr]

    def get_input_grads(self, merge_multi_context: bool = True) -> list:
        self._require(bound=True, initialized=True, what="get_input_grads")
        return self._curr_module.get_input_grads(merge_multi_context=merge_multi_context)  # type: ignore[union-attr]

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        self._require(bound=True, initialized=True, what="update_metric")
        self._curr_module.update_metric(eval_metric, labels, pre_sliced)  # type: ignore[union-attr]

    def _make_step_program(self, monitor: Any = None, sparse_row_id_fn: Any = None) -> Any:
        """A :class:`~mxkit.train.module.step_program.BucketingStepProgram` (config
        ``module_step_program``), or None when a monitor or sparse row ids need the general path."""
        from mxkit.core import config
        from mxkit.train.module.step_program import BucketingStepProgram

        if not config.get("module_step_program") or monitor is not None or self._monitor is not None \
                or sparse_row_id_fn is not None:
            return None
        return BucketingStepProgram(self)

    def install_monitor(self, mon: Any) -> None:
        self._require(bound=True, what="install_monitor")
        self._monitor = mon
        for module in self._buckets.values():
            module.install_monitor(mon)

    def save_checkpoint(self, prefix: str, epoch: int, remove_amp_cast: bool = False) -> None:
        """Write ``prefix-<key>-symbol.json`` per bound bucket, ``prefix.buckets`` and ``prefix-%04d.params``."""
        from mxkit.ndarray import array, save

        self._require(bound=True, initialized=True, what="save_checkpoint")
        for key in self._buckets:
            symbol, _, _ = self._call_sym_gen(key)
            symbol.save(f"{prefix}-{key}-symbol.json")
        save(f"{prefix}.buckets", array(list(self._buckets), dtype="int32"))
        self.save_params(f"{prefix}-{int(epoch):04d}.params")


__all__ = ["BucketingModule"]
