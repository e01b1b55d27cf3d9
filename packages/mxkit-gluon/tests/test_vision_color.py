"""Colour transforms against their definitions in numpy (float64): brightness scales, contrast and
saturation blend toward the BT.601 luma (factor 0 gives the grey image), a hue turn by 2 (x pi) is
the identity and by 1 negates the chroma, lighting adds the PCA offset; uint8 results are clipped
and truncated as MXNet's saturate_cast. Tolerances: float32 products of three terms, 1e-4."""

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import GluonError
from mxkit.gluon.data.vision import color, transforms

RNG = np.random.RandomState(4)
IMAGE = RNG.uniform(0, 255, (5, 6, 3)).astype(np.float32)
GRAY = IMAGE.astype(np.float64) @ np.array([0.299, 0.587, 0.114])


def test_brightness_contrast_saturation_are_their_blends():
    np.testing.assert_allclose(color.adjust_brightness(IMAGE, 1.3), IMAGE * 1.3, rtol=1e-6)
    np.testing.assert_allclose(color.adjust_contrast(IMAGE, 0.0), np.full(IMAGE.shape, GRAY.mean()), rtol=1e-4)
    np.testing.assert_allclose(color.adjust_contrast(IMAGE, 0.4), IMAGE * 0.4 + GRAY.mean() * 0.6, rtol=1e-4)
    np.testing.assert_allclose(color.adjust_saturation(IMAGE, 0.0), np.repeat(GRAY[..., None], 3, axis=2),
                               rtol=1e-4)
    np.testing.assert_allclose(color.adjust_saturation(IMAGE, 1.5), IMAGE * 1.5 - 0.5 * GRAY[..., None], rtol=1e-4,
                               atol=1e-3)


# MXNet's YIQ matrices are rounded to 3 decimals: their product is the identity within 1.4e-3 per
# entry, so a pixel of three values up to 255 comes back within 3 * 255 * 1.4e-3 < 1.1
YIQ_ATOL = 1.1


def test_hue_turns_in_yiq_space():
    np.testing.assert_allclose(color.adjust_hue(IMAGE, 2.0), IMAGE, atol=YIQ_ATOL)
    to_yiq = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])
    yiq, turned = IMAGE @ to_yiq.T, color.adjust_hue(IMAGE, 1.0) @ to_yiq.T
    np.testing.assert_allclose(turned[..., 0], yiq[..., 0], atol=YIQ_ATOL)  # the luma stays
    np.testing.assert_allclose(turned[..., 1:], -yiq[..., 1:], atol=YIQ_ATOL)  # a half turn negates I and Q


def test_lighting_adds_the_pca_offset_and_uint8_saturates():
    alphas = np.array([0.1, -0.2, 0.05])
    eigvec = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140], [-0.5836, -0.6948, 0.4203]])
    offset = eigvec @ (alphas * np.array([55.46, 4.794, 1.148]))
    np.testing.assert_allclose(color.adjust_lighting(IMAGE, alphas), IMAGE + offset, rtol=1e-5)
    bright = transforms.RandomBrightness(0.0)  # factor exactly 1
    x = mx.nd.array(np.array([[[0, 128, 255]]], dtype=np.uint8), dtype="uint8")
    np.testing.assert_array_equal(bright(x).asnumpy(), [[[0, 128, 255]]])
    out = color._back(np.array([[[-3.7, 100.9, 300.0]]], dtype=np.float32), np.dtype(np.uint8), x)
    np.testing.assert_array_equal(out.asnumpy(), [[[0, 100, 255]]])


def test_random_transforms_draw_within_their_limits():
    np.random.seed(2)
    x = mx.nd.array(IMAGE)
    for _ in range(5):
        ratio = transforms.RandomBrightness(0.1)(x).asnumpy() / IMAGE
        assert np.allclose(ratio, ratio.flat[0], rtol=1e-5) and 0.9 <= ratio.flat[0] <= 1.1
    jittered = transforms.RandomColorJitter(0.1, 0.1, 0.1, 0.1)(x)
    assert jittered.shape == x.shape and jittered.dtype == np.float32
    assert transforms.RandomLighting(0.1)(mx.nd.ones((4, 4, 3), dtype="uint8")).dtype == np.uint8


@pytest.mark.parametrize("make", [lambda: transforms.RandomBrightness(-0.1), lambda: transforms.RandomHue(-1),
                                  lambda: transforms.RandomColorJitter(contrast=-0.5)])
def test_negative_limits_are_refused(make):
    with pytest.raises(GluonError, match=">= 0"):
        make()


def test_a_non_rgb_image_is_refused():
    with pytest.raises(GluonError, match="RGB"):
        transforms.RandomSaturation(0.1)(mx.nd.ones((3, 4, 4)))


def test_random_hue_shifts_in_hls_space_by_its_draw():
    from mxkit.ndarray.ops.image import adjust_hue_hls

    np.random.seed(4)
    alpha = np.random.uniform(-0.25, 0.25)
    np.random.seed(4)
    shifted = transforms.RandomHue(0.25)(mx.nd.array(IMAGE)).asnumpy()
    np.testing.assert_allclose(shifted, adjust_hue_hls(IMAGE, alpha), rtol=1e-6, atol=1e-6)
    # a hue shift keeps each pixel's HLS lightness, (max + min) / 2
    np.testing.assert_allclose(shifted.max(-1) + shifted.min(-1), IMAGE.max(-1) + IMAGE.min(-1), atol=1e-2)
