"""``NDArrayIter``: batches over in-memory arrays, with MXNet 1.x's last-batch semantics."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from mxkit.core import config
from mxkit.core.errors import ConfigError, ShapeError
from mxkit.io._batch_arrays import batch_converter
from mxkit.io.databatch import DataBatch, DataDesc, DataIter, HostDataBatch

__all__ = ["NDArrayIter"]

_LAST_BATCH_HANDLES = ("pad", "discard", "roll_over")


def _to_numpy(value: Any, name: str) -> np.ndarray:
    if hasattr(value, "asnumpy"):  # an NDArray keeps its dtype, as in MXNet
        return np.asarray(value.asnumpy())
    # MXNet converts every other input with mx.nd.array, i.e. to the default dtype.
    dtype = config.get("default_dtype")
    try:
        return np.asarray(value, dtype=dtype)
    except (TypeError, ValueError):
        raise ShapeError(
            f"input {name!r} of NDArrayIter is a {type(value).__name__} that is not convertible "
            f"to a numeric array; pass numpy arrays, NDArrays, or lists of numbers"
        ) from None


def _init_data(data: Any, allow_empty: bool, default_name: str) -> list[tuple[str, np.ndarray]]:
    """Named arrays from one array, a list of arrays, or a dict (sorted by name, as MXNet)."""
    if data is None:
        if allow_empty:
            return []
        raise ShapeError("NDArrayIter needs data: pass an array, a list of arrays, or a dict of arrays")
    if isinstance(data, Mapping):
        named = sorted(data.items())
    elif isinstance(data, (list, tuple)) and not data:
        named = []  # an empty list is no arrays (MXNet's label=[] means no label), not a 0-length array
    elif isinstance(data, (list, tuple)) and not np.isscalar(data[0]) and np.ndim(data[0]) > 0:
        if len(data) == 1:
            named = [(default_name, data[0])]
        else:
            named = [(f"_{i}_{default_name}", array) for i, array in enumerate(data)]
    else:
        named = [(default_name, data)]
    if not named and not allow_empty:
        raise ShapeError("NDArrayIter needs at least one data array, got an empty list or dict")
    return [(name, _to_numpy(array, name)) for name, array in named]


class NDArrayIter(DataIter):
    """Iterate over arrays in batches (MXNet's ``mx.io.NDArrayIter``).

    Parameters
    ----------
    data : array, list of arrays, or dict of name to array
        Samples along the first axis.
    label : array, list of arrays, or dict, optional
        Labels, aligned with ``data``.
    batch_size : int
        Samples per batch.
    shuffle : bool
        Draw a new random order (``numpy.random``) at the start of every epoch.
    last_batch_handle : {"pad", "discard", "roll_over"}
        What to do with an incomplete last batch: fill it from the start of the data and
        report the fill in ``pad``; drop it; or carry its samples into the first batch
        of the next epoch.
    data_name, label_name : str
        Names used when ``data``/``label`` are not dicts.
    """

    def __init__(
        self,
        data: Any,
        label: Any = None,
        batch_size: int = 1,
        shuffle: bool = False,
        last_batch_handle: str = "pad",
        data_name: str = "data",
        label_name: str = "softmax_label",
    ):
        super().__init__(batch_size)
        if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        if last_batch_handle not in _LAST_BATCH_HANDLES:
            raise ConfigError(
                f"last_batch_handle must be one of {', '.join(_LAST_BATCH_HANDLES)}, got {last_batch_handle!r}"
            )
        self.data = _init_data(data, allow_empty=False, default_name=data_name)
        self.label = _init_data(label, allow_empty=True, default_name=label_name)
        self.num_data = self.data[0][1].shape[0] if self.data[0][1].ndim else 0
        for name, array in self.data + self.label:
            if array.ndim == 0 or array.shape[0] < self.num_data:
                raise ShapeError(
                    f"every input of NDArrayIter needs at least {self.num_data} samples along axis 0 "
                    f"(like {self.data[0][0]!r}), but {name!r} has shape {array.shape}"
                )
        # As MXNet, the first data array sets the sample count and only its indices are ever
        # read: a longer input (a label array shared by several iterators over slices of the
        # data) contributes its first num_data samples.
        self.data = [(k, v[: self.num_data]) for k, v in self.data]
        self.label = [(k, v[: self.num_data]) for k, v in self.label]
        if self.num_data == 0:
            raise ShapeError("NDArrayIter got inputs with no samples (axis 0 has length 0)")
        self.idx = np.arange(self.num_data)
        self.shuffle = shuffle
        self.last_batch_handle = last_batch_handle
        self.cursor = -batch_size
        self._cache_data: list[np.ndarray] | None = None
        self._cache_label: list[np.ndarray] | None = None
        self._convert = batch_converter()
        self.reset()

    @property
    def provide_data(self) -> list[DataDesc]:
        """Name, batch shape and dtype of every data input."""
        return [DataDesc(k, (self.batch_size, *v.shape[1:]), v.dtype) for k, v in self.data]

    @property
    def provide_label(self) -> list[DataDesc]:
        """Name, batch shape and dtype of every label input."""
        return [DataDesc(k, (self.batch_size, *v.shape[1:]), v.dtype) for k, v in self.label]

    def __len__(self) -> int:
        """Batches per epoch (the first epoch for ``roll_over``)."""
        if self.last_batch_handle == "pad":
            return -(-self.num_data // self.batch_size)
        return self.num_data // self.batch_size

    def _shuffle_data(self) -> None:
        # As MXNet: ``idx`` stays the permutation just applied to the current order, so after
        # the first shuffle sample i of the epoch is the input's sample idx[i]; each later
        # shuffle permutes the previous epoch's order (the same draws and orders as MXNet).
        np.random.shuffle(self.idx)
        self.data = [(k, v[self.idx]) for k, v in self.data]
        self.label = [(k, v[self.idx]) for k, v in self.label]

    def hard_reset(self) -> None:
        """Restart from the first sample, dropping anything rolled over."""
        if self.shuffle:
            self._shuffle_data()
        self.cursor = -self.batch_size
        self._cache_data = None
        self._cache_label = None

    def reset(self) -> None:
        """Start the next epoch (keeping a rolled-over partial batch)."""
        if self.shuffle:
            self._shuffle_data()
        if self.last_batch_handle == "roll_over" and self.num_data - self.batch_size < self.cursor < self.num_data:
            # The samples cached from the last batch open the next epoch.
            self.cursor = self.cursor - self.num_data - self.batch_size
        else:
            self.cursor = -self.batch_size

    def iter_next(self) -> bool:
        """Advance the cursor by one batch; False past the end of the data."""
        self.cursor += self.batch_size
        return self.cursor < self.num_data

    def next(self) -> DataBatch:
        """The next batch; an incomplete last batch ends the epoch unless padded."""
        if not self.iter_next():
            raise StopIteration
        data = self._batchify(self.data)
        label = self._batchify(self.label)
        if data[0].shape[0] != self.batch_size:
            self._cache_data = data
            self._cache_label = label
            raise StopIteration
        # converted when read: a bound module copies the host slices straight into its inputs
        return HostDataBatch(data, label, self._convert, pad=self.getpad(), index=None)

    def _slice(self, source: list[tuple[str, np.ndarray]], start: int = 0, end: int | None = None) -> list[np.ndarray]:
        return [array[start:end] for _, array in source]

    def _batchify(self, source: list[tuple[str, np.ndarray]]) -> list[np.ndarray]:
        if not source:
            return []
        if self.last_batch_handle == "roll_over" and -self.batch_size < self.cursor < 0:
            is_data = source is self.data
            cached = self._cache_data if is_data else self._cache_label
            if cached is None:
                raise ShapeError("NDArrayIter lost the rolled-over samples; call hard_reset()")
            if is_data:
                self._cache_data = None
            else:
                self._cache_label = None
            rest = self._slice(source, 0, self.cursor + self.batch_size)
            return [np.concatenate([a, b], axis=0) for a, b in zip(cached, rest)]
        if self.last_batch_handle == "pad" and self.cursor + self.batch_size > self.num_data:
            pad = self.batch_size - self.num_data + self.cursor
            head = self._slice(source, self.cursor)
            # Wrap around as many times as needed (a batch larger than the data).
            fill = [np.take(array, np.arange(pad) % self.num_data, axis=0) for _, array in source]
            return [np.concatenate([a, b], axis=0) for a, b in zip(head, fill)]
        return self._slice(source, self.cursor, min(self.cursor + self.batch_size, self.num_data))

    def getdata(self) -> list[Any]:
        """Data arrays of the current batch."""
        return [self._convert(d) for d in self._batchify(self.data)]

    def getlabel(self) -> list[Any]:
        """Label arrays of the current batch."""
        return [self._convert(x) for x in self._batchify(self.label)]

    def getpad(self) -> int:
        """Padding samples in the current batch (the rolled-over count for ``roll_over``)."""
        if self.last_batch_handle == "pad" and self.cursor + self.batch_size > self.num_data:
            return self.cursor + self.batch_size - self.num_data
        if self.last_batch_handle == "roll_over" and -self.batch_size < self.cursor < 0:
            return -self.cursor
        return 0
