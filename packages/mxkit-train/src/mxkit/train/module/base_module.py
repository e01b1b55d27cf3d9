"""``BaseModule``: the training loop (``fit``), evaluation (``score``) and inference
(``predict``, ``iter_predict``) of MXNet 1.x, written against the abstract module API
(``bind``, ``init_params``, ``init_optimizer``, ``forward``, ``backward``, ``update``...)."""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
from mxkit.train.module.executor_group import ModuleError


def _as_list(obj: Any) -> list:
    return list(obj) if isinstance(obj, list | tuple) else [obj]


def _check_input_names(symbol: Any, names: list[str], typename: str, throw: bool) -> None:
    """Every name of ``names`` must be an argument of ``symbol``; say which ones look right if not."""
    args = symbol.list_arguments()
    for name in names:
        if name in args:
            continue
        candidates = [arg for arg in args if not arg.endswith(("_weight", "_bias", "_gamma", "_beta"))]
        message = (f"you created a Module with {typename}_names={names!r}, but the symbol has no argument "
                   f"{name!r}; its input-like arguments are: {', '.join(candidates) or 'none'}")
        if throw:
            raise ModuleError(message)
        warnings.warn(message, stacklevel=3)


def _check_names_match(data_names: list[str], data_shapes: list[Any], name: str, throw: bool) -> None:
    actual = [desc[0] for desc in data_shapes]
    if sorted(data_names) != sorted(actual):
        message = (f"the {name} shapes given ({data_shapes}) name {actual}, but the module's {name}_names are "
                   f"{data_names}")
        if throw:
            raise ModuleError(message)
        warnings.warn(message, stacklevel=3)


def _parse_data_desc(data_names: list[str], label_names: list[str], data_shapes: Any,
                     label_shapes: Any) -> tuple[list, list | None]:
    """``DataDesc`` lists from ``(name, shape)`` pairs or ``DataDesc``s, checked against the names."""
    from mxkit.io import DataDesc

    data_shapes = [x if isinstance(x, DataDesc) else DataDesc(*x) for x in data_shapes]
    _check_names_match(data_names, data_shapes, "data", True)
    if label_shapes is not None:
        label_shapes = [x if isinstance(x, DataDesc) else DataDesc(*x) for x in label_shapes]
        _check_names_match(label_names, label_shapes, "label", False)
    else:
        _check_names_match(label_names, [], "label", False)
    return data_shapes, label_shapes


def _create_metric(eval_metric: Any) -> Any:
    from mxkit.train import metric

    if isinstance(eval_metric, metric.EvalMetric):
        return eval_metric
    return metric.create(eval_metric)


def _default_initializer() -> Any:
    from mxkit.train.initializer import Uniform

    return Uniform(0.01)


def _call_all(callbacks: Any, *args: Any) -> None:
    if callbacks is None:
        return
    for callback in _as_list(callbacks):
        callback(*args)


def _stop_requested(*callbacks: Any) -> bool:
    """Whether a callback (``mx.callback.EarlyStopping``) set its ``stop_training`` flag."""
    return any(getattr(cb, "stop_training", False) is True
               for group in callbacks if group is not None for cb in _as_list(group))


def _global_name_value(eval_metric: Any) -> list:
    getter = getattr(eval_metric, "get_global_name_value", None) or eval_metric.get_name_value
    return getter()


class BaseModule:
    """The module API of MXNet 1.x; :class:`~mxkit.train.module.Module` implements it.

    A module is created, then bound (``bind``: memory for the input shapes), initialised
    (``init_params``) and given an optimizer (``init_optimizer``); ``fit`` does all of it.
    """

    def __init__(self, logger: logging.Logger | Any = logging) -> None:
        self.logger = logger
        self.binded = False
        self.for_training = False
        self.inputs_need_grad = False
        self.params_initialized = False
        self.optimizer_initialized = False
        self._symbol: Any = None
        self._total_exec_bytes = 0

    # -- high-level API -----------------------------------------------------------------

    def forward_backward(self, data_batch: Any) -> None:
        """``forward(is_train=True)`` then ``backward()``."""
        self.forward(data_batch, is_train=True)
        self.backward()

    def score(self, eval_data: Any, eval_metric: Any, num_batch: int | None = None, batch_end_callback: Any = None,
              score_end_callback: Any = None, reset: bool = True, epoch: int = 0,
              sparse_row_id_fn: Any = None) -> list[tuple[str, float]]:
        """Evaluate ``eval_metric`` over ``eval_data``; ``[(name, value), ...]``."""
        from mxkit.train.model import BatchEndParam

        self._require(bound=True, initialized=True, what="score")
        if reset:
            eval_data.reset()
        eval_metric = _create_metric(eval_metric)
        eval_metric.reset()
        actual_num_batch = 0
        for nbatch, eval_batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(eval_batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(eval_batch, is_train=False)
            if isinstance(eval_batch, list):
                self.update_metric(eval_metric, [eb.label for eb in eval_batch], pre_sliced=True)
            else:
                self.update_metric(eval_metric, eval_batch.label)
            _call_all(batch_end_callback, BatchEndParam(epoch, nbatch, eval_metric, locals()))
            actual_num_batch += 1
        _call_all(score_end_callback, BatchEndParam(epoch, actual_num_batch, eval_metric, locals()))
        return eval_metric.get_name_value()

    def iter_predict(self, eval_data: Any, num_batch: int | None = None, reset: bool = True,
                     sparse_row_id_fn: Any = None) -> Iterator[tuple[list, int, Any]]:
        """Yield ``(outputs, nbatch, batch)`` per batch, padding removed from the outputs."""
        self._require(bound=True, initialized=True, what="iter_predict")
        if reset:
            eval_data.reset()
        for nbatch, eval_batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(eval_batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(eval_batch, is_train=False)
            pad = eval_batch.pad or 0
            outputs = [out[0:out.shape[0] - pad] for out in self.get_outputs()]
            yield outputs, nbatch, eval_batch

    def predict(self, eval_data: Any, num_batch: int | None = None, merge_batches: bool = True, reset: bool = True,
                always_output_list: bool = False, sparse_row_id_fn: Any = None) -> Any:
        """Run the model over ``eval_data`` (an iterator, an NDArray or a numpy array) and collect outputs.

        Returns
        -------
        NDArray or list
            One array per output (a single array for one output unless ``always_output_list``),
            batches concatenated unless ``merge_batches=False``.
        """
        from mxkit.io import DataBatch
        from mxkit.ndarray import NDArray, array, concatenate

        self._require(bound=True, initialized=True, what="predict")
        if isinstance(eval_data, NDArray | np.ndarray):
            data = array(eval_data) if isinstance(eval_data, np.ndarray) else eval_data
            self.forward(DataBatch([data]), is_train=False)
            return self.get_outputs()[0]
        output_list = [[out.copy() for out in outputs]
                       for outputs, _, _ in self.iter_predict(eval_data, num_batch, reset, sparse_row_id_fn)]
        if not output_list:
            return output_list
        if not merge_batches:
            return output_list
        num_outputs = len(output_list[0])
        for outputs in output_list:
            if len(outputs) != num_outputs:
                raise ModuleError("cannot merge batches: the number of outputs differs between mini-batches; "
                                  "call predict with merge_batches=False")
        merged = [concatenate([outputs[i] for outputs in output_list]) for i in range(num_outputs)]
        if num_outputs == 1 and not always_output_list:
            return merged[0]
        return merged

    def fit(self, train_data: Any, eval_data: Any = None, eval_metric: Any = "acc", epoch_end_callback: Any = None,
            batch_end_callback: Any = None, kvstore: Any = "local", optimizer: Any = "sgd",
            optimizer_params: Any = (("learning_rate", 0.01),), eval_end_callback: Any = None,
            eval_batch_end_callback: Any = None, initializer: Any = None, arg_params: dict | None = None,
            aux_params: dict | None = None, allow_missing: bool = False, force_rebind: bool = False,
            force_init: bool = False, begin_epoch: int = 0, num_epoch: int | None = None,
            validation_metric: Any = None, monitor: Any = None, sparse_row_id_fn: Any = None) -> None:
        """Train on ``train_data`` for epochs ``begin_epoch .. num_epoch - 1`` (MXNet's ``Module.fit``).

        Parameters
        ----------
        train_data : DataIter
        eval_data : DataIter, optional
            Scored with ``validation_metric`` after every epoch.
        eval_metric : str or EvalMetric
            Training metric (default ``'acc'``).
        epoch_end_callback : callable or list
            Called as ``cb(epoch, symbol, arg_params, aux_params)`` (``mx.callback.do_checkpoint``).
        batch_end_callback : callable or list
            Called with a ``BatchEndParam`` after every batch (``mx.callback.Speedometer``).
        kvstore : str or KVStore
            How devices agree (``'local'``, ``'device'``, a store, or None).
        optimizer, optimizer_params
            An optimizer name and its parameters, or an Optimizer.
        eval_end_callback, eval_batch_end_callback : callable or list
            Called by ``score`` on ``eval_data``.
        initializer : Initializer
            For parameters not in ``arg_params`` (default ``Uniform(0.01)``).
        arg_params, aux_params : dict, optional
            Starting parameters.
        allow_missing : bool
            Let ``arg_params`` lack some parameters (initialised by ``initializer``).
        force_rebind, force_init : bool
            Bind and initialise again even if done before.
        begin_epoch, num_epoch : int
            The epochs to run; ``num_epoch`` is required.
        validation_metric : str or EvalMetric, optional
            Metric on ``eval_data`` (default: ``eval_metric``).
        monitor : Monitor, optional
            Installed on the executors; ``tic``/``toc_print`` around every batch.

        Training ends early, after an epoch, when a callback has set ``stop_training``
        (``mx.callback.EarlyStopping`` as ``eval_end_callback``).
        """
        from mxkit.train.model import BatchEndParam

        if num_epoch is None:
            raise ModuleError("fit needs num_epoch, the number of epochs to train (e.g. num_epoch=10)")
        if initializer is None:
            initializer = _default_initializer()
        self.bind(data_shapes=train_data.provide_data, label_shapes=train_data.provide_label, for_training=True,
                  force_rebind=force_rebind)
        if monitor is not None:
            self.install_monitor(monitor)
        self.init_params(initializer=initializer, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init)
        self.init_optimizer(kvstore=kvstore, optimizer=optimizer, optimizer_params=optimizer_params)
        if validation_metric is None:
            validation_metric = eval_metric
        eval_metric = _create_metric(eval_metric)
        # one device, nothing per-step to observe: each batch replays a step prepared once
        program = self._make_step_program(monitor, sparse_row_id_fn)

        for epoch in range(begin_epoch, num_epoch):
            tic = time.time()
            eval_metric.reset()
            nbatch = 0
            data_iter = iter(train_data)
            end_of_batch = False
            try:
                next_data_batch = next(data_iter)
            except StopIteration:
                raise ModuleError(f"train_data gave no batch in epoch {epoch}; it must yield at least one batch "
                                  f"per epoch (did its reset() restart it?)") from None
            eval_name_vals: list = []
            while not end_of_batch:
                data_batch = next_data_batch
                if monitor is not None:
                    monitor.tic()
                if program is None or not program.run(data_batch, eval_metric):
                    self.forward_backward(data_batch)
                    self.update()
                    if isinstance(data_batch, list):
                        self.update_metric(eval_metric, [db.label for db in data_batch], pre_sliced=True)
                    else:
                        self.update_metric(eval_metric, data_batch.label)
                try:
                    next_data_batch = next(data_iter)
                    self.prepare(next_data_batch, sparse_row_id_fn=sparse_row_id_fn)
                except StopIteration:
                    end_of_batch = True
                if monitor is not None:
                    monitor.toc_print()
                if end_of_batch:
                    eval_name_vals = _global_name_value(eval_metric)
                _call_all(batch_end_callback, BatchEndParam(epoch, nbatch, eval_metric, locals()))
                nbatch += 1

            kvstore = getattr(self, "_kvstore", None)
            if kvstore is not None and "dist" in str(getattr(kvstore, "type", "")):
                # every worker ends its epoch here, so a worker with fewer batches than the others
                # excuses itself from their last rounds instead of leaving them waiting (MXNet #7888)
                kvstore.barrier()
            for name, val in eval_name_vals:
                self.logger.info("Epoch[%d] Train-%s=%f", epoch, name, val)
            self.logger.info("Epoch[%d] Time cost=%.3f", epoch, time.time() - tic)

            # sync the devices' parameters into the module's copies (and back, as MXNet does)
            arg_params_now, aux_params_now = self.get_params()
            self.set_params(arg_params_now, aux_params_now)
            _call_all(epoch_end_callback, epoch, self.symbol, arg_params_now, aux_params_now)

            if eval_data is not None:
                res = self.score(eval_data, validation_metric, score_end_callback=eval_end_callback,
                                 batch_end_callback=eval_batch_end_callback, epoch=epoch)
                for name, val in res:
                    self.logger.info("Epoch[%d] Validation-%s=%f", epoch, name, val)
            train_data.reset()
            if _stop_requested(epoch_end_callback, batch_end_callback, eval_end_callback):
                self.logger.info("Epoch[%d] a callback asked to stop training", epoch)
                break

    def _make_step_program(self, monitor: Any = None, sparse_row_id_fn: Any = None) -> Any:
        """The prepared step ``fit`` replays (anything with ``run(batch, metric) -> bool``), or
        None for the general path; modules that can prepare one override this."""
        return None

    # -- parameters ---------------------------------------------------------------------

    def set_params(self, arg_params: dict, aux_params: dict, allow_missing: bool = False, force_init: bool = True,
                   allow_extra: bool = False) -> None:
        """Set parameters from dictionaries (see ``init_params``)."""
        self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init, allow_extra=allow_extra)

    def save_params(self, fname: str) -> None:
        """Save parameters as an MXNet ``.params`` file (``arg:``/``aux:`` names)."""
        from mxkit.core.context import cpu
        from mxkit.ndarray import save

        arg_params, aux_params = self.get_params()
        arrays = {f"arg:{k}": v.as_in_context(cpu()) for k, v in arg_params.items()}
        arrays.update({f"aux:{k}": v.as_in_context(cpu()) for k, v in aux_params.items()})
        save(fname, arrays)

    def load_params(self, fname: str) -> None:
        """Load parameters from an MXNet ``.params`` file."""
        from mxkit.ndarray import load
        from mxkit.train.model.checkpoint import CheckpointError

        try:
            saved = load(fname)
        except FileNotFoundError:
            raise CheckpointError(f"parameter file {fname!r} does not exist") from None
        arg_params, aux_params = {}, {}
        for key, value in saved.items():
            kind, _, name = key.partition(":")
            if kind == "arg":
                arg_params[name] = value
            elif kind == "aux":
                aux_params[name] = value
            else:
                raise CheckpointError(f"{fname!r} has the key {key!r}; expected 'arg:<name>' or 'aux:<name>'")
        self.set_params(arg_params, aux_params)

    # -- what a module implements (MXNet's abstract API) ---------------------------------

    def bind(self, data_shapes: Any, label_shapes: Any = None, for_training: bool = True,
             inputs_need_grad: bool = False, force_rebind: bool = False, shared_module: Any = None,
             grad_req: Any = "write") -> None:
        """Allocate executors for the input shapes."""
        raise NotImplementedError

    def init_params(self, initializer: Any = None, arg_params: dict | None = None, aux_params: dict | None = None,
                    allow_missing: bool = False, force_init: bool = False, allow_extra: bool = False) -> None:
        """Initialise the parameters."""
        raise NotImplementedError

    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),), force_init: bool = False) -> None:
        """Create the optimizer (and the KVStore)."""
        raise NotImplementedError

    def get_params(self) -> tuple[dict, dict]:
        """``(arg_params, aux_params)``."""
        raise NotImplementedError

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Forward computation."""
        raise NotImplementedError

    def backward(self, out_grads: Any = None) -> None:
        """Backward computation."""
        raise NotImplementedError

    def update(self) -> None:
        """One optimizer step."""
        raise NotImplementedError

    def get_outputs(self, merge_multi_context: bool = True) -> list:
        """Outputs of the last forward."""
        raise NotImplementedError

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        """Update a metric with the last outputs."""
        raise NotImplementedError

    # -- helpers ------------------------------------------------------------------------

    def prepare(self, data_batch: Any, sparse_row_id_fn: Any = None) -> None:
        """Prepare for the next batch (nothing for dense parameters)."""

    def install_monitor(self, mon: Any) -> None:
        """Install a monitor on the executors."""
        raise NotImplementedError

    def _require(self, bound: bool = False, initialized: bool = False, optimizer: bool = False,
                 what: str = "this call") -> None:
        if bound and not self.binded:
            raise ModuleError(f"{what} needs a bound module; call bind(data_shapes, label_shapes) first "
                              f"(fit does it)")
        if initialized and not self.params_initialized:
            raise ModuleError(f"{what} needs initialised parameters; call init_params() or set_params() first")
        if optimizer and not self.optimizer_initialized:
            raise ModuleError(f"{what} needs an optimizer; call init_optimizer() first")

    @property
    def symbol(self) -> Any:
        """The module's symbol."""
        return self._symbol


__all__ = ["BaseModule"]
