"""Gluon helpers: ``split_data``, ``split_and_load``, ``clip_global_norm``."""

from __future__ import annotations

import math
from typing import Any

from mxkit.core.errors import ShapeError


def split_data(data: Any, num_slice: int, batch_axis: int = 0, even_split: bool = True) -> list[Any]:
    """Split ``data`` into ``num_slice`` parts along ``batch_axis``."""
    size = data.shape[batch_axis]
    if even_split and size % num_slice != 0:
        raise ShapeError(f"data with shape {data.shape} cannot be evenly split into {num_slice} slices along axis "
                         f"{batch_axis}; use a batch size that's a multiple of {num_slice} or set even_split=False")
    if num_slice > size:
        raise ShapeError(f"too many slices ({num_slice}) for data with shape {data.shape}")
    step = size // num_slice
    bounds = [(i * step, (i + 1) * step if i < num_slice - 1 else size) for i in range(num_slice)]
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


def clip_global_norm(arrays: list[Any], max_norm: float, check_isfinite: bool = True) -> float:
    """Scale ``arrays`` in place so that their joint L2 norm is at most ``max_norm``; returns the norm."""
    total = 0.0
    for array in arrays:
        values = array.asnumpy().astype("float64")
        total += float((values * values).sum())
    norm = math.sqrt(total)
    if check_isfinite and not math.isfinite(norm):
        import warnings

        warnings.warn("nan or inf is detected; clipping results will be undefined", stacklevel=2)
    scale = max_norm / (norm + 1e-8)
    if scale < 1.0:
        for array in arrays:
            array *= scale
    return norm
