"""gluon.data: datasets, samplers, DataLoader."""

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import GluonError, data


def test_dataloader_covers_every_sample_once_per_epoch():
    features = np.arange(20, dtype=np.float32).reshape(10, 2)
    labels = np.arange(10)
    loader = data.DataLoader(data.ArrayDataset(features, labels), batch_size=3, shuffle=True)
    assert len(loader) == 4
    for _ in range(2):
        seen = []
        for x, y in loader:
            assert isinstance(x, mx.nd.NDArray) and x.shape[1] == 2
            np.testing.assert_array_equal(x.asnumpy()[:, 0] / 2, y.asnumpy())
            seen.extend(y.asnumpy().tolist())
        assert sorted(seen) == list(range(10))


def test_batch_sampler_last_batch_modes():
    sampler = data.SequentialSampler(7)
    assert list(data.BatchSampler(sampler, 3, "keep")) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(data.BatchSampler(sampler, 3, "discard")) == [[0, 1, 2], [3, 4, 5]]
    rollover = data.BatchSampler(sampler, 3, "rollover")
    assert list(rollover) == [[0, 1, 2], [3, 4, 5]]
    assert list(rollover) == [[6, 0, 1], [2, 3, 4]]
    with pytest.raises(GluonError, match="last_batch must be one of"):
        data.BatchSampler(sampler, 3, "sometimes")


def test_dataset_transforms_and_errors():
    dataset = data.SimpleDataset([(1, "a"), (2, "b")])
    assert dataset.transform_first(lambda x: x * 10)[1] == (20, "b")
    assert len(dataset.filter(lambda item: item[0] > 1)) == 1
    with pytest.raises(GluonError, match="same length"):
        data.ArrayDataset(np.zeros(3), np.zeros(4))
    with pytest.raises(GluonError, match="timeout must be a positive number"):
        data.DataLoader(dataset, batch_size=1, num_workers=2, timeout=0)
    with pytest.raises(GluonError, match="needs batch_size"):
        data.DataLoader(dataset)


def test_record_file_dataset_reads_records(tmp_path):
    from mxkit.io.recordio import MXIndexedRecordIO

    rec, idx = str(tmp_path / "d.rec"), str(tmp_path / "d.idx")
    writer = MXIndexedRecordIO(idx, rec, "w")
    for i in range(3):
        writer.write_idx(i, f"record {i}".encode())
    writer.close()
    dataset = data.RecordFileDataset(rec)
    assert len(dataset) == 3
    assert dataset[2] == b"record 2"
    with pytest.raises(GluonError, match="needs the index"):
        data.RecordFileDataset(str(tmp_path / "missing.rec"))


def test_vision_transforms_against_numpy():
    from mxkit.gluon.data.vision import transforms

    image = np.random.RandomState(0).randint(0, 256, size=(4, 5, 3)).astype(np.uint8)
    pipeline = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5, 0.4, 0.3), (0.2, 0.25, 0.5))])
    out = pipeline(mx.nd.array(image, dtype="uint8")).asnumpy()
    expected = (image.transpose(2, 0, 1) / 255.0 - np.array([0.5, 0.4, 0.3])[:, None, None]) / \
        np.array([0.2, 0.25, 0.5])[:, None, None]
    assert out.shape == (3, 4, 5) and out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    flipped = {tuple(transforms.RandomFlipLeftRight()(mx.nd.array(image)).asnumpy()[0, :, 0]) for _ in range(20)}
    assert flipped == {tuple(image[0, :, 0].astype(np.float32)), tuple(image[0, ::-1, 0].astype(np.float32))}
    with pytest.raises(GluonError, match="std must not contain 0"):
        transforms.Normalize(0.0, 0.0)


def test_worker_threads_keep_order_cover_every_sample_and_surface_errors():
    features = np.arange(40, dtype=np.float32).reshape(20, 2)
    loader = data.DataLoader(data.ArrayDataset(features, np.arange(20)), batch_size=3, shuffle=True,
                             num_workers=2, thread_pool=True, prefetch=3)
    for _ in range(2):
        seen = [int(v) for _, y in loader for v in y.asnumpy()]
        assert sorted(seen) == list(range(20))
    ordered = data.DataLoader(data.SimpleDataset(list(range(10))), batch_size=2, num_workers=3, thread_pool=True)
    assert [b.asnumpy().tolist() for b in ordered] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]

    class Broken(data.Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, idx):
            if idx == 4:
                raise ValueError("sample 4 is corrupt")
            return np.float32(idx)

    with pytest.raises(ValueError, match="sample 4 is corrupt"):
        list(data.DataLoader(Broken(), batch_size=2, num_workers=2, thread_pool=True))


class _Squares(data.Dataset):
    """Sample i: (a 2x2 float array of i, the int i); sample ``broken`` raises; ``die`` ends the process."""

    def __init__(self, length, broken=None, die=None):
        self.length, self.broken, self.die = length, broken, die

    def __len__(self):
        return self.length

    def __getitem__(self, idx):
        import os

        if idx == self.broken:
            raise ValueError(f"sample {idx} is corrupt")
        if idx == self.die:
            os._exit(3)
        return np.full((2, 2), idx, np.float64), idx


def test_worker_processes_cover_every_sample_once_per_epoch_in_order():
    loader = data.DataLoader(_Squares(11), batch_size=3, shuffle=True, num_workers=2)
    try:
        for _ in range(2):  # the same workers serve both epochs
            seen = []
            for x, y in loader:
                assert isinstance(x, mx.nd.NDArray) and x.dtype == np.float32 and x.shape[1:] == (2, 2)
                np.testing.assert_array_equal(x.asnumpy()[:, 0, 0], y.asnumpy())
                seen.extend(int(v) for v in y.asnumpy())
            assert sorted(seen) == list(range(11))
        ordered = data.DataLoader(data.SimpleDataset(list(range(10))), batch_size=2, num_workers=3)
        assert [b.asnumpy().tolist() for b in ordered] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
        ordered.close()
    finally:
        loader.close()


def test_worker_processes_leave_no_files_and_keep_a_custom_batchify():
    import os

    def batchify(samples):  # runs in the worker: numpy arrays come back as numpy, other values as they are
        return np.stack([s[0] for s in samples]), [s[1] for s in samples], "tag"

    loader = data.DataLoader(_Squares(7), batch_size=2, num_workers=2, batchify_fn=batchify, prefetch=4)
    first = next(iter(loader))  # an epoch left early: its prefetched batches are dropped
    x, labels, tag = first
    assert isinstance(x, np.ndarray) and x.shape == (2, 2, 2) and labels == [0, 1] and tag == "tag"
    directory = loader._pool._directory
    batches = list(loader)
    assert [b[1] for b in batches] == [[0, 1], [2, 3], [4, 5], [6]]
    assert os.listdir(directory) == []
    loader.close()
    assert not os.path.exists(directory)


def test_worker_process_exception_is_raised_with_its_traceback():
    loader = data.DataLoader(_Squares(6, broken=4), batch_size=2, num_workers=2)
    with pytest.raises(data.WorkerError, match="ValueError: sample 4 is corrupt") as info:
        list(loader)
    assert "__getitem__" in str(info.value)  # the worker's traceback
    loader.close()


def test_a_dead_worker_process_is_reported_not_waited_for():
    loader = data.DataLoader(_Squares(6, die=3), batch_size=2, num_workers=2, timeout=60)
    with pytest.raises(data.WorkerError, match="exited with code 3"):
        list(loader)
    loader.close()


def test_object_arrays_cannot_leave_a_worker():
    loader = data.DataLoader(data.SimpleDataset([object(), object()]), batch_size=2, num_workers=1,
                             batchify_fn=lambda samples: np.array(samples, dtype=object))
    with pytest.raises(data.WorkerError, match="cannot leave a worker process"):
        list(loader)
    loader.close()


@pytest.mark.parametrize("length, shards", [(9, 4), (8, 4), (3, 5), (0, 2), (10, 1)])
def test_shards_cover_every_sample_once_in_order_sizes_differing_by_one_at_most(length, shards):
    samples = data.SimpleDataset(list(range(length)))
    parts = [samples.shard(shards, index) for index in range(shards)]
    assert [x for part in parts for x in part] == list(range(length))
    sizes = [len(part) for part in parts]
    assert sizes == sorted(sizes, reverse=True) and max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("args", [(0, 0), (2, 2), (2, -1), (2.0, 0)])
def test_a_bad_shard_is_refused(args):
    with pytest.raises(GluonError, match="shard"):
        data.SimpleDataset([1, 2, 3]).shard(*args)


def test_pin_memory_hands_batches_over_on_the_pinned_context_with_the_same_values():
    x = np.random.RandomState(3).uniform(size=(10, 4)).astype(np.float32)
    y = np.arange(10, dtype=np.float32)
    dataset = data.ArrayDataset(x, y)
    plain = list(data.DataLoader(dataset, 4))
    pinned = list(data.DataLoader(dataset, 4, pin_memory=True, pin_device_id=1, auto_reload=True))
    assert len(plain) == len(pinned) == 3
    for (px, py), (qx, qy) in zip(plain, pinned):
        assert px.context == mx.cpu(0) and qx.context == mx.cpu_pinned(1) and qy.context == mx.cpu_pinned(1)
        np.testing.assert_array_equal(px.asnumpy(), qx.asnumpy())
        np.testing.assert_array_equal(py.asnumpy(), qy.asnumpy())
    with pytest.raises(GluonError, match="pin_device_id"):
        data.DataLoader(dataset, 4, pin_memory=True, pin_device_id=-1)


def test_worker_processes_read_a_dataset_of_ndarrays_made_before_they_forked():
    # The workers inherit the dataset's NDArrays (and their engine vars) from this process.
    features = mx.nd.array(np.arange(40, dtype=np.float32).reshape(10, 4))
    labels = mx.nd.array(np.arange(10, dtype=np.float32) * 3)
    dataset = data.ArrayDataset(features, labels)
    expected = [(x.asnumpy(), y.asnumpy()) for x, y in data.DataLoader(dataset, batch_size=3, num_workers=0)]
    loader = data.DataLoader(dataset, batch_size=3, num_workers=2)
    try:
        got = [(x.asnumpy(), y.asnumpy()) for x, y in loader]
    finally:
        loader.close()
    assert len(got) == len(expected) == 4
    assert got[0][0].shape == (3, 4) and got[0][1].shape == (3,)  # 1-D labels batch as (batch,), as in MXNet
    assert np.ndim(dataset[0][1]) == 0
    for (x, y), (ex, ey) in zip(got, expected):
        np.testing.assert_array_equal(x, ex)
        np.testing.assert_array_equal(y, ey)
    np.testing.assert_array_equal(np.concatenate([x for x, _ in got]), features.asnumpy())
