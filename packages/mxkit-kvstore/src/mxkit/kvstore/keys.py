"""Keys and values of KVStore calls: MXNet's argument forms, checked and grouped.

A call takes one key with a value (an NDArray, or a list with one NDArray per device), or
a list of keys with a list of such values. Repeated keys in one call are grouped, as
MXNet does, so ``push([3, 3], [a, b])`` is ``push(3, [a, b])``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mxkit.core.errors import KVStoreError


def key_kind(key: Any) -> type:
    """``int`` or ``str``: the kind of a valid key.

    Raises
    ------
    KVStoreError
        If ``key`` is neither an int nor a str.
    """
    if isinstance(key, str):
        return str
    if isinstance(key, int) and not isinstance(key, bool):
        return int
    try:
        import numpy as np

        if isinstance(key, np.integer):
            return int
    except ImportError:  # pragma: no cover - numpy comes with mxkit-ndarray
        pass
    raise KVStoreError(f"a KVStore key must be an int or a str, got {key!r} ({type(key).__name__})")


def normalize_key(key: Any) -> Any:
    """The key as a plain ``int`` or ``str``."""
    return int(key) if key_kind(key) is int else key


_ndarray_class: list[type] = []


def _is_array(value: Any) -> bool:
    """Whether ``value`` is an NDArray or a row-sparse array (which the store takes as values)."""
    if not _ndarray_class:
        from mxkit.ndarray import NDArray
        from mxkit.ndarray.sparse import RowSparseNDArray

        _ndarray_class.extend((NDArray, RowSparseNDArray))
    return isinstance(value, (_ndarray_class[0], _ndarray_class[1]))


def is_row_sparse(value: Any) -> bool:
    """Whether ``value`` is a row-sparse array."""
    _is_array(None)
    return isinstance(value, _ndarray_class[1])


def dense_only(pairs: list[tuple[Any, list[Any]]], what: str, store: str) -> list[tuple[Any, list[Any]]]:
    """``pairs`` unchanged when no value is row-sparse.

    Raises
    ------
    KVStoreError
        Naming the key, for a row-sparse value (the distributed stores move dense values only).
    """
    for key, arrays in pairs:
        if any(is_row_sparse(a) for a in arrays):
            raise KVStoreError(f"{what} of key {key!r}: the {store!r} store moves dense arrays only; pass "
                               f"x.tostype('default'), or use a 'local'/'device' store for row_sparse values")
    return pairs


def densified(arrays: list[Any]) -> list[Any]:
    """``arrays`` with each row-sparse one as its dense NDArray (the store keeps dense values)."""
    if not any(is_row_sparse(a) for a in arrays):
        return arrays
    return [a.tostype("default") if is_row_sparse(a) else a for a in arrays]


def _as_array_list(key: Any, value: Any, what: str) -> list[Any]:
    if isinstance(value, list) and value and all(type(v) is _ndarray_class[0] for v in value):
        return value  # the common case, checked fast
    if _is_array(value):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(_is_array(v) for v in value):
        return list(value)
    raise KVStoreError(f"{what} of key {key!r} needs an NDArray or a non-empty list of NDArrays (one per "
                       f"device), got {_describe(value)}; make arrays with mx.nd.array(...)")


def _describe(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of [{', '.join(type(v).__name__ for v in value)}]"
    return f"{type(value).__name__} {value!r}" if isinstance(value, (int, float, str)) else type(value).__name__


def group(keys: Any, values: Any, what: str) -> list[tuple[Any, list[Any]]]:
    """``[(key, [arrays...]), ...]`` of a call, repeated keys merged, in first-seen order.

    Raises
    ------
    KVStoreError
        If a key is not an int or str, the keys mix both, a value is not an NDArray (or a
        list of them), or the numbers of keys and values differ.
    """
    if isinstance(keys, (list, tuple)):
        if not keys:
            raise KVStoreError(f"{what} got an empty list of keys")
        if not isinstance(values, (list, tuple)) or len(values) != len(keys):
            count = len(values) if isinstance(values, (list, tuple)) else "one"
            raise KVStoreError(f"{what} got {len(keys)} keys and {count} values; give one value (an NDArray "
                               f"or a list of per-device NDArrays) per key")
        pairs: Sequence[tuple[Any, Any]] = list(zip(keys, values))
    else:
        pairs = [(keys, values)]
    _is_array(None)  # loads the NDArray class
    first_kind = key_kind(pairs[0][0])
    grouped: dict[Any, list[Any]] = {}
    for key, value in pairs:
        kind = type(key)
        if kind is not first_kind:  # subclasses (numpy ints, bool) take the slow, exact path
            if key_kind(key) is not first_kind:
                raise KVStoreError(f"{what} got keys of mixed types {[k for k, _ in pairs]!r}; keys must be all "
                                   f"ints or all strs")
            key = normalize_key(key)
        arrays = _as_array_list(key, value, what)
        if key in grouped:
            grouped[key] = grouped[key] + arrays  # never extend the caller's list
        else:
            grouped[key] = arrays
    return list(grouped.items())


__all__ = ["dense_only", "densified", "group", "is_row_sparse", "key_kind", "normalize_key"]
