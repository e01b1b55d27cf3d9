"""``mx.nd.image`` / ``mx.sym.image``: MXNet 1.9.1's image operators.

Deterministic operators are compared with MXNet 1.9.1's outputs (fixtures/image_ops, written
by make_image_fixtures.py) and with numpy; random ones with the deterministic operator at the
factor they can only have drawn (a zero-width range) or with the set of possible results.
"""

import importlib.util
import pathlib

import mxkit.ndarray as nd
import mxkit.symbol as sym
import numpy as np
import pytest
from mxkit.core.errors import ShapeError
from mxkit.ndarray import ParamError
from mxkit.ndarray.ops import image as image_ops

_FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "image_ops"


def _load_cases():
    spec = importlib.util.spec_from_file_location("make_image_fixtures", _FIXTURES / "make_image_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CASES


CASES = _load_cases()
EXPECTED = np.load(_FIXTURES / "image_ops.npz")


@pytest.mark.parametrize("case", sorted(CASES))
def test_against_mxnet_1_9_1(case):
    op, _, params = CASES[case]
    if op == "resize":
        pytest.importorskip("cv2", reason="resize resamples with OpenCV: pip install 'mxkit[image]'")
    x = EXPECTED[f"{case}.in"]
    want = EXPECTED[f"{case}.out"]
    got = getattr(nd.image, op)(nd.array(x, dtype=x.dtype), **params).asnumpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    if want.dtype == np.uint8 and op in ("adjust_lighting", "random_hue"):
        # a float result truncated to uint8: the order of float operations may move it across an integer
        assert np.abs(got.astype(int) - want.astype(int)).max() <= 1
    elif want.dtype == np.uint8:
        np.testing.assert_array_equal(got, want)  # moved pixels, or OpenCV's own integer arithmetic
    elif op == "random_hue":
        # the HLS round trip: ~15 float32 operations on values scaled to [0, 1] and back by 255
        np.testing.assert_allclose(got, want, rtol=0, atol=255 * 15 * np.finfo(np.float32).eps)
    else:
        # float32 arithmetic of a few operations on values up to 255: a few ulps (1.5e-5 at 255)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-4)


def test_against_numpy():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, size=(4, 5, 3)).astype(np.uint8)
    batch = rng.integers(0, 256, size=(2, 4, 5, 3)).astype(np.uint8)
    np.testing.assert_allclose(nd.image.to_tensor(nd.array(image, dtype="uint8")).asnumpy(),
                               image.transpose(2, 0, 1).astype(np.float32) / 255, rtol=1e-7)
    np.testing.assert_allclose(nd.image.to_tensor(nd.array(batch, dtype="uint8")).asnumpy(),
                               batch.transpose(0, 3, 1, 2).astype(np.float32) / 255, rtol=1e-7)
    tensor = rng.random((3, 4, 5)).astype(np.float32)
    got = nd.image.normalize(nd.array(tensor), mean=(0.1, 0.2, 0.3), std=(0.5, 2.0, 4.0)).asnumpy()
    mean, std = np.array([0.1, 0.2, 0.3], np.float32), np.array([0.5, 2, 4], np.float32)
    want = (tensor - mean[:, None, None]) / std[:, None, None]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_array_equal(nd.image.crop(nd.array(batch, dtype="uint8"), x=1, y=2, width=3, height=2).asnumpy(),
                                  batch[:, 2:4, 1:4])
    np.testing.assert_array_equal(nd.image.flip_left_right(nd.array(image, dtype="uint8")).asnumpy(), image[:, ::-1])
    np.testing.assert_array_equal(nd.image.flip_top_bottom(nd.array(image, dtype="uint8")).asnumpy(), image[::-1])


def test_random_operators_draw_their_factor_in_the_range():
    rng = np.random.default_rng(1)
    image = (rng.random((4, 5, 3)) * 200).astype(np.float32)
    x = nd.array(image)
    for name, adjust in (("brightness", image_ops.adjust_brightness), ("contrast", image_ops.adjust_contrast),
                         ("saturation", image_ops.adjust_saturation)):
        fixed = getattr(nd.image, f"random_{name}")(x, min_factor=0.7, max_factor=0.7).asnumpy()
        np.testing.assert_allclose(fixed, adjust(image, 0.7), rtol=1e-5)
    # brightness is a scale: every draw is one factor in [min, max]
    for _ in range(5):
        factor = nd.image.random_brightness(x, min_factor=0.5, max_factor=1.5).asnumpy() / image
        assert np.allclose(factor, factor.flat[0], rtol=1e-5) and 0.5 <= factor.flat[0] <= 1.5
    np.testing.assert_array_equal(nd.image.random_lighting(x, alpha_std=0.0).asnumpy(), image)
    flips = {nd.image.random_flip_left_right(x).asnumpy().tobytes() for _ in range(40)}
    assert flips == {image.tobytes(), image[:, ::-1].tobytes()}  # both outcomes, nothing else
    flips = {nd.image.random_flip_top_bottom(x).asnumpy().tobytes() for _ in range(40)}
    assert flips == {image.tobytes(), image[::-1].tobytes()}


def test_color_jitter_applies_the_adjustments_it_is_given():
    rng = np.random.default_rng(2)
    image = (rng.random((4, 5, 3)) * 200 + 20).astype(np.float32)
    x = nd.array(image)
    np.testing.assert_array_equal(
        nd.image.random_color_jitter(x, brightness=0, contrast=0, saturation=0, hue=0).asnumpy(), image)
    for _ in range(5):
        factor = nd.image.random_color_jitter(x, brightness=0.3, contrast=0, saturation=0, hue=0).asnumpy() / image
        assert np.allclose(factor, factor.flat[0], rtol=1e-5) and 0.7 <= factor.flat[0] <= 1.3
    # a hue shift keeps each pixel's lightness, (max + min) / 2
    shifted = nd.image.random_color_jitter(x, brightness=0, contrast=0, saturation=0, hue=0.4).asnumpy()
    np.testing.assert_allclose(shifted.max(-1) + shifted.min(-1), image.max(-1) + image.min(-1), atol=1e-2)
    gray = nd.array(np.full((2, 2, 1), 100, np.uint8), dtype="uint8")
    out = nd.image.random_color_jitter(gray, brightness=0, contrast=0.5, saturation=0.5, hue=0.5).asnumpy()
    np.testing.assert_array_equal(out, 100)  # one flat gray channel: contrast, saturation and hue keep it


def test_normalize_and_crop_gradients():
    from mxkit.ndarray import autograd

    rng = np.random.default_rng(4)
    tensor, head = rng.random((2, 3, 4, 5)).astype(np.float32), rng.random((2, 3, 4, 5)).astype(np.float32)
    x = nd.array(tensor)
    x.attach_grad()
    with autograd.record():
        y = nd.image.normalize(x, mean=(0.1, 0.2, 0.3), std=(0.5, 2.0, 4.0))
    y.backward(nd.array(head))
    np.testing.assert_allclose(x.grad.asnumpy(), head / np.array([0.5, 2.0, 4.0], np.float32)[:, None, None],
                               rtol=1e-6)
    image = nd.array(rng.random((2, 5, 6, 3)).astype(np.float32))
    image.attach_grad()
    crop_head = rng.random((2, 3, 2, 3)).astype(np.float32)
    with autograd.record():
        part = nd.image.crop(image, x=1, y=2, width=2, height=3)
    part.backward(nd.array(crop_head))
    want = np.zeros((2, 5, 6, 3), np.float32)
    want[:, 2:5, 1:3] = crop_head
    np.testing.assert_array_equal(image.grad.asnumpy(), want)


def test_gradients_through_a_bound_symbol():
    import mxkit.core as core

    data = sym.var("data")
    exe = (sym.image.crop(data, x=1, y=0, width=2, height=2) * 3).simple_bind(core.cpu(), data=(3, 4, 1))
    exe.forward(is_train=True, data=nd.ones((3, 4, 1)))
    exe.backward(out_grads=nd.ones((2, 2, 1)))
    want = np.zeros((3, 4, 1), np.float32)
    want[0:2, 1:3] = 3
    np.testing.assert_array_equal(exe.grad_dict["data"].asnumpy(), want)
    exe = sym.image.normalize(data, mean=(0.5,), std=(2.0, 4.0, 8.0)).simple_bind(core.cpu(), data=(3, 2, 2))
    exe.forward(is_train=True, data=nd.ones((3, 2, 2)))
    exe.backward(out_grads=nd.ones((3, 2, 2)))
    np.testing.assert_array_equal(exe.grad_dict["data"].asnumpy()[:, 0, 0], [0.5, 0.25, 0.125])


def test_symbols_infer_shapes_and_run():
    data = sym.var("data")
    net = sym.image.normalize(sym.image.to_tensor(data), mean=(0.5,), std=(0.25,))
    assert net.infer_shape(data=(4, 5, 3))[1] == [(3, 4, 5)]
    crop = sym.image.crop(data, x=1, y=0, width=2, height=3)
    assert crop.infer_shape(data=(2, 4, 5, 3))[1] == [(2, 3, 2, 3)]
    resize = sym.image.resize(data, size=(3,), keep_ratio=True)
    assert resize.infer_shape(data=(2, 8, 6, 3))[1] == [(2, 4, 3, 3)]  # short edge 6 -> 3, long 8 -> 4
    image = np.arange(60, dtype=np.float32).reshape(4, 5, 3)
    out = net.eval(data=nd.array(image))[0].asnumpy()
    np.testing.assert_allclose(out, (image.transpose(2, 0, 1) / 255 - 0.5) / 0.25, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call, error, match", [
    (lambda: nd.image.to_tensor(nd.ones((3, 3))), ShapeError, r"\(H, W, C\) image or an \(N, H, W, C\) batch"),
    (lambda: nd.image.normalize(nd.ones((2, 3, 3)), mean=(0.5,), std=(1.0,)), ShapeError, "1 or 3 elements"),
    (lambda: nd.image.normalize(nd.ones((3, 2, 2))), ParamError, "mean must have 1 or 3 elements"),
    (lambda: nd.image.normalize(nd.ones((3, 2, 2)), mean=(1, 2), std=(1,)), ParamError, "got \\(1.0, 2.0\\)"),
    (lambda: nd.image.normalize(nd.ones((3, 2, 2)), mean=(1,), std=(0,)), ParamError, "std must not contain 0"),
    (lambda: nd.image.crop(nd.ones((4, 4, 3)), x=2, y=0, width=3, height=2), ShapeError, "must lie inside"),
    (lambda: nd.image.crop(nd.ones((4, 4, 3)), x=0, y=0, width=0, height=2), ParamError, "must be > 0"),
    (lambda: nd.image.crop(nd.ones((4, 4)), x=0, y=0, width=1, height=1), ShapeError, "image or an"),
    (lambda: nd.image.flip_left_right(nd.ones((2, 4, 4, 3))), ShapeError, "one \\(H, W, C\\) image"),
    (lambda: nd.image.adjust_lighting(nd.ones((2, 2, 3)), alpha=(0.1, 0.1)), ParamError, "alpha must hold 3"),
    (lambda: nd.image.adjust_lighting(nd.ones((2, 2, 1)), alpha=(0.1, 0.1, 0.1)), ShapeError, "RGB image"),
    (lambda: nd.image.random_contrast(nd.ones((2, 2, 3)), min_factor=2, max_factor=1), ParamError, "<= max_factor"),
    (lambda: nd.image.random_saturation(nd.ones((2, 2, 3)), min_factor=-0.5, max_factor=1), ParamError, ">= 0"),
    (lambda: nd.image.resize(nd.ones((4, 4, 3)), size=(0, 2)), ParamError, "positive ints"),
    (lambda: nd.image.resize(nd.ones((4, 4, 3)), size=(2, 2), interp=7), ParamError, "interp must be one of"),
    (lambda: nd.image.resize(nd.ones((4, 4)), size=(2, 2)), ShapeError, "image or an"),
    (lambda: nd.image.random_color_jitter(nd.ones((2, 2, 3)), brightness=0, contrast=-1, saturation=0, hue=0),
     ParamError, "contrast must be >= 0"),
    (lambda: nd.image.random_hue(nd.ones((2, 2, 2)), min_factor=0, max_factor=1), ShapeError, "gray or"),
    (lambda: nd.image.random_lighting(nd.ones((2, 2, 3)), alpha_std=-1), ParamError, "alpha_std must be >= 0"),
])
def test_bad_inputs_fail_clearly(call, error, match):
    with pytest.raises(error, match=match):
        call().wait_to_read()
