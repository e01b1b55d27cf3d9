"""mxkit-spark: train a network on a Spark DataFrame and predict with it (``mxkit.spark``).

``Estimator(network, checkpoint_prefix, ...).fit(df)`` runs one mxkit worker per partition
as a Spark barrier stage against the distributed KVStore's parameter servers (on Ray),
and returns a :class:`Model` whose ``transform(df)`` adds a column of the network's outputs,
computed by a pandas UDF on the executors. See docs/spark.md.
"""

from mxkit.spark.columns import FeatureColumn
from mxkit.spark.estimator import KVSTORE_TYPES, Estimator, Model, check_java
from mxkit.spark.worker import WorkerReport

__all__ = ["KVSTORE_TYPES", "Estimator", "FeatureColumn", "Model", "WorkerReport", "check_java"]
