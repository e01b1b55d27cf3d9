"""Correlation against a direct loop over its definition, and its gradient against finite
differences (multiply and absolute-difference modes)."""

from __future__ import annotations

import os
import sys

import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit.core.errors import MXKitError

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures", "nn"))

import nn_harness as harness


def direct(a, b, k, md, s1, s2, pad, multiply):
    """The definition, one output element at a time (floor of the output size: the cases below divide)."""
    n, c, h, w = a.shape
    pa = np.pad(a, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    pb = np.pad(b, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    border = md + (k - 1) // 2
    top_h, top_w = (h + 2 * pad - 2 * border) // s1, (w + 2 * pad - 2 * border) // s1
    r = md // s2
    grid = 2 * r + 1
    out = np.zeros((n, grid * grid, top_h, top_w))
    for ch in range(grid * grid):
        dx, dy = (ch % grid - r) * s2, (ch // grid - r) * s2
        for i in range(top_h):
            for j in range(top_w):
                y1, x1 = i * s1 + md, j * s1 + md
                p1 = pa[:, :, y1:y1 + k, x1:x1 + k]
                p2 = pb[:, :, y1 + dy:y1 + dy + k, x1 + dx:x1 + dx + k]
                out[:, ch, i, j] = (p1 * p2 if multiply else np.abs(p1 - p2)).sum(axis=(1, 2, 3)) / (k * k * c)
    return out


RNG = np.random.default_rng(4)
CASES = [
    dict(kernel_size=1, max_displacement=2, stride1=1, stride2=1, pad_size=2, is_multiply=True),
    dict(kernel_size=3, max_displacement=1, stride1=2, stride2=1, pad_size=2, is_multiply=False),
    dict(kernel_size=1, max_displacement=2, stride1=1, stride2=2, pad_size=1, is_multiply=True),
]


@pytest.mark.parametrize("params", CASES)
def test_forward_matches_the_definition(params):
    a, b = RNG.random((2, 2, 6, 6)), RNG.random((2, 2, 6, 6))
    out = harness.run("Correlation", [a, b], **params)[0]
    want = direct(a, b, params["kernel_size"], params["max_displacement"], params["stride1"], params["stride2"],
                  params["pad_size"], params["is_multiply"])
    np.testing.assert_allclose(out, want, rtol=1e-12)


@pytest.mark.parametrize("params", CASES)
def test_gradient_matches_finite_differences(params):
    a = RNG.random((1, 2, 5, 5))
    b = a + RNG.choice([-1.0, 1.0], size=a.shape) * RNG.uniform(0.1, 0.5, size=a.shape)  # no ties for |a - b|
    harness.check_gradient("Correlation", [a, b], rtol=1e-6, atol=1e-8, **params)


@pytest.mark.parametrize("kwargs, message", [
    ({"kernel_size": 4}, "must be odd"),
    ({"kernel_size": 9, "max_displacement": 8}, "too small"),
])
def test_bad_parameters_fail_clearly(kwargs, message):
    with pytest.raises(MXKitError, match=message):
        nd.Correlation(nd.ones((1, 1, 8, 8)), nd.ones((1, 1, 8, 8)), **kwargs)
