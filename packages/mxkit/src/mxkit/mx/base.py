"""``mx.base``: the names of MXNet's ``base`` module that user code imports.

``MXNetError`` (every mxkit error is one), ``py_str``, ``string_types`` and the version.
MXNet's ctypes helpers (``check_call``, ``c_str``, ``_LIB``) have no counterpart: mxkit has
no C API (see the migration guide).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from mxkit.core.errors import MXKitError

#: MXNet code catches ``mx.base.MXNetError``; in mxkit every error is an MXKitError.
MXNetError = MXKitError

#: MXNet's alias for the string types (a tuple, for ``isinstance``)
string_types = (str,)
#: MXNet's integer types for ``isinstance`` checks (numpy integers are ``numbers.Integral`` too)
integer_types = (int,)


def py_str(value: bytes | str) -> str:
    """A Python string from the bytes a C API returned (UTF-8); a string is returned as is."""
    if isinstance(value, str):
        return value
    if not isinstance(value, (bytes, bytearray)):
        raise MXKitError(f"py_str expects bytes (UTF-8) or str, got {type(value).__name__} {value!r}")
    return bytes(value).decode("utf-8")


#: MXNet's default real type (float32)
mx_real_t = np.float32


def __getattr__(name: str) -> Any:
    # the Symbol error class lives with Symbol; importing it here would load mxkit-symbol eagerly
    if name == "NotImplementedForSymbol":
        from mxkit.symbol.symbol import NotImplementedForSymbol

        return NotImplementedForSymbol
    raise AttributeError(f"module 'mxkit.mx.base' has no attribute {name!r}")


def _as_list(obj: Any) -> list[Any]:
    """``obj`` itself if it is a list, else ``[obj]`` (a tuple too, as MXNet's ``base._as_list``)."""
    return obj if isinstance(obj, list) else [obj]


def data_dir() -> str:
    """Where datasets are looked for: ``$MXKIT_DATA_DIR``, else ``$MXNET_HOME``, else ``~/.mxnet``.

    mxkit never downloads; the directory is only a default place to read from.
    """
    return os.environ.get("MXKIT_DATA_DIR") or os.environ.get("MXNET_HOME") or os.path.join(
        os.path.expanduser("~"), ".mxnet")


def _distribution_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("mxkit")
    except metadata.PackageNotFoundError:
        return "0+unknown"  # running from a source tree that was never installed


#: the version of the mxkit distribution (``mx.__version__``)
__version__ = _distribution_version()

__all__ = ["MXNetError", "__version__", "data_dir", "integer_types", "mx_real_t",
           "py_str", "string_types"]
