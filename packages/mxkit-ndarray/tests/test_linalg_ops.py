"""The linalg operators against numpy's linear algebra, and their gradients against central
finite differences (float64), in MXNet's conventions: triangular inputs read and get gradient
in their triangle only; potrf and syevd take symmetric inputs (the finite differences below
perturb a symmetric parametrisation of them)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from mxkit.core.errors import MXKitError

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures", "nn"))

import mxkit.ndarray as nd
import nn_harness as harness


def rand(*shape, seed=0):
    return np.random.default_rng(seed + 7 * sum(shape)).uniform(-1, 1, shape)


def spd(n, batch=(2,), seed=0):
    a = rand(*batch, n, n, seed=seed)
    return a @ a.swapaxes(-1, -2) + n * np.eye(n)


def lower_tri(n, batch=(2,), seed=0):
    return np.tril(rand(*batch, n, n, seed=seed)) + 2 * np.eye(n)


def test_forward_results_match_numpy():
    a, b, c = rand(2, 3, 4), rand(2, 4, 5, seed=1), rand(2, 3, 5, seed=2)
    out = harness.run("_linalg_gemm", [a, b, c], alpha=0.5, beta=2.0)[0]
    np.testing.assert_allclose(out, 0.5 * a @ b + 2 * c)
    # rows in axis 0, columns last: the matrices of a.transpose(1, 0, 2)
    moved = harness.run("_linalg_gemm2", [a.transpose(1, 0, 2), b.transpose(1, 0, 2)], axis=0)[0]
    np.testing.assert_allclose(moved, (a @ b).transpose(1, 0, 2))
    s = spd(4)
    factor = harness.run("_linalg_potrf", [s])[0]
    np.testing.assert_allclose(factor, np.linalg.cholesky(s))
    np.testing.assert_allclose(harness.run("_linalg_potrf", [s], lower=False)[0], np.linalg.cholesky(s).swapaxes(1, 2))
    np.testing.assert_allclose(harness.run("_linalg_potri", [factor])[0], np.linalg.inv(s), rtol=1e-10)
    low, m = lower_tri(3), rand(2, 3, 4, seed=3)
    np.testing.assert_allclose(harness.run("_linalg_trmm", [low, m], alpha=2.0)[0], 2 * low @ m)
    np.testing.assert_allclose(harness.run("_linalg_trsm", [low, m], transpose=True)[0],
                               np.linalg.solve(low.swapaxes(1, 2), m))
    right = rand(2, 4, 3, seed=4)
    np.testing.assert_allclose(harness.run("_linalg_trsm", [low, right], rightside=True, alpha=3.0)[0],
                               3 * right @ np.linalg.inv(low))
    np.testing.assert_allclose(harness.run("_linalg_sumlogdiag", [s])[0],
                               np.log(np.diagonal(s, 0, 1, 2)).sum(-1))
    np.testing.assert_allclose(harness.run("_linalg_syrk", [m], transpose=True, alpha=0.5)[0],
                               0.5 * m.swapaxes(1, 2) @ m)
    wide = rand(2, 3, 5, seed=5)
    q, lq = harness.run("_linalg_gelqf", [wide])
    np.testing.assert_allclose(q @ q.swapaxes(1, 2), np.broadcast_to(np.eye(3), (2, 3, 3)), atol=1e-12)
    np.testing.assert_allclose(lq @ q, wide, atol=1e-12)
    assert np.allclose(np.triu(lq, 1), 0)
    u, lam = harness.run("_linalg_syevd", [s])
    np.testing.assert_allclose(u.swapaxes(1, 2) @ (lam[..., None] * u), s, atol=1e-10)
    np.testing.assert_allclose(lam, np.linalg.eigvalsh(s))
    largest = np.take_along_axis(u, np.abs(u).argmax(-1)[..., None], -1)
    assert (largest > 0).all()
    np.testing.assert_allclose(harness.run("_linalg_inverse", [s])[0], np.linalg.inv(s))
    np.testing.assert_allclose(harness.run("_linalg_det", [s])[0], np.linalg.det(s))
    sign, logabs = harness.run("_linalg_slogdet", [-s[:, :3, :3]])
    np.testing.assert_allclose(sign, [-1, -1])
    np.testing.assert_allclose(logabs, np.linalg.slogdet(s[:, :3, :3])[1])


def test_diagonal_and_triangle_packing_round_trip():
    a = rand(2, 4, 4)
    for k in (-2, 0, 1):
        d = harness.run("_linalg_extractdiag", [a], offset=k)[0]
        np.testing.assert_array_equal(d, np.diagonal(a, k, 1, 2))
        made = harness.run("_linalg_makediag", [d], offset=k)[0]
        np.testing.assert_array_equal(made[1], np.diagflat(d[1], k))
    for k, lower in ((0, True), (0, False), (-1, True), (2, True)):
        packed = harness.run("_linalg_extracttrian", [a], offset=k, lower=lower)[0]
        rebuilt = harness.run("_linalg_maketrian", [packed], offset=k, lower=lower)[0]
        want = np.tril(a, k) if k < 0 or (k == 0 and lower) else np.triu(a, k)
        np.testing.assert_array_equal(rebuilt, want)


GRADIENTS = [
    ("_linalg_gemm", [rand(2, 3, 4), rand(2, 3, 5, seed=1), rand(2, 4, 5, seed=2)],
     {"transpose_a": True, "alpha": 0.7, "beta": -1.5}),
    ("_linalg_gemm2", [rand(3, 2, 4), rand(4, 2, 5, seed=1)], {"axis": 0, "alpha": 2.0}),
    ("_linalg_trmm", [lower_tri(3), rand(2, 4, 3, seed=1)], {"rightside": True, "transpose": True, "alpha": 1.5}),
    ("_linalg_trmm", [np.ascontiguousarray(lower_tri(3).swapaxes(1, 2)), rand(2, 3, 2, seed=1)], {"lower": False}),
    ("_linalg_trsm", [lower_tri(3), rand(2, 3, 2, seed=1)], {"alpha": -2.0}),
    ("_linalg_trsm", [lower_tri(3), rand(2, 2, 3, seed=1)], {"rightside": True, "transpose": True}),
    ("_linalg_potri", [lower_tri(3)], {}),
    ("_linalg_potri", [np.ascontiguousarray(lower_tri(3).swapaxes(1, 2))], {"lower": False}),
    ("_linalg_sumlogdiag", [spd(3)], {}),
    ("_linalg_syrk", [rand(2, 3, 4)], {"alpha": 0.5}),
    ("_linalg_syrk", [rand(2, 3, 4)], {"transpose": True}),
    ("_linalg_gelqf", [rand(2, 3, 5)], {}),
    ("_linalg_inverse", [spd(3)], {}),
    ("_linalg_det", [spd(3)], {}),
    ("_linalg_slogdet", [spd(3)], {}),
    ("_linalg_extractdiag", [rand(2, 3, 3)], {"offset": -1}),
    ("_linalg_makediag", [rand(2, 3)], {"offset": 1}),
    ("_linalg_extracttrian", [rand(2, 3, 3)], {"offset": 0, "lower": False}),
    ("_linalg_maketrian", [rand(2, 6)], {}),
]


@pytest.mark.parametrize("name, inputs, params", GRADIENTS, ids=[f"{g[0]}-{i}" for i, g in enumerate(GRADIENTS)])
def test_gradient_matches_finite_differences(name, inputs, params):
    if name == "_linalg_slogdet":  # output 1 (logabsdet) carries the gradient
        a = inputs[0]
        head = rand(2, seed=9)
        analytic = harness.gradients(name, [a], [np.zeros(2), head])[0]
        numeric = harness.numeric_gradient(lambda xs: np.linalg.slogdet(xs[0])[1], [a], 0, head)
        np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-8)
        return
    if name in ("_linalg_trmm", "_linalg_trsm", "_linalg_potri"):
        # a triangular input: only its triangle is read, so only its triangle gets gradient
        lower = params.get("lower", True)
        tri = np.tril if lower else np.triu
        out = harness.run(name, inputs, **params)[0]
        head = rand(*out.shape, seed=11)
        analytic = harness.gradients(name, inputs, [head], **params)
        numeric = harness.numeric_gradient(lambda xs: harness.run(name, xs, **params)[0], inputs, 0, head)
        np.testing.assert_allclose(analytic[0], tri(numeric), rtol=1e-6, atol=1e-8)
        assert np.all(analytic[0] == tri(analytic[0]))
        if len(inputs) > 1:
            numeric_b = harness.numeric_gradient(lambda xs: harness.run(name, xs, **params)[0], inputs, 1, head)
            np.testing.assert_allclose(analytic[1], numeric_b, rtol=1e-6, atol=1e-8)
        return
    if name == "_linalg_gelqf":  # both outputs carry gradient
        a = inputs[0]
        q, low = harness.run(name, [a])
        heads = [rand(*q.shape, seed=3), rand(*low.shape, seed=4)]
        analytic = harness.gradients(name, [a], heads)[0]

        def both(xs):
            q2, l2 = harness.run(name, xs)
            return np.concatenate([(q2 * heads[0]).ravel(), (l2 * heads[1]).ravel()])

        numeric = harness.numeric_gradient(both, [a], 0, np.ones(q.size + low.size))
        np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7)
        return
    harness.check_gradient(name, inputs, rtol=1e-5, atol=1e-7, **params)


@pytest.mark.parametrize("name", ["_linalg_potrf", "_linalg_syevd"])
def test_symmetric_input_gradients_through_a_symmetric_parametrisation(name):
    # f(X) with X = (B + B^T) / 2: the chain rule gives (G + G^T) / 2 for the operator's gradient G
    b = spd(3) + 0.1 * rand(2, 3, 3, seed=2)
    x = 0.5 * (b + b.swapaxes(1, 2))
    outputs = harness.run(name, [x])
    heads = [rand(*o.shape, seed=5 + i) for i, o in enumerate(outputs)]
    grad = harness.gradients(name, [x], heads)[0]
    analytic = 0.5 * (grad + grad.swapaxes(1, 2))

    def value(xs):
        sym = 0.5 * (xs[0] + xs[0].swapaxes(1, 2))
        return np.concatenate([(o * h).ravel() for o, h in zip(harness.run(name, [sym]), heads)])

    total = sum(o.size for o in outputs)
    numeric = harness.numeric_gradient(value, [b], 0, np.ones(total))
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("call, message", [
    (lambda: nd.linalg.potrf(nd.ones((2, 3))), "square"),
    (lambda: nd.linalg.gelqf(nd.ones((3, 2))), "no more rows than columns"),
    (lambda: nd.linalg.trmm(nd.ones((3, 3)), nd.ones((2, 2))), "does not fit"),
    (lambda: nd.linalg.gemm(nd.ones((2, 3)), nd.ones((2, 3)), nd.ones((2, 3))), "do not chain"),
    (lambda: nd.linalg.extractdiag(nd.ones((2, 2)), offset=2), "outside"),
    (lambda: nd.linalg.maketrian(nd.ones((4,))), "do not fill a triangle"),
])
def test_bad_shapes_fail_with_a_clear_error(call, message):
    with pytest.raises(MXKitError, match=message):
        call()
