"""Batches copied to a device by the iterator's own threads (``ctx=``), checked on a second CPU device.

A GPU is not needed to check the mechanism: ``cpu(1)`` is another device of the CPU backend,
and a batch must arrive there with the values the host batch had.
"""

from __future__ import annotations

import numpy as np
import pytest
from mxkit.core.errors import ConfigError
from mxkit.io import recordio
from mxkit.io.image_iter import ImageRecordIter
from mxkit.io.ndarray_iter import NDArrayIter
from mxkit.io.recordio import IRHeader
from mxkit.io.wrappers import PrefetchingIter

nd = pytest.importorskip("mxkit.ndarray", reason="device batches are NDArrays (mxkit-ndarray)")
from mxkit.core.context import Context  # noqa: E402

DEVICE = Context("cpu", 1)


@pytest.fixture
def ndarray_batches(monkeypatch):
    monkeypatch.setenv("MXKIT_IO_BATCH_TYPE", "ndarray")


def test_prefetching_iter_hands_out_batches_on_the_device(ndarray_batches):
    data = np.arange(40, dtype=np.float32).reshape(10, 4)
    labels = np.arange(10, dtype=np.float32)
    expected = [(b.data[0].asnumpy(), b.label[0].asnumpy(), b.pad) for b in NDArrayIter(data, labels, 3)]
    prefetch = PrefetchingIter(NDArrayIter(data, labels, 3), ctx=DEVICE, prefetch_depth=2)
    for _ in range(2):  # and again after a reset
        got = list(prefetch)
        assert [b.data[0].context for b in got] == [DEVICE] * len(expected)
        assert all(b.label[0].context == DEVICE for b in got)
        for batch, (x, y, pad) in zip(got, expected, strict=True):
            np.testing.assert_array_equal(batch.data[0].asnumpy(), x)
            np.testing.assert_array_equal(batch.label[0].asnumpy(), y)
            assert batch.pad == pad
        prefetch.reset()


def test_image_record_iter_decodes_straight_to_the_device(ndarray_batches, tmp_path):
    pytest.importorskip("cv2", reason="ImageRecordIter needs OpenCV (mxkit-io[image])")
    path = tmp_path / "imgs.rec"
    rng = np.random.default_rng(3)
    with recordio.MXRecordIO(str(path), "w") as writer:
        for index in range(6):
            image = rng.integers(0, 255, size=(8, 8, 3)).astype(np.uint8)
            writer.write(recordio.pack_img(IRHeader(0, float(index), index, 0), image, img_fmt=".png"))
    host = [(b.data[0].asnumpy(), b.label[0].asnumpy()) for b in ImageRecordIter(str(path), (3, 8, 8), 4)]
    device_iter = ImageRecordIter(str(path), (3, 8, 8), 4, ctx=DEVICE)
    batches = list(device_iter)
    device_iter.close()
    assert [b.data[0].context for b in batches] == [DEVICE, DEVICE]
    for batch, (x, y) in zip(batches, host, strict=True):
        np.testing.assert_array_equal(batch.data[0].asnumpy(), x)
        np.testing.assert_array_equal(batch.label[0].asnumpy(), y)


def test_a_device_with_numpy_batches_is_refused(monkeypatch):
    monkeypatch.setenv("MXKIT_IO_BATCH_TYPE", "numpy")
    with pytest.raises(ConfigError, match="io_batch_type is 'numpy'"):
        PrefetchingIter(NDArrayIter(np.zeros((4, 2)), np.zeros(4), 2), ctx=DEVICE)


def test_ndarray_batches_keep_the_iterators_dtype(ndarray_batches):
    # an int32 CSVIter gives int32 NDArray batches, as MXNet's; labels stay float32
    from mxkit.io import CSVIter
    from mxkit_io_test_helpers import FIXTURES

    data_iter = CSVIter(data_csv=str(FIXTURES / "mxnet_csv_data.csv"), data_shape=(2, 3), batch_size=2,
                        dtype="int32")
    batch = next(data_iter)
    assert isinstance(batch.data[0], nd.NDArray)
    assert batch.data[0].dtype == np.int32 and batch.label[0].dtype == np.float32
    assert data_iter.getdata().dtype == np.int32
