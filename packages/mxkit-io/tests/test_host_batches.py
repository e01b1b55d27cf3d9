"""NDArrayIter's batches keep their host arrays and convert them when first read (HostDataBatch):
the converted arrays are those an eager conversion gives, in every last-batch mode, and writing
``data``/``label`` replaces the host arrays of that side."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit.io import DataBatch, NDArrayIter, PrefetchingIter
from mxkit.io._batch_arrays import as_numpy
from mxkit.io.databatch import HostDataBatch


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 23), batch_size=st.integers(1, 9), mode=st.sampled_from(["pad", "discard", "roll_over"]),
       shuffle=st.booleans())
def test_host_arrays_and_converted_batches_agree(n, batch_size, mode, shuffle):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    y = np.arange(n, dtype=np.float32)
    it = NDArrayIter(x, y, batch_size=batch_size, last_batch_handle=mode, shuffle=shuffle)
    for _ in range(2):
        for batch in it:
            assert isinstance(batch, HostDataBatch) and isinstance(batch, DataBatch)
            host_data, host_label = [a.copy() for a in batch.host_data], [a.copy() for a in batch.host_label]
            for host, array in zip(host_data, batch.data):
                np.testing.assert_array_equal(as_numpy(array), host)
            for host, array in zip(host_label, batch.label):
                np.testing.assert_array_equal(as_numpy(array), host)
            assert batch.data[0].shape == (batch_size, 3)
            assert batch.data is batch.data  # converted once
        it.reset()


def test_a_batch_read_later_still_holds_its_own_samples():
    """Conversion on first read must not see later batches or a later epoch's shuffle."""
    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    it = NDArrayIter(x, np.zeros(20, np.float32), batch_size=5, shuffle=True)
    first_epoch = list(it)
    expected = [batch.host_data[0].copy() for batch in first_epoch]
    it.reset()
    list(it)
    for batch, want in zip(first_epoch, expected):
        np.testing.assert_array_equal(as_numpy(batch.data[0]), want)


def test_writing_data_or_label_replaces_the_host_arrays():
    batch = next(iter(NDArrayIter(np.ones((4, 2), np.float32), np.zeros(4, np.float32), batch_size=2)))
    replacement = [np.full((2, 2), 7.0, np.float32)]
    batch.data = replacement
    assert batch.data is replacement and batch.host_data is None
    assert batch.host_label is not None
    batch.label = None
    assert batch.label is None and batch.host_label is None


def test_no_label_is_an_empty_list():
    batch = next(iter(NDArrayIter(np.ones((4, 2), np.float32), batch_size=2)))
    assert batch.label == [] and batch.host_label == []


@pytest.mark.parametrize("depth", [1, 3])
def test_prefetching_converts_in_its_thread_and_keeps_the_host_arrays(depth):
    x = np.arange(24, dtype=np.float32).reshape(12, 2)
    it = PrefetchingIter(NDArrayIter(x, np.arange(12, dtype=np.float32), batch_size=4), prefetch_depth=depth)
    batches = list(it)
    assert len(batches) == 3
    for index, batch in enumerate(batches):
        assert batch._data is not None  # converted by the prefetching thread
        np.testing.assert_array_equal(batch.host_data[0], x[index * 4:(index + 1) * 4])
        np.testing.assert_array_equal(as_numpy(batch.data[0]), x[index * 4:(index + 1) * 4])
