"""mx.test_utils: comparisons, random shapes and arrays, the default context (hand-computed cases)."""

import json
import os
import re
import subprocess
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxkit import mx
from mxkit.core.errors import MXKitError, ShapeError
from mxkit.mx import test_utils as tu


def test_assert_almost_equal_names_the_worst_element_and_its_index():
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = a.copy()
    b[0, 2] = 3.1   # violation 0.1 / (1e-5 * 3.1) = 3225.8
    b[1, 1] = 5.5   # violation 0.5 / (1e-5 * 5.5) = 9090.9: the worst
    with pytest.raises(AssertionError) as info:
        tu.assert_almost_equal(a, b, names=("mine", "reference"))
    message = str(info.value)
    assert "Error 9090.909091 exceeds tolerance rtol=1.000000e-05, atol=1.000000e-20" in message
    assert "(mismatch 33.333333%)" in message  # 2 of 6 elements
    assert "Location of maximum error: (1, 1), mine=5.00000000, reference=5.50000000" in message
    assert " mine: array(" in message and " reference: array(" in message


def test_assert_almost_equal_prints_the_worst_mismatches_in_order(capsys):
    a = np.zeros(5)
    b = np.array([0.0, 3.0, 0.0, 1.0, 2.0])
    with pytest.raises(AssertionError):
        tu.assert_almost_equal(a, b, rtol=0.0, atol=0.5, mismatches=(2, 10))
    printed = capsys.readouterr().out
    lines = [line for line in printed.splitlines() if re.match(r"\s+\d+: Error", line)]
    assert len(lines) == 2  # mismatches[0] limits what is printed
    assert "(1,)" in lines[0] and "(4,)" in lines[1]
    assert "Error 6.000000" in lines[0] and "Error 4.000000" in lines[1]  # |0-3|/0.5, |0-2|/0.5


def test_tolerances_default_by_dtype_and_explicit_ones_win():
    a32 = np.array([1.0, 2.0], dtype=np.float32)
    # float32 defaults: rtol 1e-4, atol 1e-3: a difference of 1e-3 at 2.0 passes, 1e-2 fails
    tu.assert_almost_equal(a32, a32 + np.float32(1e-3))
    with pytest.raises(AssertionError, match=r"rtol=1\.000000e-04, atol=1\.000000e-03"):
        tu.assert_almost_equal(a32, a32 + np.float32(1e-2))
    tu.assert_almost_equal(a32, a32 + np.float32(1e-2), rtol=0, atol=0.02)
    # float64 against float32: the looser (float32) default applies
    tu.assert_almost_equal(a32.astype(np.float64), a32 + np.float32(1e-3))
    # a dict of dtype to tolerance
    with pytest.raises(AssertionError, match=r"atol=1\.000000e-06"):
        tu.assert_almost_equal(a32, a32 + np.float32(1e-3), rtol={np.float32: 0.0}, atol={np.float32: 1e-6})
    assert tu.get_rtol() == 1e-5 and tu.get_atol() == 1e-20
    assert tu.get_rtol(dtype=np.float16) == 1e-2 and tu.get_atol(0.5) == 0.5


def test_equal_nan_and_infinities():
    a = np.array([1.0, np.nan, np.inf])
    tu.assert_almost_equal(a, a.copy(), equal_nan=True)
    with pytest.raises(AssertionError, match=r"Location of maximum error: \(1,\)"):
        tu.assert_almost_equal(a, a.copy())
    assert tu.almost_equal(a, a, equal_nan=True) and not tu.almost_equal(a, a)


def test_ndarrays_and_broadcasting():
    x = mx.nd.array([[1.0, 2.0]])
    tu.assert_almost_equal(x, np.array([[1.0, 2.0]]))
    tu.assert_almost_equal(np.ones((3, 2)), np.ones((2,)))  # broadcast like numpy
    with pytest.raises(AssertionError, match=r"a.shape = \(3, 2\) and b.shape = \(2,\) are not equal"):
        tu.assert_almost_equal(np.ones((3, 2)), np.ones((2,)), use_broadcast=False)
    with pytest.raises(AssertionError, match="do not broadcast"):
        tu.assert_almost_equal(np.ones(3), 2 * np.ones(2))


def test_boolean_arrays_compare_exactly():
    tu.assert_almost_equal(np.array([True, False]), np.array([True, False]))
    with pytest.raises(AssertionError):
        tu.assert_almost_equal(np.array([True, False]), np.array([True, True]))


def test_same_and_almost_equal():
    assert tu.same(np.array([1, 2]), mx.nd.array([1, 2]).asnumpy().astype(np.int64))
    assert not tu.same(np.array([1, 2]), np.array([1, 3]))
    assert not tu.same(np.array([1, 2]), np.array([[1, 2]]))
    assert tu.almost_equal(np.array([1.0]), np.array([1.0 + 1e-6]))
    assert not tu.almost_equal(np.array([1.0]), np.array([1.0 + 1e-4]))


def test_find_max_violation_by_hand():
    index, worst = tu.find_max_violation(np.array([[0.0, 1.0], [2.0, 3.0]]), np.array([[0.0, 1.5], [2.0, 2.0]]),
                                         rtol=0.0, atol=0.25)
    assert index == (1, 1) and worst == pytest.approx(4.0)


def test_assert_exception():
    def fail(value):
        raise ShapeError(f"bad {value}")

    error = tu.assert_exception(fail, MXKitError, 3)
    assert str(error) == "bad 3"
    with pytest.raises(AssertionError, match="returned normally; expected it to raise ValueError"):
        tu.assert_exception(lambda: None, ValueError)
    with pytest.raises(ShapeError):  # another type propagates
        tu.assert_exception(fail, KeyError, 1)


@pytest.mark.parametrize(("axis", "keepdims"), [(None, False), (0, False), ((0, 2), True), (-1, False),
                                                ([1, -1], True)])
def test_np_reduce_matches_numpy_multi_axis_reduction(axis, keepdims):
    data = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    expected = np.sum(data, axis=tuple(axis) if isinstance(axis, list) else axis, keepdims=keepdims)
    np.testing.assert_array_equal(tu.np_reduce(data, axis, keepdims, np.sum), expected)


def test_np_reduce_by_hand_and_bad_axis():
    data = np.array([[1.0, 5.0], [3.0, 2.0]])
    np.testing.assert_array_equal(tu.np_reduce(data, 1, True, np.max), [[5.0], [3.0]])
    with pytest.raises(MXKitError, match="axis 2 is out of range for an array of 2 dimensions"):
        tu.np_reduce(data, 2, False, np.sum)


def test_random_shapes_stay_in_bounds():
    np.random.seed(0)
    for _ in range(50):
        d0, d1 = tu.rand_shape_2d(3, 4)
        assert 1 <= d0 <= 3 and 1 <= d1 <= 4
        assert all(1 <= d <= 2 for d in tu.rand_shape_3d(2, 2, 2))
        shape = tu.rand_shape_nd(4, dim=3, allow_zero_size=True)
        assert len(shape) == 4 and all(0 <= d <= 3 for d in shape)
    seen = {tu.rand_shape_2d(2, 2) for _ in range(200)}
    assert seen == {(1, 1), (1, 2), (2, 1), (2, 2)}  # every size reachable
    with pytest.raises(MXKitError, match="num_dim=-1 is negative"):
        tu.rand_shape_nd(-1)


def test_random_arrays_and_rand_ndarray():
    np.random.seed(1)
    single = tu.random_arrays((2, 3))
    assert isinstance(single, np.ndarray) and single.shape == (2, 3) and single.dtype == np.float32
    several = tu.random_arrays((1,), (), (4, 1))
    assert [a.shape for a in several] == [(1,), (), (4, 1)]
    arr = tu.rand_ndarray((3, 2), ctx=mx.cpu(1), dtype="float64")
    assert arr.shape == (3, 2) and arr.context == mx.cpu(1) and arr.dtype == np.float64
    assert tu.rand_ndarray((2,)).context == tu.default_context()
    with pytest.raises(MXKitError, match="'coo' is not a storage type"):
        tu.rand_ndarray((2, 2), stype="coo")
    # csr: each element stored with probability density, values uniform in [0, 1)
    csr = tu.rand_ndarray((20, 30), stype="csr", density=0.2)
    assert csr.stype == "csr" and 0 < csr.data.shape[0] < 20 * 30 and (csr.data.asnumpy() >= 0).all()
    with pytest.raises(MXKitError, match="2-D"):
        tu.rand_ndarray((2, 2, 2), stype="csr")
    # row_sparse: each row stored with probability density, values uniform in [0, 1)
    rows = tu.rand_ndarray((400, 3), stype="row_sparse", density=0.25, ctx=mx.cpu(1))
    assert rows.stype == "row_sparse" and rows.context == mx.cpu(1) and rows.shape == (400, 3)
    stored = rows.indices.asnumpy()
    assert 60 < stored.size < 140 and (np.diff(stored) > 0).all()  # 100 expected, sd 8.7
    dense = rows.asnumpy()
    assert (dense[stored] >= 0).all() and (dense[stored] < 1).all()
    assert not np.delete(dense, stored, axis=0).any()
    assert tu.rand_ndarray((5, 2), stype="row_sparse", density=0).indices.shape == (0,)
    with pytest.raises(MXKitError, match=r"density must be in \[0, 1\]"):
        tu.rand_ndarray((2, 2), stype="row_sparse", density=1.5)


def test_default_context_follows_with_blocks_and_set_default_context():
    assert tu.default_context() == mx.cpu(0)
    try:
        tu.set_default_context(mx.cpu(3))
        assert tu.default_context() == mx.cpu(3) and mx.current_context() == mx.cpu(3)
        assert mx.nd.zeros((1,)).context == mx.cpu(3)
        with mx.cpu(2):
            assert tu.default_context() == mx.cpu(2)
        assert tu.default_context() == mx.cpu(3)
        other = []
        thread = threading.Thread(target=lambda: other.append(tu.default_context()))
        thread.start()
        thread.join()
        assert other == [mx.cpu(0)]  # per thread, as MXNet's
    finally:
        tu.set_default_context(None)
    assert tu.default_context() == mx.cpu(0)


def _mxnet_python():
    interpreter = os.environ.get("MXKIT_MXNET_PYTHON")
    if not interpreter:
        pytest.skip("set MXKIT_MXNET_PYTHON to the interpreter of an MXNet 1.9.1 environment to run this check")
    return interpreter


CASES = {
    "float64 2-d": (np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), np.array([[1.0, 2.0, 3.1], [4.0, 5.5, 6.0]])),
    "float32 near the default tolerance": (np.array([1.0, 2.0, 3.0], np.float32),
                                           np.array([1.0, 2.01, 3.0005], np.float32)),
    "mixed dtypes, 3-d": (np.arange(8, dtype=np.float64).reshape(2, 2, 2),
                          (np.arange(8) + np.array([0, 0, 0, 0.5, 0, 0, 0, 2])).reshape(2, 2, 2).astype(np.float32)),
}


def test_failure_messages_match_mxnet_1_9_1(tmp_path):
    interpreter = _mxnet_python()
    np.savez(tmp_path / "cases.npz", **{f"{i}_{side}": pair[j] for i, pair in enumerate(CASES.values())
                                        for j, side in enumerate("ab")})
    code = ("import json, sys, numpy as np\n"
            "from mxnet.test_utils import assert_almost_equal\n"
            "cases = np.load(sys.argv[1]); out = []\n"
            "for i in range(len(cases.files) // 2):\n"
            "    try:\n"
            "        assert_almost_equal(cases[f'{i}_a'], cases[f'{i}_b'], names=('x', 'y'))\n"
            "        out.append(None)\n"
            "    except AssertionError as e:\n"
            "        out.append([l for l in str(e).splitlines() if l.startswith(('Error', 'Location'))])\n"
            "print(json.dumps(out))")
    result = subprocess.run([interpreter, "-c", code, str(tmp_path / "cases.npz")], capture_output=True, text=True,
                            check=True)
    theirs = json.loads(result.stdout.strip().splitlines()[-1])
    for (a, b), expected in zip(CASES.values(), theirs):
        try:
            tu.assert_almost_equal(a, b, names=("x", "y"))
            ours = None
        except AssertionError as exc:
            ours = [line for line in str(exc).splitlines() if line.startswith(("Error", "Location"))]
        assert ours == expected


finite = st.floats(-1e3, 1e3, allow_nan=False, width=64)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(finite, finite), min_size=1, max_size=12), st.sampled_from([0.0, 1e-3, 0.1]),
       st.sampled_from([0.0, 1e-2, 1.0]))
def test_property_agrees_with_allclose_and_names_the_worst_index(pairs, rtol, atol):
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    close = bool(np.allclose(a, b, rtol=rtol, atol=atol))
    assert tu.almost_equal(a, b, rtol=rtol, atol=atol) == close
    try:
        tu.assert_almost_equal(a, b, rtol=rtol, atol=atol)
    except AssertionError as exc:
        assert not close
        # the independent reference: the first index of the largest |a - b| / (atol + rtol |b|)
        ratio = np.where(a == b, 0.0, np.abs(a - b)) / (atol + rtol * np.abs(b) + 1e-20)
        worst = int(np.argmax(ratio))
        assert f"Location of maximum error: ({worst},), a={a[worst]:.8f}, b={b[worst]:.8f}" in str(exc)
    else:
        assert close


def test_effective_dtype_is_the_data_dtype_off_tf32_devices():
    from mxkit.mx.test_utils import effective_dtype

    assert effective_dtype(mx.nd.ones((2,), dtype="float32")) == np.dtype(np.float32)
    assert effective_dtype(mx.nd.ones((2,), dtype="float16")) == np.dtype(np.float16)
    assert effective_dtype(np.ones(2, dtype=np.float64)) == np.dtype(np.float64)  # numpy data: no device


def test_effective_dtype_of_float32_on_a_gpu_with_tf32_allowed_is_float16(monkeypatch):
    """TF32 keeps about float16's mantissa: MXNet's tests then use float16's tolerances. A stand-in
    array on a gpu context, since the check reads only the context and the config."""
    from types import SimpleNamespace

    from mxkit.mx.testing import compare

    on_gpu = SimpleNamespace(dtype=np.float32, context=mx.gpu(0))
    monkeypatch.setattr(compare, "_tf32_enabled", lambda ctx: ctx.device_type == "gpu")
    assert compare.effective_dtype(on_gpu) == np.dtype(np.float16)
    assert compare.effective_dtype(SimpleNamespace(dtype=np.float64, context=mx.gpu(0))) == np.dtype(np.float64)
    monkeypatch.undo()
    assert compare._tf32_enabled(mx.cpu()) is False
