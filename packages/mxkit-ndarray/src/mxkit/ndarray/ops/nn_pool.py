"""``Pooling`` (max, avg, sum, lp; 1-D to 3-D) and nearest ``UpSampling``, with their backward operators.

Pooling runs one vectorised step per kernel offset over strided slices of the padded
input (``prod(kernel)`` steps, never a loop over pixels). The divisor of average pooling is
itself a sum-pooling of a 0/1 grid, which gives MXNet's two conventions for windows that
overlap the padding (``count_include_pad``) and for windows the ``full`` convention lets
reach past the padding.
"""

from __future__ import annotations

import itertools
import math

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import lowest, write
from mxkit.ndarray.ops.nn_common import as_list, fmt, public, spatial_tuple
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define

_POOL_SCHEMA = schema([
    Param("kernel", "shape", (), doc="Window size per spatial axis (ignored with global_pool)."),
    Param("pool_type", "str", "max", choices=("avg", "lp", "max", "sum"), doc="The reduction over a window."),
    Param("global_pool", "bool", False, doc="Pool over the whole spatial extent (kernel, stride, pad ignored)."),
    Param("cudnn_off", "bool", False, doc="Ignored on CPU."),
    Param("pooling_convention", "str", "valid", choices=("full", "same", "valid"),
          doc="Output size rounding: valid floors, full ceils (windows may reach past the padding)."),
    Param("stride", "shape", (), doc="Stride per spatial axis; () means 1."),
    Param("pad", "shape", (), doc="Padding on both sides per spatial axis; () means 0."),
    Param("p_value", "int", None, optional=True, doc="The p of lp pooling."),
    Param("count_include_pad", "bool", None, optional=True,
          doc="Whether average pooling divides by the full window including padding (None means True)."),
    Param("layout", "str", None, optional=True, choices=("NCW", "NCHW", "NCDHW", "NWC", "NHWC", "NDHWC"),
          doc="Data layout; only channel-first layouts are supported."),
])
_CHANNEL_FIRST = {1: "NCW", 2: "NCHW", 3: "NCDHW"}


class PoolGeometry:
    """The windows of one pooling call: kernel, stride, padding before and after, output size.

    Published to kernel plugins through :mod:`mxkit.ndarray.kernels`. ``PoolGeometry(params,
    data_shape)`` validates the typed ``Pooling`` parameters against ``(batch, channels,
    *spatial)`` (raising :class:`ShapeError`) and has ``kernel``, ``stride``, ``pad`` (before),
    ``after`` (past the input at the end, for the ``full`` convention), ``spatial`` and
    ``out_spatial``, one value per spatial axis.
    """

    def __init__(self, params: dict, data_shape) -> None:
        if data_shape is None or not 3 <= len(data_shape) <= 5:
            raise ShapeError(f"Pooling: data shape {fmt(data_shape)} must have 3 to 5 axes "
                             f"(batch, channel and 1 to 3 spatial)")
        ndim = len(data_shape) - 2
        layout = params["layout"]
        if layout is not None and layout != _CHANNEL_FIRST[ndim]:
            raise ShapeError(f"Pooling: layout={layout} is not supported for data shape {fmt(data_shape)}; "
                             f"use {_CHANNEL_FIRST[ndim]}")
        self.spatial = tuple(int(d) for d in data_shape[2:])
        if params["global_pool"]:
            self.kernel, self.stride, self.pad = self.spatial, (1,) * ndim, (0,) * ndim
        else:
            kernel = tuple(params["kernel"])
            if len(kernel) != ndim:
                raise ShapeError(f"Pooling: kernel={kernel} must have one size per spatial axis of data shape "
                                 f"{fmt(data_shape)} ({ndim} values)")
            if any(k <= 0 for k in kernel):
                raise ShapeError(f"Pooling: kernel={kernel} must be positive")
            self.kernel = kernel
            self.stride = spatial_tuple("Pooling", "stride", params["stride"], ndim, 1)
            same = params["pooling_convention"] == "same"
            pad = tuple(params["pad"])
            if same and not any(pad):
                pad = ()  # MXNet only checks that 'same' gets no padding: (0, 0, 0) serves any kernel
            self.pad = spatial_tuple("Pooling", "pad", pad, ndim, 0)
            if any(s <= 0 for s in self.stride) or any(p < 0 for p in self.pad):
                raise ShapeError(f"Pooling: stride={self.stride} must be positive and pad={self.pad} "
                                 f"not negative")
        full = params["pooling_convention"] == "full" and not params["global_pool"]
        if params["pooling_convention"] == "same" and not params["global_pool"]:
            # TensorFlow's SAME: ceil(size / stride) outputs, the padding the windows need split
            # before/after (the larger half after); explicit padding does not combine with it
            if any(self.pad):
                raise ShapeError(f"Pooling: pooling_convention='same' computes its own padding; got pad={self.pad}")
            totals = [max((math.ceil(size / s) - 1) * s + k - size, 0)
                      for size, k, s in zip(self.spatial, self.kernel, self.stride)]
            self.pad = tuple(t // 2 for t in totals)
            self.out_spatial = tuple(math.ceil(size / s) for size, s in zip(self.spatial, self.stride))
            self.after = tuple(t - t // 2 for t in totals)
            return
        out = []
        for axis, (size, k, s, p) in enumerate(zip(self.spatial, self.kernel, self.stride, self.pad)):
            if size + 2 * p < k:
                raise ShapeError(f"Pooling: kernel={self.kernel} is larger than the padded input along "
                                 f"spatial axis {axis}: data shape {fmt(data_shape)} with pad={self.pad} "
                                 f"gives {size + 2 * p}; use a smaller kernel or more padding")
            span = size + 2 * p - k
            out.append(1 + (math.ceil(span / s) if full else span // s))
        self.out_spatial = tuple(out)
        # how far the last window reaches past the input, beyond the padding before it
        self.after = tuple(max((o - 1) * s + k - size - p, 0)
                           for o, s, k, size, p in zip(self.out_spatial, self.stride, self.kernel, self.spatial,
                                                       self.pad))

    def offsets(self):
        return itertools.product(*(range(k) for k in self.kernel))

    def window(self, offset):
        """The (N, C, *out) slice of the padded grid that kernel offset ``offset`` reads."""
        steps = [slice(o, o + s * (count - 1) + 1, s)
                 for o, s, count in zip(offset, self.stride, self.out_spatial)]
        return (slice(None), slice(None), *steps)

    def padded(self, xp, x, value):
        if not any(self.pad) and not any(self.after):
            return x
        widths = ((0, 0), (0, 0), *tuple((p, a) for p, a in zip(self.pad, self.after)))
        return xp.pad(x, widths, mode="constant", constant_values=value)

    def crop(self):
        return (slice(None), slice(None), *tuple(slice(p, p + size) for p, size in zip(self.pad, self.spatial)))


def _pool_shape(params: dict, in_shapes: list) -> list:
    data = in_shapes[0]
    geometry = PoolGeometry(params, data)
    if params["pool_type"] == "lp" and not params["p_value"]:
        raise ShapeError(f"Pooling: pool_type=lp needs a positive p_value, got p_value={params['p_value']}")
    return [tuple(int(d) for d in data[:2]) + geometry.out_spatial]


def _lowest(xp, dtype):
    """The fill of max pooling: a window wholly in the padding (full convention) gives it, as in MXNet."""
    return lowest(xp, dtype)


def _window_counts(xp, g: PoolGeometry, include_pad: bool, dtype):
    """How many cells each window averages over (MXNet's rule for padding and overhanging windows)."""
    ones = xp.ones((1, 1, *g.spatial), dtype=dtype)
    # with count_include_pad the padding counts but the overhang of the full convention does not
    padded = g.padded(xp, ones, 0.0)
    if include_pad:
        inside = tuple(slice(0, size + 2 * p) for size, p in zip(g.spatial, g.pad))
        padded = padded.copy()
        padded[(slice(None), slice(None), *inside)] = 1
    counts = xp.zeros((1, 1, *g.out_spatial), dtype=dtype)
    for offset in g.offsets():
        counts += padded[g.window(offset)]
    return xp.maximum(counts, 1)


def _pool_kernel(xp, inputs, outputs, params):
    data = inputs[0]
    g = PoolGeometry(params, data.shape)
    pool_type = params["pool_type"]
    padded = g.padded(xp, data, _lowest(xp, data.dtype) if pool_type == "max" else 0)
    if pool_type == "lp":
        padded = xp.abs(padded) ** params["p_value"]
    result = None
    for offset in g.offsets():
        window = padded[g.window(offset)]
        if result is None:
            result = window.copy()
        elif pool_type == "max":
            xp.maximum(result, window, out=result)
        else:
            result += window
    if pool_type == "avg":
        include_pad = params["count_include_pad"] is not False
        result = result / _window_counts(xp, g, include_pad, result.dtype)
    elif pool_type == "lp":
        result = result ** (1.0 / params["p_value"])
    write(xp, outputs[0], result)


def _pool_backward_kernel(xp, inputs, outputs, params):
    out_grad, data, output = inputs
    g = PoolGeometry(params, data.shape)
    pool_type = params["pool_type"]
    grid_shape = tuple(data.shape[:2]) + tuple(s + p + a for s, p, a in zip(g.spatial, g.pad, g.after))
    grid = xp.zeros(grid_shape, dtype=out_grad.dtype)
    if pool_type == "max":
        padded = g.padded(xp, data, _lowest(xp, data.dtype))
        unclaimed = xp.ones(output.shape, dtype=bool)
        for offset in g.offsets():
            # the first maximal cell of a window (row-major order) takes its gradient, as in MXNet
            hit = (padded[g.window(offset)] == output) & unclaimed
            grid[g.window(offset)] += xp.where(hit, out_grad, 0)
            unclaimed &= ~hit
    else:
        share = out_grad
        if pool_type == "avg":
            share = out_grad / _window_counts(xp, g, params["count_include_pad"] is not False, out_grad.dtype)
        elif pool_type == "lp":
            p = params["p_value"]
            padded = g.padded(xp, data, 0)
            safe = xp.where(output == 0, 1, output)
            share = xp.where(output == 0, 0, out_grad / safe ** (p - 1))
            for offset in g.offsets():
                window = padded[g.window(offset)]
                grid[g.window(offset)] += share * window * xp.abs(window) ** (p - 2)
            write(xp, outputs[0], grid[g.crop()])
            return
        for offset in g.offsets():
            grid[g.window(offset)] += share
    write(xp, outputs[0], grid[g.crop()])


define(OpDef(
    name="Pooling", infer_shape=_pool_shape, kernel=_pool_kernel, params=_POOL_SCHEMA,
    gradient=lambda F, p, i, o, g: [F("_backward_Pooling", g[0], i[0], o[0], **public(p))],
    doc="Max, average, sum or lp pooling over 1-D to 3-D windows of channel-first data.",
))
define(OpDef(
    name="_backward_Pooling", params=_POOL_SCHEMA, kernel=_pool_backward_kernel,
    infer_shape=lambda p, s: [tuple(s[1])], num_inputs=3, input_names=("out_grad", "data", "output"),
    infer_dtype=lambda p, d: [d[1]],
    doc="Backward of Pooling: the window gradients added back onto the input.",
))

# ---- UpSampling ------------------------------------------------------------------------------

_UPSAMPLING_SCHEMA = schema([
    Param("scale", "int", doc="Up-sampling factor of the first input."),
    Param("num_filter", "int", 0, doc="Bilinear up-sampling: the output channels (the data's channels)."),
    Param("sample_type", "str", choices=("nearest", "bilinear"),
          doc="nearest (neighbour), or bilinear: a grouped Deconvolution with a given weight (MXNet's)."),
    Param("multi_input_mode", "str", "concat", choices=("concat", "sum"),
          doc="How several inputs, each scaled to the first one's output size, are combined."),
    Param("num_args", "int", doc="Number of inputs."),
    Param("workspace", "int", 512, doc="Ignored."),
])


def _upsampling_factors(params: dict, in_shapes: list) -> tuple[tuple[int, int], list[int]]:
    scale = params["scale"]
    if scale <= 0:
        raise ShapeError(f"UpSampling: scale={scale} must be positive")
    first = in_shapes[0]
    if first is None or len(first) != 4:
        raise ShapeError(f"UpSampling: data shape {fmt(first)} must be (N, C, H, W)")
    out_hw = (int(first[2]) * scale, int(first[3]) * scale)
    factors = []
    for shape in in_shapes:
        if len(shape) != 4 or shape[0] != first[0] or out_hw[0] % shape[2] or out_hw[1] % shape[3] \
                or out_hw[0] // shape[2] != out_hw[1] // shape[3]:
            raise ShapeError(f"UpSampling: input shape {fmt(shape)} cannot be scaled by a whole factor to "
                             f"the output size {out_hw} given by the first input {fmt(first)} with scale={scale}")
        factors.append(out_hw[0] // int(shape[2]))
    return out_hw, factors


def bilinear_deconvolution_params(params: dict) -> dict:
    """The Deconvolution that bilinear UpSampling is in MXNet: kernel 2s - s % 2, stride s, pad
    ceil((s - 1) / 2), one group per filter, no bias (its weight is an input, usually filled by
    ``mx.init.Bilinear``)."""
    from mxkit.ndarray.registry import get_op

    scale = params["scale"]
    if scale <= 0 or params["num_filter"] <= 0:
        raise ShapeError(f"UpSampling: sample_type='bilinear' needs a positive scale and num_filter (the "
                         f"channels), got scale={scale}, num_filter={params['num_filter']}")
    kernel = 2 * scale - scale % 2
    pad = math.ceil((scale - 1) / 2)
    return get_op("Deconvolution").parse_params({
        "kernel": (kernel, kernel), "stride": (scale, scale), "pad": (pad, pad), "num_filter": params["num_filter"],
        "num_group": params["num_filter"], "no_bias": True})


def _bilinear(params: dict) -> bool:
    return params["sample_type"] == "bilinear"


def _upsampling_shape(params: dict, in_shapes: list) -> list:
    if _bilinear(params):
        from mxkit.ndarray.registry import get_op

        data = in_shapes[0]
        if data is None or len(data) != 4:
            raise ShapeError(f"UpSampling: data shape {fmt(data)} must be (N, C, H, W)")
        return get_op("Deconvolution").infer_shape(bilinear_deconvolution_params(params), list(in_shapes[:2]))
    out_hw, _ = _upsampling_factors(params, in_shapes)
    first = in_shapes[0]
    if params["multi_input_mode"] == "sum":
        for shape in in_shapes:
            if shape[1] != first[1]:
                raise ShapeError(f"UpSampling: multi_input_mode=sum needs equal channel counts, got "
                                 f"{', '.join(fmt(s) for s in in_shapes)}")
        channels = int(first[1])
    else:
        channels = sum(int(s[1]) for s in in_shapes)
    return [(int(first[0]), channels, *out_hw)]


def _nearest(xp, x, factor: int):
    return xp.repeat(xp.repeat(x, factor, axis=2), factor, axis=3)


def _upsampling_kernel(xp, inputs, outputs, params):
    if _bilinear(params):
        from mxkit.ndarray.registry import get_op

        get_op("Deconvolution").kernel(xp, inputs, outputs, bilinear_deconvolution_params(params))
        return
    _, factors = _upsampling_factors(params, [x.shape for x in inputs])
    scaled = [_nearest(xp, x, f) for x, f in zip(inputs, factors)]
    if params["multi_input_mode"] == "sum":
        result = scaled[0]
        for extra in scaled[1:]:
            result = result + extra
        write(xp, outputs[0], result)
    else:
        write(xp, outputs[0], xp.concatenate(scaled, axis=1))


def _upsampling_backward_kernel(xp, inputs, outputs, params):
    out_grad, shapes_from = inputs[0], inputs[1:]
    _, factors = _upsampling_factors(params, [x.shape for x in shapes_from])
    start = 0
    for out, f in zip(outputs, factors):
        n, c, h, w = out.shape
        part = out_grad if params["multi_input_mode"] == "sum" else out_grad[:, start:start + c]
        start += c
        write(xp, out, part.reshape(n, c, h, f, w, f).sum(axis=(3, 5)))


def _upsampling_gradient(F, params, inputs, outputs, out_grads):
    if _bilinear(params):
        return as_list(F("_backward_Deconvolution", out_grads[0], inputs[0], inputs[1],
                         **public(bilinear_deconvolution_params(params))))
    return as_list(F("_backward_UpSampling", out_grads[0], *inputs, **public(params)))


define(OpDef(
    name="UpSampling", infer_shape=_upsampling_shape, kernel=_upsampling_kernel, params=_UPSAMPLING_SCHEMA,
    num_inputs=lambda p: 2 if _bilinear(p) else p["num_args"],
    input_names=lambda p: ("data", "weight") if _bilinear(p) else tuple(f"arg{i}" for i in range(p["num_args"])),
    gradient=_upsampling_gradient,  # nearest reads only shapes, bilinear the data and weight values
    doc="Up-sampling of (N, C, H, W) inputs by an integer factor: nearest neighbour (several inputs "
        "concatenated or summed), or bilinear through a grouped Deconvolution with a given weight.",
))
define(OpDef(
    name="_backward_UpSampling", params=_UPSAMPLING_SCHEMA, kernel=_upsampling_backward_kernel,
    infer_shape=lambda p, s: [tuple(x) for x in s[1:]], num_inputs=lambda p: p["num_args"] + 1,
    num_outputs=lambda p: p["num_args"], infer_dtype=lambda p, d: [d[0]] * p["num_args"],
    doc="Backward of UpSampling: block sums of the gradient (the inputs give only shapes).",
))
