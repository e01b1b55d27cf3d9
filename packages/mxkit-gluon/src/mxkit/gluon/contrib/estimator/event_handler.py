"""The Estimator's event handlers (MXNet 1.x's ``gluon.contrib.estimator.event_handler``).

A handler subclasses one or more of the six event mixins (:class:`TrainBegin`,
:class:`EpochBegin`, :class:`BatchBegin`, :class:`BatchEnd`, :class:`EpochEnd`,
:class:`TrainEnd`); the Estimator calls the matching methods, in the order of each handler's
``priority`` (lower first). A ``batch_end`` that returns True ends the epoch (the epoch-end
handlers still run); an ``epoch_end`` that returns True ends training, as in MXNet.
"""

from __future__ import annotations

import math
import operator
import os
import time
import warnings
from typing import Any

from mxkit.gluon.contrib.estimator.errors import EstimatorError
from mxkit.gluon.contrib.estimator.metrics import check_metrics
from mxkit.train.metric import CompositeEvalMetric, EvalMetric
from mxkit.train.metric import Loss as LossMetric


class EventHandler:
    """The base of every event handler."""


def check_event_handlers(handlers: Any) -> list[EventHandler]:
    """``handlers`` as a new list: one handler, a list of them, or None (empty)."""
    if isinstance(handlers, EventHandler):
        return [handlers]
    handlers = list(handlers or [])
    wrong = [h for h in handlers if not isinstance(h, EventHandler)]
    if wrong:
        raise EstimatorError(f"event handlers must be EventHandler objects (subclasses of TrainBegin, BatchEnd, ...), "
                             f"got {wrong[0]!r}")
    return handlers


class TrainBegin(EventHandler):
    """Called once when ``fit`` starts."""

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        """Runs before the first epoch."""


class TrainEnd(EventHandler):
    """Called once when ``fit`` ends."""

    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        """Runs after the last epoch."""


class EpochBegin(EventHandler):
    """Called at the start of each epoch (and of each ``evaluate``)."""

    def epoch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        """Runs before the epoch's first batch."""


class EpochEnd(EventHandler):
    """Called at the end of each epoch (and of each ``evaluate``)."""

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        """Runs after the epoch's last batch; True stops training."""
        return False


class BatchBegin(EventHandler):
    """Called before each batch."""

    def batch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        """Runs before the batch (``batch=`` is passed)."""


class BatchEnd(EventHandler):
    """Called after each batch with ``batch``, ``pred``, ``label`` and ``loss`` keywords."""

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        """Runs after the batch; True ends the epoch."""
        return False


class StoppingHandler(TrainBegin, BatchEnd, EpochEnd):
    """Stops training after ``estimator.max_epoch`` epochs or ``estimator.max_batch`` batches."""

    def __init__(self, max_epoch: int | None = None, max_batch: int | None = None) -> None:
        self.max_epoch = max_epoch
        self.max_batch = max_batch
        self.current_batch = 0
        self.current_epoch = 0
        self.stop_training = False

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.max_epoch = estimator.max_epoch
        self.max_batch = estimator.max_batch
        self.current_batch = 0
        self.current_epoch = 0
        self.stop_training = False

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        self.current_batch += 1
        if self.current_batch == self.max_batch:
            self.stop_training = True
        return self.stop_training

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        self.current_epoch += 1
        if self.current_epoch == self.max_epoch:
            self.stop_training = True
        return self.stop_training


class MetricHandler(EpochBegin, BatchEnd):
    """Resets ``metrics`` at each epoch and updates them after each batch (a ``Loss`` metric with the loss)."""

    def __init__(self, metrics: Any, priority: float = -1000) -> None:
        self.metrics = check_metrics(metrics)
        self.priority = priority

    def epoch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        for metric in self.metrics:
            metric.reset()

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        for metric in self.metrics:
            if isinstance(metric, LossMetric):
                metric.update(0, kwargs["loss"])
            else:
                metric.update(kwargs["label"], kwargs["pred"])
        return False


class ValidationHandler(TrainBegin, BatchEnd, EpochEnd):
    """Runs ``eval_fn(val_data=..., batch_axis=..., event_handlers=...)`` every ``epoch_period``
    epochs and/or every ``batch_period`` batches."""

    def __init__(self, val_data: Any, eval_fn: Any, epoch_period: int | None = 1, batch_period: int | None = None,
                 priority: float = -1000, event_handlers: Any = None) -> None:
        if not callable(eval_fn):
            raise EstimatorError(f"ValidationHandler: eval_fn must be callable (e.g. estimator.evaluate), "
                                 f"got {eval_fn!r}")
        self.val_data = val_data
        self.eval_fn = eval_fn
        self.epoch_period = epoch_period
        self.batch_period = batch_period
        self.current_batch = 0
        self.current_epoch = 0
        self.priority = priority
        self.event_handlers = event_handlers

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.current_batch = 0
        self.current_epoch = 0

    def _evaluate(self, estimator: Any) -> None:
        self.eval_fn(val_data=self.val_data, batch_axis=estimator.batch_axis, event_handlers=self.event_handlers)

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        self.current_batch += 1
        if self.batch_period and self.current_batch % self.batch_period == 0:
            self._evaluate(estimator)
        return False

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        self.current_epoch += 1
        if self.epoch_period and self.current_epoch % self.epoch_period == 0:
            self._evaluate(estimator)
        return False


def _metrics_text(metrics: list[EvalMetric]) -> str:
    parts = []
    for metric in metrics:
        names, values = metric.get()
        if isinstance(names, str):
            names, values = [names], [values]
        parts.extend(f"{n}: {v:.4f}" for n, v in zip(names, values, strict=True))
    return ", ".join(parts)


class LoggingHandler(TrainBegin, TrainEnd, EpochBegin, EpochEnd, BatchBegin, BatchEnd):
    """Logs progress through ``estimator.logger``: at each epoch (``log_interval="epoch"``) or
    also every ``log_interval`` batches (an int), with the values of ``metrics``."""

    def __init__(self, log_interval: int | str = "epoch", metrics: Any = None, priority: float = math.inf) -> None:
        if isinstance(log_interval, bool) or not (isinstance(log_interval, int) or log_interval == "epoch"):
            raise EstimatorError(f"LoggingHandler: log_interval must be a positive integer or 'epoch', "
                                 f"got {log_interval!r}")
        if isinstance(log_interval, int) and log_interval < 1:
            raise EstimatorError(f"LoggingHandler: log_interval must be at least 1 batch, got {log_interval}")
        self.metrics = check_metrics(metrics)
        self.log_interval = log_interval
        self.priority = priority
        self.batch_index = 0
        self.current_epoch = 0
        self.processed_samples = 0
        self.log_interval_time = 0.0
        self.train_start = self.epoch_start = self.batch_start = time.time()

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.train_start = time.time()
        trainer = estimator.trainer
        estimator.logger.info("Training begin: using optimizer %s with current learning rate %.4f ",
                              type(trainer.optimizer).__name__, trainer.learning_rate)
        if estimator.max_epoch:
            estimator.logger.info("Train for %d epochs.", estimator.max_epoch)
        else:
            estimator.logger.info("Train for %d batches.", estimator.max_batch)
        self.current_epoch = 0
        self.batch_index = 0
        self.processed_samples = 0
        self.log_interval_time = 0.0

    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        seconds = time.time() - self.train_start
        text = _metrics_text(self.metrics)
        estimator.logger.info("Train finished using total %ds with %d epochs. %s", seconds, self.current_epoch, text)

    def batch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(self.log_interval, int):
            self.batch_start = time.time()

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        if isinstance(self.log_interval, int):
            self.log_interval_time += time.time() - self.batch_start
            self.processed_samples += _batch_size(kwargs["batch"], getattr(estimator, "batch_axis", 0))
            if self.batch_index % self.log_interval == 0:
                message = (f"[Epoch {self.current_epoch}][Batch {self.batch_index}][Samples {self.processed_samples}] "
                           f"time/interval: {self.log_interval_time:.3f}s {_metrics_text(self.metrics)}")
                self.log_interval_time = 0.0
                estimator.logger.info(message.rstrip())
        self.batch_index += 1
        return False

    def epoch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.epoch_start = time.time()
        if any("training" in metric.name for metric in self.metrics):
            estimator.logger.info("[Epoch %d] Begin, current learning rate: %.4f",
                                  self.current_epoch, estimator.trainer.learning_rate)
        else:
            estimator.logger.info("Validation Begin")

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        seconds = time.time() - self.epoch_start
        estimator.logger.info(f"[Epoch {self.current_epoch}] Finished in {seconds:.3f}s, "
                              f"{_metrics_text(self.metrics)}".rstrip(", "))
        self.current_epoch += 1
        self.batch_index = 0
        return False


def _batch_size(batch: Any, batch_axis: int) -> int:
    data = batch[0] if isinstance(batch, (list, tuple)) else batch
    return int(data.shape[batch_axis])


def _comparison(mode: str, monitor: EvalMetric, owner: str) -> Any:
    """np.greater or np.less for ``mode``; "auto" picks greater for accuracy and F1, else less."""
    if mode not in ("auto", "min", "max"):
        warnings.warn(f"{owner}: mode {mode!r} is unknown, using 'auto' (greater for accuracy and F1, "
                      f"less otherwise); pass 'min' or 'max'", RuntimeWarning, stacklevel=3)
        mode = "auto"
    if mode == "auto":
        name = str(monitor.get()[0]).lower()
        mode = "max" if ("acc" in name or "f1" in name) else "min"
    return operator.gt if mode == "max" else operator.lt


class CheckpointHandler(TrainBegin, BatchEnd, EpochEnd):
    """Saves ``net.save_parameters`` and ``trainer.save_states`` files as
    ``{model_prefix}-epoch{E}batch{B}.params`` / ``.states`` every ``epoch_period`` epochs or
    ``batch_period`` batches, keeping the last ``max_checkpoints``; with ``save_best`` also
    ``{model_prefix}-best.*`` whenever ``monitor`` improves; a hybridized net's graph goes to
    ``{model_prefix}-symbol.json``. ``resume_from_checkpoint`` loads the newest checkpoint in
    ``model_dir`` and trains only the epochs (or batches) that remain.
    """

    def __init__(self, model_dir: str, model_prefix: str = "model", monitor: EvalMetric | None = None, verbose: int = 0,
                 save_best: bool = False, mode: str = "auto", epoch_period: int | None = 1,
                 batch_period: int | None = None, max_checkpoints: int = 5,
                 resume_from_checkpoint: bool = False) -> None:
        if save_best and not isinstance(monitor, EvalMetric):
            raise EstimatorError("CheckpointHandler: save_best=True needs monitor=, one of the metric objects of "
                                 "estimator.train_metrics or estimator.val_metrics")
        if max_checkpoints < 1:
            raise EstimatorError(f"CheckpointHandler: max_checkpoints must be at least 1, got {max_checkpoints}")
        os.makedirs(model_dir, exist_ok=True)
        self.model_dir = model_dir
        self.model_prefix = model_prefix
        self.monitor = monitor
        self.verbose = verbose
        self.save_best = save_best
        self.epoch_period = epoch_period
        self.batch_period = batch_period
        self.max_checkpoints = max_checkpoints
        self.resume_from_checkpoint = resume_from_checkpoint
        self.current_batch = 0
        self.current_epoch = 0
        self.trained_epoch = -1
        self.trained_batch = -1
        self.saved_checkpoints: list[str] = []
        self.monitor_op = _comparison(mode, monitor, "CheckpointHandler") if save_best else None
        self.best = math.nan

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.current_epoch = 0
        self.current_batch = 0
        if self.save_best:
            self.best = math.inf if self.monitor_op is operator.lt else -math.inf
        if self.resume_from_checkpoint:
            by_batch, by_epoch = bool(estimator.max_batch), bool(estimator.max_epoch)
            if (by_batch and (not self.batch_period or self.epoch_period)) or \
                    (by_epoch and (not self.epoch_period or self.batch_period)):
                raise EstimatorError("CheckpointHandler: to resume, checkpoint by the same kind of period as training "
                                     "runs: epoch_period (and batch_period=None) when fit(epochs=...), batch_period "
                                     "(and epoch_period=None) when fit(batches=...)")
            self._resume(estimator)

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        if self.current_batch == 0:
            self._save_symbol(estimator)
        if self.batch_period and (self.current_batch + 1) % self.batch_period == 0:
            self._save_checkpoint(estimator)
        self.current_batch += 1
        return False

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        if self.epoch_period and (self.current_epoch + 1) % self.epoch_period == 0:
            self._save_checkpoint(estimator)
        self.current_epoch += 1
        return False

    def _save_checkpoint(self, estimator: Any) -> None:
        epoch, batch = self.current_epoch, self.current_batch
        if self.trained_epoch >= 0:  # resumed: number on from the checkpoint we started from
            epoch += self.trained_epoch + 1
            batch += self.trained_batch + (0 if estimator.max_epoch else 1)
        prefix = f"{self.model_prefix}-epoch{epoch}batch{batch}"
        self._save_params_and_trainer(estimator, prefix)
        if self.verbose > 0:
            estimator.logger.info("[Epoch %d] CheckpointHandler: trained total %d batches, saving model at %s "
                                  "with prefix: %s", self.current_epoch, self.current_batch + 1, self.model_dir, prefix)
        if self.save_best:
            name, value = self.monitor.get()
            if math.isnan(value):
                warnings.warn(f"CheckpointHandler: not saving the best model because {name} was never updated; "
                              f"monitor one of estimator.train_metrics or estimator.val_metrics", RuntimeWarning,
                              stacklevel=2)
            elif self.monitor_op(value, self.best):
                if self.verbose > 0:
                    estimator.logger.info("[Epoch %d] CheckpointHandler: %s improved from %0.5f to %0.5f, updating "
                                          "best model", self.current_epoch, name, self.best, value)
                self.best = value
                self._save_params_and_trainer(estimator, f"{self.model_prefix}-best")

    def _save_symbol(self, estimator: Any) -> None:
        symbol_file = os.path.join(self.model_dir, f"{self.model_prefix}-symbol.json")
        graph = getattr(estimator.net, "_cached_graph", None)
        if graph:
            graph[1].save(symbol_file)
        else:
            estimator.logger.info("Model architecture (symbol file) is not saved: build the model from HybridBlocks "
                                  "and call net.hybridize() before fit to save it as %s.", symbol_file)

    def _save_params_and_trainer(self, estimator: Any, file_prefix: str) -> None:
        estimator.net.save_parameters(os.path.join(self.model_dir, f"{file_prefix}.params"))
        estimator.trainer.save_states(os.path.join(self.model_dir, f"{file_prefix}.states"))
        if file_prefix.endswith("-best"):
            return
        self.saved_checkpoints.append(file_prefix)
        while len(self.saved_checkpoints) > self.max_checkpoints:
            oldest = self.saved_checkpoints.pop(0)
            for suffix in (".params", ".states"):
                path = os.path.join(self.model_dir, oldest + suffix)
                if os.path.exists(path):
                    os.remove(path)

    def _checkpoints_on_disk(self) -> list[tuple[int, int, str]]:
        """(epoch, batch, prefix) of every ``{prefix}-epoch{E}batch{B}.params`` in ``model_dir``."""
        head = f"{self.model_prefix}-epoch"
        found = []
        for name in os.listdir(self.model_dir):
            if not (name.startswith(head) and name.endswith(".params")):
                continue
            epoch_text, sep, batch_text = name[len(head):-len(".params")].partition("batch")
            if not (sep and epoch_text.isdigit() and batch_text.isdigit()):
                raise EstimatorError(f"CheckpointHandler: cannot read checkpoint file name {name!r}; expected "
                                     f"{self.model_prefix}-epoch<E>batch<B>.params")
            found.append((int(epoch_text), int(batch_text), name[:-len(".params")]))
        return sorted(found)

    def _resume(self, estimator: Any) -> None:
        found = self._checkpoints_on_disk()
        if not found:
            remaining = f"{estimator.max_batch} batches" if estimator.max_batch else f"{estimator.max_epoch} epochs"
            estimator.logger.info("CheckpointHandler: no checkpoint found, training from scratch for %s", remaining)
            return
        self.saved_checkpoints = [prefix for _, _, prefix in found]
        self.trained_epoch, self.trained_batch, prefix = found[-1]
        if estimator.max_epoch:
            if self.trained_epoch >= estimator.max_epoch - 1:
                raise EstimatorError(f"CheckpointHandler: the checkpoint {prefix} already reached the "
                                     f"{estimator.max_epoch} "
                                     f"epochs asked for; pass resume_from_checkpoint=False to train from scratch")
            estimator.max_epoch -= self.trained_epoch + 1
        if estimator.max_batch:
            if self.trained_batch >= estimator.max_batch - 1:
                raise EstimatorError(f"CheckpointHandler: the checkpoint {prefix} already reached the "
                                     f"{estimator.max_batch} "
                                     f"batches asked for; pass resume_from_checkpoint=False to train from scratch")
            estimator.max_batch -= self.trained_batch + 1
        states_file = os.path.join(self.model_dir, prefix + ".states")
        if not os.path.exists(states_file):
            raise EstimatorError(f"CheckpointHandler: cannot resume from {prefix}: {states_file} is missing "
                                 f"(every .params checkpoint has a .states file beside it)")
        estimator.net.load_parameters(os.path.join(self.model_dir, prefix + ".params"), ctx=estimator.context)
        estimator.trainer.load_states(states_file)
        remaining = f"{estimator.max_epoch} epochs" if estimator.max_epoch else f"{estimator.max_batch} batches"
        estimator.logger.warning("CheckpointHandler: resumed from epoch %d batch %d, training for %s more",
                                 self.trained_epoch, self.trained_batch, remaining)


class EarlyStoppingHandler(TrainBegin, EpochEnd, TrainEnd):
    """Stops training when ``monitor`` has not improved by more than ``min_delta`` for
    ``patience`` epochs (``mode``: "min", "max", or "auto": max for accuracy and F1)."""

    def __init__(self, monitor: EvalMetric, min_delta: float = 0, patience: int = 0, mode: str = "auto",
                 baseline: float | None = None) -> None:
        if not isinstance(monitor, EvalMetric):
            raise EstimatorError("EarlyStoppingHandler: monitor must be one of the metric objects of "
                                 f"estimator.train_metrics or estimator.val_metrics, got {monitor!r}")
        if isinstance(monitor, CompositeEvalMetric):
            raise EstimatorError("EarlyStoppingHandler: a CompositeEvalMetric cannot be monitored; "
                                 "pass one of its metrics")
        self.monitor = monitor
        self.baseline = baseline
        self.patience = patience
        self.monitor_op = _comparison(mode, monitor, "EarlyStoppingHandler")
        # the improvement must exceed min_delta in the direction that counts
        self.min_delta = abs(min_delta) if self.monitor_op is operator.gt else -abs(min_delta)
        self.wait = 0
        self.stopped_epoch = 0
        self.current_epoch = 0
        self.stop_training = False
        self.best = math.nan

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.wait = 0
        self.stopped_epoch = 0
        self.current_epoch = 0
        self.stop_training = False
        if self.baseline is not None:
            self.best = self.baseline
        else:
            self.best = math.inf if self.monitor_op is operator.lt else -math.inf

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        name, value = self.monitor.get()
        if math.isnan(value):
            warnings.warn(f"EarlyStoppingHandler: {name} was never updated; monitor one of estimator.train_metrics "
                          f"or estimator.val_metrics", RuntimeWarning, stacklevel=2)
        elif self.monitor_op(value - self.min_delta, self.best):
            self.best = value
            self.wait = 0
        else:
            self.wait += 1
            if self.wait >= self.patience:
                self.stopped_epoch = self.current_epoch
                self.stop_training = True
        self.current_epoch += 1
        return self.stop_training

    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if self.stopped_epoch > 0:
            estimator.logger.info("[Epoch %d] EarlyStoppingHandler: early stopping because %s did not improve",
                                  self.stopped_epoch, self.monitor.get()[0])


class GradientUpdateHandler(BatchEnd):
    """Steps the trainer after each batch, normalising by the batch's sample count."""

    def __init__(self, priority: float = -2000) -> None:
        self.priority = priority

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        loss = kwargs["loss"]
        losses = loss if isinstance(loss, list) else [loss]
        estimator.trainer.step(sum(int(each.shape[0]) for each in losses))
        return False


__all__ = ["BatchBegin", "BatchEnd", "CheckpointHandler", "EarlyStoppingHandler", "EpochBegin", "EpochEnd",
           "EventHandler", "GradientUpdateHandler", "LoggingHandler", "MetricHandler", "StoppingHandler", "TrainBegin",
           "TrainEnd", "ValidationHandler", "check_event_handlers"]
