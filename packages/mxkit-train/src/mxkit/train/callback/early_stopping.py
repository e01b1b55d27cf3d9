"""Stop training when a validation metric stops improving.

:class:`EarlyStopping` is an ``eval_end_callback`` (it receives the validation metric at
the end of each epoch). When the metric has not improved by more than ``min_delta`` for
``patience`` epochs it sets :attr:`EarlyStopping.stop_training`; ``fit`` checks that flag
of its callbacks after each epoch and ends the loop. With ``raise_on_stop=True`` it
raises :class:`StopTraining` instead, for training loops that do not check the flag.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from mxkit.core.errors import MXKitError
from mxkit.train._registry import TrainingValueError, check_number

_LOG = logging.getLogger("mxkit.train")

# metric names where smaller is better (mode="auto")
_LOWER_IS_BETTER = ("loss", "error", "entropy", "mse", "mae", "rmse", "perplexity", "nll")


class StopTraining(MXKitError):
    """Raised by a callback to end training early (see :class:`EarlyStopping`)."""


class EarlyStopping:
    """Stop when the monitored validation metric has not improved for ``patience`` epochs.

    Parameters
    ----------
    monitor : str, optional
        The metric name to watch (``"accuracy"``, ``"cross-entropy"``); default the first
        one the metric reports.
    patience : int, default 3
        Stop at the ``patience``-th epoch in a row without improvement (0: at the first).
    min_delta : float, default 0.0
        An improvement must exceed this.
    mode : {'auto', 'min', 'max'}
        Whether smaller or larger is better; ``auto`` picks ``min`` for names containing
        loss, error, entropy, mse, mae, rmse, perplexity or nll, ``max`` otherwise.
    baseline : float, optional
        A value the metric must beat to count as an improvement at all.
    raise_on_stop : bool, default False
        Raise :class:`StopTraining` when stopping, instead of only setting the flag.

    Attributes
    ----------
    stop_training : bool
        Set when training should stop.
    best : float
        The best value seen.
    best_epoch : int
        The epoch of :attr:`best` (-1 before any).
    stopped_epoch : int
        The epoch at which stopping was decided (-1 while running).
    """

    def __init__(self, monitor: str | None = None, patience: int = 3, min_delta: float = 0.0, mode: str = "auto",
                 baseline: float | None = None, raise_on_stop: bool = False) -> None:
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 0:
            raise TrainingValueError(f"EarlyStopping: patience must be a non-negative int, got {patience!r}")
        if mode not in ("auto", "min", "max"):
            raise TrainingValueError(f"EarlyStopping: mode={mode!r}; expected 'auto', 'min' or 'max'")
        self.monitor = monitor
        self.patience = patience
        self.min_delta = abs(check_number("EarlyStopping", "min_delta", min_delta))
        self.mode = mode
        self.baseline = check_number("EarlyStopping", "baseline", baseline, allow_none=True)
        self.raise_on_stop = raise_on_stop
        self.reset()

    def reset(self) -> None:
        """Forget the history (for a new ``fit``)."""
        self.stop_training = False
        self.wait = 0
        self.best_epoch = -1
        self.stopped_epoch = -1
        self.best = math.nan
        self._resolved_mode: str | None = None if self.mode == "auto" else self.mode

    def _direction(self, name: str) -> str:
        if self._resolved_mode is None:
            lowered = name.lower()
            self._resolved_mode = "min" if any(word in lowered for word in _LOWER_IS_BETTER) else "max"
        return self._resolved_mode

    def _improved(self, value: float, reference: float, direction: str) -> bool:
        if math.isnan(reference):
            return True
        if direction == "min":
            return value < reference - self.min_delta
        return value > reference + self.min_delta

    def _pick(self, metric: Any) -> tuple[str, float]:
        pairs = metric.get_name_value()
        if not pairs:
            raise TrainingValueError("EarlyStopping: the metric reported no values")
        if self.monitor is None:
            return pairs[0][0], float(pairs[0][1])
        for name, value in pairs:
            if name == self.monitor:
                return name, float(value)
        raise TrainingValueError(f"EarlyStopping: monitor={self.monitor!r} is not among the metric's names "
                                 f"{[name for name, _ in pairs]}")

    def update(self, epoch: int, name: str, value: float) -> bool:
        """Record ``value`` of metric ``name`` for ``epoch``; return whether to stop.

        Once stopping was decided, later values are ignored until :meth:`reset`.
        """
        if self.stop_training:
            return True
        direction = self._direction(name)
        reference = self.best
        if math.isnan(reference) and self.baseline is not None:
            reference = self.baseline
        if not math.isnan(value) and self._improved(value, reference, direction):
            self.best, self.best_epoch, self.wait = value, epoch, 0
        else:
            self.wait += 1
            if self.wait >= self.patience:
                self.stop_training = True
                self.stopped_epoch = epoch
                _LOG.info("Epoch[%d] Early stopping: %s has not improved for %d epochs (best %f at epoch %d)",
                          epoch, name, self.wait, self.best, self.best_epoch)
        return self.stop_training

    def __call__(self, param: Any) -> None:
        """The ``eval_end_callback``: read the validation metric of ``param``."""
        metric = getattr(param, "eval_metric", None)
        if metric is None:
            return
        name, value = self._pick(metric)
        if self.update(param.epoch, name, value) and self.raise_on_stop:
            raise StopTraining(f"early stopping at epoch {param.epoch}: {name} has not improved for {self.wait} "
                               f"epochs (best {self.best} at epoch {self.best_epoch})")


__all__ = ["EarlyStopping", "StopTraining"]
