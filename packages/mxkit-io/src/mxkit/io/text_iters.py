"""``CSVIter`` and ``LibSVMIter``: batches from text files, with MXNet's round_batch rule."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from mxkit.core.errors import DTypeError, FormatError, ShapeError
from mxkit.io._batch_arrays import batch_converter, csr_batch_converter
from mxkit.io._batching import RoundBatchSchedule
from mxkit.io._current_batch import CurrentBatchAccessors
from mxkit.io._streams import open_text
from mxkit.io.databatch import DataBatch, DataDesc, DataIter

__all__ = ["CSVIter", "LibSVMIter"]


def _shape(value: Any, what: str) -> tuple[int, ...]:
    shape = (int(value),) if np.isscalar(value) else tuple(int(v) for v in value)
    if not shape or any(v < 1 for v in shape):
        raise ShapeError(f"{what} must be a tuple of positive integers, got {value!r}")
    return shape


def _integer(text: str) -> int:
    """An integer field: digits are read exactly ("200000001" stays odd), "2.0" as 2."""
    try:
        return int(text)
    except ValueError:
        return int(float(text))


def _read_csv(path: str, row_shape: tuple[int, ...], what: str, dtype: Any = np.float32) -> np.ndarray:
    """The rows of a CSV file, parsed straight into ``dtype`` as MXNet's parser does (integers
    never pass through float32, which would round values above 2**24)."""
    width = int(np.prod(row_shape))
    parse = _integer if np.dtype(dtype).kind in "iu" else float
    rows = []
    with open_text(path, "r") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                values = [parse(v) for v in line.strip().split(",")]
            except ValueError:
                raise FormatError(
                    f"{what} {path!r} line {line_number} is {line.strip()[:60]!r}: expected "
                    f"comma-separated numbers"
                ) from None
            if len(values) != width:
                raise ShapeError(
                    f"{what} {path!r} line {line_number} has {len(values)} values; shape {row_shape} "
                    f"needs {width} per line"
                )
            rows.append(values)
    if not rows:
        raise FormatError(f"{what} {path!r} has no rows")
    try:
        return np.asarray(rows, dtype=dtype).reshape(len(rows), *row_shape)
    except OverflowError:
        raise FormatError(f"{what} {path!r} holds a value outside the range of {np.dtype(dtype).name}") from None


_CSV_DTYPES = ("float32", "float64", "int32", "int64", "uint8")


def _output_dtype(dtype: Any) -> np.dtype[Any]:
    try:
        resolved = np.dtype(dtype)
    except TypeError:
        resolved = None
    if resolved is None or resolved.name not in _CSV_DTYPES:
        raise DTypeError(f"CSVIter dtype must be one of {', '.join(_CSV_DTYPES)}, got {dtype!r}")
    return resolved


class _TextBatchIter(CurrentBatchAccessors, DataIter):
    """Batches over samples held in memory, cut by a :class:`RoundBatchSchedule`."""

    def __init__(self, data: np.ndarray, label: np.ndarray, batch_size: int, round_batch: bool,
                 data_name: str, label_name: str):
        super().__init__(batch_size)
        if label.shape[0] != data.shape[0]:
            raise ShapeError(
                f"the data has {data.shape[0]} rows but the labels have {label.shape[0]}; "
                f"both files need one line per sample"
            )
        self._data = data
        self._label = label
        self._data_name = data_name
        self._label_name = label_name
        self._schedule = RoundBatchSchedule(data.shape[0], batch_size, round_batch)
        self._previous: tuple[np.ndarray, np.ndarray] | None = None
        self._convert = batch_converter()

    def __len__(self) -> int:
        """Batches in the first epoch (the last one padded)."""
        return -(-self._data.shape[0] // self.batch_size)

    @property
    def provide_data(self) -> list[DataDesc]:
        """The data input: ``(batch_size, *data_shape)`` float32."""
        return [DataDesc(self._data_name, (self.batch_size, *self._data.shape[1:]), self._data.dtype)]

    @property
    def provide_label(self) -> list[DataDesc]:
        """The label input: ``(batch_size,)`` for width-1 labels, else ``(batch_size, width)``."""
        return [DataDesc(self._label_name, (self.batch_size, *self._label.shape[1:]), np.float32)]

    def reset(self) -> None:
        """Start the next epoch."""
        self._schedule.reset()

    def next(self) -> DataBatch:
        """The next batch; ``pad`` counts the samples that are not part of this epoch."""
        step = self._schedule.next_batch()
        if step is None:
            raise StopIteration
        indices, pad, _ = step
        data = self._data[indices]
        label = self._label[indices]
        if len(indices) < self.batch_size:
            # MXNet leaves the previous batch's rows in the unfilled tail; so do we.
            data = self._join(data, self._tail(0, len(indices), data))
            label = np.concatenate([label, self._tail(1, len(indices), label)])
        self._previous = (data, label)
        return self._remember(DataBatch([self._convert_data(data)], [self._convert(label)], pad=pad, index=indices))

    def _convert_data(self, data: Any) -> Any:
        return self._convert(data)

    def _tail(self, which: int, filled: int, current: Any) -> Any:
        if self._previous is None:
            if which == 0 and isinstance(current, SparseRows):
                return SparseRows.empty(self.batch_size - filled, current.shape[1])
            return np.zeros((self.batch_size - filled, *current.shape[1:]), dtype=current.dtype)
        return self._previous[which][filled:]

    @staticmethod
    def _join(first: Any, second: Any) -> Any:
        if isinstance(first, SparseRows):
            return first.concat(second)
        return np.concatenate([first, second])


class CSVIter(_TextBatchIter):
    """Batches from CSV files (MXNet's ``mx.io.CSVIter``).

    Parameters
    ----------
    data_csv : str
        CSV file, one sample per line (local path or fsspec URI).
    data_shape : tuple of int
        Shape of one sample; each line holds ``prod(data_shape)`` values.
    label_csv : str, optional
        CSV file of labels; every label is 0 when omitted.
    label_shape : tuple of int
        Shape of one label (``(1,)`` gives a label array of shape ``(batch_size,)``).
    batch_size : int
        Samples per batch.
    round_batch : bool
        Complete the last batch from the start of the data (see ``pad``).
    dtype : str
        dtype of the data batches (labels stay float32, as in MXNet).
    prefetch_buffer, ctx
        Accepted for MXNet compatibility; the file is parsed into memory up front, so
        there is nothing to prefetch.
    """

    def __init__(self, data_csv: str | os.PathLike[str], data_shape: Any, label_csv: str | None = None,
                 label_shape: Any = (1,), batch_size: int = 1, round_batch: bool = True,
                 data_name: str = "data", label_name: str = "softmax_label", dtype: str = "float32",
                 prefetch_buffer: int = 4, ctx: Any = None):
        data_shape = _shape(data_shape, "data_shape")
        label_shape = _shape(label_shape, "label_shape")
        out_dtype = _output_dtype(dtype)
        data = _read_csv(os.fspath(data_csv), data_shape, "data_csv", out_dtype)
        if label_csv is None or label_csv == "NULL":
            label = np.zeros((data.shape[0], *label_shape), dtype=np.float32)
        else:
            label = _read_csv(os.fspath(label_csv), label_shape, "label_csv")
        if label_shape == (1,):
            label = label.reshape(-1)
        super().__init__(data.astype(out_dtype), label, batch_size, round_batch, data_name, label_name)


class SparseRows:
    """Rows of a LibSVM file in compressed sparse row form: ``values`` and ``columns`` (one per
    stored feature) and ``indptr`` (row ``i`` is ``indptr[i]:indptr[i+1]``). Only the stored
    features are held, so a file with millions of feature columns costs its own size."""

    def __init__(self, values: np.ndarray, columns: np.ndarray, indptr: np.ndarray, width: int):
        self.values, self.columns, self.indptr, self.width = values, columns, indptr, int(width)

    @classmethod
    def empty(cls, rows: int, width: int) -> SparseRows:
        return cls(np.zeros(0, np.float32), np.zeros(0, np.int64), np.zeros(rows + 1, np.int64), width)

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.indptr) - 1, self.width)

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.values.dtype

    def __getitem__(self, rows: Any) -> SparseRows:
        rows = np.arange(self.shape[0])[rows] if isinstance(rows, slice) else np.asarray(rows, dtype=np.int64)
        starts, lengths = self.indptr[rows], np.diff(self.indptr)[rows]
        indptr = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lengths, out=indptr[1:])
        positions = np.repeat(starts - indptr[:-1], lengths) + np.arange(indptr[-1])
        return SparseRows(self.values[positions], self.columns[positions], indptr, self.width)

    def concat(self, other: SparseRows) -> SparseRows:
        return SparseRows(np.concatenate([self.values, other.values]), np.concatenate([self.columns, other.columns]),
                          np.concatenate([self.indptr, other.indptr[1:] + self.indptr[-1]]), self.width)

    def todense(self) -> np.ndarray:
        dense = np.zeros(self.shape, dtype=self.values.dtype)
        dense[np.repeat(np.arange(self.shape[0]), np.diff(self.indptr)), self.columns] = self.values
        return dense


def _read_libsvm_rows(path: str, width: int, what: str, with_label: bool) -> tuple[SparseRows, np.ndarray]:
    """The rows (sparse) and labels of a LibSVM file; every feature index is checked against
    ``width``, and a row's features are sorted (a repeated index is an error)."""
    values: list[float] = []
    columns: list[int] = []
    indptr = [0]
    labels: list[float] = []
    with open_text(path, "r") as handle:
        for line_number, line in enumerate(handle, start=1):
            fields = line.split()
            if not fields:
                continue
            if with_label:
                try:
                    labels.append(float(fields[0]))
                except ValueError:
                    raise FormatError(
                        f"{what} {path!r} line {line_number} starts with {fields[0]!r}; expected "
                        f"'label index:value ...'"
                    ) from None
                fields = fields[1:]
            row_columns, row_values = [], []
            for field in fields:
                index_text, _, value_text = field.partition(":")
                try:
                    index, value = int(index_text), float(value_text)
                except ValueError:
                    raise FormatError(
                        f"{what} {path!r} line {line_number} has {field!r}; expected index:value"
                    ) from None
                if not 0 <= index < width:
                    raise ShapeError(
                        f"{what} {path!r} line {line_number} has feature index {index}, outside the "
                        f"shape's 0..{width - 1}; raise data_shape/label_shape or fix the file"
                    )
                row_columns.append(index)
                row_values.append(value)
            order = np.argsort(row_columns, kind="stable")
            sorted_columns = np.asarray(row_columns, dtype=np.int64)[order]
            repeated = sorted_columns[1:][np.diff(sorted_columns) == 0]
            if repeated.size:
                raise FormatError(f"{what} {path!r} line {line_number} gives feature {int(repeated[0])} twice")
            columns.extend(sorted_columns.tolist())
            values.extend(np.asarray(row_values, dtype=np.float64)[order].tolist())
            indptr.append(len(columns))
    if len(indptr) == 1:
        raise FormatError(f"{what} {path!r} has no rows")
    rows = SparseRows(np.asarray(values, dtype=np.float32), np.asarray(columns, dtype=np.int64),
                      np.asarray(indptr, dtype=np.int64), width)
    return rows, np.asarray(labels, dtype=np.float32)


class LibSVMIter(_TextBatchIter):
    """Batches from LibSVM text files (MXNet's ``mx.io.LibSVMIter``): the data as csr arrays
    (``CSRNDArray``) when batches are NDArrays, dense numpy arrays otherwise; the labels dense.

    Lines read ``label index:value index:value ...`` with 0-based feature indices.

    Parameters
    ----------
    data_libsvm : str
        The data file.
    data_shape : tuple of int
        ``(num_features,)``.
    label_libsvm : str, optional
        A file of ``index:value`` label rows (no leading label) for multi-dimensional
        labels; the first column of ``data_libsvm`` is the label when omitted.
    label_shape : tuple of int
        ``(1,)`` or ``(label_width,)``.
    batch_size : int
        Samples per batch.
    round_batch : bool
        Complete the last batch from the start of the data.
    prefetch_buffer, ctx
        Accepted for MXNet compatibility; the file is parsed into memory up front.
    """

    def __init__(self, data_libsvm: str | os.PathLike[str], data_shape: Any, label_libsvm: str | None = None,
                 label_shape: Any = (1,), batch_size: int = 1, round_batch: bool = True,
                 data_name: str = "data", label_name: str = "softmax_label", prefetch_buffer: int = 4,
                 ctx: Any = None):
        data_shape = _shape(data_shape, "data_shape")
        label_shape = _shape(label_shape, "label_shape")
        if len(data_shape) != 1:
            raise ShapeError(f"LibSVMIter data_shape must be (num_features,), got {data_shape}")
        data, label = _read_libsvm_rows(os.fspath(data_libsvm), data_shape[0], "data_libsvm", with_label=True)
        if label_libsvm is not None and label_libsvm != "NULL":
            label_rows, _ = _read_libsvm_rows(os.fspath(label_libsvm), int(np.prod(label_shape)), "label_libsvm",
                                              with_label=False)
            label = label_rows.todense().reshape(label_rows.shape[0], *label_shape)
            if label_shape == (1,):
                label = label.reshape(-1)
        super().__init__(data, label, batch_size, round_batch, data_name, label_name)
        self._csr = csr_batch_converter()

    def _convert_data(self, rows: SparseRows) -> Any:
        return self._csr(rows.values, rows.columns, rows.indptr, rows.shape, rows.todense)
