"""One training worker: a task of the barrier stage, running ``Module.fit`` on its partition.

The barrier stage has ``num_workers`` tasks, one per partition; Spark starts them together
or not at all (``BarrierTaskContext``), which a ``dist_sync`` job needs, since a round
waits for every worker. Each task takes its partition index as its rank, exchanges
``(rank, host)`` with the others (``allGather``) so that every task knows the stage is
complete, streams its rows into an iterator (:mod:`.partition_data`), joins the job's
KVStore and trains. Rank 0 writes a checkpoint after every epoch.

Failures carry the rank: every mxkit error a task raises is re-raised as
``[mxkit-spark ClassName] worker rank R on HOST: message``, which the driver turns back
into the same mxkit error class (:func:`error_from_spark`). A barrier stage that fails is
retried by the driver from the last checkpoint with new servers; Spark's own re-attempt of
the stage would rejoin servers whose rounds had moved on, so a re-attempted task stops at
once and leaves the retry to the driver.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from mxkit.core import errors
from mxkit.core.errors import KVStoreError, MXKitError
from mxkit.spark.columns import FeatureColumn, RowDecoder

ERROR_PATTERN = re.compile(r"\[mxkit-spark (\w+)\] (.*)")


@dataclass(frozen=True)
class WorkerPlan:
    """Everything a worker task needs, shipped to the executors with the task."""

    symbol_json: str
    features: FeatureColumn
    label: str
    data_name: str
    label_name: str
    kvstore: str
    num_workers: int
    namespace: str
    address: str
    task_env: dict[str, str] = field(repr=False)  # holds the Ray cluster's token: never in a message
    batch_size: int
    begin_epoch: int
    num_epoch: int
    optimizer: str
    optimizer_params: dict[str, Any]
    checkpoint_prefix: str
    seed: int
    timeout: float
    #: ``(prefix, epoch)`` of a checkpoint to start from (a resumed fit, or a Gluon block's parameters)
    initial_checkpoint: tuple[str, int] | None = None
    initializer: dict[str, Any] = field(default_factory=lambda: {"rnd_type": "gaussian", "factor_type": "in",
                                                                 "magnitude": 2})


@dataclass(frozen=True)
class WorkerReport:
    """What a worker reports when its fit ends.

    Attributes
    ----------
    rank : int
    host : str
    rows : int
        Rows of its partition.
    batches : int
        Batches per epoch.
    seconds : float
        Time in ``Module.fit`` (joining the store, initialising, every epoch).
    epoch_seconds : tuple of float
        Time of each epoch this run trained (the epochs after a retry's start only).
    """

    rank: int
    host: str
    rows: int
    batches: int
    seconds: float
    epoch_seconds: tuple[float, ...]


def _tagged(exc: BaseException, rank: int) -> MXKitError:
    where = f"worker rank {rank} on {socket.gethostname()}"
    name = type(exc).__name__ if isinstance(exc, MXKitError) else "MXKitError"
    text = str(exc) if isinstance(exc, MXKitError) else f"{type(exc).__name__}: {exc}"
    # one line: the driver finds it in the text of Spark's exception
    return MXKitError(f"[mxkit-spark {name}] {where}: {' '.join(text.split())}")


def error_from_spark(exc: BaseException) -> MXKitError | None:
    """The mxkit error a worker raised, from the exception Spark raised on the driver (or None).

    The class is looked up in :mod:`mxkit.core.errors` (``MXKitError`` when it is not
    there, e.g. a checkpoint error of mxkit-train, whose name stays in the message).
    """
    matches = ERROR_PATTERN.findall(str(exc))
    if not matches:
        return None
    name, message = matches[-1]
    cls = getattr(errors, name, None)
    if not (isinstance(cls, type) and issubclass(cls, MXKitError)):
        cls, message = MXKitError, f"{name}: {message}"
    return cls(message)


def train_partition(plan: WorkerPlan, rows: Iterable[Any]) -> Iterator[WorkerReport]:
    """Train one worker of the job on ``rows`` (run by Spark in a barrier task).

    Yields
    ------
    WorkerReport
        Once, when the fit ends.
    """
    from pyspark import BarrierTaskContext

    context = BarrierTaskContext.get()
    rank = context.partitionId()
    try:
        if context.attemptNumber() > 0:
            raise KVStoreError("Spark re-attempted the barrier stage; its servers have moved on, so the driver "
                               "retries the fit from the last checkpoint instead")
        peers = [json.loads(message) for message in
                 context.allGather(json.dumps({"rank": rank, "host": socket.gethostname()}))]
        if sorted(peer["rank"] for peer in peers) != list(range(plan.num_workers)):
            raise KVStoreError(f"the barrier stage has ranks {sorted(p['rank'] for p in peers)}; a job of "
                               f"{plan.num_workers} workers needs ranks 0..{plan.num_workers - 1}")
        yield _fit(plan, rank, rows)
    except Exception as exc:
        raise _tagged(exc, rank) from exc


def _fit(plan: WorkerPlan, rank: int, rows: Iterable[Any]) -> WorkerReport:
    from mxkit.spark.cluster import task_environment
    from mxkit.spark.partition_data import partition_iterator, spill_rows

    with tempfile.TemporaryDirectory(prefix=f"mxkit-spark-{rank}-") as scratch:
        partition = spill_rows(rows, RowDecoder(plan.features, plan.label), scratch)
        train_iter = partition_iterator(partition, plan.batch_size, rank, plan.data_name, plan.label_name)
        with task_environment(plan.task_env):
            from mxkit.kvstore.dist import runtime

            try:
                seconds, epoch_seconds = _run_module(plan, rank, train_iter)
            finally:
                runtime.shutdown_ray()  # a reused Python worker must not stay on this job's cluster
        return WorkerReport(rank, socket.gethostname(), partition.count, len(train_iter), seconds, epoch_seconds)


def _run_module(plan: WorkerPlan, rank: int, train_iter: Any) -> tuple[float, tuple[float, ...]]:
    import numpy as np
    from mxkit.core.context import cpu
    from mxkit.kvstore import create
    from mxkit.ndarray import random as nd_random
    from mxkit.symbol import load_json
    from mxkit.train.initializer import Xavier
    from mxkit.train.module import Module

    np.random.seed(plan.seed)
    nd_random.seed(plan.seed)
    symbol = load_json(plan.symbol_json)
    module = Module(symbol, data_names=(plan.data_name,), label_names=(plan.label_name,), context=cpu(),
                    logger=logging.getLogger(__name__))
    kvstore = create(plan.kvstore, rank=rank, num_workers=plan.num_workers, namespace=plan.namespace,
                     address=plan.address, timeout=plan.timeout)
    arg_params = aux_params = None
    if plan.initial_checkpoint is not None:
        from mxkit.train.model.checkpoint import load_params

        arg_params, aux_params = load_params(*plan.initial_checkpoint)

    epoch_ends: list[float] = []

    def checkpoint(epoch: int, sym: Any, arg: dict[str, Any], aux: dict[str, Any]) -> None:
        epoch_ends.append(time.perf_counter())
        if rank == 0:  # the workers of a dist_sync job hold the same weights: one checkpoint
            module.save_checkpoint(plan.checkpoint_prefix, epoch + 1)

    start = time.perf_counter()
    module.fit(train_iter, eval_metric="acc", kvstore=kvstore, optimizer=plan.optimizer,
               optimizer_params=dict(plan.optimizer_params), initializer=Xavier(**plan.initializer),
               arg_params=arg_params, aux_params=aux_params, epoch_end_callback=checkpoint,
               begin_epoch=plan.begin_epoch, num_epoch=plan.num_epoch)
    seconds = time.perf_counter() - start
    # an epoch's time runs from the previous epoch's end (the first from fit's start: it joins the store too)
    return seconds, tuple(float(b - a) for a, b in zip([start, *epoch_ends], epoch_ends))


__all__ = ["ERROR_PATTERN", "WorkerPlan", "WorkerReport", "error_from_spark", "train_partition"]
