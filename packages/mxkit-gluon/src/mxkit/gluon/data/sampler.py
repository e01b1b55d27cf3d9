"""Samplers: the order in which a DataLoader visits a dataset."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from mxkit.gluon.parameter import GluonError


class Sampler:
    """The base class: iterates over sample indices (or batches of them)."""

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError


class SequentialSampler(Sampler):
    """``start, start + 1, ..., start + length - 1``."""

    def __init__(self, length: int, start: int = 0) -> None:
        self._length = length
        self._start = start

    def __iter__(self) -> Iterator[int]:
        return iter(range(self._start, self._start + self._length))

    def __len__(self) -> int:
        return self._length


class RandomSampler(Sampler):
    """A random permutation of ``0 .. length - 1`` each epoch (numpy's global generator, as MXNet)."""

    def __init__(self, length: int) -> None:
        self._length = length

    def __iter__(self) -> Iterator[int]:
        return iter(np.random.permutation(self._length).tolist())

    def __len__(self) -> int:
        return self._length


class BatchSampler(Sampler):
    """Group another sampler's indices into batches.

    Parameters
    ----------
    last_batch : {'keep', 'discard', 'rollover'}
        What to do with a last batch smaller than ``batch_size``: return it, drop it, or
        carry its samples over to the next epoch.
    """

    def __init__(self, sampler: Sampler, batch_size: int, last_batch: str = "keep") -> None:
        if last_batch not in ("keep", "discard", "rollover"):
            raise GluonError(f"last_batch must be one of 'keep', 'discard' or 'rollover', got {last_batch!r}")
        if batch_size <= 0:
            raise GluonError(f"batch_size must be positive, got {batch_size}")
        self._sampler = sampler
        self._batch_size = batch_size
        self._last_batch = last_batch
        self._prev: list[int] = []

    def __iter__(self) -> Iterator[list[int]]:
        batch, self._prev = self._prev, []
        for index in self._sampler:
            batch.append(index)
            if len(batch) == self._batch_size:
                yield batch
                batch = []
        if batch:
            if self._last_batch == "keep":
                yield batch
            elif self._last_batch == "rollover":
                self._prev = batch

    def __len__(self) -> int:
        count = len(self._sampler)
        if self._last_batch == "keep":
            return (count + self._batch_size - 1) // self._batch_size
        if self._last_batch == "discard":
            return count // self._batch_size
        return (len(self._prev) + count) // self._batch_size
