"""bfloat16 NDArrays on the CPU (numpy's dtype from ml_dtypes, MXNet's type flag 12): creation, casts both
ways (round to nearest even, as MXNet's and ml_dtypes' conversions do), asnumpy, save and load in MXNet's
.params format, AMP's casts; and the error that says what to install when ml_dtypes is missing."""

from __future__ import annotations

import struct
import subprocess
import sys

import numpy as np
import pytest
from mxkit import ndarray as nd

ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 arrays need ml_dtypes (mxkit-ndarray[bfloat16])")
BF16 = np.dtype(ml_dtypes.bfloat16)


def to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns by round to nearest, ties to even, computed on the integer bits (an
    independent reference for finite values)."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = bits + 0x7FFF + ((bits >> 16) & 1)
    return (rounded >> 16).astype(np.uint16)


def test_create_cast_and_read_back():
    values = np.array([1.0, -2.5, 3.140625, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1e30, -0.0], dtype=np.float32)
    a = nd.array(values).astype("bfloat16")
    assert a.dtype == BF16
    got = a.asnumpy()
    assert got.dtype == BF16
    assert np.array_equal(got.view(np.uint16), to_bf16_bits(values))
    # widening is exact
    assert np.array_equal(a.astype("float32").asnumpy(), got.astype(np.float32))
    assert np.array_equal(nd.Cast(nd.array(values), dtype="bfloat16").asnumpy().view(np.uint16),
                          to_bf16_bits(values))
    assert nd.zeros((2, 3), dtype="bfloat16").dtype == BF16
    assert nd.array([[1, 2]], dtype="bfloat16").asnumpy().astype(np.float32).tolist() == [[1.0, 2.0]]


def test_save_and_load_params_with_type_flag_12(tmp_path):
    a = nd.array(np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3)).astype("bfloat16")
    path = tmp_path / "bf16.params"
    nd.save(str(path), {"w": a})
    raw = path.read_bytes()
    # the array's header: magic (v2), storage type, shape (ndim, dims), context (dev type, id), type flag 12
    header = struct.pack("<Iii", 0xF993FAC9, 0, 2) + struct.pack("<qq", 2, 3) + struct.pack("<iii", 1, 0, 12)
    assert header in raw
    (loaded,) = nd.load(str(path)).values()
    assert loaded.dtype == BF16
    assert np.array_equal(loaded.asnumpy().view(np.uint16), a.asnumpy().view(np.uint16))


def test_amp_casts_treat_bfloat16_as_floating():
    x = nd.array([1.5, 2.25]).astype("bfloat16")
    y = nd.array([1.0, 2.0], dtype="float32")
    assert nd.amp_cast(x, dtype="float32").dtype == np.float32
    assert nd.amp_cast(y, dtype="bfloat16").dtype == BF16
    wide = nd.amp_multicast(x, y, num_outputs=2)
    assert [o.dtype for o in wide] == [np.float32, np.float32]
    narrow = nd.amp_multicast(x, y, num_outputs=2, cast_narrow=True)
    assert [o.dtype for o in narrow] == [BF16, BF16]


def test_reductions_accumulate_in_float32():
    """sum, mean, norm... of bfloat16 add in float32 and round once (ml_dtypes alone adds in bfloat16: 1000 ones
    would sum to 256): within 2**-8 of the result plus float32's bound for n terms."""
    assert nd.ones((1000,), dtype="bfloat16").sum().asnumpy().astype(np.float32).tolist() == [1000.0]
    rng = np.random.default_rng(0)
    values = rng.standard_normal((7, 300)).astype(np.float32).astype(BF16)
    x = nd.array(values.astype(np.float32)).astype("bfloat16")
    exact = values.astype(np.float64)
    n, u32 = 300, 2.0 ** -24
    gamma = 2 * (n + 1) * u32 / (1 - (n + 1) * u32)
    for name, expected, magnitude in (("sum", exact.sum(axis=1), np.abs(exact).sum(axis=1)),
                                      ("mean", exact.mean(axis=1), np.abs(exact).mean(axis=1)),
                                      ("norm", np.sqrt((exact ** 2).sum(axis=1)), np.sqrt((exact ** 2).sum(axis=1)))):
        got = getattr(nd, name)(x, axis=1).asnumpy()
        assert got.dtype == BF16, name
        error = np.abs(got.astype(np.float64) - expected)
        assert np.all(error <= 2.0 ** -8 * np.abs(expected) + gamma * magnitude), (name, error.max())


def test_generic_kernels_treat_bfloat16_as_floating():
    """numpy sees ml_dtypes' bfloat16 as kind ``V``, not ``f``: the kernels that branch on floating types ask
    mxkit (a scalar division is a true division, max pooling's padding the lowest bfloat16, a bfloat16 label an
    index to convert)."""
    a = nd.array([1.0, 3.0]).astype("bfloat16")
    assert (a / 2).asnumpy().astype(np.float32).tolist() == [0.5, 1.5]
    assert (a / nd.array([2.0, 2.0]).astype("bfloat16")).asnumpy().astype(np.float32).tolist() == [0.5, 1.5]
    x = nd.array(-np.arange(1, 5, dtype=np.float32).reshape(1, 1, 2, 2)).astype("bfloat16")
    # full convention: the last window lies half in the padding; the maximum of what it covers
    pooled = nd.Pooling(x, kernel=(2, 2), stride=(2, 2), pad=(1, 1), pool_type="max", pooling_convention="full")
    assert pooled.asnumpy().astype(np.float32).ravel().tolist() == [-1.0, -2.0, -3.0, -4.0]
    probabilities = nd.array([[0.1, 0.9], [0.8, 0.2]]).astype("bfloat16")
    label = nd.array([1.0, 0.0]).astype("bfloat16")
    picked = nd.pick(probabilities, label).asnumpy().astype(np.float32)
    assert np.allclose(picked, [0.9, 0.8], rtol=2.0 ** -8)


MISSING = """
import sys
sys.modules["ml_dtypes"] = None  # as if it were not installed
from mxkit import ndarray as nd
from mxkit.core.errors import DTypeError
for make in (lambda: nd.zeros((2,), dtype="bfloat16"), lambda: nd.ones((2,)).astype("bfloat16"),
             lambda: nd.Cast(nd.ones((2,)), dtype="bfloat16")):
    try:
        make().wait_to_read()
    except DTypeError as exc:
        print("DTypeError:", exc)
    else:
        print("no error")
"""


def test_missing_ml_dtypes_says_what_to_install():
    # a fresh process: this one has met bfloat16 already and keeps its numpy dtype
    done = subprocess.run([sys.executable, "-c", MISSING], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and all("ml_dtypes" in line and "mxkit-ndarray[bfloat16]" in line for line in lines), \
        done.stdout
