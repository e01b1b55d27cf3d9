"""``gluon.contrib.data``: MXNet 1.x's contributed samplers (``IntervalSampler``).

MXNet's ``contrib.data.text`` corpora (WikiText) download their files and are not provided.
"""

from __future__ import annotations

from collections.abc import Iterator

from mxkit.gluon.data.sampler import Sampler
from mxkit.gluon.parameter import GluonError


class IntervalSampler(Sampler):
    """Samples ``0, k, 2k, ...`` below ``length``; with ``rollover`` then ``1, k+1, ...`` and so
    on until every index was drawn once (for batches of sequences read in parallel strides).

    Parameters
    ----------
    length : int
        Number of samples.
    interval : int
        The stride ``k``, at most ``length``.
    rollover : bool
        Whether to continue from offsets ``1 .. k-1`` after offset 0.
    """

    def __init__(self, length: int, interval: int, rollover: bool = True) -> None:
        if not (isinstance(length, int) and isinstance(interval, int)) or length < 0 or interval < 1:
            raise GluonError(f"IntervalSampler: length must be a non-negative int and interval a positive int, "
                             f"got length={length!r}, interval={interval!r}")
        if interval > length:
            raise GluonError(f"IntervalSampler: interval {interval} is larger than length {length}; "
                             f"pass an interval of at most {length}")
        self._length = length
        self._interval = interval
        self._rollover = rollover

    def __iter__(self) -> Iterator[int]:
        for offset in range(self._interval if self._rollover else 1):
            yield from range(offset, self._length, self._interval)

    def __len__(self) -> int:
        if self._rollover:
            return self._length
        return len(range(0, self._length, self._interval))


__all__ = ["IntervalSampler"]
