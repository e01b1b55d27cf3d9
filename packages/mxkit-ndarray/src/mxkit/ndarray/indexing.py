"""``NDArray.__getitem__`` and ``__setitem__``.

Basic indexing (ints, slices, ``...``, ``None``) gives views sharing the parent's storage
and var. Advanced indexing (an NDArray, list or numpy array of indices or a boolean mask,
alone or beside ints, slices, ``None`` and ``...``, with NumPy's rules) gives a copy.
While autograd records, basic indexing is done with the ``slice`` and ``Reshape``
operators so that it has a gradient.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mxkit.core.errors import MXKitError, ShapeError
from mxkit.ndarray.invoke import invoke_by_name, push_raw


class IndexingError(MXKitError, IndexError):
    """An index that NDArray does not support or that is out of range."""


def _is_basic(key: Any) -> bool:
    parts = key if isinstance(key, tuple) else (key,)
    return all(isinstance(p, (int, np.integer, slice)) or p is None or p is Ellipsis for p in parts) \
        and not any(isinstance(p, bool) for p in parts)


def _check_basic(array: Any, key: Any) -> None:
    parts = key if isinstance(key, tuple) else (key,)
    axis = 0
    ndim = array.ndim
    for part in parts:
        if part is Ellipsis:
            axis = ndim - sum(1 for p in parts if p is not None and p is not Ellipsis) + axis
            continue
        if part is None:
            continue
        if axis >= ndim:
            raise IndexingError(f"too many indices {key!r} for an array of shape {array.shape}")
        if isinstance(part, (int, np.integer)) and not -array.shape[axis] <= part < array.shape[axis]:
            raise IndexingError(f"index {part} is out of range for axis {axis} of size {array.shape[axis]} "
                                f"(shape {array.shape})")
        if isinstance(part, slice) and part.step == 0:
            raise IndexingError(f"slice step must not be 0 in index {key!r}")
        axis += 1


def _view_key(key: Any) -> tuple:
    """``key`` with a trailing ``...`` unless it has one, so numpy returns a view, never a scalar."""
    parts = key if isinstance(key, tuple) else (key,)
    return parts if Ellipsis in parts else (*parts, Ellipsis)


def get_item(array: Any, key: Any) -> Any:
    """``array[key]``: a view for basic indexing, a copy for integer-array indexing."""
    from mxkit.ndarray import autograd

    if _is_basic(key):
        _check_basic(array, key)
        if autograd._state.recording and array._ag is not None:
            return _recorded_basic(array, key)
        view = array._data[_view_key(key)]
        if view.ndim == 0:  # MXNet 1.x NDArrays have no 0-d results from indexing
            view = view.reshape((1,))
        return array._view(view)
    if _needs_general_gather(key):
        return _gather_positions(array, key)
    if not isinstance(key, tuple):
        return invoke_by_name("take", array, _as_index_arrays(array, key), axis=0, mode="raise")
    return invoke_by_name("gather_nd", array, _as_index_arrays(array, key))


def _needs_general_gather(key: Any) -> bool:
    """Whether an advanced index goes beyond one array (``take``) or same-shaped arrays and
    ints (``gather_nd``): slices, ``None`` or ``...`` beside arrays, arrays that broadcast,
    boolean masks."""
    from mxkit.ndarray.ndarray import NDArray

    parts = key if isinstance(key, tuple) else (key,)
    arrays = [p for p in parts if not (isinstance(p, (int, np.integer, slice)) or p is None or p is Ellipsis)]
    if len(arrays) != len(parts) - sum(isinstance(p, (int, np.integer)) for p in parts):
        return True
    shapes = set()
    for part in arrays:
        if isinstance(part, NDArray):
            if part.dtype == np.bool_:
                return True
            shapes.add(tuple(part.shape))
        else:
            host = np.asarray(part)
            if host.dtype == bool:
                return True
            shapes.add(host.shape)
    return len(shapes) > 1


def _gather_positions(array: Any, key: Any) -> Any:
    """``array[key]`` for any NumPy advanced index (MXNet 1.x follows NumPy's rules): the flat
    positions the index selects are found on the host, then ``take`` gathers them, so that
    autograd differentiates it (the gradient scatters back, adding repeated positions).

    The positions come from indexing one zero-copy broadcast ``arange`` per axis with the
    key, so the host work is proportional to the result, not to the array."""
    from mxkit.ndarray.creation import array as make_array

    index = _host_index(array, key)
    shape = tuple(array.shape)
    positions: Any = None
    stride = 1
    try:
        for axis in reversed(range(len(shape))):
            along = np.arange(shape[axis], dtype=np.int64).reshape([-1 if a == axis else 1 for a in range(len(shape))])
            term = np.broadcast_to(along, shape)[index] * stride
            positions = term if positions is None else positions + term
            stride *= shape[axis]
    except IndexError as exc:
        raise IndexingError(f"index {key!r} does not apply to an array of shape {shape}: {exc}") from None
    if positions is None:
        raise IndexingError(f"index {key!r} does not apply to a 0-d array")
    if positions.ndim == 0:  # MXNet 1.x NDArrays have no 0-d results from indexing
        positions = positions.reshape((1,))
    flat = invoke_by_name("Reshape", array, shape=(-1,))
    return invoke_by_name("take", flat, make_array(positions, ctx=array.context, dtype="int64"), axis=0)


def _as_index_arrays(array: Any, key: Any) -> Any:
    """An NDArray of indices for ``take`` (one array) or a stacked (M, ...) one for ``gather_nd``."""
    from mxkit.ndarray.creation import array as make_array
    from mxkit.ndarray.ndarray import NDArray

    def as_nd(part: Any) -> Any:
        if isinstance(part, NDArray):
            return part
        host = np.asarray(part)
        if host.dtype == bool:
            raise IndexingError(f"boolean mask indexing is not supported (index {key!r}); use "
                                f"mx.nd.where or the indices from numpy.nonzero")
        if host.dtype.kind not in "iu":
            raise IndexingError(f"index arrays must hold integers, got dtype {host.dtype} in {key!r}")
        return make_array(host, ctx=array.context, dtype="int64")

    if not isinstance(key, tuple):
        return as_nd(key)
    if any(isinstance(p, slice) or p is None or p is Ellipsis for p in key):
        raise IndexingError(f"mixing slices and index arrays in one index ({key!r}) is not supported; "
                            f"index in two steps")
    if len(key) > array.ndim:
        raise IndexingError(f"too many indices ({len(key)}) for an array of shape {array.shape}")
    parts = [as_nd(p) if not isinstance(p, (int, np.integer)) else None for p in key]
    shapes = {p.shape for p in parts if p is not None}
    if len(shapes) > 1:
        raise IndexingError(f"index arrays must have one shape, got {sorted(shapes)}")
    shape = shapes.pop() if shapes else (1,)
    from mxkit.ndarray.creation import full

    columns = [p if p is not None else full(shape, int(k), ctx=array.context, dtype="int64")
               for p, k in zip(parts, key)]
    return invoke_by_name("stack", *[c.astype("int64") for c in columns], axis=0, num_args=len(columns))


def _recorded_basic(array: Any, key: Any) -> Any:
    """Basic indexing as ``slice`` + ``Reshape`` operators, so autograd sees it."""
    parts = list(key) if isinstance(key, tuple) else [key]
    if Ellipsis in parts:
        at = parts.index(Ellipsis)
        fill = array.ndim - sum(1 for p in parts if p is not None and p is not Ellipsis)
        parts[at:at + 1] = [slice(None)] * fill
    begin, end, step, out_shape = [], [], [], []
    axis = 0
    for part in parts:
        if part is None:
            out_shape.append(1)
            continue
        size = array.shape[axis]
        if isinstance(part, slice):
            start, stop, stride = part.indices(size)
            begin.append(part.start)
            end.append(part.stop)
            step.append(part.step)
            out_shape.append(len(range(start, stop, stride)))
        else:
            index = int(part) % size
            begin.append(index)
            end.append(index + 1)
            step.append(1)
        axis += 1
    out_shape += list(array.shape[axis:])
    sliced = invoke_by_name("slice", array, begin=tuple(begin), end=tuple(end), step=tuple(step))
    return invoke_by_name("Reshape", sliced, shape=tuple(out_shape) or (1,))


def set_item(array: Any, key: Any, value: Any) -> None:
    """``array[key] = value``: pushes a write of the selected elements (ordered by the array's var).

    Raises
    ------
    AutogradError
        While recording, when ``array`` or ``value`` is part of the recorded graph: the write
        is not differentiable (MXNet refuses in-place writes there too), and going on would
        lose the gradient silently.
    """
    from mxkit.ndarray import autograd
    from mxkit.ndarray.ndarray import NDArray
    from mxkit.ndarray.transfer import copy_into

    if autograd.is_recording() and (array._ag is not None or (isinstance(value, NDArray) and value._ag is not None)):
        raise autograd.AutogradError(
            # the first sentence is MXNet's message, which ported code matches on
            "Inplace operations (+=, -=, x[:]=, etc) are not supported when recording with autograd: in-place "
            "writes (x[...] = v) where x or v is part of the recorded graph lose the gradient; build the result "
            "with operators (mx.nd.where, concat, slice) or write it outside autograd.record()")
    if _is_basic(key):
        _check_basic(array, key)
        target = array._view(array._data[_view_key(key)])
        if isinstance(value, NDArray) and not target.shape and value.size == 1:
            value = value.reshape(())  # one element into one element, as MXNet allows
        if isinstance(value, NDArray) and value.ndim > target.ndim and \
                all(n == 1 for n in value.shape[:value.ndim - target.ndim]):
            value = value.reshape(value.shape[value.ndim - target.ndim:])  # extra leading 1s go, as in MXNet
        if isinstance(value, NDArray):
            try:
                fits = np.broadcast_shapes(value.shape, target.shape) == tuple(target.shape)
            except ValueError:
                fits = False
            if not fits:
                raise ShapeError(f"cannot assign an array of shape {value.shape} to a selection of shape "
                                 f"{target.shape} (index {key!r} of an array of shape {array.shape})")
        copy_into(target, value)
        return
    index = _host_index(array, key)
    data = array._data
    if isinstance(value, NDArray):
        source = value._data

        def scatter() -> None:
            data[index] = source

        push_raw(scatter, [value], [array], array.context, "_scatter_set")
        return
    host = np.asarray(value, dtype=data.dtype)

    def scatter_host() -> None:
        data[index] = host

    push_raw(scatter_host, [], [array], array.context, "_scatter_set")


def _host_index(array: Any, key: Any) -> Any:
    """An integer-array index as numpy arrays (an NDArray index is waited for and copied)."""
    from mxkit.ndarray.ndarray import NDArray

    def host(part: Any) -> Any:
        if isinstance(part, NDArray):
            part = part.asnumpy()
        part = np.asarray(part)
        if part.dtype.kind == "f":
            part = part.astype(np.int64)
        if part.dtype.kind not in "iub":
            raise IndexingError(f"index arrays must hold integers, got dtype {part.dtype}")
        return part

    parts = key if isinstance(key, tuple) else (key,)
    converted = tuple(p if isinstance(p, slice) or p is None or p is Ellipsis or isinstance(p, (int, np.integer))
                      else host(p) for p in parts)
    index = converted if isinstance(key, tuple) else converted[0]
    # a dry run on a zero-copy view of the shape finds what numpy would refuse (an index out of
    # range, shapes that do not broadcast) now, not later inside the engine
    try:
        np.broadcast_to(np.zeros((), dtype=np.int8), tuple(array.shape))[index]
    except IndexError as exc:
        raise IndexingError(f"index {key!r} does not apply to an array of shape {tuple(array.shape)}: {exc}") \
            from None
    return index


__all__ = ["IndexingError", "get_item", "set_item"]
