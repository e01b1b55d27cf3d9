"""mx.image: decoding, resizing, crops and padding against MXNet 1.9.1; augmenters; ImageIter."""

import json
import pathlib
import random

import numpy as np
import pytest
from mxkit import mx
from mxkit.core.errors import ConfigError, FormatError, MXKitError, ShapeError

cv2 = pytest.importorskip("cv2", reason="mx.image needs OpenCV (mxkit[image])")

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "mx_image" / "mxnet_191_image_ops.npz"


@pytest.fixture(scope="module")
def mxnet_results():
    with np.load(FIXTURE) as data:
        return {key: data[key] for key in data.files}


def _close_to_mxnet(ours, theirs, uint8_tolerance=0):
    ours = ours.asnumpy()
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    # bicubic weights are rounded differently between OpenCV versions: one grey level at most
    assert np.abs(ours.astype(np.int32) - theirs.astype(np.int32)).max() <= uint8_tolerance


@pytest.mark.parametrize("interp", [0, 1, 2, 3, 4])
def test_imresize_matches_mxnet(mxnet_results, interp):
    # MXNet hands interp to OpenCV unchanged (2 is bicubic, 3 area), so ours must too
    image = mx.nd.array(mxnet_results["image"], dtype="uint8")
    _close_to_mxnet(mx.image.imresize(image, 29, 17, interp=interp), mxnet_results[f"imresize_{interp}"],
                    uint8_tolerance=1 if interp == 2 else 0)


def test_crops_borders_and_normalize_match_mxnet(mxnet_results):
    image = mx.nd.array(mxnet_results["image"], dtype="uint8")
    _close_to_mxnet(mx.image.resize_short(image, 24), mxnet_results["resize_short"], uint8_tolerance=1)
    _close_to_mxnet(mx.image.center_crop(image, (20, 30))[0], mxnet_results["center_crop"])
    _close_to_mxnet(mx.image.fixed_crop(image, 3, 5, 20, 10, size=(40, 20), interp=1), mxnet_results["fixed_crop"])
    _close_to_mxnet(mx.image.copyMakeBorder(image, 1, 2, 3, 4, type=0, values=(5.0, 6.0, 7.0)),
                    mxnet_results["border"])
    _close_to_mxnet(mx.image.copyMakeBorder(image, 2, 2, 2, 2, type=2), mxnet_results["border_reflect"])
    normalized = mx.image.color_normalize(mx.nd.array(mxnet_results["image"]), mx.nd.array([123.68, 116.28, 103.53]),
                                          mx.nd.array([58.395, 57.12, 57.375]))
    np.testing.assert_allclose(normalized.asnumpy(), mxnet_results["color_normalize"], rtol=1e-6, atol=1e-6)


def _png(image):
    ok, buf = cv2.imencode(".png", image)
    assert ok
    return buf.tobytes()


def test_imdecode_and_imread_give_rgb_hwc(tmp_path):
    bgr = np.random.default_rng(0).integers(0, 256, (9, 13, 3), dtype=np.uint8)
    data = _png(bgr)
    for buf in (data, bytearray(data), np.frombuffer(data, np.uint8), mx.nd.array(np.frombuffer(data, np.uint8))):
        decoded = mx.image.imdecode(buf)
        assert decoded.dtype == np.uint8
        np.testing.assert_array_equal(decoded.asnumpy(), bgr[:, :, ::-1])
    np.testing.assert_array_equal(mx.image.imdecode(data, to_rgb=0).asnumpy(), bgr)
    gray = mx.image.imdecode(data, flag=0)
    assert gray.shape == (9, 13, 1)
    # the decoder's fixed-point luma may round one grey level away from the exact weights
    luma = bgr[:, :, ::-1].astype(np.float64) @ np.array([0.299, 0.587, 0.114])
    assert np.abs(gray.asnumpy()[:, :, 0] - luma).max() <= 1.0
    path = tmp_path / "a.png"
    path.write_bytes(data)
    np.testing.assert_array_equal(mx.image.imread(str(path)).asnumpy(), bgr[:, :, ::-1])
    out = mx.nd.zeros((9, 13, 3), dtype="uint8")
    assert mx.image.imdecode(data, out=out) is out
    np.testing.assert_array_equal(out.asnumpy(), bgr[:, :, ::-1])


def test_bad_images_raise_mxnet_errors(tmp_path):
    # MXNet raises MXNetError (a RuntimeError); code ported from it catches either
    with pytest.raises(FormatError, match="empty"):
        mx.image.imdecode(b"")
    with pytest.raises(mx.base.MXNetError, match="could not decode"):
        mx.image.imdecode(b"not an image at all")
    with pytest.raises(RuntimeError, match="cannot read"):
        mx.image.imread(str(tmp_path / "missing.jpg"))
    with pytest.raises(ConfigError, match="interp must be one of"):
        mx.image.imresize(mx.nd.ones((12, 16, 3)), 3, 3, interp=-1)
    with pytest.raises(ShapeError, match="not inside"):
        mx.image.fixed_crop(mx.nd.ones((4, 4, 3)), 2, 2, 3, 3)
    with pytest.raises(ConfigError, match="type must be one of"):
        mx.image.copyMakeBorder(mx.nd.ones((4, 4, 3)), 1, 1, 1, 1, type=9)


def test_scale_down_and_random_crops_stay_inside():
    assert mx.image.scale_down((640, 480), (720, 120)) == (640, 106)
    assert mx.img is mx.image
    image = mx.nd.array(np.arange(20 * 30 * 3).reshape(20, 30, 3) % 251, dtype="uint8")
    random.seed(5)
    for _ in range(20):
        crop, (x0, y0, w, h) = mx.image.random_crop(image, (10, 8))
        assert crop.shape == (8, 10, 3) and 0 <= x0 <= 20 and 0 <= y0 <= 12
        np.testing.assert_array_equal(crop.asnumpy(), image.asnumpy()[y0:y0 + 8, x0:x0 + 10])
        crop, (x0, y0, w, h) = mx.image.random_size_crop(image, (12, 12), (0.1, 0.5), (0.75, 1.33))
        assert crop.shape == (12, 12, 3) and x0 + w <= 30 and y0 + h <= 20
    # larger than the image: the largest crop of that aspect ratio, resized up
    crop, rect = mx.image.center_crop(image, (60, 10))
    assert crop.shape == (10, 60, 3) and rect == (0, 7, 30, 5)


def test_color_augmenters_against_numpy():
    rng = np.random.default_rng(1)
    src = rng.uniform(0, 255, (6, 7, 3)).astype(np.float32)
    luma = np.array([0.299, 0.587, 0.114], np.float32)
    random.seed(2)
    alpha = 1.0 + random.uniform(-0.3, 0.3)
    random.seed(2)
    out = mx.image.BrightnessJitterAug(0.3)(mx.nd.array(src))
    np.testing.assert_allclose(out.asnumpy(), src * alpha, rtol=1e-5)
    random.seed(2)
    out = mx.image.SaturationJitterAug(0.3)(mx.nd.array(src))
    gray = (src * luma).sum(axis=2, keepdims=True)
    np.testing.assert_allclose(out.asnumpy(), src * alpha + gray * (1 - alpha), rtol=1e-4, atol=1e-3)
    random.seed(2)
    out = mx.image.ContrastJitterAug(0.3)(mx.nd.array(src))
    mean_gray = 3.0 * (1 - alpha) / src.size * (src * luma).sum()
    np.testing.assert_allclose(out.asnumpy(), src * alpha + mean_gray, rtol=1e-4, atol=1e-3)
    random.seed(1)  # the first draw of seed 1 (0.13) is below 0.5
    flipped = mx.image.HorizontalFlipAug(0.5)(mx.nd.array(src))
    np.testing.assert_array_equal(flipped.asnumpy(), src[:, ::-1])
    np.random.seed(4)
    noise = np.random.normal(0, 0.1, size=(3,))
    np.random.seed(4)
    lit = mx.image.CreateAugmenter((3, 6, 7), pca_noise=0.1)[-1](mx.nd.array(src))
    eigval = np.array([55.46, 4.794, 1.148])
    eigvec = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140], [-0.5836, -0.6948, 0.4203]])
    np.testing.assert_allclose(lit.asnumpy(), src + np.dot(eigvec * noise, eigval), rtol=1e-5, atol=1e-3)


def test_create_augmenter_list_and_dumps():
    augs = mx.image.CreateAugmenter((3, 24, 24), resize=30, rand_crop=True, rand_resize=True, rand_mirror=True,
                                    mean=True, std=True, brightness=0.1, hue=0.1, rand_gray=0.2)
    names = [type(a).__name__ for a in augs]
    assert names == ["ResizeAug", "RandomSizedCropAug", "HorizontalFlipAug", "CastAug", "ColorJitterAug",
                     "HueJitterAug", "RandomGrayAug", "ColorNormalizeAug"]
    assert json.loads(augs[0].dumps()) == ["resizeaug", {"size": 30, "interp": 2}]
    assert json.loads(augs[-1].dumps())[1]["mean"] == [123.68, 116.28, 103.53]
    image = mx.nd.array(np.random.default_rng(2).integers(0, 256, (40, 50, 3)), dtype="uint8")
    for aug in augs:
        image = aug(image)
    assert image.shape == (24, 24, 3) and image.dtype == np.float32
    with pytest.raises(ConfigError, match="rand_resize=True needs rand_crop"):
        mx.image.CreateAugmenter((3, 8, 8), rand_resize=True)
    with pytest.raises(ShapeError, match="1 or 3 values"):
        mx.image.CreateAugmenter((3, 8, 8), mean=np.zeros(2))


def _write_images(tmp_path, count):
    rng = np.random.default_rng(7)
    images, lines = [], []
    for i in range(count):
        bgr = rng.integers(0, 256, (10 + i, 12, 3), dtype=np.uint8)
        (tmp_path / f"img{i}.png").write_bytes(_png(bgr))
        images.append(bgr[:, :, ::-1])
        lines.append(f"{i}\t{float(i)}\timg{i}.png\n")
    (tmp_path / "list.lst").write_text("".join(lines))
    return images


def test_image_iter_over_a_list_file_pads_from_the_start(tmp_path):
    images = _write_images(tmp_path, 5)
    it = mx.image.ImageIter(2, (3, 8, 8), path_imglist=str(tmp_path / "list.lst"), path_root=str(tmp_path))
    assert it.provide_data[0].shape == (2, 3, 8, 8) and it.provide_label[0].shape == (2,)
    batches = list(it)
    assert [b.pad for b in batches] == [0, 0, 1]
    labels = np.concatenate([b.label[0].asnumpy() for b in batches])
    np.testing.assert_array_equal(labels, [0, 1, 2, 3, 4, 0])
    for i, image in enumerate(images):
        expected, _ = mx.image.center_crop(mx.nd.array(image, dtype="uint8"), (8, 8))
        got = batches[i // 2].data[0].asnumpy()[i % 2]
        np.testing.assert_array_equal(got, expected.asnumpy().transpose(2, 0, 1).astype(np.float32))
    it.reset()
    assert len(list(it)) == 3


def test_image_iter_over_records_discard_roll_over_and_parts(tmp_path):
    images = _write_images(tmp_path, 5)
    rec, idx = str(tmp_path / "d.rec"), str(tmp_path / "d.idx")
    writer = mx.recordio.MXIndexedRecordIO(idx, rec, "w")
    for i, image in enumerate(images):
        writer.write_idx(i, mx.recordio.pack(mx.recordio.IRHeader(0, float(i * 10), i, 0), _png(image[:, :, ::-1])))
    writer.close()
    it = mx.image.ImageIter(2, (3, 8, 8), path_imgrec=rec, last_batch_handle="discard")
    assert [b.label[0].asnumpy().tolist() for b in it] == [[0, 10], [20, 30]]
    it = mx.image.ImageIter(2, (3, 8, 8), path_imgrec=rec, path_imgidx=idx, last_batch_handle="roll_over")
    assert [b.label[0].asnumpy().tolist() for b in it] == [[0, 10], [20, 30]]
    it.reset()  # the left-over image starts the next epoch
    assert next(iter(it)).label[0].asnumpy().tolist() == [40, 0]
    random.seed(1)
    it = mx.image.ImageIter(1, (3, 8, 8), path_imgrec=rec, path_imgidx=idx, shuffle=True, num_parts=2, part_index=1)
    assert sorted(b.label[0].asnumpy()[0] for b in it) == [20, 30]
    it = mx.image.ImageIter(2, (3, 8, 8), imglist=[[[1.0, 4.0], "img0.png"], [2.0, 3.0, "img1.png"]],
                            path_root=str(tmp_path), label_width=2, dtype="uint8")
    batch = next(it)
    assert batch.data[0].dtype == np.uint8 and batch.label[0].asnumpy().tolist() == [[1, 4], [2, 3]]
    it = mx.image.ImageIter(1, (3, 8, 8), imglist=[[1.0, "img0.png"]], path_root=str(tmp_path), label_width=2)
    with pytest.raises(FormatError, match="has 1 labels, label_width is 2"):
        next(it)


def test_image_iter_refuses_bad_setups(tmp_path):
    _write_images(tmp_path, 1)
    lst = str(tmp_path / "list.lst")
    with pytest.raises(ConfigError, match="needs path_imgrec, path_imglist or imglist"):
        mx.image.ImageIter(2, (3, 8, 8))
    with pytest.raises(ShapeError, match="3 \\(RGB\\) or 1"):
        mx.image.ImageIter(2, (4, 8, 8), path_imglist=lst, path_root=str(tmp_path))
    with pytest.raises(ConfigError, match="last_batch_handle"):
        mx.image.ImageIter(2, (3, 8, 8), path_imglist=lst, last_batch_handle="wrap")
    (tmp_path / "bad.lst").write_text("0\tnot-a-number\timg0.png\n")
    with pytest.raises(FormatError, match="line 1"):
        mx.image.ImageIter(2, (3, 8, 8), path_imglist=str(tmp_path / "bad.lst"))
    (tmp_path / "img0.png").write_bytes(b"broken")
    it = mx.image.ImageIter(1, (3, 8, 8), path_imglist=lst, path_root=str(tmp_path))
    with pytest.raises(MXKitError, match=r"broken image file 'img0\.png'"):
        next(it)
