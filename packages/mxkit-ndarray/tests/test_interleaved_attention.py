"""contrib.interleaved_matmul_* against a per-head numpy reference, and their gradients
against finite differences."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures", "nn"))

import nn_harness as harness

T, TK, N, H, D = 3, 4, 2, 2, 5
RNG = np.random.default_rng(8)
QKV = RNG.normal(size=(T, N, H * 3 * D))
Q = RNG.normal(size=(T, N, H * D))
KV = RNG.normal(size=(TK, N, H * 2 * D))


def head(x, parts, part, n, h):
    """The (time, D) slice of batch n, head h, part `part` of an interleaved projection."""
    return x.reshape(x.shape[0], N, H, parts, D)[:, n, h, part]


def test_scores_and_weighted_values_match_a_per_head_reference():
    scores = harness.run("_contrib_interleaved_matmul_selfatt_qk", [QKV], heads=H)[0]
    att = RNG.uniform(size=(N * H, T, T))
    out = harness.run("_contrib_interleaved_matmul_selfatt_valatt", [QKV, att], heads=H)[0]
    enc = harness.run("_contrib_interleaved_matmul_encdec_qk", [Q, KV], heads=H)[0]
    att2 = RNG.uniform(size=(N * H, T, TK))
    enc_out = harness.run("_contrib_interleaved_matmul_encdec_valatt", [KV, att2], heads=H)[0]
    for n in range(N):
        for h in range(H):
            b = n * H + h
            q, k, v = (head(QKV, 3, i, n, h) for i in range(3))
            np.testing.assert_allclose(scores[b], q @ k.T / np.sqrt(D), rtol=1e-12)
            np.testing.assert_allclose(out[:, n, h * D:(h + 1) * D], att[b] @ v, rtol=1e-12)
            q2 = Q.reshape(T, N, H, D)[:, n, h]
            k2, v2 = head(KV, 2, 0, n, h), head(KV, 2, 1, n, h)
            np.testing.assert_allclose(enc[b], q2 @ k2.T / np.sqrt(D), rtol=1e-12)
            np.testing.assert_allclose(enc_out[:, n, h * D:(h + 1) * D], att2[b] @ v2, rtol=1e-12)


@pytest.mark.parametrize("name, inputs", [
    ("_contrib_interleaved_matmul_selfatt_qk", [QKV]),
    ("_contrib_interleaved_matmul_selfatt_valatt", [QKV, RNG.uniform(size=(N * H, T, T))]),
    ("_contrib_interleaved_matmul_encdec_qk", [Q, KV]),
    ("_contrib_interleaved_matmul_encdec_valatt", [KV, RNG.uniform(size=(N * H, T, TK))]),
])
def test_gradients_match_finite_differences(name, inputs):
    harness.check_gradient(name, inputs, rtol=1e-6, atol=1e-8, heads=H)
