"""Gluon helpers: ``split_data``, ``split_and_load``, ``clip_global_norm``."""

from __future__ import annotations

import math
from typing import Any

from mxkit.core.errors import ShapeError


def split_data(data: Any, num_slice: int, batch_axis: int = 0, even_split: bool = True) -> list[Any]:
    """Split ``data`` into ``num_slice`` parts along ``batch_axis``.

    With ``even_split=False`` the sizes differ by at most one, the larger parts first (as
    ``numpy.array_split`` and MXNet 1.9.1 divide them).
    """
    size = data.shape[batch_axis]
    if even_split and size % num_slice != 0:
        raise ShapeError(f"data with shape {data.shape} cannot be evenly split into {num_slice} slices along axis "
                         f"{batch_axis}; use a batch size that's a multiple of {num_slice} or set even_split=False")
    if num_slice > size:
        raise ShapeError(f"too many slices ({num_slice}) for data with shape {data.shape}")
    each, extras = divmod(size, num_slice)
    bounds, start = [], 0
    for i in range(num_slice):
        end = start + each + (1 if i < extras else 0)
        bounds.append((start, end))
        start = end
    from mxkit import ndarray

    return [ndarray.slice_axis(data, axis=batch_axis, begin=b, end=e) for b, e in bounds]


def split_and_load(data: Any, ctx_list: list[Any], batch_axis: int = 0, even_split: bool = True) -> list[Any]:
    """Split ``data`` and load each part onto one context of ``ctx_list``."""
    from mxkit import ndarray

    if not isinstance(data, ndarray.NDArray):
        data = ndarray.array(data, ctx=ctx_list[0])
    if len(ctx_list) == 1:
        return [data.as_in_context(ctx_list[0])]
    slices = split_data(data, len(ctx_list), batch_axis, even_split)
    return [part.as_in_context(ctx) for part, ctx in zip(slices, ctx_list)]


def clip_global_norm(arrays: list[Any], max_norm: float, check_isfinite: bool = True) -> Any:
    """Scale ``arrays`` in place so that their joint L2 norm is at most ``max_norm``.

    Row-sparse arrays are scaled through their stored rows. Returns the norm before clipping:
    a float with ``check_isfinite`` (which waits for it, and warns when it is nan or inf),
    else a ``(1,)`` NDArray, so that nothing waits (MXNet's contract).
    """
    from mxkit import ndarray

    if not arrays:
        raise ShapeError("clip_global_norm needs at least one array")

    def values(array: Any) -> Any:
        return array.data if getattr(array, "stype", "default") == "row_sparse" else array

    ctx = arrays[0].context
    squares = [ndarray.sum(ndarray.square(values(a))).as_in_context(ctx) for a in arrays]
    total = ndarray.sqrt(ndarray.add_n(*squares) if len(squares) > 1 else squares[0])
    if check_isfinite and not math.isfinite(float(total.asscalar())):
        import warnings

        warnings.warn("nan or inf is detected; clipping results will be undefined", stacklevel=2)
    scale = ndarray.minimum(max_norm / (total + 1e-8), 1.0)
    for array in arrays:
        target = values(array)
        target *= scale.as_in_context(target.context)
    return float(total.asscalar()) if check_isfinite else total
