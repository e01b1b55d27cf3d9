"""MXNet 1.x's NDArray file format: files written by MXNet 1.9.1, round trips, corruption.

The references are independent of the code under test: files and values written by a real
MXNet 1.9.1 (tests/fixtures/make_fixtures.py, committed with its output), byte layouts
packed here with ``struct``, and numpy itself for round trips.
"""

from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from mxkit.core import config
from mxkit.core.errors import ConfigError, DTypeError, FormatError, MXKitError, ShapeError
from mxkit.ndarray import serialization
from mxkit.ndarray.serialization import (
    SparseArray,
    dumps_arrays,
    load_arrays,
    load_stored_arrays,
    loads_arrays,
    save_arrays,
)

FIXTURES = Path(__file__).parent / "fixtures"
EXPECTED = dict(np.load(FIXTURES / "expected.npz", allow_pickle=False))
MXNET_FILES = ["dtypes_list.params", "named_dict.params", "empty_list.params", "zero_size_legacy.params",
               "np_shape.params", "sparse.params", "legacy_v0.params", "legacy_v1.params"]
PLAIN_DTYPES = ["float32", "float64", "float16", "uint8", "int32", "int8", "int64", "bool",
                "int16", "uint16", "uint32", "uint64"]
FLAGS = {name: flag for flag, name in enumerate(PLAIN_DTYPES)}


def expected_of(fname: str) -> list[np.ndarray] | dict[str, np.ndarray]:
    prefix = fname + "/"
    if prefix + "__names__" in EXPECTED:
        return {str(name): EXPECTED[prefix + str(name)] for name in EXPECTED[prefix + "__names__"]}
    keys = sorted((k for k in EXPECTED if k.startswith(prefix)), key=lambda k: int(k[len(prefix):]))
    return [EXPECTED[k] for k in keys]


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    assert isinstance(got, np.ndarray)
    assert got.dtype == want.dtype and got.shape == want.shape
    # bit for bit: NaN payloads and the sign of zero survive too
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()


def header(count: int) -> bytes:
    return struct.pack("<QQQ", 0x112, 0, count)


def dense_v2(arr: np.ndarray, magic: int = 0xF993FAC9, device: tuple[int, int] = (1, 0)) -> bytes:
    """A dense record packed by hand, after MXNet's NDArray::Save."""
    return (struct.pack(f"<Iii{arr.ndim}q", magic, 0, arr.ndim, *arr.shape) + struct.pack("<ii", *device)
            + struct.pack("<i", FLAGS[arr.dtype.name]) + arr.tobytes())


NO_NAMES = struct.pack("<Q", 0)


# --------------------------------------------------------------------------- MXNet 1.9.1 files


@pytest.mark.parametrize("fname", MXNET_FILES)
def test_mxnet_written_files_load_exactly(fname):
    got = load_arrays(FIXTURES / fname)
    want = expected_of(fname)
    assert type(got) is type(want)
    if isinstance(want, dict):
        assert list(got) == list(want)  # names in the order MXNet wrote them
        pairs = [(got[k], want[k]) for k in want]
    else:
        assert len(got) == len(want)
        pairs = list(zip(got, want))
    for g, w in pairs:
        assert_same(g, w)


def test_mxnet_files_cover_what_they_claim():
    # guards the fixture set itself: a regenerated set missing a case would make the tests weaker
    assert {a.dtype.name for a in expected_of("dtypes_list.params")} == set(PLAIN_DTYPES[:8])
    np_shape = [r.value for r in load_stored_arrays(FIXTURES / "np_shape.params")[0]]
    assert [a.shape for a in np_shape] == [(), (), (0, 3), (2, 2)]
    assert [r.version for r in load_stored_arrays(FIXTURES / "legacy_v0.params")[0]] == [0, 0]
    assert [r.version for r in load_stored_arrays(FIXTURES / "legacy_v1.params")[0]] == [1, 1]
    assert list(expected_of("named_dict.params")) == ["conv0_weight", "gewicht_ü_重み", ""]


@pytest.mark.parametrize("fname", ["dtypes_list.params", "named_dict.params", "empty_list.params",
                                   "zero_size_legacy.params", "np_shape.params", "sparse.params"])
def test_resaving_an_mxnet_file_gives_its_exact_bytes(fname):
    original = (FIXTURES / fname).read_bytes()
    assert dumps_arrays(loads_arrays(original, sparse="keep")) == original


def test_sparse_records_keep_their_structure():
    records, names = load_stored_arrays(FIXTURES / "sparse.params")
    rsp, csr, empty_rsp, dense = (r.value for r in records)
    assert names == [] and [r.version for r in records] == [2, 2, 2, 2]
    assert isinstance(rsp, SparseArray) and rsp.stype == "row_sparse"
    assert rsp.indices.tolist() == [1, 3] and rsp.data.tolist() == [[1.5, 0, 2], [0, -3, 0]]
    assert isinstance(csr, SparseArray) and csr.stype == "csr"
    assert csr.indptr.tolist() == [0, 0, 2, 2, 3] and csr.indices.tolist() == [0, 2, 1]
    assert csr.data.tolist() == [1.5, 2, -3]
    assert empty_rsp.data.shape == (0, 2) and empty_rsp.todense().shape == (3, 2)
    assert isinstance(dense, np.ndarray)
    assert all(r.device_type == "cpu" and r.device_id == 0 for r in records)


def test_bfloat16_file_from_mxnet():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    (got,) = load_arrays(FIXTURES / "bfloat16.params")
    assert got.dtype == np.dtype(ml_dtypes.bfloat16)
    assert_same(got.view(np.uint16), expected_of("bfloat16.params")[0])
    assert dumps_arrays([got]) == (FIXTURES / "bfloat16.params").read_bytes()


def test_bfloat16_without_ml_dtypes_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)
    monkeypatch.setattr(serialization, "_DTYPE_CACHE", {})  # forget a bfloat16 dtype met before
    with pytest.raises(DTypeError, match="ml_dtypes"):
        load_arrays(FIXTURES / "bfloat16.params")


def test_cross_check_script_against_a_real_mxnet():
    mxnet_python = os.environ.get("MXKIT_MXNET_PYTHON")
    if not mxnet_python:
        pytest.skip("set MXKIT_MXNET_PYTHON to an interpreter with MXNet 1.x to run the cross-check")
    proc = subprocess.run([sys.executable, str(FIXTURES / "cross_check_mxnet.py"), "--mxnet-python", mxnet_python],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- layout, by hand


def test_layout_of_a_list_file_matches_a_hand_packed_one():
    arr = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert dumps_arrays([arr]) == header(1) + dense_v2(arr) + NO_NAMES


def test_layout_of_a_dict_file_and_utf8_names():
    a, b = np.ones(2, np.float32), np.zeros((1, 1), np.float64)
    names = struct.pack("<Q", 2) + struct.pack("<Q", 3) + "wé".encode() + struct.pack("<Q", 1) + b"b"
    assert dumps_arrays({"wé": a, "b": b}) == header(2) + dense_v2(a) + dense_v2(b) + names


def test_zero_d_arrays_choose_numpy_shape_records():
    data = dumps_arrays([np.array(2.5, np.float32), np.ones((2,), np.float32)])
    expected = (header(2) + dense_v2(np.array(2.5, np.float32), magic=0xF993FACA)
                + dense_v2(np.ones((2,), np.float32), magic=0xF993FACA) + NO_NAMES)
    assert data == expected
    assert dumps_arrays([np.ones(2, np.float32)], version=3)[24:28] == struct.pack("<I", 0xF993FACA)


def test_legacy_v0_and_v1_records_by_hand():
    arr = np.array([[1, 2], [3, 4]], np.float32)
    v0 = struct.pack("<III", 2, 2, 2) + struct.pack("<iii", 1, 0, 0) + arr.tobytes()
    v0_none = struct.pack("<I", 0)  # before 1.0, ndim 0 was "no array" and nothing followed
    v1 = struct.pack("<Iiqq", 0xF993FAC8, 2, 2, 2) + struct.pack("<iii", 2, 1, 0) + arr.tobytes()
    records, _ = load_stored_arrays(header(3) + v0 + v0_none + v1 + NO_NAMES)
    assert [r.version for r in records] == [0, 0, 1]
    assert_same(records[0].value, arr)
    assert records[1].value is None
    assert_same(records[2].value, arr)
    assert (records[2].device_type, records[2].device_id) == ("gpu", 1)


def test_none_records():
    v2_none = struct.pack("<Iii", 0xF993FAC9, 0, 0)
    v3_unknown_ndim = struct.pack("<Iii", 0xF993FACA, 0, -1)
    v3_unknown_dim = struct.pack("<Iiiqq", 0xF993FACA, 0, 2, 3, -1)
    got = loads_arrays(header(3) + v2_none + v3_unknown_ndim + v3_unknown_dim + NO_NAMES)
    assert got == [None, None, None]


def test_gpu_records_load_on_the_host():
    arr = np.arange(4, dtype=np.float64)
    records, _ = load_stored_arrays(header(1) + dense_v2(arr, device=(2, 3)) + NO_NAMES)
    assert (records[0].device_type, records[0].device_id) == ("gpu", 3)
    assert_same(records[0].value, arr)


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("dtype", PLAIN_DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (5,), (2, 3, 4)])
def test_round_trip_every_dtype_and_shape(dtype, shape):
    rng = np.random.default_rng(7)
    arr = (rng.standard_normal(shape) * 100).astype(dtype)
    (got,) = loads_arrays(dumps_arrays([arr]))
    assert_same(got, arr)
    got = loads_arrays(dumps_arrays({"x": arr}))
    assert list(got) == ["x"]
    assert_same(got["x"], arr)


def test_round_trip_bfloat16():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    arr = np.array([[1.0, -0.5], [3.0, 1e30]], dtype=ml_dtypes.bfloat16)
    (got,) = loads_arrays(dumps_arrays([arr]))
    assert got.dtype == arr.dtype and np.array_equal(got.view(np.uint16), arr.view(np.uint16))


def test_round_trip_through_paths_and_file_objects(tmp_path):
    data = {"a": np.arange(5, dtype=np.int64), "名前": np.eye(3, dtype=np.float16)}
    for target in (tmp_path / "p.params", str(tmp_path / "s.params")):
        save_arrays(target, data)
        got = load_arrays(target)
        assert list(got) == list(data)
        for k in data:
            assert_same(got[k], data[k])
    assert sorted(os.listdir(tmp_path)) == ["p.params", "s.params"]  # no temporary left behind
    buffer = io.BytesIO(b"prefix")
    buffer.seek(6)
    save_arrays(buffer, data)
    buffer.seek(6)  # a file object is read from where it stands
    assert list(load_arrays(buffer)) == list(data)
    with open(tmp_path / "p.params", "rb", buffering=0) as raw:  # unbuffered: short reads allowed
        assert_same(load_arrays(raw)["a"], data["a"])


def test_non_seekable_stream_is_read_whole():
    class Pipe(io.RawIOBase):
        def __init__(self, payload: bytes) -> None:
            self.inner = io.BytesIO(payload)

        def readable(self) -> bool:
            return True

        def readinto(self, buf) -> int:
            return self.inner.readinto(buf)

    arr = np.arange(10, dtype=np.uint8)
    (got,) = load_arrays(Pipe(dumps_arrays([arr])))
    assert_same(got, arr)


def test_awkward_inputs_are_saved_as_their_values():
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    big_endian = np.arange(4, dtype=">i4")

    class HasArray:
        def __array__(self, dtype=None, copy=None):
            return np.full(2, 7, dtype=np.int8)

    got = loads_arrays(dumps_arrays((base[:, ::2], big_endian, np.float64(3.5), HasArray())))
    assert_same(got[0], np.ascontiguousarray(base[:, ::2]))
    assert_same(got[1], big_endian.astype("<i4"))
    assert_same(got[2], np.array(3.5))
    assert_same(got[3], np.full(2, 7, dtype=np.int8))
    (single,) = loads_arrays(dumps_arrays(base))  # mx.nd.save takes one array too
    assert_same(single, base)


def test_loaded_arrays_are_writable_and_aligned():
    (got,) = loads_arrays(dumps_arrays([np.arange(8, dtype=np.float64)]))
    got += 1
    assert got.flags.aligned and got.flags.c_contiguous and got.tolist() == list(range(1, 9))


def test_csr_columns_may_restart_at_each_row():
    csr = SparseArray("csr", [2, 3], np.array([1.0, 2, 3, 4]), np.array([1, 2, 0, 2]), np.array([0, 2, 4]))
    assert csr.shape == (2, 3)
    assert_same(csr.todense(), np.array([[0, 1.0, 2], [3, 0, 4]]))


def test_sparse_round_trip_both_ways():
    dense = np.array([[0, 0], [1, 2], [0, 0], [3, 0]], dtype=np.float64)
    rsp = SparseArray("row_sparse", dense.shape, dense[[1, 3]], np.array([1, 3], np.int32))
    csr = SparseArray("csr", dense.shape, np.array([1.0, 2, 3]), np.array([0, 1, 0]), np.array([0, 0, 2, 2, 3]))
    data = dumps_arrays({"r": rsp, "c": csr})
    dense_view = loads_arrays(data)
    assert_same(dense_view["r"], dense)
    assert_same(dense_view["c"], dense)
    kept = loads_arrays(data, sparse="keep")
    assert kept["r"].indices.dtype == np.int64  # MXNet's index type, whatever was given
    assert kept["c"].indptr.tolist() == [0, 0, 2, 2, 3]


dtype_strategy = st.sampled_from(PLAIN_DTYPES).map(np.dtype)
array_strategy = hnp.arrays(dtype_strategy, hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(array_strategy, max_size=4))
def test_hypothesis_list_round_trip(arrays):
    got = loads_arrays(dumps_arrays(arrays))
    assert len(got) == len(arrays)
    for g, w in zip(got, arrays):
        assert_same(g, w)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(max_size=8), array_strategy, max_size=4))
def test_hypothesis_dict_round_trip(data):
    got = loads_arrays(dumps_arrays(data))
    if not data:
        assert got == []  # a file without arrays has no names either: MXNet loads it as a list
        return
    assert list(got) == list(data)
    for k in data:
        assert_same(got[k], data[k])


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float32, st.tuples(st.integers(1, 5), st.integers(1, 5)),
                  elements=st.sampled_from([0.0, 1.5, -2.0])))
def test_hypothesis_sparse_round_trip(dense):
    rows = np.flatnonzero(dense.any(axis=1))
    nz_rows, nz_cols = np.nonzero(dense)
    indptr = np.concatenate([[0], np.cumsum(np.count_nonzero(dense, axis=1))])
    rsp = SparseArray("row_sparse", dense.shape, dense[rows], rows)
    csr = SparseArray("csr", dense.shape, dense[nz_rows, nz_cols], nz_cols, indptr)
    got = loads_arrays(dumps_arrays([rsp, csr]))
    assert_same(got[0], dense)
    assert_same(got[1], dense)


# --------------------------------------------------------------------------- corrupt files


@pytest.mark.parametrize("fname", ["dtypes_list.params", "named_dict.params", "np_shape.params",
                                   "sparse.params", "legacy_v0.params", "legacy_v1.params"])
def test_every_truncation_is_a_format_error(fname):
    data = (FIXTURES / fname).read_bytes()
    for cut in range(len(data)):
        with pytest.raises(FormatError, match="offset"):
            loads_arrays(data[:cut])


def test_trailing_bytes_are_a_format_error():
    data = dumps_arrays([np.ones(3)])
    with pytest.raises(FormatError, match=r"1 unexpected bytes after the last name.*offset|offset.*1 unexpected"):
        loads_arrays(data + b"\0")


def test_flipped_bytes_never_escape_as_other_errors():
    # Flipping data bytes gives other valid values (the format has no checksum), but flipping
    # any structural byte must end in an mxkit error, never an IndexError or a huge allocation.
    data = (FIXTURES / "sparse.params").read_bytes()
    for pos in range(len(data)):
        for value in (0x00, 0x7F, 0xFF):
            corrupt = data[:pos] + bytes([value]) + data[pos + 1:]
            for mode in ("keep", "dense"):  # densifying is bounded by what the file stores
                try:
                    loads_arrays(corrupt, sparse=mode)
                except FormatError:
                    pass


def test_densifying_too_large_a_sparse_array_says_so(monkeypatch):
    rsp = SparseArray("row_sparse", (2**40, 4), np.ones((1, 4), np.float32), np.array([5]))

    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(np, "zeros", no_memory)
    with config.override(sparse_max_expansion=2**50):  # past the proportion check: memory itself runs out
        with pytest.raises(MXKitError, match=r"shape \(1099511627776, 4\) needs 17592186044416 bytes.*sparse='keep'"):
            rsp.todense()


def test_a_tiny_file_cannot_claim_a_huge_dense_array(tmp_path):
    # 117 bytes of file, a row_sparse array of logical shape (1, 2**28) with no stored rows:
    # densifying it would take 1 GiB
    empty = SparseArray("row_sparse", (1, 2**28), np.zeros((0, 2**28), np.float32), np.zeros((0,), np.int64))
    path = tmp_path / "tiny.params"
    save_arrays(str(path), {"w": empty})
    assert path.stat().st_size < 200
    with pytest.raises(FormatError, match=r"tiny.params: array 'w': a row_sparse array of logical shape "
                                          r"\(1, 268435456\) stores 0 bytes but its dense form needs 1073741824 "
                                          r"bytes.*sparse_max_expansion = 1024.*MXKIT_SPARSE_MAX_EXPANSION"):
        load_arrays(str(path))
    kept = load_arrays(str(path), sparse="keep")["w"]  # sparse, it costs what it stores
    assert kept.shape == (1, 2**28) and kept.data.size == 0


def test_a_sparse_array_within_proportion_densifies():
    rows = SparseArray("row_sparse", (10_000, 8), np.ones((2, 8), np.float32), np.array([3, 9000]))
    dense = loads_arrays(dumps_arrays([rows]))[0]
    expected = np.zeros((10_000, 8), np.float32)
    expected[[3, 9000]] = 1
    np.testing.assert_array_equal(dense, expected)
    with config.override(sparse_max_expansion=1):
        small = SparseArray("row_sparse", (2**22, 1), np.ones((1, 1), np.float32), np.array([0]))
        assert small.todense().shape == (2**22, 1)  # 16 MiB: far over the ratio, but under the 64 MiB floor
        large = SparseArray("row_sparse", (2**25, 1), np.ones((1, 1), np.float32), np.array([0]))
        with pytest.raises(FormatError, match="needs 134217728 bytes"):
            large.todense()


def patched(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    size = struct.calcsize("<" + fmt)
    return data[:offset] + struct.pack("<" + fmt, value) + data[offset + size:]


ONE = dumps_arrays({"w": np.arange(3, dtype=np.float32)})  # record at 24: magic, stype, ndim, dim, dev...
BAD_FILES = {
    "file magic": (patched(ONE, 0, "Q", 0x113), r"offset 0: bad file magic 0x113; expected 0x112"),
    "array count": (patched(ONE, 16, "Q", 2**40), r"offset 16: the file claims 1099511627776 arrays"),
    "record magic": (patched(ONE, 24, "I", 0xDEADBEEF), r"offset 24: array 0 starts with 0xDEADBEEF"),
    "storage type": (patched(ONE, 28, "i", 7), r"offset 28: unknown storage type 7 of array 0; expected"),
    "ndim": (patched(ONE, 32, "i", 99), r"offset 32: the ndim of the shape of array 0 is 99; expected 0\.\.32"),
    "v2 unknown ndim": (patched(ONE, 32, "i", -1), r"offset 32: .*ndim of array 0 is -1"),
    "negative dim": (patched(ONE, 36, "q", -5), r"offset 32: the shape of array 0 \(-5,\) has a negative"),
    "huge dim": (patched(ONE, 36, "q", 2**50), r"expected the data of array 0 \(shape \(1125899906842624,\)\)"),
    "zero-size but huge": (patched(patched(ONE, 32, "i", 2), 36, "q", 0)[:44] + struct.pack("<q", 2**62)
                           + ONE[44:], r"offset 32: the shape of array 0 \(0, 4611686018427387904\) is larger"),
    "device type": (patched(ONE, 44, "i", 4), r"offset 44: unknown device type 4 in array 0; expected"),
    "device id": (patched(ONE, 48, "i", -2), r"offset 48: device id -2 of array 0 is negative"),
    "dtype flag": (patched(ONE, 52, "i", 13), r"offset 52: unknown dtype flag 13 for array 0; expected"),
    "name count": (patched(ONE, 68, "Q", 3), r"offset 68: the file has 1 arrays but 3 names; expected 0 or 1"),
    "name length": (patched(ONE, 76, "Q", 2**62), r"offset 84: truncated or corrupt file: expected name 0"),
    "name utf-8": (ONE[:-1] + b"\xff", r"offset 84: name 0 is not valid UTF-8"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_corrupt_field_is_named_with_its_offset(case):
    data, message = BAD_FILES[case]
    with pytest.raises(FormatError, match=message):
        loads_arrays(data)


def test_structurally_wrong_records():
    arr = np.arange(2, dtype=np.float32)
    v3_sparse = struct.pack("<Ii", 0xF993FACA, 1)
    with pytest.raises(FormatError, match=r"offset 28: .*row_sparse in a V3"):
        loads_arrays(header(1) + v3_sparse + b"\0" * 64)
    duplicate = struct.pack("<QQ", 2, 1) + b"x" + struct.pack("<Q", 1) + b"x"
    with pytest.raises(FormatError, match="name 'x' appears twice"):
        loads_arrays(header(2) + dense_v2(arr) + dense_v2(arr) + duplicate)
    good = dumps_arrays([SparseArray("row_sparse", (4, 2), np.ones((1, 2)), np.array([3]))])
    with pytest.raises(FormatError, match=r"inconsistent sparse record array 0: .*\[0, 4\), got \[9\]"):
        loads_arrays(good.replace(struct.pack("<q", 3), struct.pack("<q", 9)))
    bad_aux = patched(good, good.index(struct.pack("<iiq", 6, 1, 1)), "i", 0)  # float32 indices
    with pytest.raises(FormatError, match="unknown dtype flag 0 for aux array 0 of array 0"):
        loads_arrays(bad_aux)


# --------------------------------------------------------------------------- bad arguments


def test_bad_things_to_save(tmp_path):
    with pytest.raises(MXKitError, match=r"cannot save a int; expected a list of arrays"):
        dumps_arrays(3)
    with pytest.raises(MXKitError, match=r"array names must be str, got 1 \(int\)"):
        dumps_arrays({1: np.ones(1)})
    with pytest.raises(MXKitError, match=r"array 1 is a list; expected a numpy array"):
        dumps_arrays([np.ones(1), [1, 2]])
    with pytest.raises(MXKitError, match=r"array 'w' is None; a none array cannot be saved"):
        dumps_arrays({"w": None})
    with pytest.raises(DTypeError, match=r"array 0 cannot be saved: unsupported dtype .*complex64.*supported"):
        dumps_arrays([np.ones(2, np.complex64)])
    with pytest.raises(DTypeError, match=r"array 'o' cannot be saved: unsupported dtype"):
        dumps_arrays({"o": np.array(["a"], dtype=object)})
    with pytest.raises(MXKitError, match=r"array name '\\udc80' cannot be written as UTF-8"):
        dumps_arrays({"\udc80": np.ones(1)})
    sparse_complex = SparseArray("row_sparse", (2,), np.ones(1, np.complex64), np.array([0]))
    with pytest.raises(DTypeError, match=r"array 0 cannot be saved: unsupported dtype .*complex64"):
        dumps_arrays([sparse_complex])
    with pytest.raises(ConfigError, match=r"version=4 cannot be written; expected 2 .* or 3"):
        dumps_arrays([np.ones(1)], version=4)
    with pytest.raises(ShapeError, match=r"0-d array needs version 3"):
        dumps_arrays([np.float32(1)], version=2)
    rsp = SparseArray("row_sparse", (2,), np.ones(1), np.array([0]))
    with pytest.raises(ShapeError, match=r"sparse array cannot be written in version 3"):
        dumps_arrays([rsp, np.float32(1)])
    with pytest.raises(MXKitError, match=r"cannot write arrays to int; expected a file name"):
        save_arrays(5, [np.ones(1)])
    with pytest.raises(DTypeError):
        save_arrays(tmp_path / "never.params", [np.ones(1, np.complex128)])
    assert not os.listdir(tmp_path)  # bad input never leaves a file behind


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(stype="coo", shape=(2,), data=np.ones(1), indices=np.array([0])), r"stype 'coo' is not"),
    (dict(stype="row_sparse", shape=(-2,), data=np.ones(0), indices=np.array([], np.int64)),
     r"shape \(-2,\): dimensions must be >= 0"),
    (dict(stype="row_sparse", shape=(3, 2), data=np.ones((2, 3)), indices=np.array([0, 1])),
     r"data shape \(2, 3\) != \(len\(indices\), \*shape\[1:\]\) = \(2, 2\)"),
    (dict(stype="row_sparse", shape=(3,), data=np.ones(2), indices=np.array([1, 1])), r"strictly increasing"),
    (dict(stype="row_sparse", shape=(3,), data=np.ones(1), indices=np.array([0.5])), r"1-d integer array"),
    (dict(stype="csr", shape=(2, 2, 2), data=np.ones(1), indices=np.array([0]), indptr=np.array([0, 1, 1])),
     r"csr needs exactly two dimensions"),
    (dict(stype="csr", shape=(2, 2), data=np.ones(1), indices=np.array([0])), r"indptr must be .* \(3,\), got None"),
    (dict(stype="csr", shape=(2, 2), data=np.ones(1), indices=np.array([0]), indptr=np.array([0, 2, 1])),
     r"indptr must rise from 0 to nnz=1, got \[0, 2, 1\]"),
    (dict(stype="csr", shape=(2, 2), data=np.ones(1), indices=np.array([2]), indptr=np.array([0, 1, 1])),
     r"column indices must lie in \[0, 2\), got \[2\]"),
    (dict(stype="csr", shape=(2, 3), data=np.ones(3), indices=np.array([2, 1, 0]), indptr=np.array([0, 2, 3])),
     r"column indices must strictly increase within each row, got \[2, 1, 0\]"),
    (dict(stype="row_sparse", shape=(2, "x"), data=np.ones(1), indices=np.array([0])),
     r"the shape of a row_sparse array must be a tuple of ints, got \(2, 'x'\)"),
])
def test_invalid_sparse_arrays(kwargs, message):
    with pytest.raises(ShapeError, match=message):
        SparseArray(**kwargs)


def test_bytes_like_sources():
    data = dumps_arrays([np.arange(3, dtype=np.int8)])
    for source in (bytearray(data), memoryview(data)):
        assert_same(loads_arrays(source)[0], np.arange(3, dtype=np.int8))


def test_bad_things_to_load(tmp_path):
    (tmp_path / "x.params").write_bytes(dumps_arrays([np.ones(1)]))
    with open(tmp_path / "x.params", encoding="latin-1") as text, \
            pytest.raises(MXKitError, match=r"x.params gave str, not bytes; open the file in binary mode"):
        load_arrays(text)
    with pytest.raises(MXKitError, match=r"cannot read arrays from int; expected a file name"):
        load_arrays(12)
    with pytest.raises(MXKitError, match=r"loads_arrays expects bytes, got str"):
        loads_arrays("not bytes")
    with pytest.raises(ConfigError, match=r"sparse='csr' is not a choice; expected one of dense, keep"):
        loads_arrays(dumps_arrays([]), sparse="csr")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_hypothesis_mutations_of_params_only_raise_format_errors(data):
    # dense, named, several dtypes, and the sparse fixture: mutate, cut, then load both ways
    source = data.draw(st.sampled_from([
        dumps_arrays({"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1, 2], np.int64)}),
        (FIXTURES / "sparse.params").read_bytes(),
    ]))
    raw = bytearray(source)
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[:data.draw(st.integers(0, len(raw)))]
    for mode in ("keep", "dense"):
        try:
            loads_arrays(bytes(raw), sparse=mode)
        except FormatError:
            pass


def test_load_names_the_file_of_a_malformed_params(tmp_path):
    path = tmp_path / "broken.params"
    path.write_bytes(dumps_arrays({"w": np.ones(3, np.float32)})[:-5])
    with pytest.raises(FormatError, match=r"broken.params: at byte offset \d+: truncated"):
        load_arrays(str(path))
