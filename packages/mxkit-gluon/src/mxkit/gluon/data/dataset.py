"""Datasets: indexable collections of samples."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from mxkit.gluon.parameter import GluonError


class Dataset:
    """The base class: ``__getitem__(idx)`` and ``__len__``."""

    def __getitem__(self, idx: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must implement __len__")

    def transform(self, fn: Callable[..., Any], lazy: bool = True) -> Dataset:
        """A dataset whose samples are ``fn(*sample)`` (computed on access with ``lazy``)."""
        transformed = _LazyTransformDataset(self, fn)
        return transformed if lazy else SimpleDataset([transformed[i] for i in range(len(transformed))])

    def transform_first(self, fn: Callable[[Any], Any], lazy: bool = True) -> Dataset:
        """Apply ``fn`` to the first element of each sample (the data, not the label)."""
        def first(x: Any, *rest: Any) -> Any:
            return (fn(x), *rest) if rest else fn(x)

        return self.transform(first, lazy)

    def take(self, count: int | None) -> Dataset:
        """The first ``count`` samples (all when None)."""
        count = len(self) if count is None or count > len(self) else count
        return SimpleDataset([self[i] for i in range(count)])

    def shard(self, num_shards: int, index: int) -> Dataset:
        """Part ``index`` of ``num_shards`` consecutive parts (MXNet's split: the first
        ``len % num_shards`` parts have one sample more), read from this dataset on access."""
        if not isinstance(num_shards, int) or num_shards <= 0:
            raise GluonError(f"shard: num_shards must be a positive int, got {num_shards!r}")
        if not isinstance(index, int) or not 0 <= index < num_shards:
            raise GluonError(f"shard: index must be an int in [0, {num_shards}), got {index!r}")
        length = len(self)
        size, rest = divmod(length, num_shards)
        start = size * index + min(index, rest)
        return _SampledDataset(self, range(start, start + size + (index < rest)))

    def filter(self, fn: Callable[[Any], bool]) -> Dataset:
        """The samples for which ``fn`` is true."""
        return SimpleDataset([self[i] for i in range(len(self)) if fn(self[i])])


class SimpleDataset(Dataset):
    """A dataset over any sequence (a list, a numpy array...)."""

    def __init__(self, data: Any) -> None:
        self._data = data

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, idx: int) -> Any:
        return self._data[idx]


class _SampledDataset(Dataset):
    """The samples of ``data`` at ``indices``, read on access."""

    def __init__(self, data: Dataset, indices: Any) -> None:
        self._data = data
        self._indices = indices

    def __len__(self) -> int:
        return len(self._indices)

    def __getitem__(self, idx: int) -> Any:
        return self._data[self._indices[idx]]


class _LazyTransformDataset(Dataset):
    def __init__(self, data: Dataset, fn: Callable[..., Any]) -> None:
        self._data = data
        self._fn = fn

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, idx: int) -> Any:
        item = self._data[idx]
        return self._fn(*item) if isinstance(item, tuple) else self._fn(item)


class ArrayDataset(Dataset):
    """Zip arrays of equal length: sample ``i`` is ``(a[i], b[i], ...)`` (``a[i]`` for one array)."""

    def __init__(self, *args: Any) -> None:
        if not args:
            raise GluonError("ArrayDataset needs at least one array")
        self._length = len(args[0])
        for index, data in enumerate(args):
            if len(data) != self._length:
                raise GluonError(f"ArrayDataset: all arrays must have the same length; array 0 has "
                                 f"{self._length} samples, array {index} has {len(data)}")
        from mxkit import ndarray

        # (MXNet 1.9.1: a 1-D NDArray is held as numpy, so its samples are scalars and a
        # batch of them has shape (batch,), not (batch, 1))
        self._data = [data.asnumpy() if isinstance(data, ndarray.NDArray) and data.ndim == 1 else data
                      for data in args]

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, idx: int) -> Any:
        if len(self._data) == 1:
            return self._data[0][idx]
        return tuple(data[idx] for data in self._data)


class RecordFileDataset(Dataset):
    """The records of an indexed RecordIO file (``.rec`` with its ``.idx``), as raw bytes."""

    def __init__(self, filename: str) -> None:
        from mxkit.io.recordio import MXIndexedRecordIO

        self.idx_file = os.path.splitext(filename)[0] + ".idx"
        if not os.path.isfile(self.idx_file):
            raise GluonError(f"RecordFileDataset needs the index {self.idx_file!r} next to {filename!r} "
                             f"(im2rec writes it)")
        self.filename = filename
        self._record = MXIndexedRecordIO(self.idx_file, self.filename, "r")
        # one file position: seek and read must not interleave between DataLoader threads
        self._lock = threading.Lock()

    def __getitem__(self, idx: int) -> bytes:
        with self._lock:
            return self._record.read_idx(self._record.keys[idx])

    def __len__(self) -> int:
        return len(self._record.keys)
