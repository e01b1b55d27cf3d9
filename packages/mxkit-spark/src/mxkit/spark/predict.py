"""Prediction on the executors: a pandas UDF over the feature column.

Each executor's Python process loads the checkpoint once (:func:`cached_module`, keyed by
the checkpoint and the batch shape) and keeps it for every later batch and task; the UDF
cuts the Arrow batches Spark hands it into batches of the model's size and returns each
row's outputs as a float array.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from mxkit.spark.columns import ARRAY, VECTOR, FeatureColumn, RowDecoder

_modules: dict[tuple[Any, ...], Any] = {}
_modules_lock = threading.Lock()


@dataclass(frozen=True)
class PredictPlan:
    """What the prediction UDF needs: the checkpoint, the feature column and the batch size."""

    checkpoint_prefix: str
    epoch: int
    features: FeatureColumn
    data_name: str
    label_name: str
    batch_size: int


def cached_module(plan: PredictPlan) -> Any:
    """The checkpoint's Module, bound for prediction at ``plan.batch_size``; loaded once per process."""
    key = (plan.checkpoint_prefix, plan.epoch, plan.features.sample_shape, plan.batch_size, plan.data_name)
    with _modules_lock:
        module = _modules.get(key)
        if module is None:
            from mxkit.core.context import cpu
            from mxkit.io import DataDesc
            from mxkit.train.module import Module

            module = Module.load(plan.checkpoint_prefix, plan.epoch, context=cpu(), data_names=(plan.data_name,),
                                 label_names=(plan.label_name,), logger=logging.getLogger(__name__))
            module.bind(data_shapes=[DataDesc(plan.data_name, (plan.batch_size, *plan.features.sample_shape))],
                        label_shapes=[DataDesc(plan.label_name, (plan.batch_size,))], for_training=False)
            _modules[key] = module
        return module


def predict_batch(plan: PredictPlan, samples: np.ndarray) -> np.ndarray:
    """Outputs of ``samples`` (``(n, *sample_shape)``), as ``(n, outputs)`` float32."""
    from mxkit.io import NDArrayIter

    module = cached_module(plan)
    count = len(samples)
    if count == 0:
        return np.zeros((0, 0), np.float32)
    # pad to whole batches: the module stays bound at one shape (no re-bind per Arrow batch)
    whole = -(-count // plan.batch_size) * plan.batch_size
    padded = np.zeros((whole, *samples.shape[1:]), np.float32)
    padded[:count] = samples
    iterator = NDArrayIter({plan.data_name: padded}, {plan.label_name: np.zeros(whole, np.float32)},
                           plan.batch_size, last_batch_handle="discard")
    outputs = module.predict(iterator).asnumpy()
    return np.asarray(outputs[:count], dtype=np.float32).reshape(count, -1)


def prediction_udf(plan: PredictPlan) -> Any:
    """The pandas UDF (iterator of Series to iterator of Series) returning ``array<float>``."""
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    # vectors arrive as arrays (transform converts them with vector_to_array), images as bytes
    arrives_as = replace(plan.features, kind=ARRAY) if plan.features.kind == VECTOR else plan.features
    decoder = RowDecoder(arrives_as, None)
    sample_shape = plan.features.sample_shape

    def predict(batches):  # type: ignore[no-untyped-def]
        for batch in batches:
            samples = [decoder.sample(value) for value in batch.tolist()]
            shaped = (np.stack(samples).reshape(len(samples), *sample_shape) if samples
                      else np.zeros((0, *sample_shape), np.float32))
            yield pd.Series(list(predict_batch(plan, shaped)))

    # real types, not this module's postponed strings: Spark reads the UDF's kind from them
    predict.__annotations__ = {"batches": Iterator[pd.Series], "return": Iterator[pd.Series]}
    predict = pandas_udf("array<float>")(predict)
    return predict



__all__ = ["PredictPlan", "cached_module", "predict_batch", "prediction_udf"]
