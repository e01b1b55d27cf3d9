"""Rotate and RandomRotation against numpy: quarter turns of a square image are np.rot90 (the
bilinear sampler then reads pixel centres exactly, up to float32 rounding of the grid), any angle
keeps the centre pixel of an odd image, and the refusals."""

import numpy as np
import pytest
from mxkit import mx
from mxkit.gluon import GluonError
from mxkit.gluon.data.vision import transforms


@pytest.mark.parametrize("quarters", [1, 2, 3, 4])
def test_quarter_turns_are_numpys_rot90(quarters):
    image = np.random.RandomState(quarters).uniform(size=(2, 5, 5)).astype(np.float32)
    out = transforms.Rotate(90.0 * quarters)(mx.nd.array(image)).asnumpy()
    np.testing.assert_allclose(out, np.rot90(image, k=quarters, axes=(1, 2)), atol=1e-5)


def test_a_batch_turns_each_image_and_the_centre_stays():
    batch = np.random.RandomState(0).uniform(size=(3, 1, 7, 7)).astype(np.float32)
    out = transforms.Rotate(33.0)(mx.nd.array(batch)).asnumpy()
    assert out.shape == batch.shape
    np.testing.assert_allclose(out[:, :, 3, 3], batch[:, :, 3, 3], rtol=1e-5)
    assert not np.allclose(out, batch)


def test_zooming_out_shows_the_whole_turned_image_and_in_shows_no_outside():
    ones = mx.nd.ones((1, 9, 9))
    zoomed_in = transforms.Rotate(45.0, zoom_in=True)(ones).asnumpy()
    np.testing.assert_allclose(zoomed_in, 1.0, atol=1e-5)  # every sample lies inside the image
    plain = transforms.Rotate(45.0)(ones).asnumpy()
    zoomed_out = transforms.Rotate(45.0, zoom_out=True)(ones).asnumpy()
    assert zoomed_out.sum() < plain.sum() < zoomed_in.sum()  # more of the outside (zeros) shows


def test_random_rotation_with_probability_zero_is_the_identity_and_the_refusals():
    data = mx.nd.random.normal(shape=(3, 6, 8))
    np.testing.assert_array_equal(transforms.RandomRotation((-100.0, 100.0), rotate_with_proba=0.0)(data).asnumpy(),
                                  data.asnumpy())
    assert transforms.RandomRotation((-10.0, 10.0))(mx.nd.ones((2, 3, 6, 8))).shape == (2, 3, 6, 8)
    for bad in (1.1, -0.3):
        with pytest.raises(ValueError, match="probability"):
            transforms.RandomRotation((-10, 10), rotate_with_proba=bad)
    with pytest.raises(ValueError, match="lower < upper"):
        transforms.RandomRotation((10, -10))
    with pytest.raises(TypeError, match="float32"):
        transforms.Rotate(10.0)(mx.nd.ones((3, 4, 4), dtype="uint8"))
    with pytest.raises(GluonError, match="cannot both"):
        transforms.Rotate(10.0, zoom_in=True, zoom_out=True)
