"""``FeedForward``: the seed's model API, trained by a data-parallel :class:`Module`.

::

    model = mx.model.FeedForward(ctx=[mx.cpu(0), mx.cpu(1)], symbol=network, num_epoch=100,
                                 learning_rate=0.01, momentum=0.9, wd=0.00001,
                                 initializer=mx.init.Xavier(factor_type="in", magnitude=2.34))
    model.fit(X=train_iter, eval_data=val_iter, kvstore="local",
              epoch_end_callback=mx.callback.do_checkpoint("model_"))
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from mxkit.core.errors import ConfigError, ShapeError


def _default_initializer() -> Any:
    from mxkit.train.initializer import Uniform

    return Uniform(0.01)


class FeedForward:
    """A feed-forward model with its parameters (MXNet 1.x's ``mx.model.FeedForward``).

    Parameters
    ----------
    symbol : Symbol
        The network (ending in a loss such as ``SoftmaxOutput``).
    ctx : Context or list of Context, optional
        Devices to train on (default ``cpu()``); a batch is split over them.
    num_epoch : int, optional
        Epochs ``fit`` trains.
    epoch_size : int, optional
        Batches per epoch (default: one pass over the data).
    optimizer : str or Optimizer
        Default ``'sgd'``.
    initializer : Initializer
        Default ``Uniform(0.01)``.
    numpy_batch_size : int
        Batch size when ``X`` is a numpy array.
    arg_params, aux_params : dict of str to NDArray, optional
        Starting parameters.
    allow_extra_params : bool
        Ignore parameters the symbol does not have.
    begin_epoch : int
        The first epoch's number.
    **kwargs
        Optimizer parameters (``learning_rate``, ``momentum``, ``wd``...).
    """

    def __init__(self, symbol: Any, ctx: Any = None, num_epoch: int | None = None, epoch_size: int | None = None,
                 optimizer: Any = "sgd", initializer: Any = None, numpy_batch_size: int = 128,
                 arg_params: dict | None = None, aux_params: dict | None = None, allow_extra_params: bool = False,
                 begin_epoch: int = 0, **kwargs: Any) -> None:
        from mxkit.core.context import Context, cpu

        if ctx is None:
            ctx = [cpu()]
        elif isinstance(ctx, Context):
            ctx = [ctx]
        self.symbol = symbol
        self.ctx = list(ctx)
        self.num_epoch = num_epoch
        self.epoch_size = epoch_size
        self.optimizer = optimizer
        self.initializer = initializer if initializer is not None else _default_initializer()
        self.numpy_batch_size = numpy_batch_size
        self.arg_params = arg_params
        self.aux_params = aux_params
        self.allow_extra_params = allow_extra_params
        self.begin_epoch = begin_epoch
        self.kwargs = dict(kwargs)
        self._pred_module: Any = None

    # -- data ---------------------------------------------------------------------------

    def _init_iter(self, X: Any, y: Any, is_train: bool) -> Any:
        """A DataIter over ``X`` (a DataIter, or arrays with labels ``y``)."""
        from mxkit.io import DataIter, NDArrayIter
        from mxkit.ndarray import NDArray

        if isinstance(X, np.ndarray | NDArray):
            if y is None:
                if is_train:
                    raise ConfigError("y must be given when X is an array (the labels of the samples)")
                y = np.zeros(X.shape[0], dtype=np.float32)
            if not isinstance(y, np.ndarray | NDArray):
                raise ConfigError(f"y must be an array when X is one, got {type(y).__name__}")
            if X.shape[0] != y.shape[0]:
                raise ShapeError(f"X has {X.shape[0]} samples but y has {y.shape[0]} labels; they must match")
            if y.ndim == 2 and y.shape[1] == 1:
                y = y.reshape(-1)
            if y.ndim != 1:
                raise ShapeError(f"labels must be 1-D (or 2-D with one column), got shape {tuple(y.shape)}")
            batch_size = min(X.shape[0], self.numpy_batch_size)
            if is_train:
                return NDArrayIter(X, y, batch_size, shuffle=True, last_batch_handle="roll_over")
            return NDArrayIter(X, y, batch_size, shuffle=False)
        if not isinstance(X, DataIter):
            raise ConfigError(f"X must be a DataIter, an NDArray or a numpy array, got {type(X).__name__}")
        return X

    def _init_eval_iter(self, eval_data: Any) -> Any:
        if eval_data is None:
            return None
        if isinstance(eval_data, list | tuple) and len(eval_data) == 2:
            data, label = eval_data
            if label is None:
                return self._init_iter(data, None, is_train=False)
            data = np.array(data) if isinstance(data, list) else data
            label = np.array(label) if isinstance(label, list) else label
            return self._init_iter(data, label, is_train=True)
        return self._init_iter(eval_data, None, is_train=False)

    def _module(self, data_iter: Any, logger: Any = logging, work_load_list: Any = None) -> Any:
        from mxkit.train.module import Module

        arguments = self.symbol.list_arguments()
        data_names = [desc[0] for desc in data_iter.provide_data]
        label_names = [desc[0] for desc in (data_iter.provide_label or []) if desc[0] in arguments]
        return Module(self.symbol, data_names=data_names, label_names=label_names, context=self.ctx,
                      logger=logger, work_load_list=work_load_list)

    # -- training -----------------------------------------------------------------------

    def fit(self, X: Any, y: Any = None, eval_data: Any = None, eval_metric: Any = "acc",
            epoch_end_callback: Any = None, batch_end_callback: Any = None, kvstore: Any = "local",
            logger: Any = None, work_load_list: Any = None, monitor: Any = None, eval_end_callback: Any = None,
            eval_batch_end_callback: Any = None) -> None:
        """Train (MXNet's ``FeedForward.fit``); parameters end in :attr:`arg_params` and :attr:`aux_params`.

        Parameters
        ----------
        X : DataIter or array
            Training data (with ``y`` when an array).
        y : array, optional
        eval_data : DataIter or (X, y), optional
            Validation data scored after every epoch.
        eval_metric : str or EvalMetric
        epoch_end_callback, batch_end_callback : callable or list
        kvstore : str or KVStore
            ``'local'``, ``'device'``, a store, or None.
        logger : logging.Logger, optional
        work_load_list : list of float, optional
        monitor : Monitor, optional
        eval_end_callback, eval_batch_end_callback : callable or list
        """
        from mxkit.io import ResizeIter

        if self.num_epoch is None:
            raise ConfigError("FeedForward.fit needs num_epoch; pass it to FeedForward(num_epoch=...)")
        data = self._init_iter(X, y, is_train=True)
        eval_iter = self._init_eval_iter(eval_data)
        if self.epoch_size is not None:
            data = ResizeIter(data, self.epoch_size, reset_internal=False)
        module = self._module(data, logger or logging, work_load_list)
        module.fit(data, eval_data=eval_iter, eval_metric=eval_metric, epoch_end_callback=epoch_end_callback,
                   batch_end_callback=batch_end_callback, kvstore=kvstore, optimizer=self.optimizer,
                   optimizer_params=self.kwargs, eval_end_callback=eval_end_callback,
                   eval_batch_end_callback=eval_batch_end_callback, initializer=self.initializer,
                   arg_params=self.arg_params, aux_params=self.aux_params, allow_missing=True,
                   begin_epoch=self.begin_epoch, num_epoch=self.num_epoch, monitor=monitor)
        self.arg_params, self.aux_params = module.get_params()
        self._pred_module = None

    # -- inference ----------------------------------------------------------------------

    def _predict_module(self, data_iter: Any) -> Any:
        if self.arg_params is None:
            raise ConfigError("the model has no parameters yet; call fit() or FeedForward.load() first")
        shapes = [tuple(d.shape) for d in data_iter.provide_data]
        cached = self._pred_module
        if cached is not None and cached[0] == shapes:
            return cached[1]
        module = self._module(data_iter)
        label_shapes = [d for d in (data_iter.provide_label or []) if d[0] in module.label_names] or None
        module.bind(data_shapes=data_iter.provide_data, label_shapes=label_shapes, for_training=False)
        module.set_params(self.arg_params, self.aux_params or {}, allow_missing=False,
                          allow_extra=self.allow_extra_params)
        self._pred_module = (shapes, module)
        return module

    def predict(self, X: Any, num_batch: int | None = None, return_data: bool = False, reset: bool = True) -> Any:
        """Outputs for ``X`` as numpy arrays (one array for a single output, else a list).

        With ``return_data``, returns ``(outputs, data, label)``.
        """
        data_iter = self._init_iter(X, None, is_train=False)
        if reset:
            data_iter.reset()
        module = self._predict_module(data_iter)
        outputs: list[list] = []
        data_list: list[list] = []
        label_list: list[list] = []
        for batch_outputs, _, batch in module.iter_predict(data_iter, num_batch=num_batch, reset=False):
            outputs.append([out.asnumpy() for out in batch_outputs])
            if return_data:
                real = batch.data[0].shape[0] - (batch.pad or 0)
                data_list.append([np.asarray(d)[:real] for d in batch.data])
                label_list.append([np.asarray(lbl)[:real] for lbl in batch.label or []])
        merged = [np.concatenate([o[i] for o in outputs]) for i in range(len(outputs[0]))] if outputs else []
        result = merged[0] if len(merged) == 1 else merged
        if return_data:
            data = [np.concatenate([d[i] for d in data_list]) for i in range(len(data_list[0]))]
            label = [np.concatenate([lbl[i] for lbl in label_list]) for i in range(len(label_list[0]))] \
                if label_list and label_list[0] else []
            return (result, data[0] if len(data) == 1 else data,
                    label[0] if len(label) == 1 else label)
        return result

    def score(self, X: Any, eval_metric: Any = "acc", num_batch: int | None = None, batch_end_callback: Any = None,
              reset: bool = True) -> float:
        """The value of ``eval_metric`` over ``X`` (a DataIter with labels)."""
        from mxkit.train.module.base_module import _create_metric

        data_iter = self._init_iter(X, None, is_train=False)
        metric = _create_metric(eval_metric)
        module = self._predict_module(data_iter)
        module.score(data_iter, metric, num_batch=num_batch, batch_end_callback=batch_end_callback, reset=reset)
        return metric.get()[1]

    # -- persistence --------------------------------------------------------------------

    def save(self, prefix: str, epoch: int | None = None) -> None:
        """Write a checkpoint (``prefix-symbol.json``, ``prefix-%04d.params``; epoch default ``num_epoch``)."""
        from mxkit.train.model.checkpoint import save_checkpoint

        if self.arg_params is None:
            raise ConfigError("the model has no parameters to save; call fit() first")
        if epoch is None:
            if self.num_epoch is None:
                raise ConfigError("save needs an epoch (the model has no num_epoch)")
            epoch = self.num_epoch
        save_checkpoint(prefix, epoch, self.symbol, self.arg_params, self.aux_params or {})

    @staticmethod
    def load(prefix: str, epoch: int, ctx: Any = None, **kwargs: Any) -> FeedForward:
        """A model from a checkpoint; training resumes at ``epoch``."""
        from mxkit.train.model.checkpoint import load_checkpoint

        symbol, arg_params, aux_params = load_checkpoint(prefix, epoch)
        return FeedForward(symbol, ctx=ctx, arg_params=arg_params, aux_params=aux_params, begin_epoch=epoch,
                           **kwargs)

    @staticmethod
    def create(symbol: Any, X: Any, y: Any = None, ctx: Any = None, num_epoch: int | None = None,
               epoch_size: int | None = None, optimizer: Any = "sgd", initializer: Any = None, eval_data: Any = None,
               eval_metric: Any = "acc", epoch_end_callback: Any = None, batch_end_callback: Any = None,
               kvstore: Any = "local", logger: Any = None, work_load_list: Any = None,
               eval_end_callback: Any = None, eval_batch_end_callback: Any = None, **kwargs: Any) -> FeedForward:
        """Make a model and ``fit`` it in one call."""
        model = FeedForward(symbol, ctx=ctx, num_epoch=num_epoch, epoch_size=epoch_size, optimizer=optimizer,
                            initializer=initializer, **kwargs)
        model.fit(X, y, eval_data=eval_data, eval_metric=eval_metric, epoch_end_callback=epoch_end_callback,
                  batch_end_callback=batch_end_callback, kvstore=kvstore, logger=logger,
                  work_load_list=work_load_list, eval_end_callback=eval_end_callback,
                  eval_batch_end_callback=eval_batch_end_callback)
        return model


__all__ = ["FeedForward"]
