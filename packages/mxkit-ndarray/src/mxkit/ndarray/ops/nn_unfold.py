"""``im2col`` and ``col2im`` as operators (MXNet's names): the sliding windows of a
convolution as columns ``(N, C * prod(kernel), L)``, and their adjoint that sums columns
back onto the image. Each is the other's gradient. Built on :mod:`.nn_im2col`."""

from __future__ import annotations

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.ops.nn_im2col import col2im, conv_out_size, im2col
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define

_WINDOW = [
    Param("kernel", "shape", doc="Window size per spatial axis."),
    Param("stride", "shape", (), doc="Step per spatial axis (1 when empty)."),
    Param("dilate", "shape", (), doc="Dilation per spatial axis (1 when empty)."),
    Param("pad", "shape", (), doc="Zero padding per spatial axis (0 when empty)."),
]
_IM2COL = schema(_WINDOW)
_COL2IM = schema([Param("output_size", "shape", doc="The spatial size of the image."), *_WINDOW])


def _window(name, params, spatial_axes):
    kernel = tuple(params["kernel"])
    if len(kernel) != spatial_axes or min(kernel, default=1) < 1:
        raise ShapeError(f"{name}: kernel={kernel} needs one positive size per spatial axis ({spatial_axes})")
    stride = tuple(params["stride"]) or (1,) * spatial_axes
    dilate = tuple(params["dilate"]) or (1,) * spatial_axes
    pad = tuple(params["pad"]) or (0,) * spatial_axes
    if not len(stride) == len(dilate) == len(pad) == spatial_axes or min(stride + dilate) < 1 or min(pad) < 0:
        raise ShapeError(f"{name}: stride {stride}, dilate {dilate} and pad {pad} need one value per spatial "
                         f"axis ({spatial_axes}), positive strides and dilations")
    return kernel, stride, dilate, pad


def _out_spatial(name, spatial, window):
    kernel, stride, dilate, pad = window
    out = tuple(conv_out_size(s, k, st, d, p, p) for s, k, st, d, p in zip(spatial, kernel, stride, dilate, pad))
    if min(out) < 1:
        raise ShapeError(f"{name}: the window {kernel} (dilate {dilate}) does not fit the padded image {spatial}")
    return out


def _count(values):
    total = 1
    for v in values:
        total *= v
    return total


def _im2col_shape(params, in_shapes):
    data = tuple(in_shapes[0])
    if len(data) < 3:
        raise ShapeError(f"im2col: data must be (N, C, *spatial), got {data}")
    window = _window("im2col", params, len(data) - 2)
    out = _out_spatial("im2col", data[2:], window)
    return [(data[0], data[1] * _count(window[0]), _count(out))]


def _col2im_shape(params, in_shapes):
    cols = tuple(in_shapes[0])
    spatial = tuple(params["output_size"])
    window = _window("col2im", params, len(spatial))
    per_channel = _count(window[0])
    out = _out_spatial("col2im", spatial, window)
    if len(cols) != 3 or cols[1] % per_channel or cols[2] != _count(out):
        raise ShapeError(f"col2im: data must be (N, C * {per_channel}, {_count(out)}) for output_size {spatial} and "
                         f"kernel {window[0]}, got {cols}")
    return [(cols[0], cols[1] // per_channel, *spatial)]


def _to_columns(xp, x, params):
    window = _window("im2col", params, x.ndim - 2)
    columns, out = im2col(xp, x, 1, *window)
    n = x.shape[0]
    return columns.reshape(-1, n, _count(out)).swapaxes(0, 1)


def _to_image(xp, columns, shape, params):
    spatial = tuple(shape[2:])
    window = _window("col2im", params, len(spatial))
    out = _out_spatial("col2im", spatial, window)
    ordered = xp.ascontiguousarray(columns.swapaxes(0, 1))  # (C * K, N, L): im2col's order
    return col2im(xp, ordered, shape, window[0], window[1], window[2], window[3], out)


define(OpDef(
    name="im2col", infer_shape=_im2col_shape, params=_IM2COL,
    kernel=lambda xp, i, o, p: write(xp, o[0], _to_columns(xp, i[0], p)),
    gradient=lambda F, p, i, o, g: [F("_backward_im2col", g[0], i[0], **p)],
    backward_ignores=frozenset({0}),
    doc="The sliding windows of data (N, C, *spatial) as columns (N, C * prod(kernel), L).",
))
define(OpDef(
    name="_backward_im2col", infer_shape=lambda p, s: [tuple(s[1])], params=_IM2COL, num_inputs=2,
    input_names=("out_grad", "data"), reads_shape_only=frozenset({1}), infer_dtype=lambda p, d: [d[1]],
    kernel=lambda xp, i, o, p: write(xp, o[0], _to_image(xp, i[0], i[1].shape, p)),
    doc="Backward of im2col: the columns' gradient summed back onto the image.",
))
define(OpDef(
    name="col2im", infer_shape=_col2im_shape, params=_COL2IM,
    kernel=lambda xp, i, o, p: write(xp, o[0], _to_image(xp, i[0], o[0].shape, p)),
    gradient=lambda F, p, i, o, g: [F("im2col", g[0], **{k: v for k, v in p.items()
                                                         if k in ("kernel", "stride", "dilate", "pad")})],
    backward_ignores=frozenset({0}),
    doc="Columns (N, C * prod(kernel), L) summed back onto an image (N, C, *output_size): im2col's adjoint.",
))
