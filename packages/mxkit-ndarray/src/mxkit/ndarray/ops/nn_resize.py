"""Spatial resizing of NCHW images: ``_contrib_AdaptiveAvgPooling2D`` and ``_contrib_BilinearResize2D``.

Both are separable: each output value is a weighted sum over rows times a weighted sum over
columns, so an operator is two small matrices, ``rows`` (out_height x height) and
``cols`` (out_width x width), and its forward is ``rows @ x @ cols.T`` over every image.
The backward is the transpose, ``rows.T @ dy @ cols``, which is exactly the scatter of
MXNet's kernels without a scatter (and serves numpy and CuPy alike).

- AdaptiveAvgPooling2D averages, for output index ``i`` of ``n`` over an input of ``size``,
  the input range ``[floor(i * size / n), ceil((i + 1) * size / n))`` (MXNet's and
  PyTorch's windows, which overlap when ``size`` is not a multiple of ``n``).
- BilinearResize2D interpolates linearly between the two nearest input rows (columns); with
  ``align_corners`` the corner pixels' centres line up (source ``i * (size - 1) / (n - 1)``),
  without it the pixel areas do (source ``(i + 0.5) * size / n - 0.5``, clamped at 0), as
  in MXNet 1.9.1's ``bilinear_resize-inl.h``.
"""

from __future__ import annotations

import numpy as np
from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.ops.nn_common import fmt, public
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define

_ADAPTIVE = "_contrib_AdaptiveAvgPooling2D"
_BILINEAR = "_contrib_BilinearResize2D"


def _image_shape(op: str, data) -> tuple[int, int, int, int]:
    if data is None or len(data) != 4:
        raise ShapeError(f"{op}: data shape {fmt(data)} must have 4 axes (batch, channel, height, width)")
    return tuple(int(d) for d in data)  # type: ignore[return-value]


# ---- the interpolation matrices ----------------------------------------------------------------

def adaptive_average_matrix(size: int, out: int) -> np.ndarray:
    """``(out, size)`` matrix whose row ``i`` averages MXNet's adaptive window ``i``."""
    matrix = np.zeros((out, size))
    for i in range(out):
        start, end = (i * size) // out, -((-(i + 1) * size) // out)
        matrix[i, start:end] = 1.0 / (end - start)
    return matrix


def bilinear_matrix(size: int, out: int, align_corners: bool) -> np.ndarray:
    """``(out, size)`` matrix of MXNet's linear interpolation weights along one axis."""
    matrix = np.zeros((out, size))
    for i in range(out):
        if align_corners:
            source = i * (size - 1) / (out - 1) if out > 1 else 0.0
        else:
            source = max((i + 0.5) * size / out - 0.5, 0.0)
        low = min(int(source), size - 1)
        high = low + 1 if low < size - 1 else low
        weight = source - low
        matrix[i, low] += 1.0 - weight
        matrix[i, high] += weight
    return matrix


# ---- AdaptiveAvgPooling2D ----------------------------------------------------------------------

_ADAPTIVE_SCHEMA = schema([
    Param("output_size", "shape", (), doc="Output (height, width), one int for both, or empty for 1x1."),
])


def _adaptive_out_size(params: dict) -> tuple[int, int]:
    size = tuple(int(s) for s in params["output_size"])
    if len(size) == 0:
        size = (1, 1)
    elif len(size) == 1:
        size = (size[0], size[0])
    if len(size) != 2 or min(size) < 1:
        raise ShapeError(f"{_ADAPTIVE}: output_size={params['output_size']} must be one or two positive ints "
                         "(height, width)")
    return size  # type: ignore[return-value]


def _adaptive_shape(params: dict, in_shapes: list) -> list:
    batch, channels, _, _ = _image_shape(_ADAPTIVE, in_shapes[0])
    return [(batch, channels, *_adaptive_out_size(params))]


def _adaptive_matrices(xp, params: dict, shape, dtype):
    out_h, out_w = _adaptive_out_size(params)
    return (xp.asarray(adaptive_average_matrix(shape[2], out_h), dtype=dtype),
            xp.asarray(adaptive_average_matrix(shape[3], out_w), dtype=dtype))


def _adaptive_kernel(xp, inputs, outputs, params):
    x = inputs[0]
    rows, cols = _adaptive_matrices(xp, params, x.shape, x.dtype)
    write(xp, outputs[0], rows @ x @ cols.T)


def _adaptive_backward_kernel(xp, inputs, outputs, params):
    out_grad, x = inputs
    rows, cols = _adaptive_matrices(xp, params, x.shape, out_grad.dtype)
    write(xp, outputs[0], rows.T @ out_grad @ cols)


define(OpDef(
    name=_ADAPTIVE, infer_shape=_adaptive_shape, kernel=_adaptive_kernel, params=_ADAPTIVE_SCHEMA,
    gradient=lambda F, params, inputs, outputs, out_grads: [
        F(f"_backward{_ADAPTIVE}", out_grads[0], inputs[0], **public(params))],
    aliases=("AdaptiveAvgPooling2D",),
    doc="Average pooling to a fixed output size with MXNet's adaptive windows (NCHW).",
))
define(OpDef(
    name=f"_backward{_ADAPTIVE}", params=_ADAPTIVE_SCHEMA, kernel=_adaptive_backward_kernel, num_inputs=2,
    input_names=("head_grad", "data"), infer_shape=lambda p, s: [tuple(s[1])],
    infer_dtype=lambda p, d: [d[0]], doc="Backward of AdaptiveAvgPooling2D.",
))

# ---- BilinearResize2D --------------------------------------------------------------------------

_MODES = ("size", "odd_scale", "like", "to_even_down", "to_even_up", "to_odd_down", "to_odd_up")
_BILINEAR_SCHEMA = schema([
    Param("height", "int", 1, doc="Output height (mode 'size' without scale_height)."),
    Param("width", "int", 1, doc="Output width (mode 'size' without scale_width)."),
    Param("scale_height", "float", None, optional=True, doc="Height factor (modes 'size' and 'odd_scale')."),
    Param("scale_width", "float", None, optional=True, doc="Width factor (modes 'size' and 'odd_scale')."),
    Param("mode", "str", "size", choices=_MODES, doc="How the output size is chosen (MXNet's modes)."),
    Param("align_corners", "bool", True, doc="Align the corner pixels' centres rather than the pixel areas."),
])


def _bilinear_inputs(params: dict) -> int:
    return 2 if params["mode"] == "like" else 1


def _scaled(op: str, params: dict, name: str) -> float:
    value = params[name]
    if value is None:
        raise ShapeError(f"{op}: mode={params['mode']!r} needs {name} (a positive factor)")
    return float(value)


def _resized(size: int, mode: str) -> int:
    even = size % 2 == 0
    return {"to_even_down": size if even else size - 1, "to_even_up": size if even else size + 1,
            "to_odd_down": size - 1 if even else size, "to_odd_up": size + 1 if even else size}[mode]


def _bilinear_out_size(params: dict, data, like) -> tuple[int, int]:
    height, width = int(data[2]), int(data[3])
    mode = params["mode"]
    if mode == "size":
        new_h = int(params["scale_height"] * height) if params["scale_height"] is not None else params["height"]
        new_w = int(params["scale_width"] * width) if params["scale_width"] is not None else params["width"]
    elif mode == "odd_scale":
        scale_h, scale_w = _scaled(_BILINEAR, params, "scale_height"), _scaled(_BILINEAR, params, "scale_width")
        new_h = int(height * scale_h) if height % 2 == 0 else int((height - 1) * scale_h) + 1
        new_w = int(width * scale_w) if width % 2 == 0 else int((width - 1) * scale_w) + 1
    elif mode == "like":
        if like is None or len(like) < 2:
            raise ShapeError(f"{_BILINEAR}: mode='like' needs a second input whose last two axes give the size, "
                             f"got {fmt(like)}")
        new_h, new_w = int(like[-2]), int(like[-1])
    else:
        new_h, new_w = _resized(height, mode), _resized(width, mode)
    if new_h < 1 or new_w < 1:
        raise ShapeError(f"{_BILINEAR}: the output size ({new_h}, {new_w}) from mode={mode!r} and data "
                         f"{fmt(data)} must be positive")
    return new_h, new_w


def _bilinear_shape(params: dict, in_shapes: list) -> list:
    batch, channels, _, _ = _image_shape(_BILINEAR, in_shapes[0])
    like = in_shapes[1] if len(in_shapes) > 1 else None
    out = [(batch, channels, *_bilinear_out_size(params, in_shapes[0], like))]
    return out


def _bilinear_matrices(xp, params: dict, shape, out_shape, dtype):
    corners = params["align_corners"]
    return (xp.asarray(bilinear_matrix(shape[2], out_shape[2], corners), dtype=dtype),
            xp.asarray(bilinear_matrix(shape[3], out_shape[3], corners), dtype=dtype))


def _bilinear_kernel(xp, inputs, outputs, params):
    x = inputs[0]
    rows, cols = _bilinear_matrices(xp, params, x.shape, outputs[0].shape, x.dtype)
    write(xp, outputs[0], rows @ x @ cols.T)


def _bilinear_backward_kernel(xp, inputs, outputs, params):
    out_grad, x = inputs[0], inputs[1]
    rows, cols = _bilinear_matrices(xp, params, x.shape, out_grad.shape, out_grad.dtype)
    write(xp, outputs[0], rows.T @ out_grad @ cols)
    if len(outputs) > 1:  # 'like' only lends its size
        outputs[1][...] = 0


def _bilinear_gradient(F, params, inputs, outputs, out_grads):
    grads = F(f"_backward{_BILINEAR}", out_grads[0], *inputs, **public(params))
    # one output is returned bare (a graph entry may itself be a tuple), two as a list
    return list(grads) if len(inputs) == 2 else [grads]


define(OpDef(
    name=_BILINEAR, infer_shape=_bilinear_shape, kernel=_bilinear_kernel, params=_BILINEAR_SCHEMA,
    num_inputs=_bilinear_inputs, input_names=lambda p: ("data", "like")[:_bilinear_inputs(p)],
    gradient=_bilinear_gradient, aliases=("BilinearResize2D",),
    doc="Bilinear resizing of NCHW images to a size given by MXNet's modes.",
))
define(OpDef(
    name=f"_backward{_BILINEAR}", params=_BILINEAR_SCHEMA, kernel=_bilinear_backward_kernel,
    num_inputs=lambda p: 1 + _bilinear_inputs(p),
    input_names=lambda p: ("head_grad", "data", "like")[:1 + _bilinear_inputs(p)],
    num_outputs=_bilinear_inputs, output_names=lambda p: ("data", "like")[:_bilinear_inputs(p)],
    infer_shape=lambda p, s: [tuple(shape) for shape in s[1:]],
    infer_dtype=lambda p, d: list(d[1:]), doc="Backward of BilinearResize2D.",
))

__all__ = ["adaptive_average_matrix", "bilinear_matrix"]
