"""The optimizer side of a Module: creating it (``rescale_grad = 1/batch_size``), wiring the
KVStore (``update_on_kvstore`` as in MXNet 1.x), running updates and keeping its state."""

from __future__ import annotations

import warnings
from typing import Any

from mxkit.core.errors import FormatError
from mxkit.train.module.executor_group import ModuleError


class OptimizingMixin:
    """``init_optimizer``, ``update``, ``borrow_optimizer`` and the optimizer-state files of
    :class:`~mxkit.train.module.Module` (which provides the attributes used here)."""

    _context: list
    _exec_group: Any
    _arg_params: Any
    _params_dirty: bool
    _compression_params: Any
    _preload_opt_states: str | None
    _optimizer: Any
    _kvstore: Any
    _update_on_kvstore: bool
    _updater: Any
    optimizer_initialized: bool
    logger: Any


    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),), force_init: bool = False) -> None:
        """Create the optimizer (``rescale_grad = 1 / batch_size``, over every worker of a
        distributed store) and the KVStore, if any.

        Parameters
        ----------
        kvstore : str, KVStore or None
        optimizer : str or Optimizer
        optimizer_params : dict or pairs
            Parameters of a named optimizer (``learning_rate``, ``momentum``, ``wd``...).
        force_init : bool
            Replace an existing optimizer.
        """
        from mxkit.train import optimizer as opt
        from mxkit.train.model.kvstore_sync import _create_kvstore, _initialize_kvstore

        self._require(bound=True, initialized=True, what="init_optimizer")
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring...")
            return
        if self._params_dirty:
            self._sync_params_from_devices()
        assert self._exec_group is not None
        kvstore, update_on_kvstore = _create_kvstore(kvstore, len(self._context), self._arg_params)  # type: ignore[arg-type]
        batch_size = self._exec_group.batch_size
        if kvstore is not None and "dist" in str(getattr(kvstore, "type", "")):
            # every distributed type, not only dist_sync (MXNet 1.x scales only dist_sync): an
            # asynchronous server applies each worker's push on its own, so with 1/batch_size
            # N workers would take N full steps for each step of dist_sync, on stale weights,
            # and with momentum 0.9 that diverges (dist_ssp at lr 0.1 stayed at chance). With
            # 1/(batch_size*N) the N pushes of a round add up to one dist_sync step.
            batch_size *= kvstore.num_workers
        rescale_grad = 1.0 / batch_size
        param_names = self._exec_group.param_names
        if update_on_kvstore:
            idx2name = dict(enumerate(param_names))
        else:
            idx2name = {i * len(self._context) + k: name
                        for i, name in enumerate(param_names) for k in range(len(self._context))}
        if isinstance(optimizer, str):
            params = dict(optimizer_params)
            params.setdefault("rescale_grad", rescale_grad)
            optimizer = opt.create(optimizer, sym=self.symbol, param_idx2name=idx2name, **params)
        else:
            if not isinstance(optimizer, opt.Optimizer):
                raise ModuleError(f"optimizer must be a name such as 'sgd' or an mx.optimizer.Optimizer, got "
                                  f"{type(optimizer).__name__}")
            if getattr(optimizer, "rescale_grad", rescale_grad) != rescale_grad:
                warnings.warn(f"Optimizer created manually outside Module but rescale_grad is not normalized to "
                              f"1.0/batch_size/num_workers ({optimizer.rescale_grad} vs. {rescale_grad}). Is this "
                              f"intended?", stacklevel=2)
            if not getattr(optimizer, "idx2name", None):
                optimizer.idx2name = idx2name.copy()
        self._optimizer = optimizer
        self._kvstore = kvstore
        self._update_on_kvstore = update_on_kvstore
        self._updater = None
        if kvstore is not None:
            if self._compression_params:
                kvstore.set_gradient_compression(self._compression_params)
            if update_on_kvstore:
                kvstore.set_optimizer(self._optimizer)
            _initialize_kvstore(kvstore=kvstore, param_arrays=self._exec_group.param_arrays,
                                arg_params=self._arg_params, param_names=param_names,
                                update_on_kvstore=update_on_kvstore)
        if not update_on_kvstore:
            self._updater = opt.get_updater(optimizer)
        self.optimizer_initialized = True
        if self._preload_opt_states is not None:
            self.load_optimizer_states(self._preload_opt_states)
            self._preload_opt_states = None

    def borrow_optimizer(self, shared_module: Any) -> None:
        """Use ``shared_module``'s optimizer, store and updater."""
        if not shared_module.optimizer_initialized:
            raise ModuleError("borrow_optimizer needs a module whose optimizer is initialised")
        self._optimizer = shared_module._optimizer
        self._kvstore = shared_module._kvstore
        self._update_on_kvstore = shared_module._update_on_kvstore
        self._updater = shared_module._updater
        self.optimizer_initialized = True

    def save_optimizer_states(self, fname: str) -> None:
        """Write the optimizer's state (momentum...) to ``fname``."""
        self._require(optimizer=True, what="save_optimizer_states")
        if self._update_on_kvstore:
            self._kvstore.save_optimizer_states(fname)
        else:
            from mxkit.core.files import atomic_write

            atomic_write(fname, self._updater.get_states())  # the old states survive a failed write

    def load_optimizer_states(self, fname: str) -> None:
        """Restore the optimizer's state from ``fname``."""
        self._require(optimizer=True, what="load_optimizer_states")
        if self._update_on_kvstore:
            self._kvstore.load_optimizer_states(fname)
        else:
            with open(fname, "rb") as handle:
                data = handle.read()
            try:
                self._updater.set_states(data)
            except FormatError as exc:
                # written by a Module that updated on a KVStore (several devices): that store's format
                from mxkit.kvstore.updater import FORMAT_NAME, OptimizerUpdater

                if FORMAT_NAME not in str(exc):
                    raise
                reader = OptimizerUpdater(self._optimizer)
                reader.load_states(fname, like={})
                # the store keys states by parameter name; this updater by i * num_device + k
                names = list(self._exec_group.param_names)
                num_device = len(self._context)
                states = {}
                for key, state in reader.states.items():
                    if key not in names:
                        raise ModuleError(f"load_optimizer_states: {fname!r} has states for {key!r}, which is not "
                                          f"a parameter of this module ({', '.join(names)})") from None
                    for device in range(num_device):  # each device updates a state of its own
                        states[names.index(key) * num_device + device] = _copy_state(state) if device else state
                self._updater.states = states
                self._updater.states_synced = dict.fromkeys(states, False)

    def update(self) -> None:
        """Apply one optimizer step from the gradients of the last ``backward``."""
        from mxkit.train.model.kvstore_sync import _update_params, _update_params_on_kvstore

        self._require(bound=True, initialized=True, optimizer=True, what="update")
        assert self._exec_group is not None
        self._params_dirty = True
        if self._update_on_kvstore:
            _update_params_on_kvstore(self._exec_group.param_arrays, self._exec_group.grad_arrays, self._kvstore,
                                      self._exec_group.param_names)
        else:
            from mxkit.train.module.step_program import row_sparse_parameters

            _update_params(self._exec_group.param_arrays, self._exec_group.grad_arrays, updater=self._updater,
                           num_device=len(self._context), kvstore=self._kvstore,
                           param_names=self._exec_group.param_names,
                           row_sparse=row_sparse_parameters(self.symbol, self._exec_group.param_names))


def _copy_state(state: Any) -> Any:
    """A copy of an optimizer state (None, an NDArray, or tuples and lists of them)."""
    if isinstance(state, (tuple, list)):
        return type(state)(_copy_state(item) for item in state)
    return state.copy() if hasattr(state, "copy") else state


__all__ = ["OptimizingMixin"]

