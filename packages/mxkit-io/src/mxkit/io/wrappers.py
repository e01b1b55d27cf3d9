"""Iterators that wrap others: ``PrefetchingIter`` (a background thread) and ``ResizeIter``."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from mxkit.core.errors import ConfigError, MXKitError
from mxkit.io.databatch import DataBatch, DataDesc, DataIter

__all__ = ["PrefetchingIter", "ResizeIter"]


class ResizeIter(DataIter):
    """Give exactly ``size`` batches per epoch from ``data_iter`` (MXNet's ``ResizeIter``).

    The inner iterator is reset whenever it runs out, so an epoch may span several of its
    epochs or stop in the middle of one.

    Parameters
    ----------
    data_iter : DataIter
        The iterator to resize.
    size : int
        Batches per epoch.
    reset_internal : bool
        Reset the inner iterator on ``reset`` as well (otherwise the next epoch goes on
        where this one stopped).
    """

    def __init__(self, data_iter: DataIter, size: int, reset_internal: bool = True):
        super().__init__(data_iter.batch_size)
        if size < 1:
            raise ConfigError(f"ResizeIter size must be a positive number of batches, got {size}")
        self.data_iter = data_iter
        self.size = size
        self.reset_internal = reset_internal
        self.cur = 0
        self.current_batch: DataBatch | None = None
        self.default_bucket_key = getattr(data_iter, "default_bucket_key", None)

    def __len__(self) -> int:
        return self.size

    @property
    def provide_data(self) -> list[DataDesc]:
        """The inner iterator's data inputs."""
        return self.data_iter.provide_data

    @property
    def provide_label(self) -> list[DataDesc]:
        """The inner iterator's label inputs."""
        return self.data_iter.provide_label

    def reset(self) -> None:
        """Start the next epoch of ``size`` batches."""
        self.cur = 0
        if self.reset_internal:
            self.data_iter.reset()

    def iter_next(self) -> bool:
        """Fetch the next batch, restarting the inner iterator when it runs dry."""
        if self.cur == self.size:
            return False
        try:
            self.current_batch = self.data_iter.next()
        except StopIteration:
            self.data_iter.reset()
            try:
                self.current_batch = self.data_iter.next()
            except StopIteration:
                raise MXKitError(
                    "ResizeIter's inner iterator yields no batch even right after reset(); "
                    "it has no data for a single batch"
                ) from None
        self.cur += 1
        return True

    def next(self) -> DataBatch:
        """The next of the ``size`` batches."""
        if not self.iter_next():
            raise StopIteration
        assert self.current_batch is not None
        return self.current_batch

    def getdata(self) -> list[Any]:
        """Data of the current batch."""
        return self.current_batch.data  # type: ignore[union-attr]

    def getlabel(self) -> list[Any] | None:
        """Labels of the current batch."""
        return self.current_batch.label  # type: ignore[union-attr]

    def getindex(self) -> Any:
        """Indices of the current batch."""
        return self.current_batch.index  # type: ignore[union-attr]

    def getpad(self) -> int:
        """Padding of the current batch."""
        return self.current_batch.pad or 0  # type: ignore[union-attr]


_END = object()


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


def _device_copier(ctx: Any) -> Callable[[DataBatch], DataBatch] | None:
    """``batch -> batch`` with every data and label array copied to ``ctx`` (None without a ctx)."""
    if ctx is None:
        return None
    from mxkit.io._batch_arrays import batch_converter

    to_ndarray = batch_converter(ctx)  # refuses a ctx when batches must stay numpy arrays

    def copy(array: Any) -> Any:
        # an NDArray is copied by the engine (a copy op on the device's copy stream); numpy via the converter
        move = getattr(array, "as_in_context", None)
        return move(ctx) if move is not None else to_ndarray(array)

    def to_device(batch: DataBatch) -> DataBatch:
        return DataBatch(data=[copy(d) for d in batch.data],
                         label=None if batch.label is None else [copy(x) for x in batch.label],
                         pad=batch.pad, index=batch.index, bucket_key=batch.bucket_key,
                         provide_data=batch.provide_data,
                         provide_label=batch.provide_label)

    return to_device


class PrefetchingIter(DataIter):
    """Keep batches ready in a background thread (MXNet's ``mx.io.PrefetchingIter``).

    With several iterators, each batch joins their data and labels (one input list).

    Parameters
    ----------
    iters : DataIter or list of DataIter
        The iterators to prefetch from, in step.
    rename_data, rename_label : list of dict, optional
        Per iterator, a mapping from input names to new names in ``provide_data``.
    prefetch_depth : int
        How many batches the thread keeps ready ahead of the consumer.
    ctx : Context, optional
        A device to copy every batch array to in the thread (``mx.gpu(0)``), so that the
        copy overlaps the consumer's work. Default: the arrays as the iterators give them.
    """

    def __init__(self, iters: DataIter | list[DataIter], rename_data: list[dict[str, str]] | None = None,
                 rename_label: list[dict[str, str]] | None = None, prefetch_depth: int = 2, ctx: Any = None):
        iters = iters if isinstance(iters, (list, tuple)) else [iters]
        if not iters:
            raise ConfigError("PrefetchingIter needs at least one iterator, got an empty list")
        if prefetch_depth < 1:
            raise ConfigError(f"prefetch_depth must be at least 1, got {prefetch_depth}")
        super().__init__(iters[0].batch_size)
        self.iters = list(iters)
        self.rename_data = rename_data
        self.rename_label = rename_label
        self.prefetch_depth = prefetch_depth
        self._to_device = _device_copier(ctx)
        self._queue: queue.Queue[Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start()

    def _renamed(self, descs_per_iter: list[list[DataDesc]], renames: list[dict[str, str]] | None) -> list[DataDesc]:
        if renames is None:
            return [d for descs in descs_per_iter for d in descs]
        return [
            DataDesc(rename.get(d.name, d.name), d.shape, d.dtype, d.layout)
            for rename, descs in zip(renames, descs_per_iter)
            for d in descs
        ]

    @property
    def provide_data(self) -> list[DataDesc]:
        """The data inputs of all iterators, renamed."""
        return self._renamed([i.provide_data for i in self.iters], self.rename_data)

    @property
    def provide_label(self) -> list[DataDesc]:
        """The label inputs of all iterators, renamed."""
        return self._renamed([i.provide_label for i in self.iters], self.rename_label)

    @staticmethod
    def _produce(iters: list[DataIter], out: queue.Queue[Any], stop: threading.Event,
                 to_device: Callable[[DataBatch], DataBatch] | None = None) -> None:
        # A static method: the thread must not keep the PrefetchingIter alive, so that one
        # dropped in the middle of an epoch is collected and its __del__ stops the thread.
        def put(item: Any) -> bool:
            while not stop.is_set():
                try:
                    out.put(item, timeout=0.05)
                    return True
                except queue.Full:
                    continue
            return False

        try:
            while not stop.is_set():
                try:
                    batches = [it.next() for it in iters]
                except StopIteration:
                    put(_END)
                    return
                if len(batches) == 1:
                    item = batches[0]
                    # a batch converted when read (HostDataBatch) is converted here, off the consumer's
                    # thread; a bound module still fills its inputs from the host arrays, one copy
                    item.data, item.label  # noqa: B018
                else:
                    item = DataBatch(
                        data=[d for b in batches for d in b.data],
                        label=[x for b in batches for x in (b.label or [])],
                        pad=batches[0].pad,
                        index=batches[0].index,
                    )
                if to_device is not None:
                    item = to_device(item)
                if not put(item):
                    return
        except BaseException as error:  # handed to the consumer thread
            put(_Failure(error))

    def _start(self) -> None:
        self._stop = threading.Event()
        self._queue = queue.Queue(maxsize=self.prefetch_depth)
        self._thread = threading.Thread(
            target=PrefetchingIter._produce, args=(self.iters, self._queue, self._stop, self._to_device),
            name="mxkit-io-prefetch", daemon=True,
        )
        self._thread.start()

    def _halt(self) -> None:
        thread = self._thread
        if thread is None:
            return
        self._stop.set()
        self._thread = None
        if thread is not threading.current_thread():
            thread.join()

    def reset(self) -> None:
        """Stop the thread, reset every iterator and start prefetching the next epoch."""
        self._halt()
        for it in self.iters:
            it.reset()
        self._start()

    def next(self) -> DataBatch:
        """The next prefetched batch; errors of the background thread are raised here."""
        if self._queue is None:
            raise StopIteration
        item = self._queue.get()
        if item is _END:
            self._queue.put(_END)  # stay exhausted until reset()
            raise StopIteration
        if isinstance(item, _Failure):
            self._queue.put(item)
            raise item.error
        return item  # type: ignore[no-any-return]

    def __del__(self) -> None:
        try:
            self._halt()
        except Exception:  # interpreter shutdown
            pass
