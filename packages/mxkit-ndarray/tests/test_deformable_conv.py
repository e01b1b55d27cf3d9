"""DeformableConvolution and ModulatedDeformableConvolution against a per-pixel loop (tiny
sizes), Convolution (zero offsets, a mask of ones), finite differences for every input, and
bad shapes."""

from __future__ import annotations

import math
import os
import sys

import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit.core.errors import MXKitError

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures", "nn"))

import nn_harness as harness

GEOMETRY = {"kernel": (3, 2), "stride": (1, 2), "pad": (1, 1), "dilate": (2, 1), "num_filter": 4, "num_group": 2}


def out_size(size, k, s, p, d):
    return (size + 2 * p - (d * (k - 1) + 1)) // s + 1


def bilinear(image, y, x, modulated):
    """One sample of a (H, W) image, with each operator's border rule."""
    h, w = image.shape
    if modulated:
        if not (-1 < y < h and -1 < x < w):
            return 0.0
    else:
        if not (0 <= y < h and 0 <= x < w):
            return 0.0
        y, x = min(y, h - 1), min(x, w - 1)
    y0, x0 = math.floor(y), math.floor(x)
    total = 0.0
    for cy, wy in ((y0, 1 - (y - y0)), (y0 + 1, y - y0)):
        for cx, wx in ((x0, 1 - (x - x0)), (x0 + 1, x - x0)):
            if 0 <= cy < h and 0 <= cx < w:
                total += wy * wx * image[cy, cx]
    return total


def reference(data, offset, weight, bias, mask, num_deformable_group, modulated):
    n, c, h, w = data.shape
    f, cg, kh, kw = weight.shape
    (sh, sw), (ph, pw), (dh, dw) = GEOMETRY["stride"], GEOMETRY["pad"], GEOMETRY["dilate"]
    ho, wo = out_size(h, kh, sh, ph, dh), out_size(w, kw, sw, pw, dw)
    groups, per_dgroup = GEOMETRY["num_group"], c // num_deformable_group
    out = np.zeros((n, f, ho, wo))
    for b in range(n):
        for o in range(f):
            group = o // (f // groups)
            for y in range(ho):
                for x in range(wo):
                    total = bias[o] if bias is not None else 0.0
                    for ci in range(cg):
                        channel = group * cg + ci
                        dgroup = channel // per_dgroup
                        for i in range(kh):
                            for j in range(kw):
                                k = i * kw + j
                                base = dgroup * 2 * kh * kw + 2 * k
                                sy = y * sh - ph + i * dh + offset[b, base, y, x]
                                sx = x * sw - pw + j * dw + offset[b, base + 1, y, x]
                                value = bilinear(data[b, channel], sy, sx, modulated)
                                if mask is not None:
                                    value *= mask[b, dgroup * kh * kw + k, y, x]
                                total += weight[o, ci, i, j] * value
                    out[b, o, y, x] = total
    return out


def _inputs(num_deformable_group, modulated, rng, spread=1.5):
    data = rng.randn(2, 4, 5, 6)
    ho, wo = out_size(5, 3, 1, 1, 2), out_size(6, 2, 2, 1, 1)
    taps = num_deformable_group * 6
    # offsets away from whole numbers (the sampling is not differentiable across pixel lines)
    offset = rng.uniform(-spread, spread, (2, 2 * taps, ho, wo))
    offset = np.where(np.abs(offset - np.round(offset)) < 0.05, offset + 0.1, offset)
    mask = rng.uniform(0.2, 1.0, (2, taps, ho, wo)) if modulated else None
    weight = rng.randn(4, 2, 3, 2)
    bias = rng.randn(4)
    return data, offset, mask, weight, bias


def _name(modulated):
    return "_contrib_ModulatedDeformableConvolution" if modulated else "_contrib_DeformableConvolution"


def _op_inputs(data, offset, mask, weight, bias):
    return [a for a in (data, offset, mask, weight, bias) if a is not None]


@pytest.mark.parametrize("modulated", [False, True])
@pytest.mark.parametrize("num_deformable_group", [1, 2])
def test_forward_matches_a_per_pixel_loop(modulated, num_deformable_group):
    data, offset, mask, weight, bias = _inputs(num_deformable_group, modulated, np.random.RandomState(3), spread=3)
    got = harness.run(_name(modulated), _op_inputs(data, offset, mask, weight, bias),
                      num_deformable_group=num_deformable_group, **GEOMETRY)[0]
    want = reference(data, offset, weight, bias, mask, num_deformable_group, modulated)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("modulated", [False, True])
def test_zero_offsets_are_a_convolution(modulated):
    data, offset, mask, weight, bias = _inputs(2, modulated, np.random.RandomState(4))
    offset[:] = 0
    if modulated:
        mask[:] = 1
    got = harness.run(_name(modulated), _op_inputs(data, offset, mask, weight, bias), num_deformable_group=2,
                      **GEOMETRY)[0]
    want = harness.run("Convolution", [data, weight, bias], **GEOMETRY)[0]
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("modulated", [False, True])
def test_gradients_match_finite_differences(modulated):
    data, offset, mask, weight, bias = _inputs(2, modulated, np.random.RandomState(5))
    inputs = _op_inputs(data, offset, mask, weight, bias)
    harness.check_gradient(_name(modulated), inputs, rtol=1e-5, atol=1e-7, num_deformable_group=2, **GEOMETRY)
    if not modulated:  # (the bias-free input list of the other operator is the same code path)
        harness.check_gradient(_name(modulated), inputs[:-1], wrt=[0, 2], rtol=1e-5, atol=1e-7,
                               num_deformable_group=2, no_bias=True, **GEOMETRY)


def test_ndarray_functions_and_bad_shapes():
    data, offset, _, weight, bias = _inputs(1, False, np.random.RandomState(6))
    got = nd.contrib.DeformableConvolution(nd.array(data), nd.array(offset), nd.array(weight), nd.array(bias),
                                           **GEOMETRY).asnumpy()
    np.testing.assert_allclose(got, reference(data, offset, weight, bias, None, 1, False), rtol=1e-4, atol=1e-4)
    with pytest.raises(MXKitError, match=r"offset.*\(N, 2 \* num_deformable_group \* kh \* kw, Ho, Wo\)"):
        nd.contrib.DeformableConvolution(nd.array(data), nd.array(offset[:, :6]), nd.array(weight), nd.array(bias),
                                         **GEOMETRY).asnumpy()
    with pytest.raises(MXKitError, match="num_deformable_group=3 must divide the 4 input channels"):
        nd.contrib.DeformableConvolution(nd.array(data), nd.array(offset), nd.array(weight), nd.array(bias),
                                         num_deformable_group=3, **GEOMETRY).asnumpy()
    with pytest.raises(MXKitError, match="only 2-D"):
        nd.contrib.DeformableConvolution(nd.ones((1, 2, 5)), nd.ones((1, 6, 3)), nd.ones((2, 2, 3)),
                                         kernel=(3,), num_filter=2, no_bias=True).asnumpy()
