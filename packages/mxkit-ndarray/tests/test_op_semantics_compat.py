"""MXNet 1.x operator semantics ported code relies on: Dropout(p=1), norm's out_dtype, the
errors of tile with non-positive reps and of max/min over an empty axis, SyncBatchNorm on
one device and BatchNorm_v1 as BatchNorm, and sample_normal's mu/sigma inputs."""

from __future__ import annotations

import mxkit.ndarray as nd
import numpy as np
import pytest
from mxkit.core.errors import MXKitError


def test_dropout_with_p_one_drops_everything_in_training():
    x = nd.ones((4, 5))
    x.attach_grad()
    with nd.autograd.record(train_mode=True):
        y = nd.Dropout(x, p=1.0)
    y.backward()
    assert (y.asnumpy() == 0).all() and (x.grad.asnumpy() == 0).all()
    np.testing.assert_array_equal(nd.Dropout(x, p=1.0).asnumpy(), x.asnumpy())  # prediction: identity
    with pytest.raises(MXKitError, match=r"\[0, 1\]"):
        nd.Dropout(x, p=1.5)


def test_norm_out_dtype():
    x = nd.array([[3.0, 4.0]], dtype="float16")
    out = nd.norm(x, axis=1, out_dtype="float32")
    assert out.dtype == np.float32 and out.asnumpy().tolist() == [5.0]


def test_invalid_tile_reps_and_empty_extrema_fail_clearly():
    with pytest.raises(MXKitError, match="must all be positive"):
        nd.tile(nd.ones((2, 2)), reps=(1, -3))
    with pytest.raises(MXKitError, match="empty axis"):
        nd.zeros((5, 0)).max()
    assert nd.zeros((5, 0)).sum(axis=1).asnumpy().tolist() == [0.0] * 5


def test_sync_batchnorm_on_one_device_is_batchnorm():
    rng = np.random.default_rng(0)
    args = [nd.array(rng.normal(size=(4, 3, 2))), nd.array(rng.uniform(0.5, 1.5, 3)), nd.array(rng.normal(size=3))]
    aux = [nd.zeros((3,)), nd.ones((3,))]
    plain = nd.BatchNorm(*args, *[a.copy() for a in aux], fix_gamma=False, output_mean_var=True)
    synced = nd.contrib.SyncBatchNorm(*args, *[a.copy() for a in aux], fix_gamma=False, output_mean_var=True,
                                      ndev=1, key="bn0")
    # BatchNorm may run the CPU plugin's compiled kernel and SyncBatchNorm the generic one: float32
    # sums in another order differ by a few units in the last place
    for a, b in zip(plain[:2], synced[:2]):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-5, atol=1e-6)
    # the third output is BatchNorm's 1 / sqrt(var + eps) but SyncBatchNorm's var, as in MXNet 1.9.1
    eps = 1e-3
    np.testing.assert_allclose(synced[2].asnumpy(), 1 / plain[2].asnumpy() ** 2 - eps, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(nd.BatchNorm_v1(*args, *aux).asnumpy(), nd.BatchNorm(*args, *aux).asnumpy(),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(MXKitError, match="ndev=2"):
        nd.contrib.SyncBatchNorm(*args, *aux, ndev=2)


def test_sample_normal_takes_mu_and_sigma():
    out = nd.sample_normal(mu=nd.array([10.0, -5.0]), sigma=nd.array([0.5, 0.1]), shape=(2000,))
    assert out.shape == (2, 2000)
    np.testing.assert_allclose(out.asnumpy().mean(-1), [10.0, -5.0], atol=0.1)


def test_pooling_same_convention_pads_for_ceil_outputs():
    x = np.random.default_rng(1).random((1, 2, 7, 10)).astype(np.float32)
    out = nd.Pooling(nd.array(x), kernel=(3, 2), stride=(2, 3), pool_type="max", pooling_convention="same").asnumpy()
    # ceil(7 / 2) = 4 rows need 2 padded rows (1 before, 1 after); ceil(10 / 3) = 4 columns need 1 (after)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (0, 1)), constant_values=-np.inf)
    want = np.array([[[[padded[0, c, i * 2:i * 2 + 3, j * 3:j * 3 + 2].max() for j in range(4)] for i in range(4)]
                      for c in range(2)]])
    np.testing.assert_array_equal(out, want)
    with pytest.raises(MXKitError, match="computes its own padding"):
        nd.Pooling(nd.array(x), kernel=(2, 2), pad=(1, 1), pool_type="max", pooling_convention="same")


def test_reshape_like_with_axis_ranges():
    lhs, rhs = nd.ones((30, 12)), nd.ones((4, 2, 2, 3))
    assert nd.reshape_like(lhs, rhs, lhs_begin=-1, rhs_begin=1).shape == (30, 2, 2, 3)
    assert nd.reshape_like(nd.ones((2, 3, 4)), nd.ones((6, 7)), lhs_end=2, rhs_end=1).shape == (6, 4)
    assert nd.reshape_like(nd.ones((2, 3)), nd.ones((3, 2))).shape == (3, 2)
    x = nd.array(np.arange(24.0).reshape(2, 3, 4))
    x.attach_grad()
    with nd.autograd.record():
        y = nd.reshape_like(x, nd.ones((6, 1)), lhs_end=2, rhs_end=1)
    y.backward(nd.ones((6, 4)) * 2)
    np.testing.assert_array_equal(y.asnumpy(), np.arange(24.0).reshape(6, 4))
    assert (x.grad.asnumpy() == 2).all()
    with pytest.raises(MXKitError, match="cannot take the shape"):
        nd.reshape_like(nd.ones((2, 3)), nd.ones((5,)), lhs_begin=0, lhs_end=1)
