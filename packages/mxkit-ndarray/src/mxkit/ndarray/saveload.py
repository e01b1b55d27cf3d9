"""``mx.nd.save`` and ``mx.nd.load``: NDArrays in MXNet 1.x's binary file format.

The format itself lives in :mod:`mxkit.ndarray.serialization`; these wrappers convert
between NDArrays and the numpy arrays it reads and writes.
"""

from __future__ import annotations

from typing import Any

from mxkit.core.errors import MXKitError


def save(fname: Any, data: Any) -> None:
    """Save an NDArray, a list of NDArrays or a dict ``str -> NDArray`` to ``fname``.

    The file is byte-compatible with MXNet 1.x's ``mx.nd.save``.
    """
    from mxkit.ndarray.ndarray import NDArray
    from mxkit.ndarray.serialization import save_arrays

    if isinstance(data, NDArray):
        data = [data]
    if isinstance(data, dict):
        for key, value in data.items():
            if not isinstance(key, str) or not isinstance(value, NDArray):
                raise MXKitError(f"save takes a dict of str -> NDArray; entry {key!r} is "
                                 f"{type(key).__name__} -> {type(value).__name__}")
        converted: Any = {key: value.asnumpy() for key, value in data.items()}
    elif isinstance(data, (list, tuple)):
        for index, value in enumerate(data):
            if not isinstance(value, NDArray):
                raise MXKitError(f"save takes a list of NDArrays; item {index} is a {type(value).__name__}")
        converted = [value.asnumpy() for value in data]
    else:
        raise MXKitError(f"save takes an NDArray, a list of NDArrays or a dict str -> NDArray, got "
                         f"{type(data).__name__}")
    save_arrays(fname, converted)


def load(fname: Any, ctx: Any = None) -> Any:
    """Load a file written by ``mx.nd.save`` (here or in MXNet 1.x): a list or dict of NDArrays on cpu."""
    from mxkit.core.context import cpu
    from mxkit.ndarray.creation import array
    from mxkit.ndarray.serialization import load_arrays

    loaded = load_arrays(fname)
    target = ctx if ctx is not None else cpu(0)

    def convert(value: Any) -> Any:
        # an MXNet "none" record (an array without storage) stays None
        return None if value is None else array(value, ctx=target, dtype=value.dtype)

    if isinstance(loaded, dict):
        return {key: convert(value) for key, value in loaded.items()}
    return [convert(value) for value in loaded]


def load_frombuffer(buf: bytes) -> Any:
    """Load arrays from the bytes of a saved file."""
    return load(bytes(buf))


__all__ = ["load", "load_frombuffer", "save"]
