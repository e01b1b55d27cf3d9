"""The dtype table: MXNet's type flags, names, sizes and numpy conversion."""

import pytest
from mxkit.core import dtypes
from mxkit.core.errors import DTypeError

np = pytest.importorskip("numpy")  # core itself needs no numpy; these tests compare with it


def test_dtype_flags_are_mxnets():
    assert dtypes.DTYPE_FLAGS == {
        "float32": 0, "float64": 1, "float16": 2, "uint8": 3, "int32": 4, "int8": 5, "int64": 6,
        "bool": 7, "int16": 8, "uint16": 9, "uint32": 10, "uint64": 11, "bfloat16": 12,
    }
    for name, flag in dtypes.DTYPE_FLAGS.items():
        assert dtypes.dtype_from_flag(flag) == name
        assert dtypes.dtype_flag(name) == flag


@pytest.mark.parametrize(
    ("given", "name"),
    [(np.float32, "float32"), (np.dtype("<f8"), "float64"), ("float16", "float16"), (float, "float64"),
     (int, "int64"), (bool, "bool"), (np.bool_, "bool"), ("i4", "int32"), (np.uint64, "uint64"),
     (np.zeros(1, np.int8), "int8")],
)
def test_dtype_names(given, name):
    assert dtypes.dtype_name(given) == name


def test_itemsize_and_numpy_agree():
    for name in dtypes.DTYPE_FLAGS:
        if name == "bfloat16":
            continue
        assert dtypes.itemsize(name) == dtypes.to_numpy(name).itemsize == np.dtype(name).itemsize


def test_bad_dtypes():
    with pytest.raises(DTypeError, match=r"complex64.*supported: float32"):
        dtypes.dtype_name(np.complex64)
    with pytest.raises(DTypeError, match="unknown MXNet dtype flag 13"):
        dtypes.dtype_from_flag(13)
