"""The accessors of MXNet's C++ data iterators (``CSVIter``, ``LibSVMIter``, ``ImageRecordIter``).

In MXNet those iterators (``MXDataIter``) answer ``getdata()`` and ``getlabel()`` with the
current batch's one data and one label array, not lists as the Python iterators do, and
``iter_next()`` advances to the next batch. Code written for them (``while it.iter_next():
x = it.getdata()``) works with ours through this mixin.
"""

from __future__ import annotations

from typing import Any

from mxkit.io.databatch import DataBatch


class CurrentBatchAccessors:
    """``iter_next``/``getdata``/``getlabel``/``getpad``/``getindex`` over the last batch that
    ``next()`` returned (the subclass passes each batch through :meth:`_remember`)."""

    _current: DataBatch | None = None

    def _remember(self, batch: DataBatch) -> DataBatch:
        self._current = batch
        return batch

    def iter_next(self) -> bool:
        """Advance to the next batch; False at the end of the epoch."""
        try:
            self.next()  # type: ignore[attr-defined]
        except StopIteration:
            self._current = None
            return False
        return True

    def _batch(self, what: str) -> DataBatch:
        if self._current is None:
            from mxkit.core.errors import MXKitError

            raise MXKitError(f"{what}: there is no current batch; call next() or iter_next() first")
        return self._current

    def getdata(self) -> Any:
        """The current batch's data array (one array, as MXNet's C++ iterators return)."""
        return self._batch("getdata").data[0]

    def getlabel(self) -> Any:
        """The current batch's label array (one array)."""
        return self._batch("getlabel").label[0]  # type: ignore[index]

    def getpad(self) -> int:
        """How many samples at the end of the current batch are padding."""
        return int(self._batch("getpad").pad or 0)

    def getindex(self) -> Any:
        """The sample indices of the current batch."""
        return self._batch("getindex").index
