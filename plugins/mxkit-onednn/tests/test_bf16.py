"""bfloat16 kernels against float64 references on the same (bfloat16-exact) inputs.

The error bounds come from how the kernels compute, not from one machine: oneDNN's bfloat16 primitives
multiply bfloat16 operands (products exact in float32: 8 + 8 significand bits), accumulate in float32 and
round the result once to bfloat16. With u = 2**-8 (bfloat16's unit roundoff: an 8-bit significand) and
gamma_K the float32 bound of a K-term sum (``onednn_harness.sum_bound``), a result y of a K-term
sum of products whose magnitudes add up to M obeys |y_computed - y| <= u |y| (1 + ...) + (1 + u) gamma_K M;
the bound below takes u |y| + 2 gamma_K M. M is the same operation on the inputs' absolute values, computed
by the float64 reference. Shapes are small: the tests stay fast, and no program is split in chunks.
The tests are skipped where oneDNN has no bfloat16 primitive on the CPU (AVX2-only: see
:func:`mxkit_onednn.bf16.availability`); the float32 route, which serves there, is tested everywhere.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mxkit.ndarray.registry import get_registry
from onednn_harness import UNIT, needs_onednn, run, sum_bound

ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 arrays need ml_dtypes (mxkit-ndarray[bfloat16])")
BF16 = np.dtype(ml_dtypes.bfloat16)
#: bfloat16's unit roundoff
U_BF16 = 2.0 ** -8


def _availability():
    from mxkit_onednn.bf16 import availability
    from mxkit_onednn.library import load

    return "oneDNN is not loadable here" if load() is None else availability()


needs_bf16 = pytest.mark.skipif(_availability() is not None, reason=f"no bfloat16 primitives: {_availability()}")
pytestmark = needs_onednn


@pytest.fixture(autouse=True)
def fresh_programs():
    from mxkit_onednn.program import PROGRAMS

    PROGRAMS.clear()
    yield
    PROGRAMS.only = None
    PROGRAMS.clear()


def bf16(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(BF16)


def assert_bf16_close(actual, expected, magnitude, terms, what):
    assert actual.dtype == BF16, f"{what}: dtype {actual.dtype}"
    bound = U_BF16 * np.abs(expected) + sum_bound(terms, magnitude) + 2.0 ** -133  # + bfloat16's least subnormal
    error = np.abs(actual.astype(np.float64) - expected)
    worst = np.argmax(error - bound)
    assert np.all(error <= bound), f"{what}: error {error.flat[worst]:.3g} over the bound {bound.flat[worst]:.3g}"


def served_in_bf16(name):
    from mxkit_onednn.program import PROGRAMS

    chosen = {key: value for key, value in PROGRAMS.chosen().items() if key[0] == name and key[1] == "bfloat16"}
    assert chosen and "fallback" not in chosen.values(), (chosen, PROGRAMS.refusals)


CONV_CASES = [
    dict(data=(2, 4, 7, 7), kernel=(3, 3), num_filter=8, pad=(1, 1)),
    dict(data=(2, 6, 9, 8), kernel=(3, 2), num_filter=4, stride=(2, 1), dilate=(1, 2), no_bias=True),
    dict(data=(1, 8, 6, 6), kernel=(1, 1), num_filter=8, num_group=2),
    dict(data=(2, 3, 10), kernel=(3,), num_filter=5, pad=(1,)),
]


@needs_bf16
@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: "x".join(map(str, c["data"])))
def test_convolution_forward_and_gradients_in_bf16(case):
    rng = np.random.default_rng(0)
    params = {k: v for k, v in case.items() if k != "data"}
    groups = params.get("num_group", 1)
    x = bf16(rng, case["data"])
    w = bf16(rng, (params["num_filter"], case["data"][1] // groups, *params["kernel"]))
    inputs = [x, w] + ([] if params.get("no_bias") else [bf16(rng, (params["num_filter"],))])
    (y,) = run("Convolution", inputs, **params)
    (ref,) = run("Convolution", inputs, "reference", **params)
    (mag,) = run("Convolution", [np.abs(a) for a in inputs], "reference", **params)
    window = int(np.prod(params["kernel"]))
    assert_bf16_close(y, ref, mag, case["data"][1] // groups * window + 1, "Convolution")
    served_in_bf16("Convolution")

    dy = bf16(rng, y.shape)
    grads = run("_backward_Convolution", [dy, *inputs[:2]], **params)
    refs = run("_backward_Convolution", [dy, *inputs[:2]], "reference", **params)
    mags = run("_backward_Convolution", [np.abs(dy), np.abs(x), np.abs(w)], "reference", **params)
    # the longest sum: the weight gradient's over the batch and the output pixels, or the data gradient's
    terms = max(int(np.prod(y.shape)) // y.shape[1], params["num_filter"] * window) + 1
    for got, ref, mag, what in zip(grads, refs, mags, ("data", "weight", "bias")):
        assert_bf16_close(got, ref, mag, terms, f"_backward_Convolution {what} gradient")
    served_in_bf16("_backward_Convolution")


@st.composite
def conv_cases(draw):
    nd = draw(st.sampled_from([1, 2, 2]))
    groups, per_group = draw(st.sampled_from([1, 2])), draw(st.integers(1, 4))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    dilate = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    pad = tuple(draw(st.integers(0, 1)) for _ in range(nd))
    spatial = tuple(max(d * (k - 1) + 1 - 2 * p, 1) + draw(st.integers(0, 4)) for k, d, p in zip(kernel, dilate, pad))
    return dict(data=(draw(st.integers(1, 2)), groups * per_group, *spatial), kernel=kernel, dilate=dilate, pad=pad,
                stride=tuple(draw(st.integers(1, 2)) for _ in range(nd)), num_group=groups,
                num_filter=groups * draw(st.integers(1, 3)), no_bias=draw(st.booleans()))


@needs_bf16
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=conv_cases(), seed=st.integers(0, 2**16))
def test_convolution_in_bf16_over_drawn_geometries(case, seed):
    """Whatever serves a drawn geometry (a bfloat16 program, or the float32 route where oneDNN refuses one), the
    forward and the gradients keep the bound."""
    rng = np.random.default_rng(seed)
    params = {k: v for k, v in case.items() if k != "data"}
    groups = params["num_group"]
    x = bf16(rng, case["data"])
    w = bf16(rng, (params["num_filter"], case["data"][1] // groups, *params["kernel"]))
    inputs = [x, w] + ([] if params["no_bias"] else [bf16(rng, (params["num_filter"],))])
    (y,) = run("Convolution", inputs, **params)
    (ref,) = run("Convolution", inputs, "reference", **params)
    (mag,) = run("Convolution", [np.abs(a) for a in inputs], "reference", **params)
    window = int(np.prod(params["kernel"]))
    assert_bf16_close(y, ref, mag, case["data"][1] // groups * window + 1, "Convolution")
    dy = bf16(rng, y.shape)
    grads = run("_backward_Convolution", [dy, *inputs[:2]], **params)
    refs = run("_backward_Convolution", [dy, *inputs[:2]], "reference", **params)
    mags = run("_backward_Convolution", [np.abs(dy), np.abs(x), np.abs(w)], "reference", **params)
    terms = max(int(np.prod(y.shape)) // y.shape[1], params["num_filter"] * window) + 1
    for got, ref, mag in zip(grads, refs, mags):
        assert_bf16_close(got, ref, mag, terms, "_backward_Convolution")


@needs_bf16
@pytest.mark.parametrize("no_bias", [False, True])
def test_fully_connected_and_gradients_in_bf16(no_bias):
    rng = np.random.default_rng(1)
    x, w = bf16(rng, (5, 3, 4)), bf16(rng, (7, 12))
    inputs = [x, w] + ([] if no_bias else [bf16(rng, (7,))])
    params = dict(num_hidden=7, no_bias=no_bias)
    (y,) = run("FullyConnected", inputs, **params)
    (ref,) = run("FullyConnected", inputs, "reference", **params)
    (mag,) = run("FullyConnected", [np.abs(a) for a in inputs], "reference", **params)
    assert_bf16_close(y, ref, mag, 13, "FullyConnected")
    dy = bf16(rng, y.shape)
    grads = run("_backward_FullyConnected", [dy, x, w], **params)
    refs = run("_backward_FullyConnected", [dy, x, w], "reference", **params)
    mags = run("_backward_FullyConnected", [np.abs(dy), np.abs(x), np.abs(w)], "reference", **params)
    for got, ref, mag in zip(grads, refs, mags):
        assert_bf16_close(got, ref, mag, 13, "_backward_FullyConnected")
    served_in_bf16("FullyConnected")
    served_in_bf16("_backward_FullyConnected")


@needs_bf16
@pytest.mark.parametrize("pool_type", ["max", "avg"])
def test_pooling_and_gradient_in_bf16(pool_type):
    rng = np.random.default_rng(2)
    x = bf16(rng, (2, 16, 6, 6))
    params = dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type=pool_type)
    (y,) = run("Pooling", [x], **params)
    (ref,) = run("Pooling", [x], "reference", **params)
    (mag,) = run("Pooling", [np.abs(x)], "reference", **params)
    assert_bf16_close(y, ref, mag, 10, "Pooling")  # a mean of 9 terms (and its division)
    dy = bf16(rng, y.shape)
    (dx,) = run("_backward_Pooling", [dy, x, ref.astype(BF16)], **params)
    (dref,) = run("_backward_Pooling", [dy, x, ref], "reference", **params)
    (dmag,) = run("_backward_Pooling", [np.abs(dy), x, ref], "reference", **params)
    assert_bf16_close(dx, dref, dmag, 10, "_backward_Pooling")  # each input gathers at most 4 windows
    served_in_bf16("Pooling")
    served_in_bf16("_backward_Pooling")


@needs_bf16
@pytest.mark.parametrize("act_type", ["relu", "sigmoid", "tanh"])
def test_activation_and_gradient_in_bf16(act_type):
    rng = np.random.default_rng(3)
    x = bf16(rng, (3, 5, 7), 3.0)
    (y,) = run("Activation", [x], act_type=act_type)
    (ref,) = run("Activation", [x], "reference", act_type=act_type)
    # relu is exact; sigmoid and tanh are computed in float32 within a few units of float32's last place
    assert_bf16_close(y, ref, np.full(ref.shape, 8.0), 1, f"Activation {act_type}")
    dy = bf16(rng, x.shape)
    (dx,) = run(f"_backward_{act_type}", [dy, y])
    (dref,) = run(f"_backward_{act_type}", [dy, y], "reference")
    assert_bf16_close(dx, dref, 4 * np.abs(dy), 3, f"_backward_{act_type}")
    served_in_bf16("Activation")
    served_in_bf16(f"_backward_{act_type}")


@needs_bf16
@pytest.mark.parametrize("name, count", [("add_n", 3), ("elemwise_add", 2)])
def test_sums_in_bf16(name, count):
    rng = np.random.default_rng(4)
    terms = [bf16(rng, (4, 9)) for _ in range(count)]
    params = {"num_args": count} if name == "add_n" else {}
    (y,) = run(name, terms, **params)
    (ref,) = run(name, terms, "reference", **params)
    assert_bf16_close(y, ref, sum(np.abs(t.astype(np.float64)) for t in terms), count, name)
    served_in_bf16(name)


def _bn_bound(x, gamma, beta, y, n):
    """First-order propagation of float32 rounding in the batch statistics (the mean and variance: sums of
    n terms, relative error gamma_n) through y = gamma (x - mean) / s + beta, s = sqrt(var + eps), then
    bfloat16's rounding of y. ``x`` is (N, C, rest) in float64."""
    mean = x.mean(axis=(0, 2), keepdims=True)
    var = x.var(axis=(0, 2), keepdims=True)
    s = np.sqrt(var + 1e-3)
    g, b = gamma.reshape(1, -1, 1), beta.reshape(1, -1, 1)
    spread = np.abs(x - mean) / s
    moment = (np.square(x).mean(axis=(0, 2), keepdims=True) + np.square(mean)) / (var + 1e-3)
    f32 = sum_bound(n + 4, np.abs(g) * (np.abs(x).mean(axis=(0, 2), keepdims=True) / s + spread * (1 + moment))
                    + np.abs(b))
    return U_BF16 * np.abs(y) + f32


@needs_bf16
@pytest.mark.parametrize("train, layout", [(True, "plain"), (True, "blocked"), (False, "plain"), (False, "blocked")])
def test_batchnorm_bf16_data_float32_statistics(train, layout):
    """BatchNorm with bfloat16 data; inference runs in numpy's layout or with the channels blocked by 16 (each
    program on its own: ``PROGRAMS.only``)."""
    from mxkit_onednn.program import PROGRAMS

    PROGRAMS.only = layout
    rng = np.random.default_rng(5)
    x = bf16(rng, (4, 3, 5, 5))
    gamma, beta = rng.uniform(0.5, 2, 3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    mean, var = rng.standard_normal(3).astype(np.float32), rng.uniform(0.5, 2, 3).astype(np.float32)
    params = dict(fix_gamma=False, use_global_stats=not train, eps=1e-3, momentum=0.9)
    moving = [mean.copy(), var.copy()]
    op = get_registry().get("BatchNorm")
    typed = dict(op.parse_params(params), _is_train=train)
    y = np.full(x.shape, np.nan, BF16)
    outs = [y, np.zeros(3, np.float32), np.zeros(3, np.float32)]
    op.kernel_for("numpy")(np, [x, gamma, beta, *moving], outs, typed)
    x64 = x.astype(np.float64).reshape(4, 3, 25)
    if train:
        batch_mean, batch_var = x64.mean(axis=(0, 2)), x64.var(axis=(0, 2))
        ref = gamma[None, :, None] * (x64 - batch_mean[None, :, None]) / np.sqrt(batch_var[None, :, None] + 1e-3) \
            + beta[None, :, None]
        bound = _bn_bound(x64, gamma.astype(np.float64), beta.astype(np.float64), ref, 100)
        np.testing.assert_allclose(moving[0], 0.9 * mean + 0.1 * batch_mean, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(moving[1], 0.9 * var + 0.1 * batch_var, rtol=1e-5, atol=1e-6)
    else:
        s = np.sqrt(var.astype(np.float64) + 1e-3)
        ref = gamma[None, :, None] * (x64 - mean[None, :, None]) / s[None, :, None] + beta[None, :, None]
        bound = U_BF16 * np.abs(ref) + sum_bound(4, np.abs(gamma[None, :, None]) * (np.abs(x64) + np.abs(
            mean[None, :, None])) / s[None, :, None] + np.abs(beta[None, :, None]))
        assert np.array_equal(moving[0], mean) and np.array_equal(moving[1], var)
    PROGRAMS.only = None
    error = np.abs(y.astype(np.float64).reshape(4, 3, 25) - ref)
    assert np.all(error <= bound), float((error - bound).max())
    served_in_bf16("BatchNorm")
    if layout == "blocked":
        assert all("+" in how for key, how in PROGRAMS.chosen().items() if key[0] == "BatchNorm")  # reorders


@needs_bf16
def test_batchnorm_backward_bf16():
    rng = np.random.default_rng(6)
    x, dy = bf16(rng, (4, 3, 6)), bf16(rng, (4, 3, 6))
    gamma = rng.uniform(0.5, 2, 3).astype(np.float32)
    stats = [np.zeros(3, np.float32), np.ones(3, np.float32)]
    params = dict(fix_gamma=False, eps=1e-3)
    got = run("_backward_BatchNorm", [dy, x, gamma, *stats], **params)
    ref = run("_backward_BatchNorm", [dy, x, gamma, *stats], "reference", **params)
    assert got[0].dtype == BF16 and got[1].dtype == np.float32
    x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
    s = np.sqrt(x64.var(axis=(0, 2), keepdims=True) + 1e-3)
    xhat = (x64 - x64.mean(axis=(0, 2), keepdims=True)) / s
    n = 24
    # dgamma = sum(dy * xhat), dbeta = sum(dy): float32 sums of n terms, xhat itself within gamma_n of its value
    mag_gamma = np.abs(dy64 * xhat).sum(axis=(0, 2)) * 3
    assert np.all(np.abs(got[1] - ref[1]) <= sum_bound(n + 4, mag_gamma))
    assert np.all(np.abs(got[2] - ref[2]) <= sum_bound(n, np.abs(dy64).sum(axis=(0, 2))))
    # dx = gamma / s (dy - mean(dy) - xhat mean(dy xhat)): its terms' magnitudes, each within gamma_n
    g = gamma.reshape(1, -1, 1)
    mag_dx = np.abs(g) / s * (np.abs(dy64) + np.abs(dy64).mean(axis=(0, 2), keepdims=True)
                              + (1 + np.abs(xhat)) * np.abs(dy64 * xhat).mean(axis=(0, 2), keepdims=True) * 3)
    assert_bf16_close(got[0], ref[0], mag_dx, n + 4, "_backward_BatchNorm data gradient")
    served_in_bf16("_backward_BatchNorm")


def test_unhandled_bf16_call_runs_through_float32():
    """A bfloat16 call of an overridden operator with no bfloat16 kernel (softmax) runs on float32 copies and is
    rounded once: the float32 kernel's result, correctly rounded (within one bfloat16 unit of the float64 value)."""
    rng = np.random.default_rng(7)
    x = bf16(rng, (3, 11))
    (y,) = run("softmax", [x], axis=-1)
    (ref,) = run("softmax", [x], "reference", axis=-1)
    assert y.dtype == BF16
    assert np.all(np.abs(y.astype(np.float64) - ref) <= U_BF16 * np.abs(ref) + sum_bound(11, ref * 4))


def test_without_bf16_primitives_every_bf16_call_runs_through_float32(monkeypatch):
    """On a CPU where oneDNN has no bfloat16 primitive (AVX2 alone) the kernels registered for bfloat16 calls
    are the float32 route: results stay right, in bfloat16."""
    from mxkit_onednn import bf16 as bf16_module

    monkeypatch.setattr(bf16_module, "availability", lambda: "no bfloat16 here (simulated)")
    real = get_registry()

    class Registry:
        def __init__(self):
            self.ops = {}

        def get(self, name):
            if name not in self.ops:
                op = copy.copy(real.get(name))
                op.kernels = dict(op.kernels)
                self.ops[name] = op
            return self.ops[name]

        def register_kernel(self, name, backend, kernel):
            self.get(name).kernels[backend] = kernel

    registry = Registry()
    names = bf16_module.register(registry)
    assert "Convolution" in names and "softmax" in names
    op = registry.get("Convolution")
    rng = np.random.default_rng(8)
    x, w = bf16(rng, (1, 3, 5, 5)), bf16(rng, (4, 3, 3, 3))
    y = np.full((1, 4, 3, 3), np.nan, BF16)
    op.kernels["numpy"](np, [x, w], [y], op.parse_params(dict(kernel=(3, 3), num_filter=4, no_bias=True)))
    (ref,) = run("Convolution", [x, w], "reference", kernel=(3, 3), num_filter=4, no_bias=True)
    (mag,) = run("Convolution", [np.abs(x), np.abs(w)], "reference", kernel=(3, 3), num_filter=4, no_bias=True)
    assert_bf16_close(y, ref, mag, 28, "Convolution through float32")
    from mxkit_onednn.program import PROGRAMS

    assert not [key for key in PROGRAMS.chosen() if len(key) > 1 and key[1] == "bfloat16"]


def test_float32_calls_are_untouched():
    """The bfloat16 layer hands float32 calls to the kernel registered before it."""
    op = get_registry().get("Convolution")
    kernel = op.kernel_for("numpy")
    assert getattr(kernel, "bfloat16", None) is not None and kernel.float32 is not None
    rng = np.random.default_rng(9)
    x, w = rng.standard_normal((1, 2, 4, 4)).astype(np.float32), rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    (y,) = run("Convolution", [x, w], kernel=(3, 3), num_filter=3, no_bias=True)
    assert y.dtype == np.float32
    (ref,) = run("Convolution", [x, w], "reference", kernel=(3, 3), num_filter=3, no_bias=True)
    np.testing.assert_allclose(y, ref, rtol=0, atol=float(sum_bound(19, np.full(1, 60.0))[0]))
    assert UNIT < U_BF16


AVX2_ONLY = """
import numpy as np, ml_dtypes
from mxkit_onednn.bf16 import availability
from mxkit import mx
print("availability:", availability())
x = mx.nd.array(np.arange(2 * 3 * 5 * 5, dtype=np.float32).reshape(2, 3, 5, 5) / 50 - 1).astype("bfloat16")
w = mx.nd.array(np.linspace(-1, 1, 4 * 3 * 9, dtype=np.float32).reshape(4, 3, 3, 3)).astype("bfloat16")
y = mx.nd.Convolution(x, w, kernel=(3, 3), num_filter=4, no_bias=True)
ref = mx.nd.Convolution(x.astype("float64"), w.astype("float64"), kernel=(3, 3), num_filter=4, no_bias=True)
print("dtype:", y.dtype.__name__ if isinstance(y.dtype, type) else y.dtype)
mag = mx.nd.Convolution(x.astype("float64").abs(), w.astype("float64").abs(), kernel=(3, 3), num_filter=4,
                        no_bias=True).asnumpy()
error = np.abs(y.asnumpy().astype(np.float64) - ref.asnumpy())
# one rounding to bfloat16 (2**-8 relative) after a float32 sum of 27 products (gamma_28, doubled)
bound = 2.0 ** -8 * np.abs(ref.asnumpy()) + 2 * 28 * 2.0 ** -24 / (1 - 28 * 2.0 ** -24) * mag
print("worst error / bound:", float((error / bound).max()))
"""


def test_a_cpu_without_bf16_primitives_runs_bf16_through_float32():
    """oneDNN held to AVX2 (``ONEDNN_MAX_CPU_ISA``, as on an AVX2-only CPU) has no bfloat16 primitive: the probe
    says so and bfloat16 convolutions run through the float32 kernels, still right: one rounding to bfloat16 of
    a float32 sum (the bound of :func:`assert_bf16_close`)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2"}
    done = subprocess.run([sys.executable, "-c", AVX2_ONLY], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)
    assert lines["availability"].startswith("oneDNN has no bfloat16 convolution on this CPU"), done.stdout
    assert lines["dtype"] == "bfloat16"
    assert float(lines["worst error / bound"]) <= 1
