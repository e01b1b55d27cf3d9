"""A worker's partition as an mxkit data iterator, streamed from Spark's rows.

Spark hands a task its partition as an iterator of rows, once. Training reads it once per
epoch, so the rows are decoded as they arrive, in chunks of bounded size, and appended to
two files in the executor's local scratch directory (float32 samples, float32 labels);
the epochs then read those files through a memory map. Nothing is collected to the
driver, and the executor never holds more than a chunk of Python rows at a time.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import numpy as np
from mxkit.core.errors import ShapeError
from mxkit.spark.columns import RowDecoder

#: rows decoded before a chunk is appended to the files (bounds the Python objects held)
CHUNK_ROWS = 4096


class SpilledPartition:
    """The samples and labels of one partition, in files under ``directory``.

    Attributes
    ----------
    count : int
        Rows read.
    samples, labels : numpy.memmap
        ``(count, *sample_shape)`` float32 and ``(count,)`` float32, read-only.
    """

    def __init__(self, directory: str, count: int, sample_shape: tuple[int, ...]):
        self.directory = directory
        self.count = count
        self.sample_shape = sample_shape
        if count:
            self.samples = np.memmap(os.path.join(directory, "samples.f32"), np.float32, "r",
                                     shape=(count, *sample_shape))
            self.labels = np.memmap(os.path.join(directory, "labels.f32"), np.float32, "r", shape=(count,))
        else:
            self.samples = np.zeros((0, *sample_shape), np.float32)
            self.labels = np.zeros((0,), np.float32)


def spill_rows(rows: Iterable[Any], decoder: RowDecoder, directory: str) -> SpilledPartition:
    """Decode ``rows`` (Spark Rows with the feature and label columns) into files in ``directory``.

    Raises
    ------
    ShapeError
        If a row's features do not have the column's shape, or a value is null.
    """
    features, label = decoder.features.name, decoder.label
    os.makedirs(directory, exist_ok=True)
    count = 0
    with open(os.path.join(directory, "samples.f32"), "wb") as samples_file, \
            open(os.path.join(directory, "labels.f32"), "wb") as labels_file:
        samples: list[np.ndarray] = []
        labels: list[float] = []

        def flush() -> None:
            if samples:
                np.stack(samples).tofile(samples_file)
                np.asarray(labels, dtype=np.float32).tofile(labels_file)
                samples.clear()
                labels.clear()

        for row in rows:
            samples.append(decoder.sample(row[features]))
            labels.append(decoder.label_of(row[label]))
            count += 1
            if len(samples) >= CHUNK_ROWS:
                flush()
        flush()
    return SpilledPartition(directory, count, decoder.features.sample_shape)


def partition_iterator(partition: SpilledPartition, batch_size: int, rank: int, data_name: str = "data",
                       label_name: str = "softmax_label") -> Any:
    """An ``NDArrayIter`` over the partition: shuffled every epoch, the incomplete last batch
    dropped (as ``mxkit train`` does).

    Raises
    ------
    ShapeError
        If the partition has fewer rows than one batch (the rank, its rows and the batch
        size named).
    """
    from mxkit.io import NDArrayIter

    if partition.count < batch_size:
        raise ShapeError(f"worker rank {rank} got {partition.count} rows, fewer than one batch of {batch_size}; "
                         f"use a smaller batch_size or fewer num_workers (each worker trains on one of "
                         f"num_workers partitions)")
    return NDArrayIter({data_name: partition.samples}, {label_name: partition.labels}, batch_size, shuffle=True,
                       last_batch_handle="discard")


__all__ = ["CHUNK_ROWS", "SpilledPartition", "partition_iterator", "spill_rows"]
