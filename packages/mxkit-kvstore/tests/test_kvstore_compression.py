"""Gradient compression: MXNet's 2-bit layout and results, and error feedback of every compressor."""

from pathlib import Path

import mxkit.ndarray as nd
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from mxkit.core import cpu
from mxkit.kvstore import create
from mxkit.kvstore.compression import (
    FP16Compression,
    TopKCompression,
    TwoBitCompression,
    make_compressor,
    pack_2bit,
    unpack_2bit,
)

FIXTURE = Path(__file__).parent / "fixtures" / "mxnet_2bit_kvstore.npz"


def mxnet_quantize_2bit(grad, residual, threshold):
    """A line-by-line transcription of MXNet 1.x's ``quantize_2bit`` kernel (one float per 16 values)."""
    posbits, negbits = (0xC0, 0x30, 0x0C, 0x03), (0x80, 0x20, 0x08, 0x02)
    size = grad.shape[0]
    out = bytearray(4 * ((size + 15) // 16))
    for block in range((size + 15) // 16):
        start = block * 16
        for i in range(start, min(start + 16, size)):
            byte = 4 * block + ((i - start) >> 2)
            residual[i] = np.float32(residual[i] + grad[i])
            if residual[i] >= np.float32(threshold):
                out[byte] |= posbits[i & 3]
                residual[i] = np.float32(residual[i] - np.float32(threshold))
            elif residual[i] <= np.float32(-threshold):
                out[byte] |= negbits[i & 3]
                residual[i] = np.float32(residual[i] - np.float32(-threshold))
    return bytes(out)


floats = hnp.arrays(np.float32, st.integers(1, 70), elements=st.floats(-2, 2, width=32))


@settings(max_examples=60, deadline=None)
@given(grad=floats, threshold=st.sampled_from([0.1, 0.5, 1.0]), start=st.floats(-0.375, 0.375, width=32))
def test_2bit_bits_and_residuals_match_mxnets_kernel(grad, threshold, start):
    residual = np.full(grad.shape, start, dtype=np.float32)
    reference_residual = residual.copy()
    expected = mxnet_quantize_2bit(grad, reference_residual, threshold)
    (packed,) = TwoBitCompression(threshold=threshold).compress(np, grad, residual)
    assert packed.dtype == np.uint32 and packed.shape == ((grad.shape[0] + 15) // 16,)
    assert packed.tobytes() == expected
    np.testing.assert_array_equal(residual, reference_residual)


def test_2bit_layout_by_hand():
    # values 0..3 of a word sit in its first byte, top bits first: +t, -t, 0, +t -> 11 10 00 11
    codes = np.array([3, 2, 0, 3] + [0] * 12 + [2], dtype=np.uint8)
    packed = pack_2bit(np, codes)
    assert packed.view(np.uint8).tolist() == [0b11100011, 0, 0, 0, 0b10000000, 0, 0, 0]
    np.testing.assert_array_equal(unpack_2bit(np, packed, 17), codes)


@settings(max_examples=40, deadline=None)
@given(grads=st.integers(1, 40).flatmap(lambda n: st.lists(
    hnp.arrays(np.float32, n, elements=st.floats(-0.4375, 0.4375, width=32)), min_size=1, max_size=12)))
def test_2bit_dequantized_sum_tracks_the_gradient_sum_within_the_threshold(grads):
    compressor = TwoBitCompression(threshold=0.5)
    residual = np.zeros_like(grads[0])
    sent = np.zeros_like(grads[0])
    for grad in grads:
        payload = compressor.compress(np, grad, residual)
        compressor.decompress(np, payload, sent, accumulate=True)
    total = np.sum(np.stack(grads).astype(np.float64), axis=0)
    assert np.all(np.abs(total - sent) < 0.5 + 1e-5)
    np.testing.assert_allclose(sent + residual, total, atol=1e-5)  # nothing is lost, only delayed


@pytest.mark.parametrize("compressor", [FP16Compression(), TopKCompression(ratio=0.25)], ids=["fp16", "topk"])
@settings(max_examples=30, deadline=None)
@given(grads=st.lists(hnp.arrays(np.float32, 16, elements=st.floats(-100, 100, width=32)), min_size=1,
                      max_size=6))
def test_error_feedback_keeps_what_was_not_sent(compressor, grads):
    residual = np.zeros(16, np.float32)
    sent = np.zeros(16, np.float32)
    for grad in grads:
        payload = compressor.compress(np, grad, residual)
        if isinstance(compressor, TopKCompression):
            indices, values = payload
            assert len(set(indices.tolist())) == 4 == len(values)  # a quarter of 16, distinct
            assert np.all(residual[indices] == 0)
        compressor.decompress(np, payload, sent, accumulate=True)
    np.testing.assert_allclose(sent + residual, np.sum(grads, axis=0), rtol=1e-5, atol=1e-3)


def test_topk_sends_the_largest_magnitudes():
    residual = np.zeros(6, np.float32)
    indices, values = TopKCompression(ratio=0.3).compress(
        np, np.array([1, -9, 3, 0, 8, -2], np.float32), residual)
    assert sorted(indices.tolist()) == [1, 4] and sorted(values.tolist()) == [-9.0, 8.0]
    np.testing.assert_array_equal(residual, [1, 0, 3, 0, 0, -2])


def test_make_compressor_reads_mxnets_dict():
    compressor = make_compressor({"type": "2bit", "threshold": 0.25})
    assert compressor.type == "2bit" and compressor.params == {"threshold": 0.25}
    assert make_compressor({"type": "2bit"}).threshold == 0.5  # MXNet's default


@pytest.mark.skipif(not FIXTURE.exists(), reason="fixture missing")
@pytest.mark.parametrize("kvtype", ["device", "local"])
@pytest.mark.parametrize("case", ["plain_t05", "plain_t025", "accumulate_t05"])
def test_2bit_store_matches_mxnet_1_9_1(kvtype, case):
    with np.load(FIXTURE, allow_pickle=False) as fixture:
        grads, pulls = fixture[f"{case}.grads"], fixture[f"{case}.pulls"]
        threshold, accumulate = float(fixture[f"{case}.threshold"]), bool(fixture[f"{case}.accumulate"])
    kv = create(kvtype)
    kv.set_gradient_compression({"type": "2bit", "threshold": threshold})
    if accumulate:
        def add(key, grad, stored):
            stored += grad

        kv.set_updater(add)
    shape = pulls.shape[1:]
    kv.init(0, nd.zeros(shape))
    out = nd.zeros(shape)
    for r in range(grads.shape[0]):
        kv.push(0, [nd.array(grads[r, d], ctx=cpu(d)) for d in range(grads.shape[1])])
        kv.pull(0, out=out)
        np.testing.assert_array_equal(out.asnumpy(), pulls[r], err_msg=f"round {r}")


def test_residuals_are_kept_per_key_and_device():
    kv = create("device")
    kv.set_gradient_compression({"type": "2bit", "threshold": 1.0})
    kv.init([0, 1], [nd.zeros((2,)), nd.zeros((2,))])
    out = nd.zeros((2,))
    # device 0 builds up residual 0.6 on key 0; device 1's pushes and key 1 must not see it
    kv.push(0, [nd.array([0.6, 0.0], ctx=cpu(0)), nd.array([0.0, 0.0], ctx=cpu(1))])
    kv.push(1, [nd.array([0.6, 0.0], ctx=cpu(0)), nd.array([0.0, 0.0], ctx=cpu(1))])
    kv.push(0, [nd.array([0.0, 0.0], ctx=cpu(0)), nd.array([0.6, 0.0], ctx=cpu(1))])
    kv.pull(0, out=out)
    np.testing.assert_array_equal(out.asnumpy(), [0.0, 0.0])
    kv.push(0, [nd.array([0.6, 0.0], ctx=cpu(0)), nd.array([0.0, 0.0], ctx=cpu(1))])
    kv.pull(0, out=out)
    np.testing.assert_array_equal(out.asnumpy(), [1.0, 0.0])  # 0.6 + 0.6 on device 0 of key 0
    kv.set_gradient_compression({"type": "none"})
    kv.push(0, [nd.array([0.25, 0.0], ctx=cpu(0))])
    kv.pull(0, out=out)
    np.testing.assert_array_equal(out.asnumpy(), [0.25, 0.0])
