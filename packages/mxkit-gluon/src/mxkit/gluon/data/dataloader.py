"""``DataLoader``: batches of a dataset, in the main process, in worker processes or in threads.

With ``num_workers > 0``, batches are made by that many worker processes (see
:mod:`mxkit.gluon.data.worker_pool`: arrays come back through shared memory, never as
pickles), or with ``thread_pool=True`` by a pool of threads (decoding and numpy work release
the GIL). Either way they are handed over in order, ``prefetch`` of them ahead of the consumer.
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


def _as_in_context(batch: Any, ctx: Any) -> Any:
    """``batch`` (an NDArray, or lists and tuples of them) with every array on ``ctx``."""
    from mxkit import ndarray

    if isinstance(batch, ndarray.NDArray):
        return batch.as_in_context(ctx)
    if isinstance(batch, list | tuple):
        return type(batch)(_as_in_context(item, ctx) for item in batch)
    return batch


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
        0: batches are made in this process; more: by that many worker processes (or threads).
    prefetch : int, optional
        Batches requested ahead of the consumer (default ``2 * num_workers``).
    thread_pool : bool
        Use threads instead of processes for ``num_workers > 0``.
    timeout : float
        Seconds to wait for a worker process's batch before raising an error.
    pin_memory : bool
        Hand batches over on ``cpu_pinned(pin_device_id)`` (page-locked host memory where a GPU
        plugin provides it, plain host memory otherwise).
    auto_reload : bool
        Accepted for MXNet compatibility: MXNet then starts the next epoch's prefetching when one
        ends; here the workers stay alive between epochs and each epoch's prefetching starts with
        its iteration, so the batches are the same either way.
    """

    def __init__(self, dataset: Any, batch_size: int | None = None, shuffle: bool = False,
                 sampler: Sampler | None = None, last_batch: str | None = None, batch_sampler: Sampler | None = None,
                 batchify_fn: Callable[[list[Any]], Any] | None = None, num_workers: int = 0,
                 pin_memory: bool = False, pin_device_id: int = 0, prefetch: int | None = None,
                 thread_pool: bool = False, timeout: int = 120, auto_reload: bool = False) -> None:
        self._dataset = dataset
        if not isinstance(pin_device_id, int) or pin_device_id < 0:
            raise GluonError(f"DataLoader: pin_device_id must be a non-negative int, got {pin_device_id!r}")
        self._pin_context: Any = None
        if pin_memory:
            from mxkit.core.context import cpu_pinned

            self._pin_context = cpu_pinned(pin_device_id)
        self.auto_reload = bool(auto_reload)
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
        if not isinstance(timeout, int | float) or timeout <= 0:
            raise GluonError(f"DataLoader: timeout must be a positive number of seconds, got {timeout!r}")
        self._batch_sampler = batch_sampler
        self._default_batchify = batchify_fn is None
        self._batchify_fn = batchify_fn if batchify_fn is not None else default_batchify_fn
        self._num_workers = num_workers
        self._thread_pool = thread_pool
        self._timeout = timeout
        self._prefetch = max(1, prefetch if prefetch is not None else 2 * num_workers)
        self._pool: Any = None

    def _make_batch(self, indices: list[int]) -> Any:
        return self._batchify_fn([self._dataset[index] for index in indices])

    def __iter__(self) -> Iterator[Any]:
        if self._pin_context is None:
            yield from self._batches()
            return
        for batch in self._batches():
            yield _as_in_context(batch, self._pin_context)

    def _batches(self) -> Iterator[Any]:
        if self._num_workers == 0:
            for indices in self._batch_sampler:
                yield self._make_batch(indices)
            return
        if not self._thread_pool:
            yield from self._iter_processes()
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

    def _iter_processes(self) -> Iterator[Any]:
        from collections import deque

        from mxkit.gluon.data.worker_pool import WorkerPool, numpy_batchify

        if self._pool is None or not self._pool.alive():
            if self._pool is not None:
                self._pool.close()
            batchify = numpy_batchify if self._default_batchify else self._batchify_fn
            self._pool = WorkerPool(self._dataset, batchify, self._num_workers, self._timeout,
                                    ndarray_batches=self._default_batchify)
        pool = self._pool
        pending: deque = deque()
        try:
            for indices in self._batch_sampler:
                pending.append(pool.submit(indices))
                if len(pending) >= self._prefetch:
                    yield pool.get(pending.popleft())
            while pending:
                yield pool.get(pending.popleft())
        finally:
            if pool.alive():
                for task in pending:  # an epoch left early: the workers' files must not be left behind
                    pool.discard(task)

    def close(self) -> None:
        """Stop the worker processes (they are also stopped when the loader is collected)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __len__(self) -> int:
        return len(self._batch_sampler)
