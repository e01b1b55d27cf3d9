"""The data-iterator protocol of MXNet 1.x: ``DataDesc``, ``DataBatch`` and ``DataIter``."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

__all__ = ["DataBatch", "DataDesc", "DataIter", "HostDataBatch"]


class DataDesc(namedtuple("DataDesc", ["name", "shape"])):
    """Name, shape, dtype and layout of one input of a model (MXNet's ``mx.io.DataDesc``).

    It is a ``(name, shape)`` tuple, so code that unpacks ``provide_data`` as pairs works.

    Parameters
    ----------
    name : str
        The input's name (``"data"``, ``"softmax_label"``).
    shape : tuple of int
        Shape of one batch of the input.
    dtype : numpy dtype
        Element type (float32 by default).
    layout : str
        Axis names, ``N`` marking the batch axis (``"NCHW"`` by default).
    """

    dtype: Any
    layout: str

    def __new__(cls, name: str, shape: tuple[int, ...], dtype: Any = np.float32, layout: str = "NCHW"):
        desc = super().__new__(cls, name, tuple(shape))
        desc.dtype = dtype
        desc.layout = layout
        return desc

    def __repr__(self) -> str:
        return f"DataDesc[{self.name},{self.shape},{self.dtype},{self.layout}]"

    @staticmethod
    def get_batch_axis(layout: str | None) -> int:
        """Index of ``N`` in ``layout`` (0 when the layout is None)."""
        if layout is None:
            return 0
        return layout.find("N")

    @staticmethod
    def get_list(shapes: list[tuple[str, tuple[int, ...]]], types: list[tuple[str, Any]] | None) -> list[DataDesc]:
        """DataDescs from ``(name, shape)`` pairs and optional ``(name, dtype)`` pairs."""
        if types is None:
            return [DataDesc(name, shape) for name, shape in shapes]
        dtypes = dict(types)
        return [DataDesc(name, shape, dtypes[name]) for name, shape in shapes]


class DataBatch:
    """One batch: lists of data and label arrays (MXNet's ``mx.io.DataBatch``).

    Parameters
    ----------
    data : list of arrays
        One array per data input.
    label : list of arrays, optional
        One array per label input.
    pad : int, optional
        How many samples at the end of the batch are padding (not real data).
    index : array, optional
        Indices of the samples in the batch.
    bucket_key, provide_data, provide_label : optional
        As in MXNet (for bucketing modules).
    """

    def __init__(
        self,
        data: list[Any],
        label: list[Any] | None = None,
        pad: int | None = None,
        index: Any = None,
        bucket_key: Any = None,
        provide_data: list[DataDesc] | None = None,
        provide_label: list[DataDesc] | None = None,
    ):
        if data is not None and not isinstance(data, (list, tuple)):
            from mxkit.core.errors import ShapeError

            raise ShapeError(f"DataBatch data must be a list of arrays, got {type(data).__name__}")
        self.data = data
        self.label = label
        self.pad = pad
        self.index = index
        self.bucket_key = bucket_key
        self.provide_data = provide_data
        self.provide_label = provide_label

    def __repr__(self) -> str:
        data_shapes = [tuple(d.shape) for d in self.data]
        label_shapes = [tuple(x.shape) for x in self.label] if self.label else None
        return f"DataBatch: data shapes: {data_shapes} label shapes: {label_shapes} pad: {self.pad}"


class HostDataBatch(DataBatch):
    """A batch an iterator made of host (numpy) arrays: ``data`` and ``label`` are converted to the
    iterator's batch type (NDArrays) when first read, and :attr:`host_data`/:attr:`host_label`
    hold the host arrays themselves.

    A consumer with input buffers of its own (a module bound for training) copies the host
    arrays straight into them and never reads ``data``, which saves the conversion: one copy
    of every batch instead of two, as MXNet's prefetcher filled the bound inputs. The host
    arrays must stay unchanged while the batch is in use (an iterator's own arrays, which it
    replaces rather than writes: NDArrayIter's slices). Assigning ``data`` or ``label`` drops
    the host arrays of that side (they no longer describe the batch).

    Parameters
    ----------
    host_data, host_label : list of numpy.ndarray
        The batch's arrays on the host.
    convert : callable
        Makes a batch array of a host array (:func:`mxkit.io._batch_arrays.batch_converter`'s).
    pad, index, bucket_key, provide_data, provide_label
        As for :class:`DataBatch`.
    """

    def __init__(self, host_data: list[Any], host_label: list[Any], convert: Any, pad: int | None = None,
                 index: Any = None, bucket_key: Any = None, provide_data: list[DataDesc] | None = None,
                 provide_label: list[DataDesc] | None = None):
        super().__init__(data=[], label=None, pad=pad, index=index, bucket_key=bucket_key,
                         provide_data=provide_data, provide_label=provide_label)
        self._convert = convert
        self.host_data: list[Any] | None = list(host_data)
        self.host_label: list[Any] | None = list(host_label)
        self._data: list[Any] | None = None
        self._label: list[Any] | None = None

    @property  # type: ignore[override]
    def data(self) -> list[Any]:
        """The data arrays (converted on first read)."""
        if self._data is None and self.host_data is not None:
            self._data = [self._convert(array) for array in self.host_data]
        return self._data  # type: ignore[return-value]

    @data.setter
    def data(self, value: list[Any]) -> None:
        self._data = value
        self.host_data = None

    @property  # type: ignore[override]
    def label(self) -> list[Any] | None:
        """The label arrays (converted on first read)."""
        if self._label is None and self.host_label is not None:
            self._label = [self._convert(array) for array in self.host_label]
        return self._label

    @label.setter
    def label(self, value: list[Any] | None) -> None:
        self._label = value
        self.host_label = None


class DataIter:
    """Base class of data iterators (MXNet's ``mx.io.DataIter``).

    Subclasses implement ``reset`` and either ``next`` or the ``iter_next`` / ``getdata``
    / ``getlabel`` / ``getpad`` / ``getindex`` quintet, and describe their inputs with
    ``provide_data`` and ``provide_label``.
    """

    def __init__(self, batch_size: int = 0):
        self.batch_size = batch_size

    def __iter__(self) -> DataIter:
        return self

    def reset(self) -> None:
        """Go back to the start of the data (the next epoch)."""

    def next(self) -> DataBatch:
        """The next batch; raises StopIteration at the end of the epoch."""
        if self.iter_next():
            return DataBatch(data=self.getdata(), label=self.getlabel(), pad=self.getpad(), index=self.getindex())
        raise StopIteration

    def __next__(self) -> DataBatch:
        return self.next()

    def iter_next(self) -> bool:
        """Advance to the next batch; False at the end of the epoch."""
        return False

    def getdata(self) -> list[Any]:
        """Data arrays of the current batch."""
        return []

    def getlabel(self) -> list[Any] | None:
        """Label arrays of the current batch."""
        return None

    def getindex(self) -> Any:
        """Indices of the current batch's samples (None when unknown)."""
        return None

    def getpad(self) -> int:
        """Number of padding samples at the end of the current batch."""
        return 0

    @property
    def provide_data(self) -> list[DataDesc]:
        """Descriptions of the data inputs."""
        return []

    @property
    def provide_label(self) -> list[DataDesc]:
        """Descriptions of the label inputs."""
        return []
