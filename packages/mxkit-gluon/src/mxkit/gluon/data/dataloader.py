"""``DataLoader``: batches of a dataset, in the main process or in worker threads.

With ``num_workers > 0`` and ``thread_pool=True``, batches are made by a pool of threads
and handed over in order, ``prefetch`` of them ahead of the consumer (decoding and numpy
work release the GIL). Worker processes (MXNet's default for ``num_workers > 0``) are not
implemented: that combination is refused with an error rather than silently run in one
process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from mxkit.gluon.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler
from mxkit.gluon.parameter import GluonError


def default_batchify_fn(data: list[Any]) -> Any:
    """Stack samples into a batch: arrays along a new first axis, tuples element-wise."""
    from mxkit import ndarray

    first = data[0]
    if isinstance(first, ndarray.NDArray):
        return ndarray.stack(*data)
    if isinstance(first, tuple):
        return [default_batchify_fn(list(items)) for items in zip(*data)]
    array = np.asarray(data)
    if array.dtype == np.float64:
        array = array.astype(np.float32)
    return ndarray.array(array, dtype=array.dtype)


class DataLoader:
    """Iterate over a dataset in batches.

    Parameters
    ----------
    dataset : Dataset
    batch_size : int
    shuffle : bool
        A new random order each epoch.
    sampler : Sampler, optional
        The order of samples (instead of ``shuffle``).
    last_batch : {'keep', 'discard', 'rollover'}
    batch_sampler : Sampler, optional
        Yields lists of indices (instead of ``batch_size``/``shuffle``/``sampler``/``last_batch``).
    batchify_fn : callable, optional
        Makes a batch of a list of samples (default: :func:`default_batchify_fn`).
    num_workers : int
        Only 0 (the main process) is supported.
    """

    def __init__(self, dataset: Any, batch_size: int | None = None, shuffle: bool = False,
                 sampler: Sampler | None = None, last_batch: str | None = None, batch_sampler: Sampler | None = None,
                 batchify_fn: Callable[[list[Any]], Any] | None = None, num_workers: int = 0,
                 pin_memory: bool = False, pin_device_id: int = 0, prefetch: int | None = None,
                 thread_pool: bool = False, timeout: int = 120) -> None:
        self._dataset = dataset
        if batch_sampler is None:
            if batch_size is None:
                raise GluonError("DataLoader needs batch_size when no batch_sampler is given")
            if sampler is None:
                sampler = RandomSampler(len(dataset)) if shuffle else SequentialSampler(len(dataset))
            elif shuffle:
                raise GluonError("shuffle must not be given with a sampler")
            batch_sampler = BatchSampler(sampler, batch_size, last_batch if last_batch else "keep")
        elif batch_size is not None or shuffle or sampler is not None or last_batch is not None:
            raise GluonError("batch_size, shuffle, sampler and last_batch must not be given with batch_sampler")
        if num_workers < 0:
            raise GluonError(f"num_workers must be a non-negative int, got {num_workers}")
        if num_workers > 0 and not thread_pool:
            raise GluonError(f"DataLoader(num_workers={num_workers}): worker processes are not implemented in "
                             f"mxkit yet; pass thread_pool=True for worker threads, or num_workers=0")
        self._batch_sampler = batch_sampler
        self._batchify_fn = batchify_fn if batchify_fn is not None else default_batchify_fn
        self._num_workers = num_workers
        self._prefetch = max(1, prefetch if prefetch is not None else 2 * num_workers)

    def _make_batch(self, indices: list[int]) -> Any:
        return self._batchify_fn([self._dataset[index] for index in indices])

    def __iter__(self) -> Iterator[Any]:
        if self._num_workers == 0:
            for indices in self._batch_sampler:
                yield self._make_batch(indices)
            return
        from collections import deque
        from concurrent.futures import ThreadPoolExecutor

        pending: deque = deque()
        with ThreadPoolExecutor(self._num_workers, thread_name_prefix="mxkit-dataloader") as pool:
            try:
                for indices in self._batch_sampler:
                    pending.append(pool.submit(self._make_batch, indices))
                    if len(pending) >= self._prefetch:
                        yield pending.popleft().result()  # a worker's exception is raised here
                while pending:
                    yield pending.popleft().result()
            finally:
                for future in pending:
                    future.cancel()

    def __len__(self) -> int:
        return len(self._batch_sampler)
