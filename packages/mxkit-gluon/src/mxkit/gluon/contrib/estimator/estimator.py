"""``Estimator``: MXNet 1.x's high-level training loop over a Gluon net (``fit`` / ``evaluate``).

The loop itself only walks the data and calls event handlers; what happens per batch is a
:class:`BatchProcessor`'s, and updating, metrics, validation, logging and stopping are default
handlers that the user can replace with their own of the same kind.
"""

from __future__ import annotations

import copy
import logging
import sys
import warnings
from typing import Any

from mxkit.core.context import Context, cpu, gpu, num_gpus
from mxkit.gluon.contrib.estimator.batch_processor import BatchProcessor
from mxkit.gluon.contrib.estimator.errors import EstimatorError, UnavailableDeviceError
from mxkit.gluon.contrib.estimator.event_handler import (
    BatchBegin,
    BatchEnd,
    EpochBegin,
    EpochEnd,
    GradientUpdateHandler,
    LoggingHandler,
    MetricHandler,
    StoppingHandler,
    TrainBegin,
    TrainEnd,
    ValidationHandler,
    check_event_handlers,
)
from mxkit.gluon.contrib.estimator.metrics import check_handler_metrics, check_metrics, suggest_metric_for_loss
from mxkit.gluon.data import DataLoader
from mxkit.gluon.loss import Loss
from mxkit.gluon.parameter import DeferredInitializationError, GluonError
from mxkit.gluon.trainer import Trainer
from mxkit.train.metric import Loss as LossMetric


class Estimator:
    """Trains and evaluates ``net`` with ``loss``.

    Parameters
    ----------
    net : Block
        The network to train.
    loss : gluon.loss.Loss
        The training loss.
    train_metrics, val_metrics : EvalMetric or list of EvalMetric, optional
        Metrics updated during ``fit`` and ``evaluate``. Without ``train_metrics`` the loss's
        suggested metric (accuracy for softmax cross-entropy) and the mean loss are used; the
        validation metrics default to copies of the training ones. Names are prefixed
        ``"training "`` / ``"validation "``.
    initializer : Initializer, optional
        Used when ``net`` is not yet initialized (a warning when it already is).
    trainer : gluon.Trainer, optional
        Default: SGD with learning rate 0.001 over ``net.collect_params()``.
    context : Context or list of Context, optional
        Devices to split each batch across (default: gpu(0) if there is one, else cpu()).
    val_net, val_loss : optional
        A separate network and loss for ``evaluate`` (default: ``net`` and ``loss``).
    batch_processor : BatchProcessor, optional
        What runs one batch (anything with ``fit_batch`` and ``evaluate_batch``).
    """

    def __init__(self, net: Any, loss: Any, train_metrics: Any = None, val_metrics: Any = None, initializer: Any = None,
                 trainer: Any = None, context: Any = None, val_net: Any = None, val_loss: Any = None,
                 batch_processor: Any = None) -> None:
        self.net = net
        self.loss = self._check_loss(loss)
        self._train_metrics = check_metrics(train_metrics)
        self._val_metrics = check_metrics(val_metrics)
        self._add_default_training_metrics()
        self._add_validation_metrics()
        self.val_loss = self.loss if val_loss is None else self._check_loss(val_loss)
        self.val_net = self.net if val_net is None else val_net
        # a logger of its own (not registered globally), printing to the stdout of the time it is made
        self.logger = logging.Logger(name="Estimator", level=logging.INFO)
        self.logger.addHandler(logging.StreamHandler(sys.stdout))
        self.context = self._check_context(context)
        self._initialize(initializer)
        self.trainer = self._check_trainer(trainer)
        self.batch_processor = self._check_batch_processor(batch_processor)
        self.max_epoch: int | None = None
        self.max_batch: int | None = None
        self.batch_axis = 0

    @staticmethod
    def _check_loss(loss: Any) -> Loss:
        if not isinstance(loss, Loss):
            raise EstimatorError(f"loss must be a gluon.loss.Loss (e.g. gluon.loss.L2Loss()), got {loss!r}")
        return loss

    @staticmethod
    def _check_context(context: Any) -> list[Context]:
        gpus = [gpu(i) for i in range(num_gpus())]
        if not context:
            if len(gpus) > 1:
                warnings.warn("several GPUs are present and only gpu(0) is used; pass context=[mx.gpu(0), "
                              "mx.gpu(1), ...] to use them all", stacklevel=3)
            return [gpus[0]] if gpus else [cpu()]
        if isinstance(context, Context):
            context = [context]
        elif not (isinstance(context, list) and all(isinstance(c, Context) for c in context)):
            raise EstimatorError(f"context must be a Context or a list of Contexts, e.g. mx.cpu() or "
                                 f"[mx.gpu(0), mx.gpu(1)], got {context!r}")
        for ctx in context:
            if ctx.device_type != "cpu" and ctx not in gpus:
                available = ", ".join(["cpu()"] + [str(g) for g in gpus])
                raise UnavailableDeviceError(f"context {ctx} is not available in this process; use one of: {available}")
        return list(context)

    @staticmethod
    def _check_batch_processor(batch_processor: Any) -> Any:
        if batch_processor is None:
            return BatchProcessor()
        if not (callable(getattr(batch_processor, "fit_batch", None))
                and callable(getattr(batch_processor, "evaluate_batch", None))):
            raise EstimatorError("a batch processor must have fit_batch() and evaluate_batch() methods "
                                 f"(subclass gluon.contrib.estimator.BatchProcessor), got {batch_processor!r}")
        return batch_processor

    def _is_initialized(self) -> bool:
        for param in self.net.collect_params().values():
            try:
                param.list_ctx()
            except (GluonError, DeferredInitializationError, RuntimeError):
                return False
        return True

    def _initialize(self, initializer: Any) -> None:
        if not self._is_initialized():
            self.net.initialize(init=initializer, ctx=self.context)
        elif initializer is not None:
            warnings.warn("Network already fully initialized, skipping initialization; the initializer passed to "
                          "Estimator is not used (call net.initialize(init=..., force_reinit=True) to re-initialize)",
                          stacklevel=3)

    def _check_trainer(self, trainer: Any) -> Trainer:
        if trainer is None:
            warnings.warn("No trainer specified, default SGD optimizer with learning rate 0.001 is used.",
                          stacklevel=3)
            return Trainer(self.net.collect_params(), "sgd", {"learning_rate": 0.001})
        if not isinstance(trainer, Trainer):
            raise EstimatorError(f"trainer must be a gluon.Trainer, got {trainer!r}")
        return trainer

    def _add_default_training_metrics(self) -> None:
        if not self._train_metrics:
            suggested = suggest_metric_for_loss(self.loss)
            if suggested is not None:
                self._train_metrics = [suggested]
            self._train_metrics.append(LossMetric(self.loss.name.rstrip("1234567890")))
        for metric in self._train_metrics:
            metric.name = "training " + metric.name

    def _add_validation_metrics(self) -> None:
        if not self._val_metrics:
            self._val_metrics = [copy.deepcopy(metric) for metric in self._train_metrics]
        for metric in self._val_metrics:
            if "training" in metric.name:
                metric.name = metric.name.replace("training", "validation")
            else:
                metric.name = "validation " + metric.name

    @property
    def train_metrics(self) -> list[Any]:
        """The metrics updated by ``fit`` (names start with ``"training "``)."""
        return self._train_metrics

    @property
    def val_metrics(self) -> list[Any]:
        """The metrics updated by ``evaluate`` (names start with ``"validation "``)."""
        return self._val_metrics

    @staticmethod
    def _check_data(data: Any, what: str) -> None:
        if not isinstance(data, DataLoader):
            raise EstimatorError(f"Estimator takes {what} as a gluon.data.DataLoader, got {type(data).__name__}; "
                                 f"wrap arrays with gluon.data.DataLoader(gluon.data.ArrayDataset(data, label), "
                                 f"batch_size=...)")

    def evaluate(self, val_data: Any, batch_axis: int = 0, event_handlers: Any = None) -> None:
        """Run ``val_net`` over ``val_data`` once, updating :attr:`val_metrics`.

        Parameters
        ----------
        val_data : gluon.data.DataLoader
            Batches of ``(data, label)``.
        batch_axis : int
            The axis along which batches are split across devices.
        event_handlers : EventHandler or list, optional
            Handlers run around the pass (a MetricHandler and LoggingHandler are added).
        """
        self._check_data(val_data, "val_data")
        for metric in self.val_metrics:
            metric.reset()
        handlers = self._prepare_default_validation_handlers(event_handlers)
        _, epoch_begin, batch_begin, batch_end, epoch_end, _ = self._categorize_handlers(handlers)
        for handler in epoch_begin:
            handler.epoch_begin(self)
        for batch in val_data:
            for handler in batch_begin:
                handler.batch_begin(self, batch=batch)
            _, label, pred, loss = self.batch_processor.evaluate_batch(self, batch, batch_axis)
            for handler in batch_end:
                handler.batch_end(self, batch=batch, pred=pred, label=label, loss=loss)
        for handler in epoch_end:
            handler.epoch_end(self)

    def fit(self, train_data: Any, val_data: Any = None, epochs: int | None = None, event_handlers: Any = None,
            batches: int | None = None, batch_axis: int = 0) -> None:
        """Train for ``epochs`` epochs or ``batches`` batches (exactly one of them).

        Parameters
        ----------
        train_data, val_data : gluon.data.DataLoader
            Training batches, and validation batches evaluated after each epoch.
        epochs, batches : int
            How long to train.
        event_handlers : EventHandler or list, optional
            Extra handlers; defaults (stopping, gradient update, metrics, validation, logging)
            are added for the kinds not given.
        batch_axis : int
            The axis along which batches are split across devices.
        """
        self._check_data(train_data, "train_data")
        if val_data is not None:
            self._check_data(val_data, "val_data")
        if bool(epochs) == bool(batches):
            raise EstimatorError(f"fit trains either for a number of epochs or for a number of batches: pass exactly "
                                 f"one of epochs= and batches= (got epochs={epochs!r}, batches={batches!r})")
        self.max_epoch = epochs
        self.max_batch = batches
        self.batch_axis = batch_axis
        handlers = self._prepare_default_handlers(val_data, event_handlers)
        train_begin, epoch_begin, batch_begin, batch_end, epoch_end, train_end = self._categorize_handlers(handlers)
        for handler in train_begin:
            handler.train_begin(self)
        while True:
            for handler in epoch_begin:
                handler.epoch_begin(self)
            for batch in train_data:
                for handler in batch_begin:
                    handler.batch_begin(self, batch=batch)
                _, label, pred, loss = self.batch_processor.fit_batch(self, batch, batch_axis)
                # every handler sees the batch, even when an earlier one asks to stop
                stops = [handler.batch_end(self, batch=batch, pred=pred, label=label, loss=loss)
                         for handler in batch_end]
                if any(stops):
                    break
            stops = [handler.epoch_end(self) for handler in epoch_end]
            if any(stops):
                break
        for handler in train_end:
            handler.train_end(self)

    def _prepare_default_handlers(self, val_data: Any, event_handlers: Any) -> list[Any]:
        handlers = check_event_handlers(event_handlers)
        added: list[Any] = [StoppingHandler(self.max_epoch, self.max_batch)]
        if not any(isinstance(h, GradientUpdateHandler) for h in handlers):
            added.append(GradientUpdateHandler())
        if not any(isinstance(h, MetricHandler) for h in handlers):
            added.append(MetricHandler(metrics=self.train_metrics))
        if val_data is not None and not any(isinstance(h, ValidationHandler) for h in handlers):
            added.append(ValidationHandler(val_data=val_data, eval_fn=self.evaluate))
        if not any(isinstance(h, LoggingHandler) for h in handlers):
            added.append(LoggingHandler(metrics=self.train_metrics))
        if handlers and added:
            # the user's handlers now run beside default ones that update only the estimator's own
            # metrics: a handler watching another metric would read a value nothing updates
            known = self.train_metrics + self.val_metrics
            for handler in handlers:
                check_handler_metrics(handler, known)
        handlers.extend(added)
        handlers.sort(key=lambda h: getattr(h, "priority", 0))
        return handlers

    def _prepare_default_validation_handlers(self, event_handlers: Any) -> list[Any]:
        handlers = check_event_handlers(event_handlers)
        added: list[Any] = []
        if not any(isinstance(h, MetricHandler) for h in handlers):
            added.append(MetricHandler(metrics=self.val_metrics))
        if not any(isinstance(h, LoggingHandler) for h in handlers):
            added.append(LoggingHandler(metrics=self.val_metrics))
        if handlers and added:
            for handler in handlers:
                check_handler_metrics(handler, self.val_metrics)
        handlers.extend(added)
        handlers.sort(key=lambda h: getattr(h, "priority", 0))
        return handlers

    @staticmethod
    def _categorize_handlers(event_handlers: list[Any]) -> tuple[list, list, list, list, list, list]:
        """The handlers of each event, in order: train_begin, epoch_begin, batch_begin, batch_end,
        epoch_end, train_end."""
        kinds = (TrainBegin, EpochBegin, BatchBegin, BatchEnd, EpochEnd, TrainEnd)
        groups: tuple[list, ...] = tuple([] for _ in kinds)
        for handler in event_handlers:
            for kind, group in zip(kinds, groups, strict=True):
                if isinstance(handler, kind):
                    group.append(handler)
        return groups  # type: ignore[return-value]


__all__ = ["Estimator"]
