"""Evaluation metrics (``mx.metric``), MXNet 1.x's classes with local and global sums.

>>> metric = mx.metric.create(["acc", "ce"])
>>> metric.update([label], [probabilities])        # NDArrays or numpy arrays
>>> metric.get()                                   # (['accuracy', 'cross-entropy'], [0.75, 0.61])
"""

from __future__ import annotations

from mxkit.train.metric.base import (
    CompositeEvalMetric,
    CustomMetric,
    EvalMetric,
    alias,
    check_label_shapes,
    create,
    np_metric,
    register,
)
from mxkit.train.metric.classification import F1, MCC, PCC, Accuracy, TopKAccuracy
from mxkit.train.metric.probability import Caffe, CrossEntropy, Loss, NegativeLogLikelihood, Perplexity, Torch
from mxkit.train.metric.regression import MAE, MSE, RMSE, PearsonCorrelation

#: MXNet's name for :func:`np_metric` (``mx.metric.np(feval)``)
np = np_metric

__all__ = [
    "F1", "MAE", "MCC", "MSE", "PCC", "RMSE", "Accuracy", "Caffe", "CompositeEvalMetric", "CrossEntropy",
    "CustomMetric", "EvalMetric", "Loss", "NegativeLogLikelihood", "PearsonCorrelation", "Perplexity",
    "TopKAccuracy", "Torch",
    "alias", "check_label_shapes", "create", "np", "np_metric", "register",
]
