"""``ImageRecordIter``: decode and augment images from a record file with a thread pool.

The pipeline: a producer thread picks the records of each batch (``RoundBatchSchedule``),
reads them, and hands every image to a pool of ``preprocess_threads`` workers that decode,
resize, crop, mirror and normalise it straight into its slot of the batch array (OpenCV
and numpy release the GIL, so the workers run in parallel). Up to ``prefetch_buffer``
batches are in flight or ready, so the pipeline runs ahead of the training loop.

Random choices of a batch come from a generator seeded by ``(seed, epoch, batch)`` and are
drawn before the images are handed out, so the batches are the same for a given seed
whatever the number of threads.
"""

from __future__ import annotations

import collections
import os
import queue
import threading
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
from mxkit.core.errors import ConfigError, DTypeError, FormatError, ShapeError
from mxkit.io._batch_arrays import batch_converter
from mxkit.io._batching import RoundBatchSchedule
from mxkit.io._current_batch import CurrentBatchAccessors
from mxkit.io._format import READ_BUFFER_BYTES, RecordReader
from mxkit.io._streams import open_binary
from mxkit.io.databatch import DataBatch, DataDesc, DataIter
from mxkit.io.image import center_crop, crop_at, cv2_module, resize_short
from mxkit.io.image_header import check_image_pixels
from mxkit.io.recordio import unpack
from mxkit.io.sharding import part_byte_range, part_record_offsets

__all__ = ["ImageRecordIter"]

_END = object()


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


def _read_index_offsets(path_imgidx: str, begin: int, end: int) -> list[int]:
    offsets = []
    from mxkit.io._streams import open_text

    with open_text(path_imgidx, "r") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                offset = int(line.split("\t")[1])
            except (IndexError, ValueError):
                raise FormatError(
                    f"index file {path_imgidx!r} line {line_number} is {line.rstrip()!r}; expected "
                    f"'key<TAB>offset' (rebuild it with `mxkit rec index`)"
                ) from None
            if begin <= offset < end:
                offsets.append(offset)
    return sorted(offsets)


class ImageRecordIter(CurrentBatchAccessors, DataIter):
    """Batches of images from a RecordIO file (MXNet's ``mx.io.ImageRecordIter``).

    Parameters
    ----------
    path_imgrec : str
        The ``.rec`` file (records made by ``pack_img`` or im2rec).
    data_shape : tuple of int
        ``(channels, height, width)`` of one output image (channels 1 or 3).
    batch_size : int
        Images per batch.
    path_imgidx : str, optional
        The ``.idx`` file; saves a pass over the record headers.
    label_width : int
        Labels per image: output labels are ``(batch_size,)`` for 1, else
        ``(batch_size, label_width)``.
    shuffle : bool
        A new random order of the records every epoch.
    seed : int
        Seed of the shuffle and of the augmentations.
    rand_crop : bool
        Crop at a random position (else the centre).
    rand_mirror : bool
        Flip left-right with probability 1/2.
    resize : int
        Resize the shorter edge to this many pixels before cropping (-1: no resize).
    mean_r, mean_g, mean_b, std_r, std_g, std_b, scale : float
        Output is ``(pixel - mean) * scale / std`` per RGB channel.
    preprocess_threads : int
        Decode and augmentation threads.
    prefetch_buffer : int
        Batches kept in flight or ready ahead of the consumer.
    num_parts, part_index : int
        Read only part ``part_index`` of ``num_parts`` disjoint parts of the file.
    round_batch : bool
        Complete the last batch from the start of the data (``pad`` tells how much).
    dtype : {"float32", "uint8"}
        Output dtype; ``uint8`` gives raw RGB pixels (no mean, std or scale).
    inter_method : int
        OpenCV interpolation for ``resize`` (1 = bilinear).
    data_name, label_name : str
        Input names in ``provide_data`` and ``provide_label``.
    ctx : Context, optional
        The device the batches go to (``mx.gpu(0)``): the producer thread copies each batch
        there while the consumer works on the previous one. Default: host NDArrays.
    """

    def __init__(
        self,
        path_imgrec: str | os.PathLike[str],
        data_shape: tuple[int, int, int],
        batch_size: int,
        path_imgidx: str | os.PathLike[str] | None = None,
        label_width: int = 1,
        shuffle: bool = False,
        seed: int = 0,
        rand_crop: bool = False,
        rand_mirror: bool = False,
        resize: int = -1,
        mean_r: float = 0.0,
        mean_g: float = 0.0,
        mean_b: float = 0.0,
        std_r: float = 1.0,
        std_g: float = 1.0,
        std_b: float = 1.0,
        scale: float = 1.0,
        preprocess_threads: int = 4,
        prefetch_buffer: int = 4,
        num_parts: int = 1,
        part_index: int = 0,
        round_batch: bool = True,
        dtype: str = "float32",
        inter_method: int = 1,
        data_name: str = "data",
        label_name: str = "softmax_label",
        ctx: Any = None,
    ):
        super().__init__(batch_size)
        shape = tuple(int(v) for v in data_shape)
        if len(shape) != 3 or shape[0] not in (1, 3) or min(shape) < 1:
            raise ShapeError(f"data_shape must be (channels, height, width) with 1 or 3 channels, got {data_shape!r}")
        if batch_size < 1 or preprocess_threads < 1 or prefetch_buffer < 1 or label_width < 1:
            raise ConfigError(
                f"batch_size, preprocess_threads, prefetch_buffer and label_width must be positive, got "
                f"{batch_size}, {preprocess_threads}, {prefetch_buffer}, {label_width}"
            )
        if np.dtype(dtype) not in (np.float32, np.uint8):
            raise DTypeError(f"ImageRecordIter dtype must be 'float32' or 'uint8', got {dtype!r}")
        self.dtype = np.dtype(dtype)
        means, stds = (mean_r, mean_g, mean_b), (std_r, std_g, std_b)
        if self.dtype == np.uint8 and (any(means) or any(s != 1 for s in stds) or scale != 1):
            raise ConfigError("dtype='uint8' gives raw pixels: leave mean_*, std_* and scale at 0, 1 and 1")
        if any(s == 0 for s in stds):
            raise ConfigError(f"std_r, std_g, std_b must be non-zero, got {stds}")
        self.path_imgrec = os.fspath(path_imgrec)
        self.data_shape = shape
        self.label_width = label_width
        self.shuffle = shuffle
        self.seed = seed
        self.rand_crop = rand_crop
        self.rand_mirror = rand_mirror
        self.resize = resize
        self.inter_method = inter_method
        channels = shape[0]
        self._mean = np.asarray(means[:channels], dtype=np.float32).reshape(channels, 1, 1)
        self._factor = (scale / np.asarray(stds[:channels], dtype=np.float32)).reshape(channels, 1, 1)
        self._identity_normalisation = not any(means[:channels]) and bool(np.all(self._factor == 1))
        self._data_name = data_name
        self._label_name = label_name
        self._prefetch_buffer = prefetch_buffer
        # Imported here, in the caller's thread: importing OpenCV from several pool threads
        # at once races on its module initialisation.
        self._cv2 = cv2_module()

        if path_imgidx is not None:
            begin, end = part_byte_range(self.path_imgrec, num_parts, part_index)
            self._offsets = _read_index_offsets(os.fspath(path_imgidx), begin, end)
        else:
            self._offsets = part_record_offsets(self.path_imgrec, num_parts, part_index)
        if not self._offsets:
            raise FormatError(
                f"part {part_index} of {num_parts} of {self.path_imgrec!r} holds no records; "
                f"use fewer parts or a larger file"
            )
        order = self._shuffled_order if shuffle else None
        self._schedule = RoundBatchSchedule(len(self._offsets), batch_size, round_batch, order)
        self._epoch = 0
        self._convert = batch_converter(ctx)
        self._pool = ThreadPoolExecutor(max_workers=preprocess_threads, thread_name_prefix="mxkit-io-decode")
        self._queue: queue.Queue[Any] = queue.Queue()
        self._stop = threading.Event()
        self._producer: threading.Thread | None = None
        self._start()

    def __len__(self) -> int:
        """Batches in the first epoch."""
        return -(-len(self._offsets) // self.batch_size)

    @property
    def num_samples(self) -> int:
        """Records in this part of the file."""
        return len(self._offsets)

    @property
    def provide_data(self) -> list[DataDesc]:
        """``data``: ``(batch_size, channels, height, width)``."""
        return [DataDesc(self._data_name, (self.batch_size, *self.data_shape), self.dtype)]

    @property
    def provide_label(self) -> list[DataDesc]:
        """``softmax_label``: ``(batch_size,)`` or ``(batch_size, label_width)``."""
        shape = (self.batch_size,) if self.label_width == 1 else (self.batch_size, self.label_width)
        return [DataDesc(self._label_name, shape, np.float32)]

    def _shuffled_order(self, pass_number: int) -> np.ndarray:
        return np.random.default_rng([self.seed, pass_number]).permutation(len(self._offsets))

    # --- one image (runs in a pool thread) -------------------------------------------------
    def _decode_into(self, record: bytes, data_out: np.ndarray, label_out: np.ndarray, draws: np.ndarray) -> None:
        cv2 = self._cv2
        header, image_bytes = unpack(record)
        if header.flag == 0:
            if self.label_width != 1:
                raise ShapeError(
                    f"a record (id {header.id}) has a scalar label but label_width is {self.label_width}; "
                    f"use label_width=1 or pack vector labels"
                )
            label_out[0] = header.label
        else:
            if header.flag != self.label_width:
                raise ShapeError(
                    f"a record (id {header.id}) has {header.flag} labels but label_width is "
                    f"{self.label_width}; set label_width={header.flag}"
                )
            label_out[:] = header.label
        channels, height, width = self.data_shape
        try:
            check_image_pixels(image_bytes)  # from the header: a bomb is refused before it is decoded
        except FormatError as exc:
            raise FormatError(f"record id {header.id} of {self.path_imgrec!r}: {exc}") from None
        img = cv2.imdecode(np.frombuffer(image_bytes, dtype=np.uint8), 1 if channels == 3 else 0)
        if img is None:
            raise FormatError(f"record id {header.id} of {self.path_imgrec!r} is not a decodable image")
        if self.resize > 0:
            img = resize_short(img, self.resize, self.inter_method)
        if self.rand_crop:
            img = crop_at(img, height, width, float(draws[0]), float(draws[1]))
        else:
            img = center_crop(img, height, width)
        if self.rand_mirror and draws[2] < 0.5:
            img = cv2.flip(img, 1)
        # OpenCV splits the channels into contiguous planes (BGR order) without the GIL;
        # a strided numpy transpose of the whole image would be twice as slow.
        planes = cv2.split(img) if channels == 3 else [img]
        for channel in range(channels):
            plane = planes[channels - 1 - channel]  # BGR -> RGB
            if self.dtype == np.uint8 or self._identity_normalisation:
                data_out[channel] = plane
            else:
                np.subtract(plane, self._mean[channel], out=data_out[channel], dtype=np.float32)
                np.multiply(data_out[channel], self._factor[channel], out=data_out[channel])

    # --- the producer thread ---------------------------------------------------------------
    @staticmethod
    def _produce(
        owner_ref: weakref.ref[ImageRecordIter], epoch: int, out: queue.Queue[Any], stop: threading.Event
    ) -> None:
        """Fill ``out`` with the batches of one epoch.

        It holds its iterator only through a weak reference while it waits on the queue,
        so an iterator dropped in the middle of an epoch is collected and its threads end.
        """

        def put(item: Any) -> bool:
            while not stop.is_set():
                try:
                    out.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    if owner_ref() is None:
                        return False
            return False

        in_flight: collections.deque[tuple[list[Future[None]], np.ndarray, np.ndarray, int, np.ndarray]] = (
            collections.deque()
        )

        def finish_oldest() -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
            futures, data, label, pad, indices = in_flight.popleft()
            for future in futures:
                future.result()
            return data, label, pad, indices

        try:
            owner = owner_ref()
            if owner is None:
                return
            with open_binary(owner.path_imgrec, "rb", buffering=READ_BUFFER_BYTES) as handle:
                reader = RecordReader(handle, owner.path_imgrec)
                batch_number = 0
                while not stop.is_set():
                    step = owner._schedule.next_batch()
                    if step is None:
                        break
                    indices, pad, _ = step
                    data = np.zeros((owner.batch_size, *owner.data_shape), dtype=owner.dtype)
                    label = np.zeros((owner.batch_size, owner.label_width), dtype=np.float32)
                    # The batch's random draws (crop row, crop column, mirror) per slot, from
                    # a generator of its own: the same whatever thread decodes which image.
                    draws = np.random.default_rng([owner.seed, epoch, batch_number]).random((len(indices), 3))
                    futures = []
                    for slot, sample in enumerate(indices.tolist()):
                        reader.seek(owner._offsets[sample])
                        record = reader.read()
                        if record is None:
                            raise FormatError(f"no record at byte {owner._offsets[sample]} of {owner.path_imgrec!r}")
                        futures.append(
                            owner._pool.submit(owner._decode_into, record, data[slot], label[slot], draws[slot])
                        )
                    in_flight.append((futures, data, label, pad, indices))
                    batch_number += 1
                    if len(in_flight) >= owner._prefetch_buffer:
                        ready = finish_oldest()
                        del owner  # not kept alive while waiting for the consumer
                        if not put(ready):
                            return
                        owner = owner_ref()
                        if owner is None:
                            return
                del owner
                while in_flight and not stop.is_set():
                    if not put(finish_oldest()):
                        return
            put(_END)
        except BaseException as error:  # handed to the consumer thread
            put(_Failure(error))

    def _start(self) -> None:
        self._stop = threading.Event()
        self._queue = queue.Queue(maxsize=self._prefetch_buffer)
        self._producer = threading.Thread(
            target=ImageRecordIter._produce,
            args=(weakref.ref(self), self._epoch, self._queue, self._stop),
            name="mxkit-io-images",
            daemon=True,
        )
        self._producer.start()

    def _halt(self) -> None:
        producer = self._producer
        if producer is None:
            return
        self._stop.set()
        self._producer = None
        if producer is threading.current_thread():
            return  # collected by its own producer: it is on its way out
        producer.join()

    def reset(self) -> None:
        """Start the next epoch (a new shuffle; after a rounded batch, continue after it)."""
        self._halt()
        self._schedule.reset()
        self._epoch += 1
        self._start()

    def next(self) -> DataBatch:
        """The next batch of images; errors of the decode threads are raised here."""
        item = self._queue.get()
        if item is _END or isinstance(item, _Failure):
            self._queue.put(item)  # stay finished until reset()
            if isinstance(item, _Failure):
                raise item.error
            raise StopIteration
        data, label, pad, indices = item
        if self.label_width == 1:
            label = label.reshape(self.batch_size)
        return self._remember(DataBatch([self._convert(data)], [self._convert(label)], pad=pad, index=indices))

    def close(self) -> None:
        """Stop the threads (also done when the iterator is garbage-collected)."""
        self._halt()
        self._pool.shutdown(wait=True)

    def __del__(self) -> None:
        try:
            # The last reference may go in a pool or producer thread, which cannot wait for itself.
            self._halt()
            self._pool.shutdown(wait=False, cancel_futures=True)
        except Exception:  # interpreter shutdown
            pass
