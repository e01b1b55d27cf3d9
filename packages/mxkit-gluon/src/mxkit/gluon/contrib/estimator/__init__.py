"""``gluon.contrib.estimator``: MXNet 1.x's Estimator training loop and its event handlers."""

from mxkit.gluon.contrib.estimator import batch_processor, estimator, event_handler
from mxkit.gluon.contrib.estimator.batch_processor import BatchProcessor
from mxkit.gluon.contrib.estimator.errors import EstimatorError, UnavailableDeviceError
from mxkit.gluon.contrib.estimator.estimator import Estimator
from mxkit.gluon.contrib.estimator.event_handler import (
    BatchBegin,
    BatchEnd,
    CheckpointHandler,
    EarlyStoppingHandler,
    EpochBegin,
    EpochEnd,
    EventHandler,
    GradientUpdateHandler,
    LoggingHandler,
    MetricHandler,
    StoppingHandler,
    TrainBegin,
    TrainEnd,
    ValidationHandler,
)

__all__ = ["BatchBegin", "BatchEnd", "BatchProcessor", "CheckpointHandler", "EarlyStoppingHandler", "EpochBegin",
           "EpochEnd", "Estimator", "EstimatorError", "EventHandler", "GradientUpdateHandler", "LoggingHandler",
           "MetricHandler", "StoppingHandler", "TrainBegin", "TrainEnd", "UnavailableDeviceError",
           "ValidationHandler", "batch_processor", "estimator", "event_handler"]
