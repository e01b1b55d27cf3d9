"""MXNet 1.x's callbacks: checkpoints, Speedometer, metric logging and the text ProgressBar.

Batch-end callbacks receive MXNet's ``BatchEndParam`` (``epoch``, ``nbatch``,
``eval_metric``, ``locals``); epoch-end callbacks ``(epoch, symbol, arg_params,
aux_params)``. Log lines keep MXNet's formats, so tools that parse MXNet training logs
(``Epoch[0] Batch [0-50]\tSpeed: ... samples/sec\taccuracy=...``) read ours.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

from mxkit.train._registry import TrainingValueError

_LOG = logging.getLogger("mxkit.train")


def _positive_int(owner: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TrainingValueError(f"{owner}: {name} must be a positive int, got {value!r}")
    return value


def module_checkpoint(mod: Any, prefix: str, period: int = 1, save_optimizer_states: bool = False) -> Callable:
    """An epoch-end callback calling ``mod.save_checkpoint(prefix, epoch + 1, ...)`` every
    ``period`` epochs.

    Parameters
    ----------
    mod : Module
        The module to save.
    prefix : str
        The checkpoint prefix (``prefix-symbol.json``, ``prefix-%04d.params``).
    period : int, default 1
        Epochs between checkpoints (values below 1 count as 1, as in MXNet).
    save_optimizer_states : bool, default False
        Also save ``prefix-%04d.states``.
    """
    period = int(max(1, period))

    def _callback(iter_no: int, sym: Any = None, arg: Any = None, aux: Any = None) -> None:
        if (iter_no + 1) % period == 0:
            mod.save_checkpoint(prefix, iter_no + 1, save_optimizer_states)

    return _callback


def do_checkpoint(prefix: str, period: int = 1) -> Callable:
    """An epoch-end callback saving ``prefix-symbol.json`` and ``prefix-%04d.params``
    (epoch numbers from 1) every ``period`` epochs, through ``mx.model.save_checkpoint``.

    Parameters
    ----------
    prefix : str
        Prefix of the checkpoint files (a path and a name: ``"model/mnist"``).
    period : int, default 1
        Epochs between checkpoints (values below 1 count as 1, as in MXNet).
    """
    if not isinstance(prefix, str) or not prefix:
        raise TrainingValueError(f"do_checkpoint: prefix must be a non-empty string like 'model/mnist', got "
                                 f"{prefix!r}")
    period = int(max(1, period))

    def _callback(iter_no: int, sym: Any, arg: Any, aux: Any) -> None:
        if (iter_no + 1) % period == 0:
            # imported here: model.py builds on this package, not the other way round
            from mxkit.train.model import save_checkpoint

            save_checkpoint(prefix, iter_no + 1, sym, arg, aux)

    return _callback


def log_train_metric(period: int, auto_reset: bool = False) -> Callable:
    """A batch-end callback logging the training metric every ``period`` batches.

    Parameters
    ----------
    period : int
        Batches between logs.
    auto_reset : bool, default False
        Reset the metric's local sums after each log.
    """
    period = _positive_int("log_train_metric", "period", period)

    def _callback(param: Any) -> None:
        if param.nbatch % period == 0 and param.eval_metric is not None:
            for name, value in param.eval_metric.get_name_value():
                _LOG.info("Iter[%d] Batch[%d] Train-%s=%f", param.epoch, param.nbatch, name, value)
            if auto_reset:
                param.eval_metric.reset_local()

    return _callback


class Speedometer:
    """Logs the training speed and metric every ``frequent`` batches.

    Parameters
    ----------
    batch_size : int
        Samples per batch.
    frequent : int, default 50
        Batches between logs.
    auto_reset : bool, default True
        Reset the metric's local sums after each log, so each line reports the batches
        since the previous one (``Batch [50-100]``); otherwise since the epoch began.

    Examples
    --------
    >>> mod.fit(train, batch_end_callback=mx.callback.Speedometer(128, 10))
    Epoch[0] Batch [0-10]	Speed: 1910.41 samples/sec	accuracy=0.200000
    """

    def __init__(self, batch_size: int, frequent: int = 50, auto_reset: bool = True) -> None:
        self.batch_size = _positive_int("Speedometer", "batch_size", batch_size)
        self.frequent = _positive_int("Speedometer", "frequent", frequent)
        self.init = False
        self.tic = 0.0
        self.last_count = 0
        self.auto_reset = auto_reset
        #: the most recent speed in samples per second (None before the first report)
        self.last_speed: float | None = None

    def __call__(self, param: Any) -> None:
        count = param.nbatch
        if self.last_count > count:  # a new epoch restarted the batch count
            self.init = False
        self.last_count = count
        if not self.init:
            self.init = True
            self.tic = time.time()
            return
        if count % self.frequent != 0:
            return
        elapsed = time.time() - self.tic
        speed = self.frequent * self.batch_size / elapsed if elapsed > 0 else float("inf")
        self.last_speed = speed
        if param.eval_metric is not None:
            name_value = param.eval_metric.get_name_value()
            values = tuple(item for pair in name_value for item in pair)
            if self.auto_reset:
                param.eval_metric.reset_local()
                message = "Epoch[%d] Batch [%d-%d]\tSpeed: %.2f samples/sec" + "\t%s=%f" * len(name_value)
                _LOG.info(message, param.epoch, count - self.frequent, count, speed, *values)
            else:
                message = "Epoch[%d] Batch [0-%d]\tSpeed: %.2f samples/sec" + "\t%s=%f" * len(name_value)
                _LOG.info(message, param.epoch, count, speed, *values)
        else:
            _LOG.info("Iter[%d] Batch [%d]\tSpeed: %.2f samples/sec", param.epoch, count, speed)
        self.tic = time.time()


class ProgressBar:
    """MXNet's text progress bar, one log line per batch: ``[=====-----] 50%``.

    For a live bar on a terminal use :class:`~mxkit.train.callback.TerminalProgressBar`.

    Parameters
    ----------
    total : int
        Batches per epoch.
    length : int, default 80
        Characters of the bar.
    """

    def __init__(self, total: int, length: int = 80) -> None:
        self.total = _positive_int("ProgressBar", "total", total)
        self.bar_len = _positive_int("ProgressBar", "length", length)

    def __call__(self, param: Any) -> None:
        count = param.nbatch
        filled_len = round(self.bar_len * count / float(self.total))
        percents = math.ceil(100.0 * count / float(self.total))
        prog_bar = "=" * filled_len + "-" * (self.bar_len - filled_len)
        _LOG.info("[%s] %s%s\r", prog_bar, percents, "%")


class LogValidationMetricsCallback:
    """Logs the validation metric at the end of an epoch (an ``eval_end_callback``)."""

    def __call__(self, param: Any) -> None:
        if not param.eval_metric:
            return
        for name, value in param.eval_metric.get_name_value():
            _LOG.info("Epoch[%d] Validation-%s=%f", param.epoch, name, value)


__all__ = ["LogValidationMetricsCallback", "ProgressBar", "Speedometer", "do_checkpoint", "log_train_metric",
           "module_checkpoint"]
