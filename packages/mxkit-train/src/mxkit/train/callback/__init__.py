"""Training callbacks (``mx.callback``): MXNet 1.x's, a live terminal progress bar, early stopping,
and PNG curves of the metrics (:class:`PlotMetrics`).

>>> mod.fit(train, eval_data=val,
...         batch_end_callback=[mx.callback.Speedometer(128, 50), mx.callback.TerminalProgressBar()],
...         epoch_end_callback=mx.callback.do_checkpoint("model/mnist"),
...         eval_end_callback=mx.callback.EarlyStopping(monitor="accuracy", patience=3))
"""

from __future__ import annotations

from mxkit.train.callback.basic import (
    LogValidationMetricsCallback,
    ProgressBar,
    Speedometer,
    do_checkpoint,
    log_train_metric,
    module_checkpoint,
)
from mxkit.train.callback.early_stopping import EarlyStopping, StopTraining
from mxkit.train.callback.plot_metrics import PlotMetrics
from mxkit.train.callback.terminal import ProgressLine, TerminalProgressBar, is_terminal, progress

__all__ = [
    "EarlyStopping", "LogValidationMetricsCallback", "PlotMetrics", "ProgressBar", "ProgressLine", "Speedometer",
    "StopTraining", "TerminalProgressBar", "do_checkpoint", "is_terminal", "log_train_metric", "module_checkpoint",
    "progress",
]
