"""Resize, CropResize, CenterCrop, RandomResizedCrop, RandomApply and Normalize's checks, against
numpy: exact-factor nearest-neighbour resizing is pixel repetition, crops are slices, and MXNet
1.9.1's size rules (``(width, height)`` pairs; keep_ratio scales the longer edge in integers)."""

import random

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import GluonError

transforms = pytest.importorskip("mxkit.gluon.data.vision.transforms")
pytest.importorskip("cv2")

RNG = np.random.RandomState(7)


def _image(shape, dtype="uint8"):
    return mx.nd.array(RNG.randint(0, 255, shape).astype(dtype), dtype=dtype)


@pytest.mark.parametrize("dtype", ["uint8", "float32", "float64"])
def test_nearest_resize_by_an_exact_factor_repeats_pixels(dtype):
    x = _image((3, 4, 3), dtype)
    out = transforms.Resize((8, 6), interpolation=0)(x)  # (width, height): twice each edge
    assert out.shape == (6, 8, 3) and out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out.asnumpy(), x.asnumpy().repeat(2, axis=0).repeat(2, axis=1))
    batch = mx.nd.stack(x, x * 0 + 1)
    out = transforms.Resize((8, 6), interpolation=0)(batch)
    assert out.shape == (2, 6, 8, 3)
    np.testing.assert_array_equal(out.asnumpy()[1], np.ones((6, 8, 3)))


@pytest.mark.parametrize("shape, size, keep, want", [((300, 200, 3), 150, True, (225, 150)),
                                                      ((200, 300, 3), 150, True, (150, 225)),
                                                      ((7, 5, 3), 3, True, (4, 3)),  # 7 * 3 // 5
                                                      ((300, 200, 3), 50, False, (50, 50)),
                                                      ((300, 200, 3), (40, 20), False, (20, 40))])
def test_resize_sizes_follow_mxnet(shape, size, keep, want):
    assert transforms.Resize(size, keep_ratio=keep)(_image(shape)).shape[:2] == want


@pytest.mark.parametrize("size", [-150, 0, (100, 100, 100), (10, -1), 2.5])
def test_a_bad_resize_size_is_refused(size):
    with pytest.raises(GluonError, match="size"):
        transforms.Resize(size, keep_ratio=True)(_image((6, 4, 3)))


def test_crop_resize_is_a_slice_then_a_resize():
    x = mx.nd.arange(60).reshape((5, 4, 3))
    out = transforms.CropResize(1, 2, 3, 2)(x)
    np.testing.assert_array_equal(out.asnumpy(), x.asnumpy()[2:4, 1:4])
    batch = mx.nd.arange(180).reshape((2, 6, 5, 3))
    np.testing.assert_array_equal(transforms.CropResize(1, 2, 3, 4)(batch).asnumpy(), batch.asnumpy()[:, 2:6, 1:4])
    y = _image((4, 6, 3))
    out = transforms.CropResize(2, 1, 2, 3, size=(4, 6), interpolation=0)(y)
    np.testing.assert_array_equal(out.asnumpy(), y.asnumpy()[1:4, 2:4].repeat(2, axis=0).repeat(2, axis=1))


@pytest.mark.parametrize("box", [(0, 0, -1, 2), (0, 0, 2, 0), (3, 0, 2, 2), (0, 4, 1, 2), (-1, 0, 1, 1)])
def test_a_crop_outside_the_image_or_empty_is_refused(box):
    with pytest.raises(GluonError, match="window"):
        transforms.CropResize(*box)(_image((5, 4, 3)))


def test_center_crop_is_the_central_slice_and_an_image_smaller_than_it_is_scaled():
    x = _image((7, 9, 3))
    np.testing.assert_array_equal(transforms.CenterCrop((5, 3))(x).asnumpy(), x.asnumpy()[2:5, 2:7])
    small = _image((2, 2, 3))
    out = transforms.CenterCrop(4, interpolation=0)(small)  # the whole image, doubled
    np.testing.assert_array_equal(out.asnumpy(), small.asnumpy().repeat(2, axis=0).repeat(2, axis=1))


def test_random_resized_crop_of_the_whole_image_is_its_resize():
    x = _image((6, 8, 3))
    whole = transforms.RandomResizedCrop((4, 3), scale=(1.0, 1.0), ratio=(8 / 6, 8 / 6), interpolation=0)
    np.testing.assert_array_equal(whole(x).asnumpy(), x.asnumpy()[::2, ::2])
    random.seed(3)
    crops = [transforms.RandomResizedCrop(5)(x) for _ in range(20)]
    assert all(c.shape == (5, 5, 3) and c.dtype == np.uint8 for c in crops)
    assert len({c.asnumpy().tobytes() for c in crops}) > 1  # the windows differ


def test_random_apply_applies_with_its_probability():
    random.seed(11)
    apply = transforms.RandomApply(transforms.Resize(2), p=0.3)
    hits = sum(apply(_image((4, 4, 3))).shape[0] == 2 for _ in range(400))
    assert 0.3 * 400 - 4 * np.sqrt(400 * 0.3 * 0.7) < hits < 0.3 * 400 + 4 * np.sqrt(400 * 0.3 * 0.7)
    with pytest.raises(GluonError, match="probability"):
        transforms.RandomApply(transforms.Resize(2), p=1.5)


@pytest.mark.parametrize("shape", [(5, 5, 3, 4, 4), (4, 4), (5, 4, 8, 8), (4, 8, 8)])
def test_normalize_refuses_other_ranks_and_channel_counts(shape):
    with pytest.raises(GluonError, match="Normalize"):
        transforms.Normalize(mean=(0, 1, 2), std=(3, 2, 1))(mx.nd.ones(shape))


def test_normalize_hybridizes_into_the_image_operator():
    image = np.random.default_rng(3).random((2, 3, 4, 5)).astype(np.float32)
    block = transforms.HybridCompose([transforms.Normalize(mean=(0.5, 0.25, 0.1), std=(2.0, 0.5, 4.0))])
    imperative = block(mx.nd.array(image)).asnumpy()
    block.hybridize()
    hybridized = block(mx.nd.array(image)).asnumpy()
    mean, std = np.array([0.5, 0.25, 0.1], np.float32), np.array([2, 0.5, 4], np.float32)
    want = (image - mean[:, None, None]) / std[:, None, None]
    assert "_image_normalize" in block(mx.sym.var("data")).tojson()  # traced into the graph
    np.testing.assert_allclose(imperative, want, rtol=1e-6)
    np.testing.assert_allclose(hybridized, want, rtol=1e-6)
