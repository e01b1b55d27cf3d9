"""How the Estimator and its handlers take metrics: checks, the default metric of a loss,
and the rule that a handler may only watch metrics the Estimator updates."""

from __future__ import annotations

from typing import Any

from mxkit.gluon.contrib.estimator.errors import EstimatorError
from mxkit.gluon.loss import SoftmaxCrossEntropyLoss
from mxkit.train.metric import Accuracy, CompositeEvalMetric, EvalMetric


def check_metrics(metrics: Any) -> list[EvalMetric]:
    """``metrics`` as a list of metrics: one metric, a list, None (empty) or a composite (its parts)."""
    if isinstance(metrics, CompositeEvalMetric):
        return [part for metric in metrics.metrics for part in check_metrics(metric)]
    if isinstance(metrics, EvalMetric):
        return [metrics]
    metrics = list(metrics or [])
    wrong = [m for m in metrics if not isinstance(m, EvalMetric)]
    if wrong:
        raise EstimatorError(f"metrics must be an mx.metric.EvalMetric or a list of them, got {wrong[0]!r}; "
                             f"make one with e.g. mx.metric.Accuracy() rather than passing its name")
    return metrics


def suggest_metric_for_loss(loss: Any) -> EvalMetric | None:
    """The metric that goes with ``loss`` when none was given (accuracy for softmax cross-entropy)."""
    return Accuracy() if isinstance(loss, SoftmaxCrossEntropyLoss) else None


def watched_metrics(handler: Any) -> list[EvalMetric]:
    """The metrics a handler holds in its attributes (``metrics``, ``monitor``, ...)."""
    found: list[EvalMetric] = []
    for value in vars(handler).values():
        if isinstance(value, EvalMetric):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(v for v in value if isinstance(v, EvalMetric))
    return found


def check_handler_metrics(handler: Any, known: list[EvalMetric]) -> None:
    """Raise when ``handler`` watches a metric that is not one of ``known`` (it would never be updated)."""
    for metric in watched_metrics(handler):
        if not any(metric is k for k in known):
            raise EstimatorError(
                f"event handler {type(handler).__name__} refers to metric {metric.name!r}, which is not one of "
                f"the estimator's metrics, so nothing would update it; use the objects of "
                f"estimator.train_metrics and estimator.val_metrics")


__all__ = ["check_handler_metrics", "check_metrics", "suggest_metric_for_loss", "watched_metrics"]
