"""MXNet's ``mx.image.ImageIter``: batches of augmented images from a .rec file or image files.

The Python-level image iterator of MXNet 1.x (``mx.io.ImageRecordIter`` is the threaded
one): it reads records (``path_imgrec``, with ``path_imgidx`` for shuffling and parts) or
image files listed in a ``.lst`` file (``path_imglist`` + ``path_root``) or a Python list
(``imglist``), decodes each with :func:`imdecode`, runs the augmenter list on it and
stacks the results as NCHW. Its steps are methods (``next_sample``, ``imdecode``,
``read_image``, ``augmentation_transform``, ``postprocess_data``) that subclasses override,
as with MXNet's.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
from mxkit import ndarray as nd
from mxkit.core.errors import ConfigError, FormatError, ShapeError
from mxkit.io import DataBatch, DataDesc, DataIter, MXIndexedRecordIO, MXRecordIO, unpack
from mxkit.mx.image.augmenters import Augmenter, CreateAugmenter
from mxkit.mx.image.functions import imdecode

__all__ = ["ImageIter"]

_LAST_BATCH = ("pad", "discard", "roll_over")


def _read_image_list(path: str) -> tuple[dict[Any, tuple[np.ndarray, str]], list[Any]]:
    """``index<TAB>label...<TAB>path`` lines (im2rec's .lst) as key -> (labels, path)."""
    images: dict[Any, tuple[np.ndarray, str]] = {}
    keys: list[Any] = []
    with open(path) as handle:
        for line_number, line in enumerate(handle, start=1):
            fields = line.strip().split("\t")
            if not fields or fields == [""]:
                continue
            try:
                if len(fields) < 3:
                    raise ValueError
                key = int(fields[0])
                labels = np.array([float(v) for v in fields[1:-1]], dtype=np.float32)
            except ValueError:
                raise FormatError(f"image list {path!r} line {line_number} is {line.rstrip()!r}; expected "
                                  f"'index<TAB>label[<TAB>label...]<TAB>path' (as im2rec --list writes)") from None
            images[key] = (labels, fields[-1])
            keys.append(key)
    return images, keys


def _python_image_list(imglist: Sequence[Any]) -> tuple[dict[Any, tuple[np.ndarray, str]], list[Any]]:
    """``[label or [labels...], path]`` items (or ``[label, label, ..., path]``), keyed 1, 2, ..."""
    images: dict[Any, tuple[np.ndarray, str]] = {}
    keys: list[Any] = []
    for index, item in enumerate(imglist, start=1):
        if not isinstance(item, (list, tuple)) or len(item) < 2:
            raise FormatError(f"imglist item {index - 1} is {item!r}; expected [label(s), path]")
        if len(item) > 2:
            labels = np.array(item[:-1], dtype=np.float32)
        else:
            labels = np.array(item[0], dtype=np.float32).reshape(-1)
        key = str(index)
        images[key] = (labels, item[-1])
        keys.append(key)
    return images, keys


class ImageIter(DataIter):  # type: ignore[misc]  # DataIter comes from an untyped re-export
    """Batches of augmented images (MXNet's ``mx.image.ImageIter``).

    Parameters
    ----------
    batch_size : int
        Images per batch.
    data_shape : tuple of int
        ``(channels, height, width)`` of an output image; channels 3 (RGB) or 1 (grey).
    label_width : int
        Labels per image: labels are ``(batch_size,)`` for 1, else ``(batch_size, label_width)``.
    path_imgrec : str, optional
        A RecordIO file of images (``pack_img``/im2rec); with ``path_imgidx`` for shuffling
        and ``num_parts``.
    path_imglist : str, optional
        An im2rec ``.lst`` file: with ``path_imgrec`` it gives the labels (by record key),
        without it the image files (under ``path_root``).
    path_root : str, optional
        The folder of the image files of ``path_imglist`` or ``imglist``.
    path_imgidx : str, optional
        The index of ``path_imgrec``.
    shuffle : bool
        Shuffle the images at every reset (Python's ``random``).
    part_index, num_parts : int
        Read only part ``part_index`` of ``num_parts`` equal parts (distributed training).
    aug_list : list of Augmenter, optional
        The augmenters; by default ``CreateAugmenter(data_shape, **kwargs)``.
    imglist : list, optional
        ``[label(s), path]`` items instead of a list file.
    data_name, label_name : str
        Names of the data and label inputs.
    dtype : str
        The data type of the batches: float32, float16, uint8 or int32 ...
    last_batch_handle : {"pad", "discard", "roll_over"}
        The incomplete last batch is padded with images from the start (``batch.pad``
        counts them), dropped, or completed at the start of the next epoch.
    **kwargs
        Passed to :func:`CreateAugmenter` (``resize``, ``rand_crop``, ``mean``, ...).
    """

    def __init__(self, batch_size: int, data_shape: Sequence[int], label_width: int = 1,
                 path_imgrec: str | None = None, path_imglist: str | None = None, path_root: str | None = None,
                 path_imgidx: str | None = None, shuffle: bool = False, part_index: int = 0, num_parts: int = 1,
                 aug_list: list[Augmenter] | None = None, imglist: list[Any] | None = None,
                 data_name: str = "data", label_name: str = "softmax_label", dtype: str = "float32",
                 last_batch_handle: str = "pad", **kwargs: Any):
        super().__init__(batch_size)
        if not (path_imgrec or path_imglist or isinstance(imglist, list)):
            raise ConfigError("ImageIter needs path_imgrec, path_imglist or imglist")
        if batch_size <= 0:
            raise ConfigError(f"ImageIter: batch_size must be positive, got {batch_size}")
        if last_batch_handle not in _LAST_BATCH:
            raise ConfigError(f"ImageIter: last_batch_handle must be one of {_LAST_BATCH}, got {last_batch_handle!r}")
        if not 0 <= part_index < num_parts:
            raise ConfigError(f"ImageIter: part_index must be in 0..num_parts-1 ({num_parts - 1}), got {part_index}")
        self.check_data_shape(data_shape)
        self.imgrec: MXRecordIO | None = None
        self.imgidx: list[Any] | None = None
        if path_imgrec:
            if path_imgidx:
                indexed = MXIndexedRecordIO(path_imgidx, path_imgrec, "r")
                self.imgrec = indexed
                self.imgidx = list(indexed.keys)
            else:
                self.imgrec = MXRecordIO(path_imgrec, "r")
        keys: list[Any] | None = None
        self.imglist: dict[Any, tuple[np.ndarray, str]] | None = None
        if path_imglist:
            self.imglist, keys = _read_image_list(path_imglist)
        elif isinstance(imglist, list):
            self.imglist, keys = _python_image_list(imglist)
        self.path_root = path_root
        self.batch_size = batch_size
        self.data_shape = tuple(int(d) for d in data_shape)
        self.label_width = label_width
        self.dtype = dtype
        self.last_batch_handle = last_batch_handle
        self.data_name, self.label_name = data_name, label_name
        self.shuffle = shuffle
        if self.imgrec is None:
            self.seq: list[Any] | None = keys
        elif shuffle or num_parts > 1 or keys is not None:
            if self.imgidx is None:
                raise ConfigError("ImageIter: shuffle, num_parts > 1 and a label list over a .rec file need "
                                  "path_imgidx (the record index; `mxkit rec index` makes one)")
            self.seq = keys if keys is not None else self.imgidx
        else:
            self.seq = None
        if num_parts > 1 and self.seq is not None:
            per_part = len(self.seq) // num_parts
            self.seq = self.seq[part_index * per_part:(part_index + 1) * per_part]
        self.auglist = CreateAugmenter(data_shape, **kwargs) if aug_list is None else aug_list
        self.cur = 0
        self._cache: tuple[np.ndarray, np.ndarray, int] | None = None
        self._epoch_done = False
        self.reset()

    @property
    def provide_data(self) -> list[DataDesc]:
        return [DataDesc(self.data_name, (self.batch_size, *self.data_shape), np.dtype(self.dtype))]

    @property
    def provide_label(self) -> list[DataDesc]:
        shape = (self.batch_size, self.label_width) if self.label_width > 1 else (self.batch_size,)
        return [DataDesc(self.label_name, shape, np.float32)]

    def reset(self) -> None:
        """Start a new epoch (reshuffled when ``shuffle``)."""
        if self.seq is not None and self.shuffle:
            random.shuffle(self.seq)
        if self.imgrec is not None:
            self.imgrec.reset()
        self.cur = 0
        self._epoch_done = False

    def hard_reset(self) -> None:
        """Start a new epoch and forget a rolled-over partial batch."""
        self._cache = None
        self.reset()

    def next_sample(self) -> tuple[Any, bytes]:
        """The next ``(label, encoded image)``; raises StopIteration at the end of the epoch."""
        if self.seq is not None:
            if self.cur >= len(self.seq):
                raise StopIteration
            key = self.seq[self.cur]
            self.cur += 1
            if self.imgrec is not None:
                header, img = unpack(self.imgrec.read_idx(key))
                return (header.label if self.imglist is None else self.imglist[key][0]), img
            label, fname = self.imglist[key]  # type: ignore[index]
            return label, self.read_image(fname)
        record = self.imgrec.read()  # type: ignore[union-attr]
        if record is None:
            raise StopIteration
        self.cur += 1
        header, img = unpack(record)
        return header.label, img

    def read_image(self, fname: str) -> bytes:
        """The bytes of the image file ``fname`` (under ``path_root``)."""
        path = os.path.join(self.path_root, fname) if self.path_root else fname
        try:
            with open(path, "rb") as handle:
                return handle.read()
        except OSError as exc:
            raise FormatError(f"ImageIter: cannot read image {path!r}: {exc.strerror or exc}") from None

    def imdecode(self, s: bytes) -> Any:
        """Decode one image, saying which record or file it was when it cannot be."""
        try:
            return imdecode(s, flag=1 if self.data_shape[0] == 3 else 0)
        except FormatError as exc:
            raise FormatError(f"ImageIter: broken image {self._where()}: {exc}") from None

    def _where(self) -> str:
        if self.seq is None:
            return f"record {self.cur - 1}"
        key = self.seq[self.cur - 1]
        if self.imglist is not None and self.imgrec is None:
            return f"file {self.imglist[key][1]!r}"
        return f"key {key!r}"

    def check_data_shape(self, data_shape: Sequence[int]) -> None:
        """Refuse a ``data_shape`` that is not (3 or 1, height, width)."""
        if len(data_shape) != 3:
            raise ShapeError(f"ImageIter: data_shape must be (channels, height, width), got {tuple(data_shape)}")
        if data_shape[0] not in (1, 3):
            raise ShapeError(f"ImageIter: data_shape must have 3 (RGB) or 1 (grey) channels, got {data_shape[0]}")

    def check_valid_image(self, data: Any) -> None:
        """Refuse an empty decoded image."""
        if len(data.shape) == 0 or 0 in data.shape:
            raise ShapeError(f"ImageIter: the decoded image {self._where()} is empty ({tuple(data.shape)})")

    def augmentation_transform(self, data: Any) -> Any:
        """Run the augmenter list on one image."""
        for aug in self.auglist:
            data = aug(data)
        return data

    def postprocess_data(self, datum: Any) -> Any:
        """HxWxC to CxHxW, the layout of a batch."""
        return nd.transpose(datum, axes=(2, 0, 1))

    def _fill(self, data: np.ndarray, labels: np.ndarray, start: int) -> int:
        """Fill slots ``start``.. of the batch; the number filled when the epoch ends."""
        i = start
        while i < self.batch_size:
            try:
                label, raw = self.next_sample()
            except StopIteration:
                return i
            image = self.imdecode(raw)
            self.check_valid_image(image)
            image = self.postprocess_data(self.augmentation_transform(image))
            image = image.asnumpy() if isinstance(image, nd.NDArray) else np.asarray(image)
            if image.shape != self.data_shape:
                raise ShapeError(f"ImageIter: the augmenters made an image of shape {image.shape} from "
                                 f"{self._where()}, the batch needs {self.data_shape}; add a crop or resize")
            label = np.asarray(label, dtype=np.float32).reshape(-1)
            if label.size != self.label_width:
                raise FormatError(f"ImageIter: {self._where()} has {label.size} labels, label_width is "
                                  f"{self.label_width}")
            data[i] = image
            labels[i] = label.reshape(labels.shape[1:])
            i += 1
        return i

    def next(self) -> DataBatch:
        """The next batch; raises StopIteration at the end of the epoch."""
        if self._cache is not None:  # the partial batch rolled over from the last epoch
            data, labels, filled = self._cache
            self._cache = None
        else:
            if self._epoch_done:
                raise StopIteration
            data = np.zeros((self.batch_size, *self.data_shape), dtype=self.dtype)
            labels = np.zeros(self.provide_label[0].shape, dtype=np.float32)
            filled = 0
        filled = self._fill(data, labels, filled)
        pad = self.batch_size - filled
        if filled == 0 or (pad and self.last_batch_handle == "discard"):
            self._epoch_done = True
            raise StopIteration
        if pad and self.last_batch_handle == "roll_over":
            self._cache = (data, labels, filled)
            self._epoch_done = True
            raise StopIteration
        if pad:  # "pad": complete the batch with the images of the next epoch's start
            self.reset()
            self._fill(data, labels, filled)
            self._epoch_done = True
        return DataBatch([nd.array(data, dtype=self.dtype)], [nd.array(labels)], pad=pad,
                         provide_data=self.provide_data, provide_label=self.provide_label)
