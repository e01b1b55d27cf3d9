"""``Correlation`` (FlowNet, Dosovitskiy et al. 2015), as MXNet defines it: for every output
position and every displacement (dx, dy) of a (2r + 1)^2 neighbourhood (r =
max_displacement // stride2, steps of stride2), the mean over channels and a k x k patch of
``data1 * data2(shifted)`` (``is_multiply``) or ``|data1 - data2(shifted)|``. Both inputs
are zero-padded by ``pad_size``; output positions step by ``stride1`` starting
``max_displacement`` in. Output ``(N, (2r + 1)^2, top_height, top_width)``, channel
``dy_index * (2r + 1) + dx_index``.
"""

from __future__ import annotations

import math

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define

_SCHEMA = schema([
    Param("kernel_size", "int", 1, doc="Side of the compared patch (odd)."),
    Param("max_displacement", "int", 1, doc="Largest displacement compared, in pixels."),
    Param("stride1", "int", 1, doc="Step between output positions."),
    Param("stride2", "int", 1, doc="Step between compared displacements."),
    Param("pad_size", "int", 0, doc="Zero padding of both inputs."),
    Param("is_multiply", "bool", True, doc="Multiply (True) or take absolute differences (False)."),
])


def _geometry(params, shape):
    _, _channels, height, width = shape
    k, md, s1, s2, pad = (params[n] for n in ("kernel_size", "max_displacement", "stride1", "stride2", "pad_size"))
    if k < 1 or k % 2 == 0:
        raise ShapeError(f"Correlation: kernel_size={k} must be odd and positive")
    if md < 0 or s1 < 1 or s2 < 1 or pad < 0:
        raise ShapeError(f"Correlation: needs max_displacement >= 0, stride1 >= 1, stride2 >= 1, pad_size >= 0, got "
                         f"{md}, {s1}, {s2}, {pad}")
    border = md + (k - 1) // 2
    padded_h, padded_w = height + 2 * pad, width + 2 * pad
    top_h = math.ceil((padded_h - 2 * border) / s1)
    top_w = math.ceil((padded_w - 2 * border) / s1)
    if top_h < 1 or top_w < 1:
        raise ShapeError(f"Correlation: inputs of {height}x{width} padded by {pad} are too small for kernel_size={k} "
                         f"and max_displacement={md} (the output would be {top_h}x{top_w})")
    radius = md // s2
    return top_h, top_w, radius, 2 * radius + 1


def _shape(params, in_shapes):
    a, b = tuple(in_shapes[0]), tuple(in_shapes[1])
    if len(a) != 4 or a != b:
        raise ShapeError(f"Correlation: data1 and data2 must be (N, C, H, W) of one shape, got {a} and {b}")
    top_h, top_w, _, grid = _geometry(params, a)
    return [(a[0], grid * grid, top_h, top_w)]


def _padded(np, x, params, top_h, top_w):
    """x zero-padded by pad_size, with room past the end for the last output row and column."""
    pad, md, k, s1 = params["pad_size"], params["max_displacement"], params["kernel_size"], params["stride1"]
    need_h = (top_h - 1) * s1 + 2 * md + k
    need_w = (top_w - 1) * s1 + 2 * md + k
    out = np.zeros((*x.shape[:2], max(need_h, x.shape[2] + 2 * pad), max(need_w, x.shape[3] + 2 * pad)))
    out[:, :, pad:pad + x.shape[2], pad:pad + x.shape[3]] = x
    return out


def _offsets(params, top_h, top_w, radius, grid):
    import numpy as np

    rows = (np.arange(top_h) * params["stride1"] + params["max_displacement"])[:, None]
    cols = (np.arange(top_w) * params["stride1"] + params["max_displacement"])[None, :]
    for channel in range(grid * grid):
        dx = (channel % grid - radius) * params["stride2"]
        dy = (channel // grid - radius) * params["stride2"]
        for h in range(params["kernel_size"]):
            for w in range(params["kernel_size"]):
                yield channel, (rows + h, cols + w), (rows + h + dy, cols + w + dx)


def _host(array):
    import numpy as np

    return np.asarray(array.get() if type(array).__module__.startswith("cupy") else array, dtype=np.float64)


def _kernel(xp, inputs, outputs, params):
    import numpy as np

    a, b = _host(inputs[0]), _host(inputs[1])
    top_h, top_w, radius, grid = _geometry(params, a.shape)
    one, two = _padded(np, a, params, top_h, top_w), _padded(np, b, params, top_h, top_w)
    out = np.zeros((a.shape[0], grid * grid, top_h, top_w))
    for channel, first, second in _offsets(params, top_h, top_w, radius, grid):
        p1, p2 = one[:, :, first[0], first[1]], two[:, :, second[0], second[1]]
        out[:, channel] += (p1 * p2 if params["is_multiply"] else np.abs(p1 - p2)).sum(axis=1)
    write(xp, outputs[0], xp.asarray(out / (params["kernel_size"] ** 2 * a.shape[1])))


def _backward_kernel(xp, inputs, outputs, params):
    import numpy as np

    out_grad, a, b = (_host(x) for x in inputs)
    top_h, top_w, radius, grid = _geometry(params, a.shape)
    one, two = _padded(np, a, params, top_h, top_w), _padded(np, b, params, top_h, top_w)
    grad_one, grad_two = np.zeros_like(one), np.zeros_like(two)
    for channel, first, second in _offsets(params, top_h, top_w, radius, grid):
        g = out_grad[:, channel][:, None]
        p1, p2 = one[:, :, first[0], first[1]], two[:, :, second[0], second[1]]
        if params["is_multiply"]:
            d1, d2 = g * p2, g * p1
        else:
            sign = np.where(p1 >= p2, 1.0, -1.0)
            d1, d2 = g * sign, -g * sign
        # the positions of one (h, w, channel) step are distinct: plain += accumulates correctly
        grad_one[:, :, first[0], first[1]] += d1
        grad_two[:, :, second[0], second[1]] += d2
    scale = 1.0 / (params["kernel_size"] ** 2 * a.shape[1])
    pad, height, width = params["pad_size"], a.shape[2], a.shape[3]
    write(xp, outputs[0], xp.asarray(grad_one[:, :, pad:pad + height, pad:pad + width] * scale))
    write(xp, outputs[1], xp.asarray(grad_two[:, :, pad:pad + height, pad:pad + width] * scale))


define(OpDef(
    name="Correlation", infer_shape=_shape, kernel=_kernel, params=_SCHEMA, num_inputs=2,
    input_names=("data1", "data2"),
    gradient=lambda F, p, i, o, g: list(F("_backward_Correlation", g[0], i[0], i[1], **p)),
    doc="Patch correlation of two feature maps over a neighbourhood of displacements (FlowNet).",
))
define(OpDef(
    name="_backward_Correlation", infer_shape=lambda p, s: [tuple(s[1]), tuple(s[2])], kernel=_backward_kernel,
    params=_SCHEMA, num_inputs=3, input_names=("out_grad", "data1", "data2"), num_outputs=2,
    output_names=("data1_grad", "data2_grad"), infer_dtype=lambda p, d: [d[1], d[2]],
    doc="Backward of Correlation.",
))
