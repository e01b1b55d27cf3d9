"""Spatial transformer networks (Jaderberg et al. 2015) as MXNet has them:
``GridGenerator`` (an affine matrix or a flow field to a sampling grid), ``BilinearSampler``
(bilinear interpolation of the input at the grid, zero outside it) and
``SpatialTransformer`` (the two in one). Grids are in normalised coordinates: -1 is the
first pixel's centre and 1 the last's, channel 0 the x (column) and channel 1 the y (row)
coordinate. Each has its backward, with respect to the data and to the grid or matrix.
"""

from __future__ import annotations

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define

# ---- grids ---------------------------------------------------------------------------------


def _target_grid(np, height, width):
    """(3, H*W): the normalised x, y of every target pixel (row-major) and a row of ones."""
    xs = -1.0 + np.arange(width) * (2.0 / (width - 1)) if width > 1 else np.zeros(1)
    ys = -1.0 + np.arange(height) * (2.0 / (height - 1)) if height > 1 else np.zeros(1)
    grid_x, grid_y = np.meshgrid(xs, ys)
    return np.stack([grid_x.ravel(), grid_y.ravel(), np.ones(height * width)])


def affine_grid(np, theta, height, width):
    """(N, 2, H, W) sampling grid of the (N, 6) affine matrices."""
    grid = theta.reshape(-1, 2, 3).astype(np.float64) @ _target_grid(np, height, width)
    return grid.reshape(-1, 2, height, width)


def _affine_grid_backward(np, out_grad, height, width):
    grad = out_grad.reshape(out_grad.shape[0], 2, -1).astype(np.float64) @ _target_grid(np, height, width).T
    return grad.reshape(-1, 6)


def _warp_scale(np, height, width):
    return np.array([(width - 1) / 2.0, (height - 1) / 2.0]).reshape(1, 2, 1, 1)


def _warp_grid(np, flow):
    _, _, height, width = flow.shape
    rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    pixels = flow.astype(np.float64) + np.stack([cols, rows])[None]
    return pixels / _warp_scale(np, height, width) - 1.0


_GRID_SCHEMA = schema([
    Param("transform_type", "str", choices=("affine", "warp"), doc="affine: (N, 6) matrices; warp: (N, 2, H, W) flow."),
    Param("target_shape", "shape", (0, 0), doc="(H, W) of the grid (affine only)."),
])


def _grid_shape(params, in_shapes):
    data = tuple(in_shapes[0])
    if params["transform_type"] == "affine":
        target = tuple(params["target_shape"])
        if len(data) != 2 or data[1] != 6 or len(target) != 2 or min(target) < 1:
            raise ShapeError(f"GridGenerator: affine needs data (batch, 6) and target_shape (H, W) >= 1, got data "
                             f"{data} and target_shape {target}")
        return [(data[0], 2, *target)]
    if len(data) != 4 or data[1] != 2:
        raise ShapeError(f"GridGenerator: warp needs a flow field (batch, 2, H, W), got {data}")
    return [data]


def _host(array):
    import numpy as np

    return np.asarray(array.get() if type(array).__module__.startswith("cupy") else array)


def _grid_kernel(xp, inputs, outputs, params):
    import numpy as np

    data = _host(inputs[0])
    if params["transform_type"] == "affine":
        grid = affine_grid(np, data, *params["target_shape"])
    else:
        grid = _warp_grid(np, data)
    write(xp, outputs[0], xp.asarray(grid))


def _grid_backward_kernel(xp, inputs, outputs, params):
    import numpy as np

    out_grad = _host(inputs[0]).astype(np.float64)
    if params["transform_type"] == "affine":
        grad = _affine_grid_backward(np, out_grad, *params["target_shape"])
    else:
        grad = out_grad / _warp_scale(np, *out_grad.shape[2:])
    write(xp, outputs[0], xp.asarray(grad))


define(OpDef(
    name="GridGenerator", infer_shape=_grid_shape, kernel=_grid_kernel, params=_GRID_SCHEMA,
    gradient=lambda F, p, i, o, g: [F("_backward_GridGenerator", g[0], i[0], **p)],
    backward_ignores=frozenset({0}),
    doc="The sampling grid (batch, 2, H, W) of affine matrices (batch, 6) or of a flow field (batch, 2, H, W).",
))
define(OpDef(
    name="_backward_GridGenerator", infer_shape=lambda p, s: [tuple(s[1])], kernel=_grid_backward_kernel,
    params=_GRID_SCHEMA, num_inputs=2, input_names=("out_grad", "data"), reads_shape_only=frozenset({1}),
    infer_dtype=lambda p, d: [d[1]], doc="Backward of GridGenerator.",
))


# ---- bilinear sampling ---------------------------------------------------------------------

def _corners(np, data, grid):
    """Per corner (dy, dx): (weight, valid mask, clipped row, clipped column), each (N, Ho, Wo),
    with the source coordinates and fractions."""
    _, _, height, width = data.shape
    x = (grid[:, 0].astype(np.float64) + 1.0) * (width - 1) / 2.0
    y = (grid[:, 1].astype(np.float64) + 1.0) * (height - 1) / 2.0
    x0, y0 = np.floor(x), np.floor(y)
    fx, fy = x - x0, y - y0
    result = {}
    for dy in (0, 1):
        for dx in (0, 1):
            row, col = y0 + dy, x0 + dx
            valid = (row >= 0) & (row < height) & (col >= 0) & (col < width)
            weight = (fy if dy else 1 - fy) * (fx if dx else 1 - fx)
            result[dy, dx] = (weight, valid, np.clip(row, 0, height - 1).astype(np.int64),
                              np.clip(col, 0, width - 1).astype(np.int64))
    return result, fx, fy


def _gather(np, data, valid, row, col):
    """data at (row, col) per output position, 0 where not valid: (N, Ho, Wo, C)."""
    batch = np.arange(data.shape[0]).reshape(-1, 1, 1)
    values = data.transpose(0, 2, 3, 1)[batch, row, col]
    return values * valid[..., None]


def bilinear_sample(np, data, grid):
    corners, _, _ = _corners(np, data, grid)
    out = 0.0
    for weight, valid, row, col in corners.values():
        out = out + weight[..., None] * _gather(np, data.astype(np.float64), valid, row, col)
    return out.transpose(0, 3, 1, 2)


def bilinear_sample_backward(np, out_grad, data, grid):
    """(data gradient, grid gradient) of :func:`bilinear_sample`."""
    data64 = data.astype(np.float64)
    og = out_grad.astype(np.float64).transpose(0, 2, 3, 1)  # (N, Ho, Wo, C)
    corners, fx, fy = _corners(np, data, grid)
    grad_data = np.zeros(data.shape[:1] + data.shape[2:] + data.shape[1:2])  # (N, H, W, C)
    batch = np.broadcast_to(np.arange(data.shape[0]).reshape(-1, 1, 1), fx.shape)
    value = {}
    for key, (weight, valid, row, col) in corners.items():
        np.add.at(grad_data, (batch, row, col), og * (weight * valid)[..., None])
        value[key] = (_gather(np, data64, valid, row, col) * og).sum(-1)
    d_x = (1 - fy) * (value[0, 1] - value[0, 0]) + fy * (value[1, 1] - value[1, 0])
    d_y = (1 - fx) * (value[1, 0] - value[0, 0]) + fx * (value[1, 1] - value[0, 1])
    height, width = data.shape[2:]
    grad_grid = np.stack([d_x * (width - 1) / 2.0, d_y * (height - 1) / 2.0], axis=1)
    return grad_data.transpose(0, 3, 1, 2), grad_grid


_SAMPLER_SCHEMA = schema([Param("cudnn_off", "bool", None, optional=True, doc="Ignored on CPU.")])


def _sampler_shape(params, in_shapes):
    data, grid = tuple(in_shapes[0]), tuple(in_shapes[1])
    if len(data) != 4 or len(grid) != 4 or grid[1] != 2 or grid[0] != data[0]:
        raise ShapeError(f"BilinearSampler: data must be (batch, C, H, W) and grid (batch, 2, Ho, Wo), got {data} "
                         f"and {grid}")
    return [(data[0], data[1], grid[2], grid[3])]


def _sampler_kernel(xp, inputs, outputs, params):
    import numpy as np

    write(xp, outputs[0], xp.asarray(bilinear_sample(np, _host(inputs[0]), _host(inputs[1]))))


def _sampler_backward_kernel(xp, inputs, outputs, params):
    import numpy as np

    grad_data, grad_grid = bilinear_sample_backward(np, *(_host(a) for a in inputs))
    write(xp, outputs[0], xp.asarray(grad_data))
    write(xp, outputs[1], xp.asarray(grad_grid))


define(OpDef(
    name="BilinearSampler", infer_shape=_sampler_shape, kernel=_sampler_kernel, params=_SAMPLER_SCHEMA,
    num_inputs=2, input_names=("data", "grid"),
    gradient=lambda F, p, i, o, g: list(F("_backward_BilinearSampler", g[0], i[0], i[1], **p)),
    doc="data sampled bilinearly at the grid's normalised (x, y) positions; zero outside the input.",
))
define(OpDef(
    name="_backward_BilinearSampler", infer_shape=lambda p, s: [tuple(s[1]), tuple(s[2])],
    kernel=_sampler_backward_kernel, params=_SAMPLER_SCHEMA, num_inputs=3, input_names=("out_grad", "data", "grid"),
    num_outputs=2, output_names=("data_grad", "grid_grad"), infer_dtype=lambda p, d: [d[1], d[2]],
    doc="Backward of BilinearSampler.",
))


# ---- SpatialTransformer ----------------------------------------------------------------------

_STN_SCHEMA = schema([
    Param("target_shape", "shape", (0, 0), doc="(H, W) of the output."),
    Param("transform_type", "str", "affine", choices=("affine",)),
    Param("sampler_type", "str", "bilinear", choices=("bilinear",)),
    Param("cudnn_off", "bool", None, optional=True, doc="Ignored on CPU."),
])


def _stn_shape(params, in_shapes):
    data, loc = tuple(in_shapes[0]), tuple(in_shapes[1])
    target = tuple(params["target_shape"])
    if len(data) != 4 or loc != (data[0], 6) or len(target) != 2 or min(target) < 1:
        raise ShapeError(f"SpatialTransformer: data must be (batch, C, H, W), loc (batch, 6) and target_shape "
                         f"(H, W) >= 1, got {data}, {loc} and {target}")
    return [(data[0], data[1], *target)]


def _stn_kernel(xp, inputs, outputs, params):
    import numpy as np

    grid = affine_grid(np, _host(inputs[1]), *params["target_shape"])
    write(xp, outputs[0], xp.asarray(bilinear_sample(np, _host(inputs[0]), grid)))


def _stn_backward_kernel(xp, inputs, outputs, params):
    import numpy as np

    out_grad, data, loc = (_host(a) for a in inputs)
    grid = affine_grid(np, loc, *params["target_shape"])
    grad_data, grad_grid = bilinear_sample_backward(np, out_grad, data, grid)
    write(xp, outputs[0], xp.asarray(grad_data))
    write(xp, outputs[1], xp.asarray(_affine_grid_backward(np, grad_grid, *params["target_shape"])))


define(OpDef(
    name="SpatialTransformer", infer_shape=_stn_shape, kernel=_stn_kernel, params=_STN_SCHEMA, num_inputs=2,
    input_names=("data", "loc"),
    gradient=lambda F, p, i, o, g: list(F("_backward_SpatialTransformer", g[0], i[0], i[1], **p)),
    doc="data warped by the affine matrices loc (batch, 6) onto target_shape, sampled bilinearly.",
))
define(OpDef(
    name="_backward_SpatialTransformer", infer_shape=lambda p, s: [tuple(s[1]), tuple(s[2])],
    kernel=_stn_backward_kernel, params=_STN_SCHEMA, num_inputs=3, input_names=("out_grad", "data", "loc"),
    num_outputs=2, output_names=("data_grad", "loc_grad"), infer_dtype=lambda p, d: [d[1], d[2]],
    doc="Backward of SpatialTransformer.",
))
