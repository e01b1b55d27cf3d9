"""GridGenerator, BilinearSampler and SpatialTransformer: identities and an independent
per-pixel bilinear reference, and gradients against finite differences."""

from __future__ import annotations

import os
import sys

import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit.core.errors import MXKitError

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures", "nn"))

import nn_harness as harness

RNG = np.random.default_rng(3)
DATA = RNG.normal(size=(2, 3, 5, 6))


def reference_sample(image, x, y):
    """Bilinear value of image (H, W) at pixel coordinates (x, y), zero outside."""
    height, width = image.shape
    x0, y0 = int(np.floor(x)), int(np.floor(y))
    total = 0.0
    for dy in (0, 1):
        for dx in (0, 1):
            row, col = y0 + dy, x0 + dx
            if 0 <= row < height and 0 <= col < width:
                total += (1 - abs(y - row)) * (1 - abs(x - col)) * image[row, col]
    return total


def test_identity_affine_grid_reproduces_the_input():
    theta = np.tile([1.0, 0, 0, 0, 1.0, 0], (2, 1))
    out = harness.run("SpatialTransformer", [DATA, theta], target_shape=(5, 6))[0]
    np.testing.assert_allclose(out, DATA, atol=1e-12)


def test_sampler_matches_a_per_pixel_reference_including_outside_points():
    grid = RNG.uniform(-1.3, 1.3, size=(2, 2, 3, 4))
    out = harness.run("BilinearSampler", [DATA, grid])[0]
    for n in range(2):
        for i in range(3):
            for j in range(4):
                x = (grid[n, 0, i, j] + 1) * 5 / 2
                y = (grid[n, 1, i, j] + 1) * 4 / 2
                for c in range(3):
                    assert out[n, c, i, j] == pytest.approx(reference_sample(DATA[n, c], x, y), abs=1e-12)


def test_grids_affine_and_warp():
    theta = np.array([[0.5, 0.1, 0.2, -0.3, 0.8, 0.0]])
    grid = harness.run("GridGenerator", [theta], transform_type="affine", target_shape=(3, 4))[0]
    xs, ys = np.meshgrid(np.linspace(-1, 1, 4), np.linspace(-1, 1, 3))
    np.testing.assert_allclose(grid[0, 0], 0.5 * xs + 0.1 * ys + 0.2)
    np.testing.assert_allclose(grid[0, 1], -0.3 * xs + 0.8 * ys)
    flow = np.ones((1, 2, 3, 4))
    warped = harness.run("GridGenerator", [flow], transform_type="warp")[0]
    np.testing.assert_allclose(warped[0, 0], (np.arange(4)[None, :] + 1) / 1.5 - 1 + 0 * ys)


@pytest.mark.parametrize("name, inputs, params", [
    ("BilinearSampler", [DATA, RNG.uniform(-0.9, 0.9, size=(2, 2, 3, 4))], {}),
    ("GridGenerator", [RNG.normal(size=(2, 6))], {"transform_type": "affine", "target_shape": (3, 4)}),
    ("GridGenerator", [RNG.normal(size=(1, 2, 3, 4))], {"transform_type": "warp"}),
    ("SpatialTransformer", [DATA, np.array([[0.7, 0.1, 0.05, -0.1, 0.6, 0.13]] * 2)], {"target_shape": (4, 3)}),
])
def test_gradients_match_finite_differences(name, inputs, params):
    # (sample points are kept off integer pixel coordinates, where bilinear sampling has kinks)
    harness.check_gradient(name, inputs, rtol=1e-5, atol=1e-7, **params)


def test_bad_shapes_fail_clearly():
    with pytest.raises(MXKitError, match=r"\(batch, 6\)"):
        nd.GridGenerator(nd.ones((2, 4)), transform_type="affine", target_shape=(2, 2))
    with pytest.raises(MXKitError, match=r"grid \(batch, 2, Ho, Wo\)"):
        nd.BilinearSampler(nd.ones((1, 1, 3, 3)), nd.ones((1, 3, 2, 2)))
