"""im2col and col2im written against ``xp``: the sliding windows of convolution and pooling.

``window_view`` exposes every (kernel offset, output position) pair of a padded input as a
strided view, without copying; ``im2col`` copies that view once into the column matrix
that one matrix product per group turns into a convolution. ``col2im`` is its adjoint: it
adds columns back onto the input grid with one vectorised slice-add per kernel offset
(never a Python loop over pixels), which is the data gradient of a convolution, the
forward of a deconvolution and the gradient of pooling.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

Shape = tuple[int, ...]


def pad_spatial(xp: Any, x: Any, before: Sequence[int], after: Sequence[int], value: float = 0.0) -> Any:
    """``x`` (N, C, *spatial) padded with ``value`` on the spatial axes (the input itself when no padding)."""
    if not any(before) and not any(after):
        return x
    widths = ((0, 0), (0, 0), *tuple((int(b), int(a)) for b, a in zip(before, after)))
    return xp.pad(x, widths, mode="constant", constant_values=value)


def window_view(xp: Any, padded: Any, kernel: Sequence[int], stride: Sequence[int], dilate: Sequence[int],
                out_spatial: Sequence[int]) -> Any:
    """Read-only view (N, C, *kernel, *out_spatial) of the windows of ``padded`` (N, C, *spatial)."""
    strides = padded.strides
    spatial_strides = strides[2:]
    shape = tuple(padded.shape[:2]) + tuple(kernel) + tuple(out_spatial)
    kernel_strides = [s * d for s, d in zip(spatial_strides, dilate)]
    output_strides = [s * t for s, t in zip(spatial_strides, stride)]
    view_strides = (strides[0], strides[1], *kernel_strides, *output_strides)
    return xp.lib.stride_tricks.as_strided(padded, shape=shape, strides=view_strides)


def conv_out_size(size: int, kernel: int, stride: int, dilate: int, pad_before: int, pad_after: int) -> int:
    """Output length of a convolution along one axis (floor, MXNet's rule)."""
    return (size + pad_before + pad_after - dilate * (kernel - 1) - 1) // stride + 1


def im2col(xp: Any, x: Any, groups: int, kernel: Sequence[int], stride: Sequence[int], dilate: Sequence[int],
           pad: Sequence[int]) -> tuple[Any, Shape]:
    """Column matrix (groups, C/groups * prod(kernel), N * prod(out_spatial)) of ``x``, and the output spatial shape.

    The batch is folded into the columns so that a convolution is one large matrix product
    per group (large products keep BLAS busy; one small product per sample does not).
    """
    n, channels = x.shape[:2]
    out_spatial = tuple(conv_out_size(size, k, s, d, p, p)
                        for size, k, s, d, p in zip(x.shape[2:], kernel, stride, dilate, pad))
    padded = xp.ascontiguousarray(pad_spatial(xp, x, pad, pad))
    view = window_view(xp, padded, kernel, stride, dilate, out_spatial)  # (N, C, *K, *out)
    kdim = len(kernel)
    order = (1, *range(2, 2 + kdim), 0, *range(2 + kdim, 2 + 2 * kdim))  # (C, *K, N, *out)
    columns = view.transpose(order).reshape(groups, channels // groups * _prod(kernel), n * _prod(out_spatial))
    return columns, out_spatial


def col2im(xp: Any, columns: Any, shape: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
           dilate: Sequence[int], pad: Sequence[int], out_spatial: Sequence[int]) -> Any:
    """Sum the columns back onto a grid of ``shape`` (N, C, *spatial): the adjoint of :func:`im2col`.

    ``columns`` holds C * prod(kernel) * N * prod(out_spatial) values in im2col's order
    (any shape with that many elements, e.g. (G, C/G * K, N * L)).
    """
    n, channels = int(shape[0]), int(shape[1])
    spatial = tuple(int(s) for s in shape[2:])
    blocks = columns.reshape((channels, *kernel, n, *out_spatial))
    padded_spatial = tuple(size + 2 * p for size, p in zip(spatial, pad))
    grid = xp.zeros((n, channels, *padded_spatial), dtype=columns.dtype)
    for offset in itertools.product(*(range(k) for k in kernel)):
        steps = [slice(o * d, o * d + s * (count - 1) + 1, s)
                 for o, d, s, count in zip(offset, dilate, stride, out_spatial)]
        grid[(slice(None), slice(None), *steps)] += blocks[(slice(None), *offset)].swapaxes(0, 1)
    crop = (slice(None), slice(None), *(slice(p, p + size) for p, size in zip(pad, spatial)))
    return grid[crop]


def batch_major(xp: Any, grouped: Any, n: int, out_shape: Sequence[int]) -> Any:
    """(G, X/G, N * L) products back to an (N, X, *spatial) array of ``out_shape``."""
    return grouped.reshape(-1, n, int(grouped.shape[-1]) // n).swapaxes(0, 1).reshape(out_shape)


def group_major(xp: Any, x: Any, groups: int) -> Any:
    """(N, C, *spatial) as (G, C/G, N * L): channels first, the batch folded into the columns."""
    n, channels = x.shape[:2]
    return x.reshape(n, channels, -1).swapaxes(0, 1).reshape(groups, channels // groups, -1)


def _prod(values: Sequence[int]) -> int:
    total = 1
    for v in values:
        total *= int(v)
    return total


__all__ = ["batch_major", "col2im", "conv_out_size", "group_major", "im2col", "pad_spatial", "window_view"]
