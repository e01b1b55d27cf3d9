"""The Cython BatchNorm kernels against the generic ``xp`` kernel (the reference), the defining
formulas and finite differences, over random shapes, axes and modes (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from cpu_kernel_harness import cpu_kernel, is_plugin_kernel, split_into_blocks
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit.ndarray.registry import get_registry
from mxkit_cpu import _norm


def _batchnorm(x, gamma, beta, aux, generic=False, train=True, **params):
    op = get_registry().get("BatchNorm")
    typed = dict(op.parse_params(dict(params, output_mean_var=True)), _is_train=train)
    channels = gamma.shape[0]
    outputs = [np.empty(x.shape, x.dtype), np.empty(channels, x.dtype), np.empty(channels, x.dtype)]
    (op.kernel if generic else cpu_kernel(op.name))(np, [x, gamma, beta, *aux], outputs, typed)
    return outputs


def _backward(out_grad, x, gamma, mean, var, generic=False, req=None, **params):
    op = get_registry().get("_backward_BatchNorm")
    typed = op.parse_params(params)
    if req:
        typed = dict(typed, _req=req)
    outputs = [np.full(x.shape, np.nan, x.dtype), np.empty(gamma.shape, x.dtype), np.empty(gamma.shape, x.dtype)]
    (op.kernel if generic else cpu_kernel(op.name))(np, [out_grad, x, gamma, mean, var], outputs, typed)
    return outputs


def test_the_batchnorm_kernels_are_registered():
    assert is_plugin_kernel("BatchNorm") and is_plugin_kernel("_backward_BatchNorm")


@st.composite
def cases(draw):
    ndim = draw(st.integers(2, 4))
    shape = tuple(draw(st.integers(1, 5)) for _ in range(ndim))
    return dict(shape=shape, axis=draw(st.integers(-ndim, ndim - 1)), dtype=draw(st.sampled_from([np.float32,
                                                                                                  np.float64])),
                train=draw(st.booleans()), use_global_stats=draw(st.booleans()), fix_gamma=draw(st.booleans()),
                seed=draw(st.integers(0, 2**16)), split=draw(st.booleans()))


@settings(max_examples=60, deadline=None)
@given(cases())
def test_batchnorm_and_its_gradients_match_the_generic_kernel_and_the_formula(case):
    rng = np.random.default_rng(case["seed"])
    dtype = case["dtype"]
    x = (rng.standard_normal(case["shape"]) * 3 + 1).astype(dtype)
    channels = x.shape[case["axis"]]
    gamma, beta = rng.standard_normal(channels).astype(dtype), rng.standard_normal(channels).astype(dtype)
    moving = [rng.standard_normal(channels).astype(dtype), (rng.random(channels) + 0.5).astype(dtype)]
    params = dict(axis=case["axis"], fix_gamma=case["fix_gamma"], use_global_stats=case["use_global_stats"],
                  eps=1e-3, momentum=0.8)
    ours_aux, generic_aux = [a.copy() for a in moving], [a.copy() for a in moving]
    with split_into_blocks(3 if case["split"] else 1):
        ours = _batchnorm(x, gamma, beta, ours_aux, train=case["train"], **params)
        out_grad = rng.standard_normal(x.shape).astype(dtype)
        backward_params = dict(params, use_global_stats=case["use_global_stats"] or not case["train"])
        grads = _backward(out_grad, x, gamma, *moving, **backward_params)
    reference = _batchnorm(x, gamma, beta, generic_aux, generic=True, train=case["train"], **params)
    tolerance = dict(rtol=2e-4, atol=2e-4) if dtype == np.float32 else dict(rtol=1e-9, atol=1e-9)
    for got, want in zip(ours + ours_aux, reference + generic_aux):
        np.testing.assert_allclose(got, want, **tolerance)
    for got, want in zip(grads, _backward(out_grad, x, gamma, *moving, generic=True, **backward_params)):
        np.testing.assert_allclose(got, want, **tolerance)
    # the formula, in float64
    axes = tuple(i for i in range(x.ndim) if i != case["axis"] % x.ndim)
    shape = [1] * x.ndim
    shape[case["axis"]] = channels
    batch = case["train"] and not case["use_global_stats"]
    xd = x.astype(np.float64)
    mean = xd.mean(axis=axes) if batch else moving[0].astype(np.float64)
    var = xd.var(axis=axes) if batch else moving[1].astype(np.float64)
    scale = np.ones(channels) if case["fix_gamma"] else gamma.astype(np.float64)
    expected = (xd - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + 1e-3) * scale.reshape(shape) \
        + beta.reshape(shape)
    np.testing.assert_allclose(ours[0], expected, **tolerance)


def test_batchnorm_gradients_match_finite_differences():
    rng = np.random.default_rng(5)
    x, gamma, beta = rng.standard_normal((3, 4, 2, 3)), rng.standard_normal(4), rng.standard_normal(4)
    probe = rng.standard_normal(x.shape)
    params = dict(axis=1, fix_gamma=False, use_global_stats=False, eps=1e-3, momentum=0.9)

    def loss(x_, gamma_, beta_):
        return float(np.vdot(_batchnorm(x_, gamma_, beta_, [np.zeros(4), np.ones(4)], **params)[0], probe))

    grads = _backward(probe, x, gamma, np.zeros(4), np.ones(4), **params)
    for which, array in enumerate((x, gamma, beta)):
        for flat in rng.choice(array.size, size=min(array.size, 6), replace=False):
            index = np.unravel_index(flat, array.shape)
            plus, minus = [a.copy() for a in (x, gamma, beta)], [a.copy() for a in (x, gamma, beta)]
            plus[which][index] += 1e-6
            minus[which][index] -= 1e-6
            numeric = (loss(*plus) - loss(*minus)) / 2e-6
            assert grads[which][index] == pytest.approx(numeric, rel=1e-5, abs=1e-6)


def test_the_data_gradient_is_skipped_when_nothing_reads_it():
    rng = np.random.default_rng(6)
    x, out_grad = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    grads = _backward(out_grad, x, np.ones(3), np.zeros(3), np.ones(3), req=["null", "write", "write"], axis=1,
                      fix_gamma=False)
    assert np.isnan(grads[0]).all()
    np.testing.assert_allclose(grads[2], out_grad.sum(axis=(0, 2)), rtol=1e-12)


def test_half_precision_falls_back_to_the_generic_kernel():
    x = np.random.default_rng(7).standard_normal((2, 3, 4)).astype(np.float16)
    ones, zeros = np.ones(3, np.float16), np.zeros(3, np.float16)
    ours = _batchnorm(x, ones, zeros, [zeros.copy(), ones.copy()], axis=1)
    reference = _batchnorm(x, ones, zeros, [zeros.copy(), ones.copy()], generic=True, axis=1)
    for got, want in zip(ours, reference):
        np.testing.assert_array_equal(got, want)


def test_the_cython_loops_reject_statistics_of_the_wrong_size():
    x = np.zeros((2, 3, 4))
    with pytest.raises(ValueError, match=r"shift has 2 values, expected one per channel \(3\)"):
        _norm.batchnorm_forward(x, np.zeros_like(x), np.ones(3), np.zeros(2), np.zeros(3), np.zeros(3), np.zeros(3),
                                0, 3, True, 1e-3)
    with pytest.raises(ValueError, match=r"channels \[0, 4\) are outside the 3 channels"):
        _norm.batchnorm_backward(x, x, None, np.ones(3), np.zeros(3), np.zeros(3), np.zeros(3), np.zeros(3), 0, 4,
                                 True, 1e-3)
