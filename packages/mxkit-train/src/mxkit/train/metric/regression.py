"""Regression metrics: MAE, MSE, RMSE and Pearson correlation (MXNet 1.x semantics).

MAE, MSE and RMSE average per-batch values (each batch counts once), as MXNet 1.x does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mxkit.core.errors import ShapeError
from mxkit.train._registry import TrainingValueError
from mxkit.train.metric.base import EvalMetric, alias, as_numpy, check_label_shapes, register


def _as_columns(owner: str, label: Any, pred: Any) -> tuple[np.ndarray, np.ndarray]:
    label, pred = as_numpy(label), as_numpy(pred)
    if label.ndim == 1:
        label = label.reshape(label.shape[0], 1)
    if pred.ndim == 1:
        pred = pred.reshape(pred.shape[0], 1)
    try:
        np.broadcast_shapes(label.shape, pred.shape)
    except ValueError:
        raise ShapeError(f"{owner}: labels of shape {label.shape} and predictions of shape {pred.shape} do not "
                         f"broadcast") from None
    return label.astype(np.float64), pred.astype(np.float64)


class _BatchMeanMetric(EvalMetric):
    def __init__(self, name: str, output_names: list[str] | None, label_names: list[str] | None) -> None:
        super().__init__(name, output_names=output_names, label_names=label_names, has_global_stats=True)

    def _batch_value(self, difference: np.ndarray) -> float:
        raise NotImplementedError

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label, pred = _as_columns(self.name, label, pred)
            self._add(self._batch_value(label - pred), 1)


@register
class MAE(_BatchMeanMetric):
    """Mean absolute error (per batch, averaged over batches)."""

    def __init__(self, name: str = "mae", output_names: list[str] | None = None,
                 label_names: list[str] | None = None) -> None:
        super().__init__(name, output_names, label_names)

    def _batch_value(self, difference: np.ndarray) -> float:
        return float(np.abs(difference).mean())


@register
class MSE(_BatchMeanMetric):
    """Mean squared error (per batch, averaged over batches)."""

    def __init__(self, name: str = "mse", output_names: list[str] | None = None,
                 label_names: list[str] | None = None) -> None:
        super().__init__(name, output_names, label_names)

    def _batch_value(self, difference: np.ndarray) -> float:
        return float((difference ** 2).mean())


@register
class RMSE(_BatchMeanMetric):
    """Root mean squared error (per batch, averaged over batches)."""

    def __init__(self, name: str = "rmse", output_names: list[str] | None = None,
                 label_names: list[str] | None = None) -> None:
        super().__init__(name, output_names, label_names)

    def _batch_value(self, difference: np.ndarray) -> float:
        return float(np.sqrt((difference ** 2).mean()))


@register
@alias("pearsonr")
class PearsonCorrelation(EvalMetric):
    """Pearson correlation between labels and predictions of the same shape.

    Parameters
    ----------
    name : str, default 'pearsonr'
    output_names, label_names
        As :class:`EvalMetric`.
    average : {'macro', 'micro'}
        ``macro``: the mean of each batch's correlation; ``micro``: the correlation of all
        samples since the last reset, from running sums (Welford's update).
    """

    def __init__(self, name: str = "pearsonr", output_names: list[str] | None = None,
                 label_names: list[str] | None = None, average: str = "macro") -> None:
        if average not in ("macro", "micro"):
            raise TrainingValueError(f"PearsonCorrelation: average={average!r}; expected 'macro' or 'micro'")
        self.average = average
        super().__init__(name, output_names=output_names, label_names=label_names, average=average,
                         has_global_stats=True)

    def reset(self) -> None:
        super().reset()
        # count, mean of labels, mean of predictions, sums of squares and co-deviations
        self._count = 0
        self._mean_label = self._mean_pred = 0.0
        self._ss_label = self._ss_pred = self._co = 0.0

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label, pred = as_numpy(label), as_numpy(pred)
            check_label_shapes(label, pred, False, True)
            label = label.ravel().astype(np.float64)
            pred = pred.ravel().astype(np.float64)
            if self.average == "macro":
                self._add(float(np.corrcoef(pred, label)[0, 1]), 1)
                continue
            self.num_inst += 1
            self.global_num_inst += 1
            count = self._count + label.size
            delta_label = label - self._mean_label
            delta_pred = pred - self._mean_pred
            mean_label = self._mean_label + delta_label.sum() / count
            mean_pred = self._mean_pred + delta_pred.sum() / count
            # batched Welford/Chan: co-deviation with the old mean of one and the new of the other
            self._ss_label += float((delta_label * (label - mean_label)).sum())
            self._ss_pred += float((delta_pred * (pred - mean_pred)).sum())
            self._co += float((delta_label * (pred - mean_pred)).sum())
            self._count, self._mean_label, self._mean_pred = count, mean_label, mean_pred

    def get(self) -> tuple[Any, Any]:
        if self.num_inst == 0:
            return (self.name, float("nan"))
        if self.average == "macro":
            return (self.name, float(self.sum_metric / self.num_inst))
        return (self.name, float(self._co / np.sqrt(self._ss_label * self._ss_pred)))

    def get_global(self) -> tuple[Any, Any]:
        if self.average == "micro":
            return self.get()
        return super().get_global()


__all__ = ["MAE", "MSE", "RMSE", "PearsonCorrelation"]
