"""The dtype table, with MXNet's type flags (the numbers in its binary files).

Names are canonical strings (``"float32"``); numpy is imported only by
:func:`to_numpy`, so this module stays cheap to import.
"""

from __future__ import annotations

from typing import Any

from mxkit.core.errors import DTypeError

#: canonical name -> MXNet type flag (``mshadow::TypeFlag``)
DTYPE_FLAGS: dict[str, int] = {
    "float32": 0,
    "float64": 1,
    "float16": 2,
    "uint8": 3,
    "int32": 4,
    "int8": 5,
    "int64": 6,
    "bool": 7,
    "int16": 8,
    "uint16": 9,
    "uint32": 10,
    "uint64": 11,
    "bfloat16": 12,
}

FLAG_DTYPES: dict[int, str] = {flag: name for name, flag in DTYPE_FLAGS.items()}

#: bytes per element
DTYPE_SIZES: dict[str, int] = {
    "float32": 4, "float64": 8, "float16": 2, "uint8": 1, "int32": 4, "int8": 1,
    "int64": 8, "bool": 1, "int16": 2, "uint16": 2, "uint32": 4, "uint64": 8, "bfloat16": 2,
}

_ALIASES = {
    "float": "float64", "double": "float64", "half": "float16", "int": "int64",
    "long": "int64", "bool_": "bool", "f4": "float32", "f8": "float64", "f2": "float16",
    "i1": "int8", "i2": "int16", "i4": "int32", "i8": "int64", "u1": "uint8", "u2": "uint16",
    "u4": "uint32", "u8": "uint64", "b1": "bool",
}


def dtype_name(dtype: Any) -> str:
    """Canonical name of ``dtype``: a name, a numpy dtype or scalar type, or a Python type.

    Raises
    ------
    DTypeError
        If the dtype is not one mxkit supports; the message lists the supported ones.
    """
    if isinstance(dtype, str):
        key = dtype.strip().lower().lstrip("<>=|")
    elif dtype is float:
        key = "float64"
    elif dtype is int:
        key = "int64"
    elif dtype is bool:
        key = "bool"
    else:
        name = getattr(dtype, "name", None)  # numpy.dtype
        if name is None:
            name = getattr(getattr(dtype, "dtype", None), "name", None)  # numpy scalar type
        if name is None and isinstance(dtype, type):
            name = dtype.__name__
        key = str(name).lower() if name is not None else repr(dtype)
    key = _ALIASES.get(key, key)
    if key not in DTYPE_FLAGS:
        raise DTypeError(f"unsupported dtype {dtype!r}; supported: {', '.join(DTYPE_FLAGS)}")
    return key


def dtype_flag(dtype: Any) -> int:
    """MXNet's type flag of ``dtype`` (float32 0, float64 1, ..., bfloat16 12)."""
    return DTYPE_FLAGS[dtype_name(dtype)]


def dtype_from_flag(flag: int) -> str:
    """Canonical dtype name of an MXNet type flag."""
    try:
        return FLAG_DTYPES[int(flag)]
    except (KeyError, ValueError, TypeError):
        raise DTypeError(
            f"unknown MXNet dtype flag {flag!r}; known flags: "
            + ", ".join(f"{f}={n}" for f, n in FLAG_DTYPES.items())
        ) from None


def itemsize(dtype: Any) -> int:
    """Bytes per element of ``dtype``."""
    return DTYPE_SIZES[dtype_name(dtype)]


def to_numpy(dtype: Any) -> Any:
    """The numpy dtype of ``dtype`` (bfloat16 needs the ``ml_dtypes`` package)."""
    import numpy as np

    name = dtype_name(dtype)
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise DTypeError("bfloat16 arrays on CPU need the ml_dtypes package: pip install 'mxkit-ndarray[bfloat16]' "
                             "(or mxkit[bfloat16], or ml_dtypes itself)") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


__all__ = ["DTYPE_FLAGS", "DTYPE_SIZES", "FLAG_DTYPES", "dtype_flag", "dtype_from_flag", "dtype_name",
           "itemsize", "to_numpy"]
