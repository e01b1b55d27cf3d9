"""Which samples make each batch, with the ``round_batch`` rule of MXNet's C++ iterators.

MXNet's ``CSVIter``, ``LibSVMIter`` and ``ImageRecordIter`` share one batch loader: with
``round_batch`` an incomplete last batch is completed from the start of the data, its
``pad`` says how many samples were borrowed, and the next epoch starts right after the
borrowed ones (so nothing is skipped or repeated over two epochs). Without it the last
batch is short by ``pad`` samples and its tail rows keep the previous batch's values.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from mxkit.core.errors import ShapeError


class RoundBatchSchedule:
    """Hands out the sample indices of each batch of an epoch.

    Parameters
    ----------
    num_samples : int
        Samples in one pass over the data.
    batch_size : int
        Samples per batch.
    round_batch : bool
        Complete the last batch from the start of the next pass (MXNet's default).
    epoch_order : callable, optional
        ``epoch_order(pass_number)`` gives the order of the samples in each pass over the
        data (a shuffle); the natural order when omitted.
    """

    def __init__(
        self,
        num_samples: int,
        batch_size: int,
        round_batch: bool = True,
        epoch_order: Callable[[int], np.ndarray] | None = None,
    ):
        if batch_size < 1:
            raise ShapeError(f"batch_size must be a positive integer, got {batch_size}")
        self.num_samples = num_samples
        self.batch_size = batch_size
        self.round_batch = round_batch
        self._epoch_order = epoch_order
        self._pass = -1
        self._order = np.arange(num_samples)
        self._position = 0
        self._overflow = 0
        self._start_pass()

    def _start_pass(self) -> None:
        self._pass += 1
        if self._epoch_order is not None:
            self._order = np.asarray(self._epoch_order(self._pass))
        self._position = 0

    @property
    def pass_number(self) -> int:
        """How many times the data has been started over (0 in the first pass)."""
        return self._pass

    def reset(self) -> None:
        """Start the next epoch; after a rounded batch, continue after the borrowed samples."""
        if not self.round_batch or self._overflow == 0:
            self._start_pass()
        else:
            self._overflow = 0

    def next_batch(self) -> tuple[np.ndarray, int, int] | None:
        """``(indices, pad, pass_of_first_sample)`` of the next batch, or None at epoch end.

        ``indices`` has ``batch_size`` entries with ``round_batch`` and ``batch_size - pad``
        otherwise.
        """
        if self._overflow:
            return None
        start, pass_number = self._position, self._pass
        take = min(self.batch_size, self.num_samples - start)
        if take <= 0:
            return None
        indices = self._order[start:start + take]
        self._position += take
        if take == self.batch_size:
            return indices, 0, pass_number
        if not self.round_batch:
            return indices, self.batch_size - take, pass_number
        borrowed = self.batch_size - take
        if borrowed > self.num_samples:
            raise ShapeError(
                f"batch_size {self.batch_size} is larger than the {self.num_samples} samples of the "
                f"data, so a batch cannot be completed; use a batch_size <= {self.num_samples}"
            )
        self._start_pass()
        indices = np.concatenate([indices, self._order[:borrowed]])
        self._position = borrowed
        self._overflow = borrowed
        return indices, borrowed, pass_number
