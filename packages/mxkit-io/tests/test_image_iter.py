"""ImageRecordIter against MXNet 1.9.1's output, and its determinism across thread counts."""

from __future__ import annotations

import numpy as np
import pytest
from mxkit.core.errors import ConfigError, DTypeError, ShapeError

pytest.importorskip("cv2", reason="ImageRecordIter needs OpenCV (mxkit-io[image])")
from mxkit.io import ImageRecordIter, recordio
from mxkit.io.recordio import IRHeader
from mxkit_io_test_helpers import FIXTURES, generators

REC = str(FIXTURES / "mxnet_images.rec")
NORMALISE = dict(mean_r=120.0, mean_g=110.0, mean_b=100.0, std_r=50.0, std_g=60.0, std_b=70.0, scale=0.5)


@pytest.mark.parametrize("threads", [1, 3])
def test_center_crop_and_normalisation_match_mxnet(threads, mxnet_results, mxnet_image_batches):
    data_iter = ImageRecordIter(REC, (3, 24, 24), 3, label_width=2, preprocess_threads=threads, **NORMALISE)
    for epoch, reference in enumerate(mxnet_results["imagerecorditer_center"]):
        batches = list(data_iter)
        assert len(batches) == len(reference)
        for number, (batch, ref) in enumerate(zip(batches, reference)):
            assert batch.pad == ref["pad"]
            np.testing.assert_array_equal(batch.label[0], ref["label"])
            if epoch == 0:  # MXNet's pixels are kept for the first epoch (the same images after)
                np.testing.assert_allclose(batch.data[0], mxnet_image_batches[f"center_e0_b{number}"], atol=1e-5)
        data_iter.reset()
    data_iter.close()


def test_resize_matches_mxnet(mxnet_results, mxnet_image_batches):
    data_iter = ImageRecordIter(REC, (3, 24, 24), 4, label_width=2, resize=30, path_imgidx=REC[:-4] + ".idx",
                                **NORMALISE)
    batches = list(data_iter)
    assert len(batches) == 2
    for number, batch in enumerate(batches):
        np.testing.assert_allclose(batch.data[0], mxnet_image_batches[f"resize_e0_b{number}"], atol=1e-5)
    assert data_iter.provide_data[0].shape == (4, 3, 24, 24)
    assert data_iter.provide_label[0].shape == (4, 2)


@pytest.mark.parametrize("num_parts", [2, 3])
def test_parts_match_mxnet(num_parts, mxnet_results):
    got = []
    for part in range(num_parts):
        data_iter = ImageRecordIter(REC, (3, 24, 24), 1, label_width=2, num_parts=num_parts, part_index=part)
        got.append([batch.label[0].tolist() for batch in data_iter])
    assert got == mxnet_results[f"imagerecorditer_parts_{num_parts}"]


@pytest.fixture(scope="module")
def big_images(tmp_path_factory):
    """20 images of 40x48 with scalar labels, written by us."""
    path = tmp_path_factory.mktemp("img") / "big.rec"
    rng = np.random.RandomState(5)
    images = []
    with recordio.MXIndexedRecordIO(str(path)[:-4] + ".idx", str(path), "w") as writer:
        for index in range(20):
            img = rng.randint(0, 255, size=(40, 48, 3)).astype(np.uint8)
            images.append(img)
            writer.write_idx(index, recordio.pack_img(IRHeader(0, float(index), index, 0), img, img_fmt=".png"))
    return str(path), images


def _collect(data_iter, epochs=2):
    out = []
    for _ in range(epochs):
        out.append([(b.data[0].copy(), b.label[0].copy(), b.pad) for b in data_iter])
        data_iter.reset()
    data_iter.close()
    return out


def test_random_augmentation_is_deterministic_for_any_thread_count(big_images):
    path, _ = big_images
    settings = dict(shuffle=True, rand_crop=True, rand_mirror=True, seed=11, path_imgidx=path[:-4] + ".idx")
    runs = [_collect(ImageRecordIter(path, (3, 32, 32), 6, preprocess_threads=t, prefetch_buffer=p, **settings))
            for t, p in ((1, 1), (4, 2), (2, 4))]
    for run in runs[1:]:
        for epoch_a, epoch_b in zip(runs[0], run):
            for (data_a, label_a, pad_a), (data_b, label_b, pad_b) in zip(epoch_a, epoch_b):
                np.testing.assert_array_equal(data_a, data_b)
                np.testing.assert_array_equal(label_a, label_b)
                assert pad_a == pad_b
    other_seed = _collect(ImageRecordIter(path, (3, 32, 32), 6, **{**settings, "seed": 12}))
    assert not np.array_equal(other_seed[0][0][0], runs[0][0][0][0])


def test_random_crops_are_windows_of_the_source(big_images):
    path, images = big_images
    data_iter = ImageRecordIter(path, (3, 32, 32), 5, rand_crop=True, rand_mirror=True, seed=3, dtype="uint8")
    mirrored = positions = 0
    seen_labels = []
    for batch in data_iter:
        for crop, label in zip(batch.data[0], batch.label[0]):
            source = images[int(label)][:, :, ::-1].transpose(2, 0, 1)  # RGB, CHW
            seen_labels.append(int(label))
            found = None
            for flip in (False, True):
                candidate = source[:, :, ::-1] if flip else source
                for top in range(40 - 32 + 1):
                    for left in range(48 - 32 + 1):
                        if np.array_equal(candidate[:, top:top + 32, left:left + 32], crop):
                            found = (flip, top, left)
            assert found is not None
            mirrored += found[0]
            positions += found[1:] != (4, 8)
    assert seen_labels == list(range(20))  # no shuffle: file order
    assert 3 <= mirrored <= 17 and positions >= 15  # both flips happen; crops move around
    data_iter.close()


def test_shuffle_visits_every_image_once_per_epoch(big_images):
    path, _ = big_images
    data_iter = ImageRecordIter(path, (3, 32, 32), 4, shuffle=True, seed=1)
    epochs = [[int(v) for b in data_iter for v in b.label[0]] for _ in range(1)]
    data_iter.reset()
    epochs.append([int(v) for b in data_iter for v in b.label[0]])
    assert sorted(epochs[0]) == sorted(epochs[1]) == list(range(20))
    assert epochs[0] != epochs[1] and epochs[0] != list(range(20))
    data_iter.close()


def test_bad_arguments_and_records(big_images, tmp_path):
    path, _ = big_images
    with pytest.raises(ShapeError, match=r"data_shape must be \(channels, height, width\)"):
        ImageRecordIter(path, (2, 32, 32), 4)
    with pytest.raises(DTypeError, match="'float16'"):
        ImageRecordIter(path, (3, 32, 32), 4, dtype="float16")
    with pytest.raises(ConfigError, match="raw pixels"):
        ImageRecordIter(path, (3, 32, 32), 4, dtype="uint8", mean_r=1.0)
    too_big = ImageRecordIter(path, (3, 64, 64), 4)
    with pytest.raises(ShapeError, match="40x48 is smaller than the crop 64x64"):
        next(too_big)
    too_big.close()
    wrong_width = ImageRecordIter(path, (3, 32, 32), 4, label_width=3)
    with pytest.raises(ShapeError, match="scalar label but label_width is 3"):
        next(wrong_width)
    wrong_width.close()
    not_images = tmp_path / "text.rec"
    with recordio.MXRecordIO(str(not_images), "w") as writer:
        writer.write(recordio.pack(IRHeader(0, 1.0, 0, 0), b"not an image"))
    broken = ImageRecordIter(str(not_images), (3, 8, 8), 1)
    with pytest.raises(Exception, match="not a decodable image"):
        next(broken)
    broken.close()


def test_grayscale_and_label_vectors():
    data_iter = ImageRecordIter(REC, (1, 20, 20), 8, label_width=2)
    batch = next(data_iter)
    assert batch.data[0].shape == (8, 1, 20, 20)
    np.testing.assert_array_equal(batch.label[0][:, 1], np.arange(8))
    # Against OpenCV's own grayscale decoding of the first record, centre-cropped.
    import cv2

    reader = recordio.MXIndexedRecordIO(REC[:-4] + ".idx", REC, "r")
    _, payload = recordio.unpack(reader.read_idx(0))
    gray = cv2.imdecode(np.frombuffer(payload, np.uint8), 0)
    top, left = (gray.shape[0] - 20) // 2, (gray.shape[1] - 20) // 2
    np.testing.assert_array_equal(batch.data[0][0, 0], gray[top:top + 20, left:left + 20])
    data_iter.close()
    assert generators.image_format(0)[0] == ".jpg"


def test_reset_in_the_middle_of_an_epoch(big_images):
    path, _ = big_images
    data_iter = ImageRecordIter(path, (3, 32, 32), 2, prefetch_buffer=1, preprocess_threads=2)
    first = next(data_iter)
    np.testing.assert_array_equal(first.label[0], [0, 1])
    data_iter.reset()  # the producer is blocked on its full queue: reset must stop it
    labels = [int(v) for batch in data_iter for v in batch.label[0]]
    assert len(labels) == 20 and sorted(labels) == list(range(20))
    data_iter.close()


def test_index_and_header_scan_give_the_same_parts():
    for part in range(3):
        with_index = ImageRecordIter(REC, (3, 24, 24), 1, label_width=2, num_parts=3, part_index=part,
                                     path_imgidx=REC[:-4] + ".idx")
        scanned = ImageRecordIter(REC, (3, 24, 24), 1, label_width=2, num_parts=3, part_index=part)
        assert with_index.num_samples == scanned.num_samples
        assert [b.label[0].tolist() for b in with_index] == [b.label[0].tolist() for b in scanned]


class _SlowDecoder:
    """OpenCV with an imdecode that sleeps (releasing the GIL) and counts overlapping calls."""

    def __init__(self, cv2):
        import threading

        self._cv2 = cv2
        self._lock = threading.Lock()
        self.active = 0
        self.most_active = 0

    def __getattr__(self, name):
        return getattr(self._cv2, name)

    def imdecode(self, data, flag):
        import time

        with self._lock:
            self.active += 1
            self.most_active = max(self.most_active, self.active)
        time.sleep(0.02)
        with self._lock:
            self.active -= 1
        return self._cv2.imdecode(data, flag)


def test_decode_threads_run_concurrently(big_images):
    path, _ = big_images
    data_iter = ImageRecordIter(path, (3, 32, 32), 8, preprocess_threads=4)
    list(data_iter)  # the first epoch used the real decoder
    slow = _SlowDecoder(data_iter._cv2)
    data_iter._cv2 = slow
    data_iter.reset()
    batches = list(data_iter)
    # 20 images, batches of 8: this epoch starts after the 4 borrowed by the last one.
    assert len(batches) == 2 and slow.most_active >= 2  # not serialised by the GIL or the producer
    data_iter.close()


def test_an_abandoned_iterator_stops_its_threads(big_images):
    import gc
    import time

    path, _ = big_images
    data_iter = ImageRecordIter(path, (3, 32, 32), 2, prefetch_buffer=1, preprocess_threads=2)
    next(data_iter)
    producer = data_iter._producer
    assert producer.is_alive()  # blocked on its full queue
    del data_iter
    gc.collect()
    for _ in range(100):
        if not producer.is_alive():
            break
        time.sleep(0.05)
    assert not producer.is_alive()
