"""NDArrayIter, CSVIter, LibSVMIter, PrefetchingIter and ResizeIter against MXNet 1.9.1."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit.core.errors import ConfigError, DTypeError, FormatError, MissingComponentError, MXKitError, ShapeError
from mxkit.io import CSVIter, DataBatch, DataDesc, DataIter, LibSVMIter, NDArrayIter, PrefetchingIter, ResizeIter
from mxkit.io._batching import RoundBatchSchedule
from mxkit_io_test_helpers import FIXTURES


def _epochs(data_iter, count):
    out = []
    for _ in range(count):
        out.append(list(data_iter))
        data_iter.reset()
    return out


def _assert_like_mxnet(epochs, reference, with_data=True):
    assert [len(e) for e in epochs] == [len(e) for e in reference]
    for epoch, ref_epoch in zip(epochs, reference):
        for batch, ref in zip(epoch, ref_epoch):
            assert isinstance(batch.data[0], np.ndarray)
            assert batch.pad == ref["pad"]
            if with_data:
                np.testing.assert_array_equal(batch.data[0], np.asarray(ref["data"], dtype=np.float32))
            np.testing.assert_array_equal(batch.label[0], np.asarray(ref["label"], dtype=np.float32))


@pytest.mark.parametrize("handle", ["pad", "discard", "roll_over"])
def test_ndarrayiter_matches_mxnet(handle, mxnet_results):
    data = np.arange(40).reshape((10, 2, 2))
    labels = np.arange(10).reshape((10, 1)) * 1.5
    data_iter = NDArrayIter(data, labels, 3, False, last_batch_handle=handle)
    _assert_like_mxnet(_epochs(data_iter, 3), mxnet_results[f"ndarrayiter_{handle}"])
    [(name, shape, dtype)] = mxnet_results[f"ndarrayiter_{handle}_provide_data"]
    [desc] = data_iter.provide_data
    assert (desc.name, list(desc.shape), np.dtype(desc.dtype).name) == (name, shape, dtype)
    assert data_iter.provide_label[0].name == "softmax_label"


def test_ndarrayiter_dicts_lists_and_shuffle():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(11, 3)), rng.normal(size=(11,))
    data_iter = NDArrayIter({"b": b, "a": a}, [b * 2], batch_size=4, shuffle=True, last_batch_handle="discard")
    assert [d.name for d in data_iter.provide_data] == ["a", "b"]  # sorted, as MXNet
    assert len(data_iter) == 2
    for _ in range(2):
        batches = list(data_iter)
        assert len(batches) == 2
        for batch in batches:
            got_a, got_b = batch.data
            # Rows stay aligned across inputs and labels through the shuffle.
            for row_a, row_b in zip(got_a, got_b):
                match = np.flatnonzero(np.all(np.isclose(a, row_a), axis=1))
                assert len(match) == 1 and np.isclose(b[match[0]], row_b)
            np.testing.assert_allclose(batch.label[0], got_b * 2, rtol=1e-6)
        data_iter.reset()
    multi = NDArrayIter([a, b], batch_size=5)
    assert [d.name for d in multi.provide_data] == ["_0_data", "_1_data"]


def test_ndarrayiter_bad_inputs():
    with pytest.raises(ShapeError, match=r"'softmax_label' has shape \(3,\)"):
        NDArrayIter(np.zeros((4, 2)), np.zeros(3))
    with pytest.raises(ConfigError, match="last_batch_handle must be one of pad, discard, roll_over, got 'wrap'"):
        NDArrayIter(np.zeros((4, 2)), last_batch_handle="wrap")
    with pytest.raises(ConfigError, match="batch_size must be a positive integer, got 0"):
        NDArrayIter(np.zeros((4, 2)), batch_size=0)
    with pytest.raises(ShapeError, match="needs data"):
        NDArrayIter(None)


def test_ndarrayiter_label_longer_than_data_uses_its_first_samples():
    # MXNet reads only the indices of the first data array: one label array can serve
    # iterators over slices of the data (MXNet's test_loss.test_sample_weight_loss does so).
    data = np.arange(12, dtype=np.float32).reshape(6, 2)
    label = np.arange(10, dtype=np.float32)
    for handle in ("pad", "discard", "roll_over"):
        it = NDArrayIter(data[:5], {"label": label, "w": label * 2}, batch_size=2, last_batch_handle=handle)
        batches = list(it)
        for batch in batches:
            first = np.asarray(batch.data[0])[:, 0] / 2  # sample index of each row
            np.testing.assert_array_equal(np.asarray(batch.label[0]), first)
            np.testing.assert_array_equal(np.asarray(batch.label[1]), first * 2)
    np.random.seed(3)
    shuffled = NDArrayIter(data, label, batch_size=3, shuffle=True)
    for batch in shuffled:
        np.testing.assert_array_equal(np.asarray(batch.label[0]), np.asarray(batch.data[0])[:, 0] / 2)


def test_ndarrayiter_pad_with_batch_larger_than_data():
    batches = list(NDArrayIter(np.arange(3.0), batch_size=7))
    assert len(batches) == 1 and batches[0].pad == 4
    np.testing.assert_array_equal(batches[0].data[0], [0, 1, 2, 0, 1, 2, 0])


@pytest.mark.parametrize("round_batch", [True, False])
def test_csviter_matches_mxnet(round_batch, mxnet_results):
    data_iter = CSVIter(
        data_csv=str(FIXTURES / "mxnet_csv_data.csv"), data_shape=(2, 3),
        label_csv=str(FIXTURES / "mxnet_csv_label.csv"), label_shape=(1,), batch_size=3, round_batch=round_batch,
    )
    _assert_like_mxnet(_epochs(data_iter, 3), mxnet_results[f"csviter_round_{int(round_batch)}"])
    assert data_iter.provide_data == [DataDesc("data", (3, 2, 3))]


def test_csviter_dtype_and_unknown_arguments():
    data_iter = CSVIter(data_csv=str(FIXTURES / "mxnet_csv_data.csv"), data_shape=(2, 3), batch_size=2,
                        dtype="int32")
    batch = next(data_iter)
    assert batch.data[0].dtype == np.int32 and data_iter.provide_data[0].dtype == np.int32
    np.testing.assert_array_equal(batch.data[0].reshape(2, 6)[1], (np.arange(6, 12) / 4).astype(np.int32))
    with pytest.raises(DTypeError, match=r"dtype must be one of .*got 'complex64'"):
        CSVIter(data_csv=str(FIXTURES / "mxnet_csv_data.csv"), data_shape=(2, 3), dtype="complex64")
    with pytest.raises(TypeError, match="shuffle"):
        CSVIter(data_csv=str(FIXTURES / "mxnet_csv_data.csv"), data_shape=(2, 3), shuffle=True)


@pytest.mark.parametrize("dtype, value", [("int32", 200000001), ("int64", 2147483648), ("int64", 2 ** 53 + 1)])
def test_csviter_reads_integers_exactly(tmp_path, dtype, value):
    # parsed straight into the dtype, as MXNet's parser does: through float32 these would round
    path = tmp_path / "ints.csv"
    path.write_text("\n".join(",".join([str(value)] * 4) for _ in range(3)) + "\n")
    batch = next(CSVIter(data_csv=str(path), data_shape=(2, 2), batch_size=3, dtype=dtype))
    assert batch.data[0].dtype == np.dtype(dtype)
    np.testing.assert_array_equal(np.asarray(batch.data[0]), np.full((3, 2, 2), value, dtype=dtype))


def test_csviter_errors(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2,3\n4,5\n")
    with pytest.raises(ShapeError, match=r"line 2 has 2 values; shape \(3,\) needs 3"):
        CSVIter(data_csv=str(bad), data_shape=(3,), batch_size=1)
    bad.write_text("1,x,3\n")
    with pytest.raises(FormatError, match="line 1 is '1,x,3'"):
        CSVIter(data_csv=str(bad), data_shape=(3,), batch_size=1)
    bad.write_text("1,2,1099511627776\n")
    with pytest.raises(FormatError, match="outside the range of int32"):
        CSVIter(data_csv=str(bad), data_shape=(3,), batch_size=1, dtype="int32")
    with pytest.raises(ShapeError, match="batch_size 6 is larger than the 1 samples"):
        bad.write_text("1,2,3\n")
        list(CSVIter(data_csv=str(bad), data_shape=(3,), batch_size=6))


def test_libsvmiter_against_dense_reference(tmp_path):
    rng = np.random.default_rng(3)
    dense = np.where(rng.random((9, 6)) < 0.4, rng.normal(size=(9, 6)), 0).astype(np.float32)
    labels = rng.integers(0, 3, size=9).astype(np.float32)
    lines = []
    for label, row in zip(labels, dense):
        lines.append(" ".join([f"{label:g}"] + [f"{j}:{float(row[j])!r}" for j in np.flatnonzero(row)]))
    path = tmp_path / "d.libsvm"
    path.write_text("\n".join(lines) + "\n")
    data_iter = LibSVMIter(data_libsvm=str(path), data_shape=(6,), batch_size=4)
    batches = list(data_iter)
    assert [b.pad for b in batches] == [0, 0, 3]
    got = np.concatenate([b.data[0] for b in batches])[:9]
    np.testing.assert_allclose(got, dense, rtol=1e-6)
    np.testing.assert_array_equal(np.concatenate([b.label[0] for b in batches])[:9], labels)
    path.write_text("1 7:1.0\n")
    with pytest.raises(ShapeError, match=r"feature index 7, outside the shape's 0\.\.5"):
        LibSVMIter(data_libsvm=str(path), data_shape=(6,), batch_size=1)


def test_resizeiter_gives_exactly_size_batches():
    inner = NDArrayIter(np.arange(10.0), batch_size=3, last_batch_handle="discard")
    resized = ResizeIter(inner, 5)
    first = [b.data[0][0] for b in resized]
    assert first == [0, 3, 6, 0, 3] and len(resized) == 5
    resized.reset()
    assert [b.data[0][0] for b in resized] == [0, 3, 6, 0, 3]
    kept = ResizeIter(NDArrayIter(np.arange(10.0), batch_size=3, last_batch_handle="discard"), 2, reset_internal=False)
    assert [b.data[0][0] for b in kept] == [0, 3]
    kept.reset()
    assert [b.data[0][0] for b in kept] == [6, 0]
    with pytest.raises(ConfigError, match="positive number of batches, got 0"):
        ResizeIter(inner, 0)


def test_prefetchingiter_matches_the_serial_iterator():
    data = np.arange(50.0).reshape(25, 2)
    serial = [b.data[0] for b in NDArrayIter(data, batch_size=4)]
    prefetch = PrefetchingIter(NDArrayIter(data, batch_size=4), prefetch_depth=3)
    for _ in range(2):
        got = [b.data[0] for b in prefetch]
        assert len(got) == len(serial)
        for a, b in zip(got, serial):
            np.testing.assert_array_equal(a, b)
        prefetch.reset()


def test_prefetchingiter_combines_iterators_and_renames():
    left = NDArrayIter(np.zeros((6, 2)), np.ones(6), batch_size=2)
    right = NDArrayIter(np.ones((6, 3)), batch_size=2)
    both = PrefetchingIter([left, right], rename_data=[{"data": "left"}, {"data": "right"}])
    assert [d.name for d in both.provide_data] == ["left", "right"]
    batch = next(iter(both))
    assert [d.shape for d in batch.data] == [(2, 2), (2, 3)] and len(batch.label) == 1


class _SlowIter(DataIter):
    """Counts batches made; each waits until the test lets it through."""

    def __init__(self):
        super().__init__(1)
        self.made = 0
        self.gate = threading.Semaphore(0)

    def next(self):
        if self.made == 6:
            raise StopIteration
        self.made += 1
        return DataBatch([np.full(1, self.made)])


def test_prefetchingiter_runs_ahead_and_bounds_its_buffer():
    source = _SlowIter()
    prefetch = PrefetchingIter(source, prefetch_depth=2)
    deadline = threading.Event()
    for _ in range(100):  # wait (up to 1 s) for the thread to fill its buffer
        if source.made >= 3:
            break
        deadline.wait(0.01)
    # depth 2 in the queue plus one batch waiting to be put: never the whole epoch.
    assert 2 <= source.made <= 3
    assert [int(b.data[0][0]) for b in prefetch] == [1, 2, 3, 4, 5, 6]


class _Broken(DataIter):
    def next(self):
        raise FormatError("record 3 is damaged")


def test_prefetchingiter_reraises_errors_of_the_thread():
    prefetch = PrefetchingIter(_Broken())
    with pytest.raises(FormatError, match="record 3 is damaged"):
        prefetch.next()
    with pytest.raises(FormatError):  # still failing, not hanging
        prefetch.next()


def test_batch_type_switch(monkeypatch):
    monkeypatch.setenv("MXKIT_IO_BATCH_TYPE", "ndarray")
    try:
        from mxkit.ndarray import array  # noqa: F401
    except ImportError:
        with pytest.raises(MissingComponentError, match=r"mxkit\.ndarray\.array is not available"):
            NDArrayIter(np.zeros((2, 2)))
    else:
        batch = next(iter(NDArrayIter(np.zeros((2, 2)), batch_size=2)))
        assert not isinstance(batch.data[0], np.ndarray) and hasattr(batch.data[0], "asnumpy")
    monkeypatch.setenv("MXKIT_IO_BATCH_TYPE", "tensor")
    with pytest.raises(ConfigError, match="io_batch_type"):
        NDArrayIter(np.zeros((2, 2)))


def test_prefetchingiter_reset_in_the_middle_of_an_epoch():
    data = np.arange(40.0).reshape(20, 2)
    prefetch = PrefetchingIter(NDArrayIter(data, batch_size=3), prefetch_depth=1)
    next(prefetch)
    prefetch.reset()  # must not hang on the thread blocked on its full queue
    assert [int(b.data[0][0, 0]) for b in prefetch] == list(range(0, 40, 6))


def test_text_iterators_know_their_length():
    data_iter = CSVIter(data_csv=str(FIXTURES / "mxnet_csv_data.csv"), data_shape=(2, 3), batch_size=3)
    assert len(data_iter) == 3 == len(list(data_iter))


# --- property tests against serial reference models ------------------------------------------



def _reference_ndarrayiter(n, batch, handle, epochs):
    """Sample ids per batch and pad, replayed from MXNet's documented rules."""
    out = []
    carried = []
    for _ in range(epochs):
        epoch = []
        if handle == "pad":
            for start in range(0, n, batch):
                ids = [(start + k) % n for k in range(batch)]
                epoch.append((ids, max(0, start + batch - n)))
        elif handle == "discard":
            epoch = [(list(range(s, s + batch)), 0) for s in range(0, n - batch + 1, batch)]
        else:  # roll_over: the leftover opens the next epoch; its pad is the leftover count
            stream = carried + list(range(n))
            full = len(stream) // batch
            for b in range(full):
                epoch.append((stream[b * batch:(b + 1) * batch], len(carried) if b == 0 and carried else 0))
            carried = stream[full * batch:]
        out.append(epoch)
    return out


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 23), st.integers(1, 9), st.sampled_from(["pad", "discard", "roll_over"]))
def test_ndarrayiter_against_a_serial_replay(n, batch, handle):
    if handle == "roll_over" and batch > n:
        return  # MXNet itself cannot roll over more than one epoch's worth
    data_iter = NDArrayIter(np.arange(n, dtype=np.float32), batch_size=batch, last_batch_handle=handle)
    got = []
    for _ in range(4):
        got.append([(b.data[0].astype(int).tolist(), b.pad) for b in data_iter])
        data_iter.reset()
    assert got == _reference_ndarrayiter(n, batch, handle, 4)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 30), st.integers(1, 12), st.booleans(), st.integers(1, 5))
def test_round_batch_schedule_walks_the_data_cyclically(n, batch, round_batch, epochs):
    if round_batch and batch > n:
        return
    schedule = RoundBatchSchedule(n, batch, round_batch)
    stream, pads, real_per_epoch, borrowed_per_epoch = [], [], [], []
    for _ in range(epochs):
        epoch_pads = []
        while (step := schedule.next_batch()) is not None:
            indices, pad, _ = step
            assert len(indices) == (batch if round_batch else batch - pad)
            stream.extend(indices.tolist())
            epoch_pads.append(pad)
        assert all(p == 0 for p in epoch_pads[:-1])  # only the last batch of an epoch pads
        real_per_epoch.append(len(epoch_pads) * batch - epoch_pads[-1])
        borrowed_per_epoch.append(epoch_pads[-1])
        pads.extend(epoch_pads)
        schedule.reset()
    if round_batch:
        # One endless cycle over the data cut into full batches; the samples borrowed from
        # the next pass are padding, and the next epoch starts right after them.
        assert stream == [i % n for i in range(len(stream))]
        assert real_per_epoch == [n - b for b in [0, *borrowed_per_epoch[:-1]]]
    else:
        assert stream == list(range(n)) * epochs
        assert real_per_epoch == [n] * epochs
        assert borrowed_per_epoch == [(-n) % batch] * epochs


def test_libsvmiter_with_a_label_file(tmp_path):
    data = tmp_path / "d.libsvm"
    labels = tmp_path / "l.libsvm"
    data.write_text("0 0:1.5 2:2\n1 1:-1\n0 3:4\n")
    labels.write_text("0:1 1:0.5\n1:2\n0:3\n")
    data_iter = LibSVMIter(data_libsvm=str(data), data_shape=(4,), label_libsvm=str(labels), label_shape=(2,),
                           batch_size=3)
    batch = next(data_iter)
    np.testing.assert_array_equal(batch.data[0], [[1.5, 0, 2, 0], [0, -1, 0, 0], [0, 0, 0, 4]])
    np.testing.assert_array_equal(batch.label[0], [[1, 0.5], [0, 2], [3, 0]])
    assert data_iter.provide_label[0].shape == (3, 2)


def test_an_abandoned_prefetchingiter_stops_its_thread():
    import gc
    import time

    prefetch = PrefetchingIter(NDArrayIter(np.zeros((50, 2)), batch_size=1), prefetch_depth=1)
    next(prefetch)
    thread = prefetch._thread
    del prefetch
    gc.collect()
    for _ in range(100):
        if not thread.is_alive():
            break
        time.sleep(0.05)
    assert not thread.is_alive()


def test_csviter_accessors_return_one_array_as_mxnets_cpp_iterators():
    # MXNet's C++ iterators answer getdata()/getlabel() with one array and advance by iter_next()
    data_iter = CSVIter(data_csv=str(FIXTURES / "mxnet_csv_data.csv"), data_shape=(2, 3), batch_size=2)
    with pytest.raises(MXKitError, match="no current batch"):
        data_iter.getdata()
    batches = []
    while data_iter.iter_next():
        batches.append((np.asarray(data_iter.getdata()).copy(), np.asarray(data_iter.getlabel()).copy(),
                        data_iter.getpad()))
    fresh = CSVIter(data_csv=str(FIXTURES / "mxnet_csv_data.csv"), data_shape=(2, 3), batch_size=2)
    for (data, label, pad), batch in zip(batches, fresh, strict=True):
        assert data.shape == (2, 2, 3)
        np.testing.assert_array_equal(data, np.asarray(batch.data[0]))
        np.testing.assert_array_equal(label, np.asarray(batch.label[0]))
        assert pad == batch.pad


def test_ndarrayiter_empty_label_list_means_no_label():
    data_iter = NDArrayIter(np.ones((10, 2)), [], batch_size=4)
    assert data_iter.provide_label == []
    assert next(data_iter).label == []
    with pytest.raises(ShapeError, match="at least one data array"):
        NDArrayIter([], batch_size=2)


def test_ndarrayiter_idx_is_the_shuffle_applied():
    data = np.arange(12.0).reshape(6, 2)
    np.random.seed(3)
    data_iter = NDArrayIter(data, np.arange(6.0), batch_size=1, shuffle=True)
    order = data_iter.idx.copy()
    assert sorted(order) == list(range(6))
    for i, batch in enumerate(data_iter):
        np.testing.assert_array_equal(np.asarray(batch.data[0])[0], data[order[i]])
        assert np.asarray(batch.label[0])[0] == order[i]
