"""The data-iterator protocol of MXNet 1.x: ``DataDesc``, ``DataBatch`` and ``DataIter``."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

__all__ = ["DataBatch", "DataDesc", "DataIter"]


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
