"""``ROIPooling`` (Fast R-CNN): max pooling of each region of interest to a fixed grid.

Each ROI is ``[batch_index, x1, y1, x2, y2]`` in input-image coordinates; scaled by
``spatial_scale`` and rounded (half away from zero, C's ``round``) as MXNet 1.x does, it
covers ``round(x1 * s) .. round(x2 * s)`` inclusive. Bin ``(ph, pw)`` spans rows
``floor(ph * bin_h) .. ceil((ph + 1) * bin_h)`` from the ROI's top, clipped to the feature
map; an empty bin, or an ROI whose batch index is out of range, pools to 0. The gradient
goes to the first maximum of each bin (row-major), as MXNet's argmax does.
"""

from __future__ import annotations

import math

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops.nn_common import as_list, fmt, public
from mxkit.ndarray.params import Param, ParamError, schema
from mxkit.ndarray.registry import OpDef, define

_ROI_SCHEMA = schema([
    Param("pooled_size", "shape", doc="(height, width) of each ROI's output."),
    Param("spatial_scale", "float", doc="Feature-map size over image size (1/16 for a stride-16 network)."),
])


def _check_params(params: dict) -> tuple[int, int]:
    size = params["pooled_size"]
    if len(size) != 2 or min(size) <= 0:
        raise ParamError(f"ROIPooling: pooled_size={size} must be two positive ints (height, width)")
    if not params["spatial_scale"] > 0:
        raise ParamError(f"ROIPooling: spatial_scale={params['spatial_scale']} must be > 0 (feature-map size "
                         f"over image size, e.g. 0.0625)")
    return int(size[0]), int(size[1])


def _roi_shape(params: dict, in_shapes: list) -> list:
    pooled_h, pooled_w = _check_params(params)
    data, rois = tuple(in_shapes[0]), tuple(in_shapes[1])
    if len(data) != 4:
        raise ShapeError(f"ROIPooling: data must be 4-D (batch, channel, height, width), got {fmt(data)}")
    if len(rois) != 2 or rois[1] != 5:
        raise ShapeError(f"ROIPooling: rois must have shape (num_rois, 5) with rows [batch_index, x1, y1, x2, y2], "
                         f"got {fmt(rois)}")
    return [(rois[0], data[1], pooled_h, pooled_w)]


def _c_round(value: float) -> int:
    """C's round(): half away from zero (numpy rounds half to even)."""
    return math.floor(value + 0.5) if value >= 0 else -math.floor(-value + 0.5)


def _bins(params: dict, roi, height: int, width: int):
    """Yield ``(ph, pw, hstart, hend, wstart, wend)`` of one ROI's bins, clipped to the map.

    The arithmetic is float32, as MXNet's kernel does it: ``ceil(3 * (7 / 3))`` is 8 there.
    """
    import numpy as np

    f32 = np.float32
    pooled_h, pooled_w = _check_params(params)
    scale = f32(params["spatial_scale"])
    x1, y1, x2, y2 = (_c_round(float(f32(v) * scale)) for v in roi[1:5])
    roi_h, roi_w = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
    bin_h, bin_w = f32(roi_h) / f32(pooled_h), f32(roi_w) / f32(pooled_w)
    for ph in range(pooled_h):
        hstart = min(max(int(np.floor(f32(ph) * bin_h)) + y1, 0), height)
        hend = min(max(int(np.ceil(f32(ph + 1) * bin_h)) + y1, 0), height)
        for pw in range(pooled_w):
            wstart = min(max(int(np.floor(f32(pw) * bin_w)) + x1, 0), width)
            wend = min(max(int(np.ceil(f32(pw + 1) * bin_w)) + x1, 0), width)
            yield ph, pw, hstart, hend, wstart, wend


def _pool(xp, data, rois, params, out=None, out_grad=None, grad=None):
    """The forward (fills ``out``) or the backward (adds ``out_grad`` into ``grad`` at the argmax)."""
    import numpy as np

    batch, channels, height, width = data.shape
    host_rois = rois.get() if hasattr(rois, "get") else np.asarray(rois)
    channel_index = xp.arange(channels)
    for r, roi in enumerate(host_rois):
        b = int(roi[0])
        valid = 0 <= b < batch
        for ph, pw, hs, he, ws, we in _bins(params, roi, height, width):
            if not valid or he <= hs or we <= ws:
                if out is not None:
                    out[r, :, ph, pw] = 0
                continue
            window = data[b, :, hs:he, ws:we].reshape(channels, -1)
            if out is not None:
                out[r, :, ph, pw] = window.max(axis=1)
                continue
            flat = window.argmax(axis=1)
            rows, cols = hs + flat // (we - ws), ws + flat % (we - ws)
            xp.add.at(grad[b], (channel_index, rows, cols), out_grad[r, :, ph, pw])


def _roi_kernel(xp, inputs, outputs, params):
    _pool(xp, inputs[0], inputs[1], params, out=outputs[0])


def _roi_backward_kernel(xp, inputs, outputs, params):
    out_grad, data, rois = inputs
    outputs[0][...] = 0
    _pool(xp, data, rois, params, out_grad=out_grad, grad=outputs[0])
    outputs[1][...] = 0


define(OpDef(
    name="ROIPooling", infer_shape=_roi_shape, kernel=_roi_kernel, params=_ROI_SCHEMA,
    num_inputs=2, input_names=("data", "rois"), infer_dtype=lambda p, d: [d[0]],
    gradient=lambda F, p, i, o, g: as_list(F("_backward_ROIPooling", g[0], i[0], i[1], **public(p))),
    doc="Max-pools each region of interest [batch_index, x1, y1, x2, y2] (image coordinates, scaled by "
        "spatial_scale) to pooled_size bins (Fast R-CNN).",
))
define(OpDef(
    name="_backward_ROIPooling", params=_ROI_SCHEMA, kernel=_roi_backward_kernel,
    infer_shape=lambda p, s: [tuple(s[1]), tuple(s[2])], num_inputs=3, input_names=("out_grad", "data", "rois"),
    num_outputs=2, output_names=("data", "rois"), infer_dtype=lambda p, d: [d[1], d[2]],
    doc="Backward of ROIPooling: each bin's gradient goes to its maximum; none for the rois.",
))
