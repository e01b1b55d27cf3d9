"""Metrics of predicted probabilities and losses: CrossEntropy, NegativeLogLikelihood,
Perplexity, Loss (MXNet 1.x semantics)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from mxkit.core.errors import ShapeError
from mxkit.train._registry import TrainingValueError, check_number
from mxkit.train.metric.base import EvalMetric, alias, as_numpy, check_label_shapes, register


def _label_probabilities(owner: str, label: Any, pred: Any) -> np.ndarray:
    """The probability each row of ``pred`` (batch, classes) gives its label."""
    label = as_numpy(label).ravel()
    pred = as_numpy(pred)
    if pred.ndim != 2 or label.shape[0] != pred.shape[0]:
        raise ShapeError(f"{owner}: predictions must be (batch, classes) probabilities with one label per row; got "
                         f"{label.shape[0]} labels and predictions of shape {pred.shape}")
    classes = label.astype(np.int64)
    if classes.size and (classes.min() < 0 or classes.max() >= pred.shape[1]):
        raise TrainingValueError(f"{owner}: labels must be class indices in [0, {pred.shape[1]}), got values from "
                                 f"{classes.min()} to {classes.max()}")
    return pred[np.arange(pred.shape[0]), classes].astype(np.float64)


class _LogLoss(EvalMetric):
    def __init__(self, eps: float, name: str, output_names: list[str] | None, label_names: list[str] | None) -> None:
        self.eps = check_number(type(self).__name__, "eps", eps, low=0.0)
        super().__init__(name, eps=eps, output_names=output_names, label_names=label_names, has_global_stats=True)

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            prob = _label_probabilities(self.name, label, pred)
            self._add(float((-np.log(prob + self.eps)).sum()), prob.shape[0])


@register
@alias("ce")
class CrossEntropy(_LogLoss):
    """Mean of ``-log(p[label] + eps)`` over samples.

    Parameters
    ----------
    eps : float, default 1e-12
    name, output_names, label_names
        As :class:`EvalMetric`.
    """

    def __init__(self, eps: float = 1e-12, name: str = "cross-entropy", output_names: list[str] | None = None,
                 label_names: list[str] | None = None) -> None:
        super().__init__(eps, name, output_names, label_names)


@register
@alias("nll_loss")
class NegativeLogLikelihood(_LogLoss):
    """Mean negative log-likelihood ``-log(p[label] + eps)`` over samples.

    Parameters
    ----------
    eps : float, default 1e-12
    name, output_names, label_names
        As :class:`EvalMetric`.
    """

    def __init__(self, eps: float = 1e-12, name: str = "nll-loss", output_names: list[str] | None = None,
                 label_names: list[str] | None = None) -> None:
        super().__init__(eps, name, output_names, label_names)


@register
class Perplexity(EvalMetric):
    """``exp`` of the mean negative log-probability of the labels, skipping ``ignore_label``.

    Parameters
    ----------
    ignore_label : int or None
        A label value to leave out (padding), or None.
    axis : int, default -1
        The class axis of the predictions.
    name, output_names, label_names
        As :class:`EvalMetric`.
    """

    def __init__(self, ignore_label: int | None, axis: int = -1, name: str = "perplexity",
                 output_names: list[str] | None = None, label_names: list[str] | None = None) -> None:
        super().__init__(name, ignore_label=ignore_label, output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self.ignore_label = ignore_label
        self.axis = axis

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        loss, count = 0.0, 0
        for label, pred in zip(labels, preds):
            label, pred = as_numpy(label).ravel(), as_numpy(pred)
            scores = np.moveaxis(pred, self.axis, -1)
            scores = scores.reshape(-1, scores.shape[-1])
            if label.size != scores.shape[0]:
                raise ShapeError(f"{self.name}: {label.size} labels for predictions of shape {pred.shape} "
                                 f"({scores.shape[0]} distributions along axis {self.axis})")
            # out-of-range labels take the nearest class, as MXNet's pick(mode='clip') gives them
            classes = np.clip(label.astype(np.int64), 0, scores.shape[-1] - 1)
            prob = scores[np.arange(label.size), classes].astype(np.float64)
            if self.ignore_label is not None:
                ignored = label == self.ignore_label
                count -= int(ignored.sum())
                prob = np.where(ignored, 1.0, prob)
            loss -= float(np.log(np.maximum(1e-10, prob)).sum())
            count += prob.size
        self._add(loss, count)

    def get(self) -> tuple[Any, Any]:
        if self.num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, math.exp(self.sum_metric / self.num_inst))

    def get_global(self) -> tuple[Any, Any]:
        if self.global_num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, math.exp(self.global_sum_metric / self.global_num_inst))


@register
class Loss(EvalMetric):
    """The mean of the predictions themselves (outputs that are losses); labels are ignored.

    Parameters
    ----------
    name, output_names, label_names
        As :class:`EvalMetric`.
    """

    def __init__(self, name: str = "loss", output_names: list[str] | None = None,
                 label_names: list[str] | None = None) -> None:
        super().__init__(name, output_names=output_names, label_names=label_names, has_global_stats=True)

    def update(self, _: Any, preds: Any) -> None:
        if isinstance(preds, np.ndarray) or hasattr(preds, "asnumpy"):
            preds = [preds]
        for pred in preds:
            values = as_numpy(pred)
            self._add(float(values.sum()), values.size)


@register
class Torch(Loss):
    """MXNet's name for :class:`Loss` of Torch modules."""

    def __init__(self, name: str = "torch", output_names: list[str] | None = None,
                 label_names: list[str] | None = None) -> None:
        super().__init__(name, output_names, label_names)


@register
class Caffe(Loss):
    """MXNet's name for :class:`Loss` of Caffe operators."""

    def __init__(self, name: str = "caffe", output_names: list[str] | None = None,
                 label_names: list[str] | None = None) -> None:
        super().__init__(name, output_names, label_names)


__all__ = ["Caffe", "CrossEntropy", "Loss", "NegativeLogLikelihood", "Perplexity", "Torch"]
