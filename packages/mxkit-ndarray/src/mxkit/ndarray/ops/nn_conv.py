"""``Convolution`` and ``Deconvolution`` (1-D, 2-D and 3-D, NC* layouts), with their backward operators.

A convolution is one im2col copy of the input and one matrix product per group, with the
batch folded into the columns (``(G, F/G, C/G*K) @ (G, C/G*K, N*L)``, one stacked call), so
the products are large and a depthwise convolution is the same single call as a dense one. The data gradient and a
deconvolution's forward are the adjoint product followed by col2im.
"""

from __future__ import annotations

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.ops.nn_common import as_list, expect_shape, fmt, public, spatial_tuple, wanted
from mxkit.ndarray.ops.nn_im2col import batch_major, col2im, conv_out_size, group_major, im2col
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define

_LAYOUTS = ("NCW", "NCHW", "NCDHW", "NWC", "NHWC", "NDHWC")
_CHANNEL_FIRST = {1: "NCW", 2: "NCHW", 3: "NCDHW"}


def _common_params(workspace: int, no_bias: bool) -> list[Param]:
    return [
        Param("kernel", "shape", doc="Kernel size: (w,), (h, w) or (d, h, w)."),
        Param("stride", "shape", (), doc="Stride per spatial axis; () means 1."),
        Param("dilate", "shape", (), doc="Dilation per spatial axis; () means 1."),
        Param("pad", "shape", (), doc="Zero padding on both sides per spatial axis; () means 0."),
    ], [
        Param("num_filter", "int", doc="Number of output channels."),
        Param("num_group", "int", 1, doc="Number of groups: channels are split into this many independent parts."),
        Param("workspace", "int", workspace, doc="Ignored (MXNet's temporary-memory cap in MB)."),
        Param("no_bias", "bool", no_bias, doc="Whether to leave out the bias."),
        Param("cudnn_tune", "str", None, optional=True, choices=("fastest", "limited_workspace", "off"),
              doc="Ignored on CPU."),
        Param("cudnn_off", "bool", False, doc="Ignored on CPU."),
        Param("layout", "str", None, optional=True, choices=_LAYOUTS,
              doc="Data layout; only the channel-first layouts (NCW, NCHW, NCDHW) are supported."),
    ]


_geometry, _rest = _common_params(1024, False)
_CONV_SCHEMA = schema(_geometry + _rest)
_geometry, _rest = _common_params(512, True)
_DECONV_SCHEMA = schema([
    *_geometry,
    Param("adj", "shape", (), doc="Extra output size added on the far side of each spatial axis."),
    Param("target_shape", "shape", (), doc="Output spatial shape; when given, pad and adj are derived from it."),
    *_rest,
])


class ConvGeometry:
    """Kernel, stride, dilation and padding of one call, validated against the data shape.

    Published to kernel plugins through :mod:`mxkit.ndarray.kernels`.

    Parameters
    ----------
    op : str
        ``"Convolution"`` or ``"Deconvolution"`` (named in error messages).
    params : dict
        The operator's typed parameters.
    data_shape : tuple of int
        ``(batch, channels, *spatial)``.

    Attributes
    ----------
    kernel, stride, dilate, pad : tuple of int
        One value per spatial axis (defaults filled in).
    dilated_kernel : tuple of int
        The extent of the dilated kernel, ``dilate * (kernel - 1) + 1``.
    spatial : tuple of int
        The input's spatial sizes.
    groups, num_filter : int
        ``num_group`` and ``num_filter``.

    Raises
    ------
    ShapeError
        When the parameters do not fit each other or the data shape.
    """

    def __init__(self, op: str, params: dict, data_shape) -> None:
        kernel = tuple(params["kernel"])
        if not 1 <= len(kernel) <= 3 or any(k <= 0 for k in kernel):
            raise ShapeError(f"{op}: kernel={kernel} must have 1, 2 or 3 positive sizes")
        ndim = len(kernel)
        layout = params["layout"]
        if layout is not None and layout != _CHANNEL_FIRST[ndim]:
            raise ShapeError(f"{op}: layout={layout} is not supported with a {ndim}-D kernel; "
                             f"use layout={_CHANNEL_FIRST[ndim]} (or leave it unset)")
        if data_shape is None or len(data_shape) != ndim + 2:
            raise ShapeError(f"{op}: data shape {fmt(data_shape)} does not fit kernel={kernel}: expected "
                             f"{ndim + 2} axes (batch, channel and {ndim} spatial)")
        self.kernel = kernel
        self.stride = spatial_tuple(op, "stride", params["stride"], ndim, 1)
        self.dilate = spatial_tuple(op, "dilate", params["dilate"], ndim, 1)
        self.pad = spatial_tuple(op, "pad", params["pad"], ndim, 0)
        for name, values in (("stride", self.stride), ("dilate", self.dilate)):
            if any(v <= 0 for v in values):
                raise ShapeError(f"{op}: {name}={values} must be positive")
        if any(p < 0 for p in self.pad):
            raise ShapeError(f"{op}: pad={self.pad} must not be negative")
        num_filter, groups = params["num_filter"], params["num_group"]
        if num_filter <= 0:
            raise ShapeError(f"{op}: num_filter={num_filter} must be positive")
        if groups <= 0:
            raise ShapeError(f"{op}: num_group={groups} must be positive")
        self.groups = groups
        self.num_filter = num_filter
        self.spatial = tuple(int(d) for d in data_shape[2:])
        self.dilated_kernel = tuple(d * (k - 1) + 1 for k, d in zip(kernel, self.dilate))


def _check_channels(op: str, channels: int, geometry: ConvGeometry, data_shape) -> None:
    if channels % geometry.groups:
        raise ShapeError(f"{op}: data shape {fmt(data_shape)} has {channels} channels, not divisible by "
                         f"num_group={geometry.groups}")
    if geometry.num_filter % geometry.groups:
        raise ShapeError(f"{op}: num_filter={geometry.num_filter} is not divisible by num_group={geometry.groups}")


# ---- Convolution -----------------------------------------------------------------------------

def _conv_input_names(params: dict) -> tuple[str, ...]:
    return ("data", "weight") if params["no_bias"] else ("data", "weight", "bias")


def _conv_shape(params: dict, in_shapes: list) -> list:
    data = in_shapes[0]
    geometry = ConvGeometry("Convolution", params, data)
    channels = int(data[1])
    _check_channels("Convolution", channels, geometry, data)
    out_spatial = []
    for axis, (size, k, s, p) in enumerate(zip(geometry.spatial, geometry.dilated_kernel, geometry.stride,
                                               geometry.pad)):
        if size and size + 2 * p < k:
            raise ShapeError(f"Convolution: kernel={geometry.kernel} (dilated to {geometry.dilated_kernel}) is "
                             f"larger than the padded input along spatial axis {axis}: data shape {fmt(data)} "
                             f"with pad={geometry.pad} gives {size + 2 * p}; use a smaller kernel or more padding")
        out_spatial.append(conv_out_size(size, k, s, 1, p, p) if size else 0)
    weight_shape = (geometry.num_filter, channels // geometry.groups, *geometry.kernel)
    expect_shape("Convolution", "weight", in_shapes[1], weight_shape,
                 f"(num_filter, channels / num_group, *kernel) for data {fmt(data)}")
    if not params["no_bias"]:
        expect_shape("Convolution", "bias", in_shapes[2], (geometry.num_filter,), "(num_filter,)")
    return [(int(data[0]), geometry.num_filter, *tuple(out_spatial))]


def conv_geometry(params: dict, data) -> ConvGeometry:
    """The :class:`ConvGeometry` of a ``Convolution`` call on array ``data`` (anything with ``.shape``)."""
    return ConvGeometry("Convolution", params, data.shape)


def _conv_kernel(xp, inputs, outputs, params):
    data, weight = inputs[0], inputs[1]
    g = conv_geometry(params, data)
    columns, out_spatial = im2col(xp, data, g.groups, g.kernel, g.stride, g.dilate, g.pad)
    filters = weight.reshape(g.groups, g.num_filter // g.groups, -1)
    out = outputs[0]
    products = xp.matmul(filters, columns)  # (G, F/G, N*L)
    n = data.shape[0]
    batch_major_view = products.reshape(g.num_filter, n, -1).swapaxes(0, 1)
    if out.flags.c_contiguous:
        # one copy from the group-major product into the batch-major output, then the bias in place
        write(xp, out.reshape(n, g.num_filter, -1), batch_major_view)
    else:
        write(xp, out, batch_major_view.reshape(out.shape))
    if not params["no_bias"]:
        out += inputs[2].reshape((1, -1) + (1,) * len(out_spatial)).astype(out.dtype, copy=False)


def _conv_backward_kernel(xp, inputs, outputs, params):
    out_grad, data, weight = inputs
    g = conv_geometry(params, data)
    columns, out_spatial = im2col(xp, data, g.groups, g.kernel, g.stride, g.dilate, g.pad)
    grad = group_major(xp, out_grad, g.groups)  # (G, F/G, N*L)
    if wanted(params, 0):  # a first layer's data gradient is read by nothing
        filters = weight.reshape(g.groups, g.num_filter // g.groups, -1)
        column_grad = xp.matmul(filters.swapaxes(-1, -2), grad)  # (G, C/G*K, N*L)
        write(xp, outputs[0], col2im(xp, column_grad, data.shape, g.kernel, g.stride, g.dilate, g.pad,
                                     out_spatial))
    write(xp, outputs[1], xp.matmul(grad, columns.swapaxes(-1, -2)).reshape(weight.shape))
    if not params["no_bias"]:
        write(xp, outputs[2], grad.sum(axis=2).reshape(-1))


define(OpDef(
    name="Convolution", infer_shape=_conv_shape, kernel=_conv_kernel, params=_CONV_SCHEMA,
    num_inputs=lambda p: 2 if p["no_bias"] else 3, input_names=_conv_input_names,
    gradient=lambda F, p, i, o, g: as_list(F("_backward_Convolution", g[0], i[0], i[1], **public(p))),
    backward_ignores=frozenset({2}),
    doc="N-D convolution (1-D, 2-D, 3-D) over channel-first data, with groups and dilation.",
))
define(OpDef(
    name="_backward_Convolution", params=_CONV_SCHEMA, kernel=_conv_backward_kernel,
    infer_shape=lambda p, s: [tuple(s[1]), tuple(s[2])] + ([] if p["no_bias"] else [(p["num_filter"],)]),
    num_inputs=3, input_names=("out_grad", "data", "weight"),
    num_outputs=lambda p: 2 if p["no_bias"] else 3, output_names=_conv_input_names,
    infer_dtype=lambda p, d: [d[1], d[2]] + ([] if p["no_bias"] else [d[2]]),
    doc="Backward of Convolution: gradients of data, weight and bias.",
))

# ---- Deconvolution ---------------------------------------------------------------------------

def _deconv_pad_adj(params: dict, g: ConvGeometry) -> tuple[tuple[int, ...], tuple[int, ...]]:
    ndim = len(g.kernel)
    adj = spatial_tuple("Deconvolution", "adj", params["adj"], ndim, 0)
    target = tuple(params["target_shape"])
    if not target or all(t == 0 for t in target):
        return g.pad, adj
    target = spatial_tuple("Deconvolution", "target_shape", target, ndim, 0)
    pads, adjs = [], []
    for size, k, s, t in zip(g.spatial, g.dilated_kernel, g.stride, target):
        total = s * (size - 1) + k - t
        if total < 0:
            raise ShapeError(f"Deconvolution: target_shape={target} is larger than the largest output "
                             f"{s * (size - 1) + k} reachable from input size {size} with kernel={g.kernel}")
        pads.append((total + 1) // 2)
        adjs.append(total % 2)
    return tuple(pads), tuple(adjs)


def deconv_geometry(params: dict, data_shape) -> tuple[ConvGeometry, tuple[int, ...], tuple[int, ...]]:
    """``(geometry, adj, out_spatial)`` of a ``Deconvolution`` call: the geometry with the padding
    that ``target_shape`` implies, the extra output rows per axis, and the output's spatial sizes."""
    g = ConvGeometry("Deconvolution", params, data_shape)
    pad, adj = _deconv_pad_adj(params, g)
    g.pad = pad
    out_spatial = tuple(s * (size - 1) + k - 2 * p + a
                        for size, k, s, p, a in zip(g.spatial, g.dilated_kernel, g.stride, pad, adj))
    return g, adj, out_spatial


def _deconv_shape(params: dict, in_shapes: list) -> list:
    data = in_shapes[0]
    g, adj, out_spatial = deconv_geometry(params, data)
    channels = int(data[1])
    _check_channels("Deconvolution", channels, g, data)
    for a, s in zip(adj, g.stride):
        if a >= s:
            raise ShapeError(f"Deconvolution: adj={adj} must be smaller than stride={g.stride} on every axis")
    if any(o <= 0 for o in out_spatial):
        raise ShapeError(f"Deconvolution: data shape {fmt(data)} with kernel={g.kernel}, stride={g.stride}, "
                         f"pad={g.pad} gives a non-positive output size {out_spatial}; reduce pad")
    expect_shape("Deconvolution", "weight", in_shapes[1], (channels, g.num_filter // g.groups, *g.kernel),
                 f"(channels, num_filter / num_group, *kernel) for data {fmt(data)}")
    if not params["no_bias"]:
        expect_shape("Deconvolution", "bias", in_shapes[2], (g.num_filter,), "(num_filter,)")
    return [(int(data[0]), g.num_filter, *out_spatial)]


def _deconv_kernel(xp, inputs, outputs, params):
    data, weight = inputs[0], inputs[1]
    g, _, out_spatial = deconv_geometry(params, data.shape)
    channels = data.shape[1]
    filters = weight.reshape(g.groups, channels // g.groups, -1)  # (G, C/G, F/G*K)
    columns = xp.matmul(filters.swapaxes(-1, -2), group_major(xp, data, g.groups))  # (G, F/G*K, N*L)
    out = outputs[0]
    result = col2im(xp, columns, out.shape, g.kernel, g.stride, g.dilate, g.pad, g.spatial)
    if not params["no_bias"]:
        result = result + inputs[2].reshape((1, -1) + (1,) * len(out_spatial))
    write(xp, out, result)


def _deconv_backward_kernel(xp, inputs, outputs, params):
    out_grad, data, weight = inputs
    g, _, _ = deconv_geometry(params, data.shape)
    channels = data.shape[1]
    # adj < stride, so the im2col grid of out_grad has exactly the data's positions
    columns, _ = im2col(xp, out_grad, g.groups, g.kernel, g.stride, g.dilate, g.pad)
    filters = weight.reshape(g.groups, channels // g.groups, -1)
    write(xp, outputs[0], batch_major(xp, xp.matmul(filters, columns), data.shape[0], data.shape))
    rows = group_major(xp, data, g.groups)
    write(xp, outputs[1], xp.matmul(rows, columns.swapaxes(-1, -2)).reshape(weight.shape))
    if not params["no_bias"]:
        write(xp, outputs[2], out_grad.sum(axis=(0, *range(2, out_grad.ndim))))


define(OpDef(
    name="Deconvolution", infer_shape=_deconv_shape, kernel=_deconv_kernel, params=_DECONV_SCHEMA,
    num_inputs=lambda p: 2 if p["no_bias"] else 3, input_names=_conv_input_names,
    gradient=lambda F, p, i, o, g: as_list(F("_backward_Deconvolution", g[0], i[0], i[1], **public(p))),
    backward_ignores=frozenset({2}),
    doc="Transposed convolution (the adjoint of Convolution), 1-D, 2-D or 3-D, with groups, dilation and adj.",
))
define(OpDef(
    name="_backward_Deconvolution", params=_DECONV_SCHEMA, kernel=_deconv_backward_kernel,
    infer_shape=lambda p, s: [tuple(s[1]), tuple(s[2])] + ([] if p["no_bias"] else [(p["num_filter"],)]),
    num_inputs=3, input_names=("out_grad", "data", "weight"),
    num_outputs=lambda p: 2 if p["no_bias"] else 3, output_names=_conv_input_names,
    infer_dtype=lambda p, d: [d[1], d[2]] + ([] if p["no_bias"] else [d[2]]),
    doc="Backward of Deconvolution: gradients of data, weight and bias.",
))
