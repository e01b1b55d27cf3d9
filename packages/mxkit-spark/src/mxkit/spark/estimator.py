"""``Estimator`` and ``Model``: Spark ML's shape over mxkit's Module and distributed KVStore.

``Estimator(network, ...).fit(df)`` checks the columns on the driver, starts the job's
parameter servers (:mod:`.cluster`), repartitions the DataFrame to ``num_workers`` and runs
one worker per partition as a barrier stage (:mod:`.worker`); rank 0 writes a checkpoint
per epoch under ``checkpoint_prefix``. A failed stage is retried from the last checkpoint
with new servers, up to ``max_attempts`` in all. The :class:`Model` it returns predicts
with a pandas UDF (:mod:`.predict`).
"""

from __future__ import annotations

import functools
import os
import tempfile
import time
import uuid
from typing import Any

from mxkit.core.errors import ConfigError, DTypeError, KVStoreError, MXKitError, ShapeError
from mxkit.spark.columns import IMAGE, VECTOR, FeatureColumn, check_feature_shape, check_label, feature_kind, sample_of
from mxkit.spark.predict import PredictPlan, prediction_udf
from mxkit.spark.worker import WorkerPlan, WorkerReport, error_from_spark, train_partition

KVSTORE_TYPES = ("dist_sync", "dist_async", "dist_ssp")
#: errors that a retry cannot cure (the data or the settings are wrong): they fail the fit at once
_DETERMINISTIC = (ConfigError, DTypeError, ShapeError)


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive int, got {value!r}")
    return value


def _spark_master(df: Any) -> str:
    return str(df.sparkSession.sparkContext.master)


def check_java() -> None:
    """Check that a Java runtime is on PATH (Spark runs in one).

    Raises
    ------
    MissingComponentError
        If ``java`` is not found (``JAVA_HOME`` is honoured as Spark does).
    """
    import shutil

    from mxkit.core.errors import MissingComponentError

    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(os.path.join(java_home, "bin", "java"), os.X_OK):
        return
    if shutil.which("java") is None:
        raise MissingComponentError("Spark needs a Java runtime (17 or newer), and no 'java' is on PATH nor in "
                                    "JAVA_HOME; install one (e.g. apt install openjdk-17-jre-headless) or set "
                                    "JAVA_HOME")


class Model:
    """A trained network: ``transform(df)`` adds a column of its outputs (float arrays).

    Parameters
    ----------
    checkpoint_prefix : str
        The checkpoint's prefix (``prefix-symbol.json``, ``prefix-%04d.params``).
    epoch : int
        Which epoch's parameters.
    features : FeatureColumn
        The feature column and the shape of one sample.
    batch_size : int
        Rows per forward pass on the executors.
    prediction_col : str
        The column ``transform`` adds.
    data_name, label_name : str
        The network's input names.
    history : list of WorkerReport, optional
        What each worker of the last attempt reported, by rank.
    attempts : int
        Runs of the barrier stage the fit took (more than 1 after a retry).
    """

    def __init__(self, checkpoint_prefix: str, epoch: int, features: FeatureColumn, batch_size: int = 64,
                 prediction_col: str = "prediction", data_name: str = "data", label_name: str = "softmax_label",
                 history: list[WorkerReport] | None = None, attempts: int = 1):
        self.checkpoint_prefix = str(checkpoint_prefix)
        self.epoch = int(epoch)
        self.features = features
        self.batch_size = _positive("batch_size", batch_size)
        self.prediction_col = prediction_col
        self.data_name, self.label_name = data_name, label_name
        self.history = list(history or [])
        self.attempts = int(attempts)

    def transform(self, df: Any) -> Any:
        """``df`` with the network's outputs of each row in ``prediction_col`` (``array<float>``).

        Raises
        ------
        ConfigError, DTypeError
            If the feature column is missing or is not of the kind the model was trained on.
        """
        from pyspark.ml.functions import vector_to_array

        kind = feature_kind(df.schema, self.features.name)
        if kind != self.features.kind:
            raise DTypeError(f"the model was trained on a {self.features.kind} column {self.features.name!r}; "
                             f"this DataFrame's {self.features.name!r} is a {kind} column")
        column = df[self.features.name]
        if kind == VECTOR:
            column = vector_to_array(column, dtype="float32")
        plan = PredictPlan(self.checkpoint_prefix, self.epoch, self.features, self.data_name, self.label_name,
                           self.batch_size)
        return df.withColumn(self.prediction_col, prediction_udf(plan)(column))

    def load_module(self) -> Any:
        """The checkpoint as a ``Module`` in this process (not bound)."""
        from mxkit.train.module import Module

        return Module.load(self.checkpoint_prefix, self.epoch, data_names=(self.data_name,),
                           label_names=(self.label_name,))

    def __repr__(self) -> str:
        return f"<mxkit.spark.Model {self.checkpoint_prefix}-{self.epoch:04d} on {self.features.name!r}>"


class Estimator:
    """Train a network on a Spark DataFrame with parameter-server workers (Spark ML's ``Estimator``).

    Parameters
    ----------
    network : Symbol or gluon.HybridBlock
        A Symbol ending in a loss output (``SoftmaxOutput`` named ``softmax``), or a Gluon
        HybridBlock whose outputs are class scores (a ``SoftmaxOutput`` is put on top).
    checkpoint_prefix : str
        Where rank 0 writes ``prefix-symbol.json`` and ``prefix-%04d.params`` after every
        epoch: a path every executor and the driver can reach (a shared filesystem on a cluster).
    features_col, label_col : str
        A vector, number-array or image-bytes column, and a numeric label column.
    feature_shape : tuple of int, optional
        The shape of one sample (default: that of the first row; images ``(C, H, W)``).
    feature_scale : float
        Every feature value is multiplied by it, in training and in ``transform``
        (``1/255`` maps image bytes to [0, 1]; default 1).
    num_workers, num_servers : int
        Barrier tasks (one partition each) and parameter servers.
    kvstore : str
        ``dist_sync``, ``dist_async`` or ``dist_ssp``.
    batch_size, epochs : int
        Per worker, and the epochs to train.
    optimizer : str
        An optimizer name (``sgd``, ``adam``, ...), built on the servers.
    optimizer_params : dict, optional
        Its parameters (default ``{"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-4}`` for sgd,
        ``{"learning_rate": 0.1}`` otherwise: ``mxkit train``'s).
    seed : int
        Seeds numpy and mxkit on every worker (the initial weights are rank 0's).
    ray_address : str, optional
        A running Ray cluster for the servers (see :mod:`mxkit.spark.cluster` for the default).
    timeout : float, optional
        Seconds a worker waits on the servers or the other workers before it fails, naming
        its rank (default config ``kvstore_timeout``).
    max_attempts : int
        Runs of the barrier stage before the fit fails (each retry starts from the last checkpoint).
    prediction_col : str
        The column the model's ``transform`` adds.
    data_name, label_name : str
        The network's data and label input names.
    """

    def __init__(self, network: Any, checkpoint_prefix: str, *, features_col: str = "features",
                 label_col: str = "label", feature_shape: Any = None, feature_scale: float = 1.0,
                 num_workers: int = 2, num_servers: int = 1,
                 kvstore: str = "dist_sync", batch_size: int = 32, epochs: int = 8, optimizer: str = "sgd",
                 optimizer_params: dict[str, Any] | None = None, seed: int = 42, ray_address: str | None = None,
                 timeout: float | None = None, max_attempts: int = 2, prediction_col: str = "prediction",
                 data_name: str = "data", label_name: str = "softmax_label"):
        if not isinstance(checkpoint_prefix, (str, os.PathLike)) or not str(checkpoint_prefix):
            raise ConfigError(f"checkpoint_prefix must be a path prefix (str), got {checkpoint_prefix!r}")
        if kvstore not in KVSTORE_TYPES:
            raise ConfigError(f"kvstore must be one of {', '.join(KVSTORE_TYPES)}, got {kvstore!r}")
        if not isinstance(optimizer, str) or not optimizer:
            raise ConfigError(f"optimizer must be an optimizer's name (e.g. 'sgd'), got {optimizer!r}")
        if optimizer_params is not None and not isinstance(optimizer_params, dict):
            raise ConfigError(f"optimizer_params must be a dict, got {optimizer_params!r}")
        if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.network = network
        self.checkpoint_prefix = os.path.abspath(str(checkpoint_prefix))
        self.features_col, self.label_col = features_col, label_col
        self.feature_shape = feature_shape
        if isinstance(feature_scale, bool) or not isinstance(feature_scale, (int, float)) or \
                not (feature_scale > 0 and feature_scale < float("inf")):
            raise ConfigError(f"feature_scale must be a positive finite number, got {feature_scale!r}")
        self.feature_scale = float(feature_scale)
        self.num_workers = _positive("num_workers", num_workers)
        self.num_servers = _positive("num_servers", num_servers)
        self.kvstore = kvstore
        self.batch_size = _positive("batch_size", batch_size)
        self.epochs = _positive("epochs", epochs)
        self.optimizer = optimizer
        defaults = {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-4} if optimizer == "sgd" else \
            {"learning_rate": 0.1}
        self.optimizer_params = dict(optimizer_params) if optimizer_params is not None else defaults
        self.seed = int(seed)
        self.ray_address = ray_address
        self.timeout = timeout
        self.max_attempts = _positive("max_attempts", max_attempts)
        self.prediction_col = prediction_col
        self.data_name, self.label_name = data_name, label_name

    # -- the driver's checks ----------------------------------------------------------------

    def feature_column(self, df: Any) -> FeatureColumn:
        """The checked feature column of ``df`` with its sample shape (from ``feature_shape``
        or the first row).

        Raises
        ------
        ConfigError, DTypeError
            If a column is missing or of the wrong type (the column named).
        ShapeError
            If the DataFrame is empty or ``feature_shape`` is malformed.
        """
        kind = feature_kind(df.schema, self.features_col)
        check_label(df.schema, self.label_col)
        if self.feature_shape is not None:
            return FeatureColumn(self.features_col, kind, check_feature_shape(kind, self.feature_shape,
                                                                              self.features_col), self.feature_scale)
        first = df.select(self.features_col).first()  # one row to the driver, for its shape
        if first is None:
            raise ShapeError("the DataFrame has no rows to train on")
        sample = sample_of(kind, first[0], self.features_col)
        shape = sample.shape if kind == IMAGE else (int(sample.size),)
        return FeatureColumn(self.features_col, kind, tuple(int(d) for d in shape), self.feature_scale)

    def _symbol_and_start(self, features: FeatureColumn) -> tuple[Any, tuple[str, int] | None]:
        """The training Symbol, and the checkpoint to start from (a Gluon block's parameters)."""
        from mxkit.symbol import Symbol

        if isinstance(self.network, Symbol):
            symbol, start = self.network, None
        else:
            symbol, start = _from_gluon(self.network, features.sample_shape, self.checkpoint_prefix,
                                        self.data_name)
        arguments = symbol.list_arguments()
        for name in (self.data_name, self.label_name):
            if name not in arguments:
                raise ConfigError(f"the network has no input {name!r}; its arguments are {arguments} (set "
                                  f"data_name= and label_name=)")
        try:
            symbol.infer_shape(**{self.data_name: (self.batch_size, *features.sample_shape)})
        except MXKitError as exc:
            raise ShapeError(f"samples of shape {features.sample_shape} from column {features.name!r} do not fit "
                             f"the network: {exc}") from None
        return symbol, start

    # -- fit ------------------------------------------------------------------------------------

    def fit(self, df: Any) -> Model:
        """Train on ``df``; return the :class:`Model` of the last epoch's checkpoint.

        Raises
        ------
        ConfigError, DTypeError, ShapeError
            On the driver, before any task: a missing or mistyped column, a feature shape
            the network does not take. From the workers (rank named): a row of another size.
        KVStoreError
            If the workers or servers fail in every attempt, or a wait times out.
        MissingComponentError
            If Java or Ray is missing.
        """
        check_java()
        from mxkit.core import config
        from mxkit.spark.cluster import start_cluster

        features = self.feature_column(df)
        symbol, start = self._symbol_and_start(features)
        timeout = float(config.get("kvstore_timeout", self.timeout))
        cluster = start_cluster(_spark_master(df), self.ray_address, self.num_servers)
        try:
            history, attempts = self._run_attempts(df, features, symbol, start, cluster, timeout)
        finally:
            cluster.stop()
        return Model(self.checkpoint_prefix, self.epochs, features, batch_size=self.batch_size,
                     prediction_col=self.prediction_col, data_name=self.data_name, label_name=self.label_name,
                     history=history, attempts=attempts)

    def _run_attempts(self, df: Any, features: FeatureColumn, symbol: Any, start: tuple[str, int] | None,
                      cluster: Any, timeout: float) -> tuple[list[WorkerReport], int]:
        from mxkit.kvstore.dist.job import start_job
        from mxkit.train.model.checkpoint import params_path, saved_epochs

        started = time.time() - 1.0  # (file times may be coarser than the clock)
        os.makedirs(os.path.dirname(self.checkpoint_prefix) or ".", exist_ok=True)
        symbol.save(f"{self.checkpoint_prefix}-symbol.json")
        data = df.select(self.features_col, self.label_col).repartition(self.num_workers)
        begin_epoch, failures = 0, []
        for attempt in range(1, self.max_attempts + 1):
            # with two servers or more, each keeps its shards on the next one too: a lost server comes back
            job = start_job(self.num_workers, self.num_servers, namespace=f"mxkit-spark-{uuid.uuid4().hex[:12]}",
                            replicate=self.num_servers >= 2)
            plan = WorkerPlan(symbol_json=symbol.tojson(), features=features, label=self.label_col,
                              data_name=self.data_name, label_name=self.label_name, kvstore=self.kvstore,
                              num_workers=self.num_workers, namespace=job.namespace, address=cluster.address,
                              task_env=cluster.task_env, batch_size=self.batch_size, begin_epoch=begin_epoch,
                              num_epoch=self.epochs, optimizer=self.optimizer,
                              optimizer_params=self.optimizer_params, checkpoint_prefix=self.checkpoint_prefix,
                              seed=self.seed, timeout=timeout, initial_checkpoint=start)
            try:
                reports = data.rdd.barrier().mapPartitions(functools.partial(train_partition, plan)).collect()
                return sorted(reports, key=lambda report: report.rank), attempt
            except Exception as exc:
                error = error_from_spark(exc)
                if isinstance(error, _DETERMINISTIC):
                    raise error from None
                failures.append(str(error) if error is not None else f"{type(exc).__name__}: "
                                f"{str(exc).splitlines()[0] if str(exc) else ''}")
            finally:
                job.stop()
            # the epochs this fit wrote (not those of an earlier run under the same prefix)
            saved = [epoch for epoch in saved_epochs(self.checkpoint_prefix) if 1 <= epoch <= self.epochs
                     and os.path.getmtime(params_path(self.checkpoint_prefix, epoch)) >= started]
            if saved:
                begin_epoch = saved[-1]
                start = (self.checkpoint_prefix, begin_epoch)
                if begin_epoch == self.epochs:  # the stage failed after the last checkpoint: nothing to redo
                    return [], attempt
        raise KVStoreError(f"the barrier stage of {self.num_workers} workers failed {self.max_attempts} times; "
                           f"the last failure: {failures[-1]}")


def _from_gluon(block: Any, sample_shape: tuple[int, ...], prefix: str, data_name: str) -> tuple[Any, tuple[str, int]]:
    """A Gluon HybridBlock as a training Symbol (``SoftmaxOutput`` on its outputs) and its
    parameters as checkpoint epoch 0 of ``prefix``.

    Raises
    ------
    ConfigError
        If ``block`` is neither a Symbol nor a Gluon HybridBlock.
    """
    try:
        from mxkit.gluon import HybridBlock
    except ImportError:
        HybridBlock = None
    if HybridBlock is None or not isinstance(block, HybridBlock):
        raise ConfigError(f"network must be a Symbol or a Gluon HybridBlock (pip install 'mxkit-spark[gluon]'), "
                          f"got {type(block).__name__}")
    from mxkit.ndarray import zeros
    from mxkit.symbol import SoftmaxOutput, load
    from mxkit.train.initializer import Xavier
    from mxkit.train.model.checkpoint import load_params, save_checkpoint

    if data_name != "data":
        raise ConfigError(f"a Gluon block's input is named 'data' when exported; got data_name={data_name!r}")
    import warnings

    with warnings.catch_warnings():
        # a block initialised by its author keeps its parameters: initialize() says so and skips them
        warnings.simplefilter("ignore")
        block.initialize(Xavier(rnd_type="gaussian", factor_type="in", magnitude=2))
    block.hybridize()
    block(zeros((1, *sample_shape)))
    with tempfile.TemporaryDirectory() as scratch:
        symbol_file, _ = block.export(os.path.join(scratch, "block"), 0)
        symbol = SoftmaxOutput(load(symbol_file), name="softmax")
        arg_params, aux_params = load_params(os.path.join(scratch, "block"), 0)
    save_checkpoint(prefix, 0, symbol, arg_params, aux_params)
    return symbol, (prefix, 0)


__all__ = ["KVSTORE_TYPES", "Estimator", "Model", "check_java"]
