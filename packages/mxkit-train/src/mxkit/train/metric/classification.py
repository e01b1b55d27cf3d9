"""Classification metrics: Accuracy, TopKAccuracy, F1 and MCC (MXNet 1.x semantics)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from mxkit.core.errors import ShapeError
from mxkit.train._registry import TrainingValueError
from mxkit.train.metric.base import (
    EvalMetric,
    alias,
    as_numpy,
    check_label_shapes,
    count_on_device,
    on_one_device,
    register,
)


@register
@alias("acc")
class Accuracy(EvalMetric):
    """The fraction of predictions equal to the label.

    A prediction shaped like its label holds class indices; otherwise it holds scores
    and its ``argmax`` along ``axis`` is the predicted class.

    Parameters
    ----------
    axis : int, default 1
        The class axis of score predictions.
    name, output_names, label_names
        As :class:`EvalMetric`.
    """

    def __init__(self, axis: int = 1, name: str = "accuracy", output_names: list[str] | None = None,
                 label_names: list[str] | None = None) -> None:
        super().__init__(name, axis=axis, output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self.axis = axis

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            if self._update_on_device(label, pred):
                continue
            label, pred = as_numpy(label), as_numpy(pred)
            if pred.shape != label.shape:
                pred = pred.argmax(axis=self.axis)
            pred_flat = pred.astype(np.int32).ravel()
            label_flat = label.astype(np.int32).ravel()
            if pred_flat.shape != label_flat.shape:
                self._raise_mismatch(label.shape, pred.shape)
            self._add(int((pred_flat == label_flat).sum()), pred_flat.size)

    def _raise_mismatch(self, label_shape: tuple, pred_shape: tuple) -> None:
        raise ShapeError(f"{self.name}: {math.prod(label_shape)} labels but {math.prod(pred_shape)} predicted "
                         f"classes (label shape {tuple(label_shape)}, prediction shape {tuple(pred_shape)}, "
                         f"axis={self.axis})")

    def _update_on_device(self, label: Any, pred: Any) -> bool:
        """Count the batch on the engine (NDArrays on one device): True if it was pushed."""
        if not on_one_device([label, pred]):
            return False
        label_shape, pred_shape = tuple(label.shape), tuple(pred.shape)
        if pred_shape != label_shape:
            if not pred_shape or not -len(pred_shape) <= self.axis < len(pred_shape):
                return False  # the host path raises numpy's own error for a bad axis
            axis = self.axis % len(pred_shape)
            pred_shape = pred_shape[:axis] + pred_shape[axis + 1:]
        if math.prod(pred_shape) != math.prod(label_shape):
            self._raise_mismatch(label_shape, pred_shape)
        axis = self.axis

        def correct(xp: Any, label: Any, pred: Any) -> int:
            # the host formula above, on the device's arrays
            if pred.shape != label.shape:
                pred = pred.argmax(axis=axis)
            return int((pred.astype(xp.int32).ravel() == label.astype(xp.int32).ravel()).sum())

        value = count_on_device(correct, [label, pred], f"{self.name}.update")
        if value is None:
            return False
        self._add_on_device(value, math.prod(label_shape))
        return True


@register
@alias("top_k_accuracy", "top_k_acc")
class TopKAccuracy(EvalMetric):
    """The fraction of samples whose label is among the ``top_k`` highest scores.

    Parameters
    ----------
    top_k : int, default 1
        How many of the best classes count (the name becomes ``top_k_accuracy_<k>``).
    name, output_names, label_names
        As :class:`EvalMetric`.
    """

    def __init__(self, top_k: int = 1, name: str = "top_k_accuracy", output_names: list[str] | None = None,
                 label_names: list[str] | None = None) -> None:
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise TrainingValueError(f"TopKAccuracy: top_k must be an int >= 1, got {top_k!r}")
        super().__init__(name, top_k=top_k, output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self.top_k = top_k
        self._base_name = self.name
        self.name += f"_{top_k}"

    def get_config(self) -> dict[str, Any]:
        # the constructor appends "_<k>" to the name it is given
        return {**super().get_config(), "name": self._base_name}

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label = as_numpy(label).astype(np.int32).ravel()
            pred = as_numpy(pred).astype(np.float32)
            if pred.ndim > 2:
                raise ShapeError(f"{self.name}: predictions must be (batch,) classes or (batch, classes) scores, "
                                 f"got shape {pred.shape}")
            if pred.shape[0] != label.shape[0]:
                raise ShapeError(f"{self.name}: {label.shape[0]} labels but {pred.shape[0]} predictions")
            if pred.ndim == 1:
                correct = int((pred.astype(np.int32) == label).sum())
            else:
                k = min(pred.shape[1], self.top_k)
                best = np.argpartition(pred, -k, axis=1)[:, -k:]
                correct = int((best == label[:, None]).any(axis=1).sum())
            self._add(correct, pred.shape[0])


class BinaryCounts:
    """True/false positive/negative counts, local (since the last local reset) and global."""

    def __init__(self) -> None:
        self.local = np.zeros(4, dtype=np.int64)  # tp, fp, fn, tn
        self.total = np.zeros(4, dtype=np.int64)

    def update(self, owner: str, label: Any, pred: Any) -> np.ndarray:
        """Add one batch (scores of shape (batch, 2) and 0/1 labels); return its counts."""
        scores = as_numpy(pred)
        truth = as_numpy(label).astype(np.int32).ravel()
        if scores.ndim != 2:
            raise ShapeError(f"{owner}: predictions must be (batch, 2) class scores, got shape {scores.shape}")
        check_label_shapes(truth, scores)
        if len(np.unique(truth)) > 2 or (truth.size and (truth.min() < 0 or truth.max() > 1)):
            raise TrainingValueError(f"{owner} supports only binary classification (labels 0 and 1), got labels "
                                     f"{sorted(np.unique(truth).tolist())[:10]}")
        predicted = scores.argmax(axis=1) == 1
        actual = truth == 1
        counts = np.array([(predicted & actual).sum(), (predicted & ~actual).sum(), (~predicted & actual).sum(),
                           (~predicted & ~actual).sum()], dtype=np.int64)
        self.local += counts
        self.total += counts
        return counts

    def reset_local(self) -> None:
        self.local[:] = 0

    def reset(self) -> None:
        self.local[:] = 0
        self.total[:] = 0


def f1_score(counts: np.ndarray) -> float:
    """F1 of ``(tp, fp, fn, tn)``; 0 when precision + recall is 0 (MXNet's convention)."""
    tp, fp, fn, _ = (float(c) for c in counts)
    precision = tp / (tp + fp) if tp + fp > 0 else 0.0
    recall = tp / (tp + fn) if tp + fn > 0 else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def matthews_cc(counts: np.ndarray) -> float:
    """Matthews correlation of ``(tp, fp, fn, tn)``; zero factors of the denominator are
    left out, as in MXNet, so a constant prediction gives 0 rather than nan."""
    tp, fp, fn, tn = (float(c) for c in counts)
    if tp + fp + fn + tn == 0:
        return 0.0
    denominator = 1.0
    for term in (tp + fp, tp + fn, tn + fp, tn + fn):
        if term != 0:
            denominator *= term
    return (tp * tn - fp * fn) / math.sqrt(denominator)


class _BinaryMetric(EvalMetric):
    """F1 and MCC: ``macro`` averages the per-batch score, ``micro`` scores all samples."""

    _score = staticmethod(f1_score)

    def __init__(self, name: str, output_names: list[str] | None, label_names: list[str] | None,
                 average: str) -> None:
        if average not in ("macro", "micro"):
            raise TrainingValueError(f"{type(self).__name__}: average={average!r}; expected 'macro' or 'micro'")
        self.average = average
        self.counts = BinaryCounts()
        super().__init__(name, output_names=output_names, label_names=label_names, average=average,
                         has_global_stats=True)

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        batch = np.zeros(4, dtype=np.int64)
        for label, pred in zip(labels, preds):
            batch += self.counts.update(self.name, label, pred)
        if self.average == "macro":
            self._add(self._score(batch), 1)
        else:
            local, total = self.counts.local, self.counts.total
            self.sum_metric = self._score(local) * int(local.sum())
            self.num_inst = int(local.sum())
            self.global_sum_metric = self._score(total) * int(total.sum())
            self.global_num_inst = int(total.sum())

    def reset(self) -> None:
        super().reset()
        self.counts.reset()

    def reset_local(self) -> None:
        super().reset_local()
        self.counts.reset_local()


@register
class F1(_BinaryMetric):
    """The F1 score of binary classification (class 1 positive) from (batch, 2) scores.

    Parameters
    ----------
    name : str, default 'f1'
    output_names, label_names
        As :class:`EvalMetric`.
    average : {'macro', 'micro'}
        ``macro``: the mean of each batch's F1; ``micro``: F1 of all samples together.
    """

    _score = staticmethod(f1_score)

    def __init__(self, name: str = "f1", output_names: list[str] | None = None, label_names: list[str] | None = None,
                 average: str = "macro") -> None:
        super().__init__(name, output_names, label_names, average)


@register
class MCC(_BinaryMetric):
    """The Matthews correlation coefficient of binary classification from (batch, 2) scores.

    Parameters
    ----------
    name : str, default 'mcc'
    output_names, label_names
        As :class:`EvalMetric`.
    average : {'macro', 'micro'}
        ``macro``: the mean of each batch's MCC; ``micro``: MCC of all samples together.
    """

    _score = staticmethod(matthews_cc)

    def __init__(self, name: str = "mcc", output_names: list[str] | None = None,
                 label_names: list[str] | None = None, average: str = "macro") -> None:
        super().__init__(name, output_names, label_names, average)


def multiclass_pcc(confusion: np.ndarray) -> float:
    """The multiclass Matthews/Pearson correlation of a K x K confusion matrix (Gorodkin 2004):
    ``sum(n * C_kk - x_k * y_k) / sqrt(sum(x_k * (n - x_k)) * sum(y_k * (n - y_k)))`` with row
    sums ``x``, column sums ``y`` and ``n`` samples; nan when every sample is in one class."""
    n = confusion.sum()
    rows, columns = confusion.sum(axis=1), confusion.sum(axis=0)
    cov_xx = float(np.sum(rows * (n - rows)))
    cov_yy = float(np.sum(columns * (n - columns)))
    if cov_xx == 0 or cov_yy == 0:
        return float("nan")
    cov_xy = float(np.sum(confusion.diagonal() * n - rows * columns))
    return cov_xy / math.sqrt(cov_xx * cov_yy)


@register
class PCC(EvalMetric):
    """The multiclass Matthews correlation (Pearson's on the confusion matrix; MXNet's ``pcc``).

    Predictions are class indices shaped like the labels, or (batch, classes) scores whose
    ``argmax`` is the class. The value is that of the confusion matrix of every sample
    since the last (local) reset, which grows as larger class indices appear; with two
    classes it equals :class:`MCC` with ``average='micro'``.

    Parameters
    ----------
    name, output_names, label_names
        As :class:`EvalMetric`.
    """

    def __init__(self, name: str = "pcc", output_names: list[str] | None = None,
                 label_names: list[str] | None = None) -> None:
        self.local_confusion = np.zeros((2, 2), dtype=np.int64)
        self.global_confusion = np.zeros((2, 2), dtype=np.int64)
        super().__init__(name, output_names=output_names, label_names=label_names, has_global_stats=True)

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label, pred = as_numpy(label).astype(np.int64).ravel(), as_numpy(pred)
            pred = (pred.argmax(axis=1) if pred.ndim == 2 and pred.shape[0] == label.size and pred.size != label.size
                    else pred).astype(np.int64).ravel()
            if pred.shape != label.shape:
                raise ShapeError(f"{self.name}: {label.size} labels but {pred.size} predicted classes")
            if label.size and min(label.min(), pred.min()) < 0:
                raise TrainingValueError(f"{self.name}: class indices must be >= 0, got "
                                         f"{min(label.min(), pred.min())}")
            classes = int(max(label.max(), pred.max())) + 1 if label.size else 0
            if classes > len(self.local_confusion):
                self.local_confusion = self._grown(self.local_confusion, classes)
                self.global_confusion = self._grown(self.global_confusion, classes)
            size = len(self.local_confusion)
            batch = np.bincount(pred * size + label, minlength=size * size).reshape(size, size)
            self.local_confusion += batch
            self.global_confusion += batch
            self.num_inst += 1
            self.global_num_inst += 1
        self.sum_metric = multiclass_pcc(self.local_confusion) * self.num_inst
        self.global_sum_metric = multiclass_pcc(self.global_confusion) * self.global_num_inst

    @staticmethod
    def _grown(confusion: np.ndarray, classes: int) -> np.ndarray:
        grown = np.zeros((classes, classes), dtype=np.int64)
        grown[:len(confusion), :len(confusion)] = confusion
        return grown

    def reset(self) -> None:
        super().reset()
        self.local_confusion = np.zeros_like(self.local_confusion)
        self.global_confusion = np.zeros_like(self.global_confusion)

    def reset_local(self) -> None:
        super().reset_local()
        self.local_confusion = np.zeros_like(self.local_confusion)


__all__ = ["F1", "MCC", "PCC", "Accuracy", "BinaryCounts", "TopKAccuracy", "f1_score", "matthews_cc", "multiclass_pcc"]
