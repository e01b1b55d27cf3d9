"""oneDNN's BatchNorm (training and inference forward, backward) against mxkit's generic kernel in float64
and mxkit-cpu's kernel, with MXNet's semantics: moving statistics updated in place, fix_gamma,
use_global_stats, the optional mean and inverse-std outputs, any axis."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mxkit.ndarray.registry import get_registry
from onednn_harness import UNIT, assert_served_by_onednn, needs_onednn, run

pytestmark = needs_onednn


@st.composite
def cases(draw):
    ndim = draw(st.integers(2, 4))
    shape = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    shape = (max(shape[0], 2), *shape[1:])  # a batch of at least two: a variance to normalise by
    return dict(shape=shape, seed=draw(st.integers(0, 2**16)),
                params=dict(axis=draw(st.sampled_from([1, 1, -1])), fix_gamma=draw(st.booleans()),
                            use_global_stats=draw(st.booleans()), output_mean_var=draw(st.booleans()),
                            eps=draw(st.sampled_from([1e-3, 1e-5])), momentum=0.9),
                train=draw(st.booleans()))


def _arrays(case):
    rng = np.random.default_rng(case["seed"])
    x = (rng.standard_normal(case["shape"]) * 2 + 1).astype(np.float32)
    channels = case["shape"][case["params"]["axis"]]
    gamma, beta = (rng.standard_normal(channels).astype(np.float32) for _ in range(2))
    moving_mean = rng.standard_normal(channels).astype(np.float32)
    moving_var = rng.uniform(0.5, 2, channels).astype(np.float32)
    return x, gamma, beta, moving_mean, moving_var


def test_the_plugin_replaces_mxkit_cpus_batchnorm_kernels():
    from mxkit_cpu import norm as cpu_norm

    for name in ("BatchNorm", "_backward_BatchNorm"):
        kernel = get_registry().get(name).kernel_for("numpy")
        assert kernel.__module__.startswith("mxkit_onednn.") and kernel.replaced is cpu_norm.KERNELS[name], name


def _bound(count: int, magnitude) -> np.ndarray:
    """Per-channel sums of ``count`` float32 terms (mean, variance, the two gradient sums) have relative
    error gamma_count; carried through the normalisation each output's error stays within a few of
    them times the output's magnitude (8 covers the four sums and the final rounding)."""
    return 8 * (count + 2) * UNIT * np.abs(magnitude) + 1e-6


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cases())
def test_batchnorm_forward_and_backward_match_the_reference_and_mxkit_cpu(onednn_only, case):
    params = case["params"]
    x, gamma, beta, moving_mean, moving_var = _arrays(case)
    axis = params["axis"] % x.ndim
    count = x.size // x.shape[axis]
    results = {}
    for which in ("onednn", "reference", "cpu"):
        aux = [moving_mean.copy(), moving_var.copy()]
        if which == "reference":
            aux = [a.astype(np.float64) for a in aux]
        op = get_registry().get("BatchNorm")
        typed = dict(op.parse_params(params), _is_train=case["train"])
        ins = [x, gamma, beta] if which != "reference" else [a.astype(np.float64) for a in (x, gamma, beta)]
        shapes = op.infer_shape(typed, [a.shape for a in ins])
        outs = [np.full(s, np.nan, dtype=ins[0].dtype) for s in shapes]
        kernel = op.kernel_for("numpy")
        kernel = kernel.replaced if which == "cpu" else op.kernel if which == "reference" else kernel
        kernel(np, [*ins, *aux], outs, typed)
        results[which] = (outs, aux)
    assert_served_by_onednn("BatchNorm")
    (y, *stats), aux = results["onednn"]
    (want, *want_stats), want_aux = results["reference"]
    scale = np.ones_like(gamma) if params["fix_gamma"] else gamma
    shape = [1] * x.ndim
    shape[axis] = -1
    # x - mean cancels: its rounding error is that of |x| + |mean|, not of the difference, and the
    # normalisation multiplies it by inv_std (a batch of nearly equal values has a tiny variance)
    global_stats = params["use_global_stats"] or not case["train"]
    reduce = tuple(a for a in range(x.ndim) if a != axis)
    mean_used = moving_mean.reshape(shape) if global_stats else x.mean(axis=reduce, keepdims=True)
    var_used = moving_var if global_stats else x.astype(np.float64).var(axis=reduce)
    cancelled = (np.abs(x) + np.abs(mean_used)) / np.sqrt(var_used + params["eps"]).reshape(shape)
    magnitude = (np.abs(want - beta.reshape(shape)) + np.abs(scale).reshape(shape) * (1 + cancelled)
                 + np.abs(beta).reshape(shape))
    for got, expected, other, name in ((y, want, results["cpu"][0][0], "output"),):
        np.testing.assert_array_less(np.abs(got - expected), _bound(count, magnitude), name)
        np.testing.assert_array_less(np.abs(got - other), 2 * _bound(count, magnitude), name + " vs mxkit-cpu")
    for got, expected in zip(aux, want_aux):  # the moving statistics
        np.testing.assert_array_less(np.abs(got - expected), _bound(count, np.abs(expected) + 1), "moving stats")
    for got, expected in zip(stats, want_stats):  # the mean and the inverse std
        np.testing.assert_array_less(np.abs(got - expected), _bound(count, np.abs(expected) + 1), "mean/inv_std")

    g = np.random.default_rng(case["seed"] + 1).standard_normal(x.shape).astype(np.float32)
    back = dict(params, use_global_stats=params["use_global_stats"] or not case["train"])
    grads = run("_backward_BatchNorm", [g, x, gamma, moving_mean, moving_var], **back)
    reference = run("_backward_BatchNorm", [g, x, gamma, moving_mean, moving_var], "reference", **back)
    cpu = run("_backward_BatchNorm", [g, x, gamma, moving_mean, moving_var], "cpu", **back)
    assert_served_by_onednn("_backward_BatchNorm")
    inv_std = 1 / np.sqrt((moving_var if back["use_global_stats"] else x.astype(np.float64).var(axis=reduce))
                          + params["eps"])
    # as above: the normalised values carry the rounding error of |x| + |mean|, times inv_std
    mean = moving_mean.reshape(shape) if back["use_global_stats"] else x.mean(axis=reduce, keepdims=True)
    normalised = (np.abs(x) + np.abs(mean)) * inv_std.reshape(shape)
    data_scale = (np.abs(scale) * inv_std).reshape(shape)
    magnitudes = [data_scale * (np.abs(g) + np.abs(g).mean(axis=reduce, keepdims=True) * (1 + normalised)),
                  (np.abs(g) * (1 + normalised)).sum(axis=reduce), np.abs(g).sum(axis=reduce)]
    for name, got, expected, other, size in zip(("data", "gamma", "beta"), grads, reference, cpu, magnitudes):
        np.testing.assert_array_less(np.abs(got - expected), _bound(count, size), name + " gradient")
        np.testing.assert_array_less(np.abs(got - other), 2 * _bound(count, size), name + " gradient vs mxkit-cpu")
