"""MXNet 1.x's older index operators, slice assignment, linspace, the contrib predicates,
integer arange, FTML's clip_grad and the added NDArray methods, against numpy."""

from __future__ import annotations

import os
import sys

import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit.core.errors import MXKitError

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures", "nn"))

import nn_harness as harness

ROWS = np.arange(12.0).reshape(4, 3)
PICKS = np.array([2, 0, 1, 1])


def test_choose_fill_and_onehot_match_numpy():
    np.testing.assert_array_equal(nd.choose_element_0index(nd.array(ROWS), nd.array(PICKS)).asnumpy(),
                                  ROWS[np.arange(4), PICKS])
    filled = ROWS.copy()
    filled[np.arange(4), PICKS] = [-1, -2, -3, -4]
    got = nd.fill_element_0index(nd.array(ROWS), nd.array([-1, -2, -3, -4]), nd.array(PICKS))
    np.testing.assert_array_equal(got.asnumpy(), filled)
    out = nd.zeros((4, 3))
    assert nd.onehot_encode(nd.array(PICKS), out) is out
    np.testing.assert_array_equal(out.asnumpy(), np.eye(3)[PICKS])


@pytest.mark.parametrize("name, inputs, wrt", [
    ("choose_element_0index", [ROWS, PICKS], [0]),
    ("fill_element_0index", [ROWS, np.array([1.0, 2.0, 3.0, 4.0]), PICKS], [0, 1]),
    ("_slice_assign", [ROWS, np.ones((2, 2))], [0, 1]),
    ("_slice_assign_scalar", [ROWS], [0]),
])
def test_gradients_match_finite_differences(name, inputs, wrt):
    params = {"begin": (1, 0), "end": (3, 2)} if "slice" in name else {}
    if name == "_slice_assign_scalar":
        params["scalar"] = 5.0
    harness.check_gradient(name, inputs, wrt=wrt, **params)


def test_slice_assign_writes_the_box():
    x = nd.ones((2, 3, 4))
    nd._internal._crop_assign(x, nd.zeros((2, 1, 3)), begin=(0, 0, 0), end=(2, 1, 3), out=x)
    want = np.ones((2, 3, 4))
    want[:, :1, :3] = 0
    np.testing.assert_array_equal(x.asnumpy(), want)
    y = nd._internal._crop_assign_scalar(nd.ones((2, 3)), scalar=5, begin=(0, 1), end=(1, 3))
    np.testing.assert_array_equal(y.asnumpy(), [[1, 5, 5], [1, 1, 1]])
    with pytest.raises(MXKitError, match="the box"):
        nd._internal._slice_assign(nd.ones((2, 3)), nd.ones((2, 2)), begin=(0, 0), end=(1, 2))


def test_linspace_predicates_and_integer_arange_follow_numpy():
    np.testing.assert_allclose(nd.linspace(2.5, 7.0, 5).asnumpy(), np.linspace(2.5, 7.0, 5), rtol=1e-6)
    np.testing.assert_allclose(nd.linspace(2.5, 7.0, 5, endpoint=False).asnumpy(),
                               np.linspace(2.5, 7.0, 5, endpoint=False), rtol=1e-6)
    x = nd.array([np.inf, -np.inf, np.nan, 1.0])
    assert nd.contrib.isinf(x).asnumpy().tolist() == [1, 1, 0, 0]
    assert nd.contrib.isnan(x).asnumpy().tolist() == [0, 0, 1, 0]
    assert nd.contrib.isfinite(x).asnumpy().tolist() == [0, 0, 0, 1]
    # an integer arange starts and steps in the integer dtype, like numpy's and MXNet's
    np.testing.assert_array_equal(nd.arange(1.3, 20.6, 1.3, dtype="int32").asnumpy(),
                                  np.arange(1.3, 20.6, 1.3, dtype=np.int32))


def test_ftml_takes_mxnets_clip_grad_name():
    w, g = nd.array([1.0, 2.0]), nd.array([100.0, -100.0])
    states = [nd.zeros((2,)) for _ in range(3)]
    clipped = nd.ftml_update(w, g, *states, lr=0.1, t=1, clip_grad=1.0)
    states = [nd.zeros((2,)) for _ in range(3)]
    same = nd.ftml_update(w, nd.array([1.0, -1.0]), *states, lr=0.1, t=1)
    np.testing.assert_allclose(clipped.asnumpy(), same.asnumpy())


def test_added_methods_call_their_operators():
    x = nd.array(np.arange(24.0).reshape(2, 3, 4))
    assert x.shape_array().asnumpy().tolist() == [2, 3, 4]
    assert x.size_array().asnumpy().tolist() == [24]
    assert x.slice_like(nd.ones((1, 2, 4))).shape == (1, 2, 4)
    assert [p.shape for p in x.split_v2((1,), axis=2)] == [(2, 3, 1), (2, 3, 3)]
    np.testing.assert_array_equal(x.diag().asnumpy(), np.diagonal(x.asnumpy(), 0, 0, 1))
