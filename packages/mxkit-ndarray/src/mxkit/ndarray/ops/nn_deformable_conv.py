"""``DeformableConvolution`` and ``ModulatedDeformableConvolution`` (2-D, NCHW): MXNet's
``_contrib_`` operators of Dai et al. (2017) and Zhu et al. (2018).

A deformable convolution samples its input at the regular grid of a convolution moved by
learned offsets: ``offset`` is ``(N, 2 * G * kh * kw, Ho, Wo)`` for ``G = num_deformable_group``
channel groups, holding for each group, kernel tap ``k = i * kw + j`` and output position the
pair (dy, dx) at channels ``2k`` and ``2k + 1`` of the group's block. A sample between pixels
is interpolated bilinearly. The modulated version multiplies each sample by ``mask``
``(N, G * kh * kw, Ho, Wo)``. The samples then meet the weights in one matrix product per
convolution group, as in ``Convolution``.

Sampling at the image's border follows MXNet's two operators: the modulated one reads a
point with -1 < y < H and -1 < x < W, a corner outside the image counting as 0; the first
version reads a point with 0 <= y < H and 0 <= x < W and clamps the far corners to the last
row and column. Gradients are the derivatives of these forwards (MXNet's own first-version
backward takes the zero-corner form in the last row's strip, where its forward clamps).
"""

from __future__ import annotations

from mxkit.core.errors import ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.ops.nn_common import expect_shape, fmt
from mxkit.ndarray.ops.nn_im2col import conv_out_size
from mxkit.ndarray.params import Param, schema
from mxkit.ndarray.registry import OpDef, define

_COMMON = [
    Param("kernel", "shape", doc="Kernel size (h, w)."),
    Param("stride", "shape", (), doc="Stride per spatial axis; () means 1."),
    Param("dilate", "shape", (), doc="Dilation per spatial axis; () means 1."),
    Param("pad", "shape", (), doc="Zero padding on both sides per spatial axis; () means 0."),
    Param("num_filter", "int", doc="Number of output channels."),
    Param("num_group", "int", 1, doc="Convolution groups."),
    Param("num_deformable_group", "int", 1, doc="Channel groups that share one set of offsets."),
    Param("workspace", "int", 1024, doc="Ignored (MXNet's temporary-memory cap in MB)."),
    Param("no_bias", "bool", False, doc="Whether to leave out the bias."),
    Param("layout", "str", None, optional=True, choices=("NCHW",), doc="Data layout: NCHW only."),
]
_SCHEMA = schema(_COMMON)
_MODULATED_SCHEMA = schema([*_COMMON, Param("im2col_step", "int", 64, doc="Ignored (MXNet's batch chunk).")])


def _host(array):
    import numpy as np

    return np.asarray(array.get() if type(array).__module__.startswith("cupy") else array)


def _input_names(modulated: bool):
    def names(params: dict) -> tuple[str, ...]:
        head = ("data", "offset", "mask", "weight") if modulated else ("data", "offset", "weight")
        return head if params["no_bias"] else (*head, "bias")

    return names


def _pair(params: dict, name: str, default: int) -> tuple[int, int]:
    value = tuple(params[name]) or (default, default)
    if len(value) != 2:
        raise ShapeError(f"DeformableConvolution: {name}={value} must have 2 entries (2-D only)")
    return int(value[0]), int(value[1])


class _Geometry:
    def __init__(self, op: str, params: dict, data: tuple) -> None:
        if len(params["kernel"]) != 2:
            raise ShapeError(f"{op}: kernel={tuple(params['kernel'])} must be (h, w): only 2-D deformable "
                             f"convolutions exist")
        if len(data) != 4:
            raise ShapeError(f"{op}: data must be (N, C, H, W), got {fmt(data)}")
        self.kh, self.kw = (int(k) for k in params["kernel"])
        self.sh, self.sw = _pair(params, "stride", 1)
        self.dh, self.dw = _pair(params, "dilate", 1)
        self.ph, self.pw = _pair(params, "pad", 0)
        self.n, self.c, self.h, self.w = (int(d) for d in data)
        self.filters, self.groups = int(params["num_filter"]), int(params["num_group"])
        self.dgroups = int(params["num_deformable_group"])
        for what, count in (("num_group", self.groups), ("num_deformable_group", self.dgroups)):
            if count < 1 or (self.c and self.c % count):
                raise ShapeError(f"{op}: {what}={count} must divide the {self.c} input channels")
        if self.filters % self.groups:
            raise ShapeError(f"{op}: num_group={self.groups} must divide num_filter={self.filters}")
        self.ho = conv_out_size(self.h, (self.kh - 1) * self.dh + 1, self.sh, 1, self.ph, self.ph) if self.h else 0
        self.wo = conv_out_size(self.w, (self.kw - 1) * self.dw + 1, self.sw, 1, self.pw, self.pw) if self.w else 0
        if self.h and self.w and (self.ho < 1 or self.wo < 1):
            raise ShapeError(f"{op}: kernel={(self.kh, self.kw)} (dilated) is larger than the padded input "
                             f"{fmt(data)} with pad={(self.ph, self.pw)}")
        self.taps = self.kh * self.kw


def _shape(modulated: bool):
    op = "ModulatedDeformableConvolution" if modulated else "DeformableConvolution"

    def infer(params: dict, in_shapes: list) -> list:
        data = tuple(in_shapes[0])
        g = _Geometry(op, params, data)
        taps = g.dgroups * g.taps
        expect_shape(op, "offset", in_shapes[1], (g.n, 2 * taps, g.ho, g.wo),
                     f"(N, 2 * num_deformable_group * kh * kw, Ho, Wo) for data {fmt(data)}")
        rest = list(in_shapes[2:])
        if modulated:
            expect_shape(op, "mask", rest.pop(0), (g.n, taps, g.ho, g.wo),
                         f"(N, num_deformable_group * kh * kw, Ho, Wo) for data {fmt(data)}")
        expect_shape(op, "weight", rest.pop(0), (g.filters, g.c // g.groups, g.kh, g.kw),
                     f"(num_filter, channels / num_group, kh, kw) for data {fmt(data)}")
        if not params["no_bias"]:
            expect_shape(op, "bias", rest.pop(0), (g.filters,), "(num_filter,)")
        return [(g.n, g.filters, g.ho, g.wo)]

    return infer


def _sample(np, g: _Geometry, data, offset, modulated: bool):
    """The bilinear samples ``(N, Gd, Cd, K, L)`` and what their gradients need."""
    n, dg, cd, taps = g.n, g.dgroups, g.c // g.dgroups, g.taps
    ho, wo = g.ho, g.wo
    i, j = np.divmod(np.arange(taps), g.kw)
    base_y = (np.arange(ho) * g.sh - g.ph)[None, :, None] + (i * g.dh)[:, None, None]  # (K, Ho, 1)
    base_x = (np.arange(wo) * g.sw - g.pw)[None, None, :] + (j * g.dw)[:, None, None]  # (K, 1, Wo)
    off = offset.reshape(n, dg, taps, 2, ho, wo).astype(np.float64)
    y = (base_y + off[:, :, :, 0]).reshape(n, dg, taps * ho * wo)
    x = (base_x + off[:, :, :, 1]).reshape(n, dg, taps * ho * wo)
    if modulated:
        inside = (y > -1) & (y < g.h) & (x > -1) & (x < g.w)
        moves_y = moves_x = inside
        ys, xs = y, x
    else:
        inside = (y >= 0) & (y < g.h) & (x >= 0) & (x < g.w)
        # the far strip reads the last row (column): the sample does not move with y there
        moves_y, moves_x = inside & (y < g.h - 1), inside & (x < g.w - 1)
        ys, xs = np.minimum(y, g.h - 1), np.minimum(x, g.w - 1)
    y0, x0 = np.floor(ys), np.floor(xs)
    ly, lx = ys - y0, xs - x0
    y0, x0 = y0.astype(np.int64), x0.astype(np.int64)
    flat = data.reshape(n, dg, cd, g.h * g.w).astype(np.float64)
    corners = []
    for dy, dx, weight_y, weight_x in ((0, 0, 1 - ly, 1 - lx), (0, 1, 1 - ly, lx), (1, 0, ly, 1 - lx), (1, 1, ly, lx)):
        cy, cx = y0 + dy, x0 + dx
        valid = inside & (cy >= 0) & (cy < g.h) & (cx >= 0) & (cx < g.w)
        index = np.where(valid, cy * g.w + cx, 0)
        values = np.take_along_axis(flat, index[:, :, None, :], axis=-1) * valid[:, :, None, :]
        corners.append((index, valid, weight_y, weight_x, dy, dx, values))
    samples = sum(wy[:, :, None] * wx[:, :, None] * v for _, _, wy, wx, _, _, v in corners)
    return samples, corners, moves_y, moves_x


def _columns(g: _Geometry, samples, mask):
    """Samples (times the mask) as the (N, G, C/G * K, L) columns of the matrix products."""
    n, taps, cells = g.n, g.taps, g.ho * g.wo
    values = samples.reshape(n, g.dgroups, g.c // g.dgroups, taps, cells)
    if mask is not None:
        values = values * mask.reshape(n, g.dgroups, 1, taps, cells)
    return values.reshape(n, g.groups, (g.c // g.groups) * taps, cells)


def _split_inputs(inputs, params, modulated):
    rest = list(inputs[2:])
    mask = rest.pop(0) if modulated else None
    weight = rest.pop(0)
    bias = None if params["no_bias"] else rest.pop(0)
    return inputs[0], inputs[1], mask, weight, bias


def _forward(modulated: bool):
    op = "ModulatedDeformableConvolution" if modulated else "DeformableConvolution"

    def kernel(xp, inputs, outputs, params):
        import numpy as np

        data, offset, mask, weight, bias = (None if a is None else _host(a)
                                            for a in _split_inputs(inputs, params, modulated))
        g = _Geometry(op, params, data.shape)
        samples, _, _, _ = _sample(np, g, data, offset, modulated)
        columns = _columns(g, samples, None if mask is None else mask.astype(np.float64))
        filters = weight.reshape(g.groups, g.filters // g.groups, -1).astype(np.float64)
        out = np.matmul(filters[None], columns).reshape(g.n, g.filters, g.ho, g.wo)
        if bias is not None:
            out = out + bias.reshape(1, -1, 1, 1)
        write(xp, outputs[0], xp.asarray(out.astype(outputs[0].dtype)))

    return kernel


def _backward(modulated: bool):
    op = "ModulatedDeformableConvolution" if modulated else "DeformableConvolution"

    def kernel(xp, inputs, outputs, params):
        import numpy as np

        out_grad = _host(inputs[0]).astype(np.float64)
        data, offset, mask, weight, bias = (None if a is None else _host(a)
                                            for a in _split_inputs(inputs[1:], params, modulated))
        g = _Geometry(op, params, data.shape)
        n, dg, cd, taps, cells = g.n, g.dgroups, g.c // g.dgroups, g.taps, g.ho * g.wo
        samples, corners, moves_y, moves_x = _sample(np, g, data, offset, modulated)
        mask64 = None if mask is None else mask.astype(np.float64)
        columns = _columns(g, samples, mask64)
        grad = out_grad.reshape(n, g.groups, g.filters // g.groups, cells)
        filters = weight.reshape(g.groups, g.filters // g.groups, -1).astype(np.float64)
        weight_grad = np.einsum("ngfl,ngkl->gfk", grad, columns).reshape(weight.shape)
        column_grad = np.matmul(filters.swapaxes(-1, -2)[None], grad)  # (N, G, C/G*K, L)
        sample_grad = column_grad.reshape(n, dg, cd, taps, cells)
        grads = []
        if mask64 is not None:
            mask_grad = (sample_grad * samples.reshape(n, dg, cd, taps, cells)).sum(axis=2)
            sample_grad = sample_grad * mask64.reshape(n, dg, 1, taps, cells)
        sample_grad = sample_grad.reshape(n, dg, cd, taps * cells)
        # the data gradient: each sample's gradient spread back to its four pixels
        data_grad = np.zeros(n * dg * cd * g.h * g.w)
        lead = (np.arange(n * dg * cd) * (g.h * g.w)).reshape(n, dg, cd, 1)
        y_grad = np.zeros((n, dg, taps * cells))
        x_grad = np.zeros((n, dg, taps * cells))
        for index, valid, weight_y, weight_x, dy, dx, values in corners:
            share = sample_grad * (weight_y * weight_x * valid)[:, :, None]
            data_grad += np.bincount((lead + index[:, :, None, :]).ravel(), weights=share.ravel(),
                                     minlength=data_grad.size)
            # d(weight_y)/dy is +1 for the lower corner row, -1 for the upper; likewise for x
            per_value = (sample_grad * values).sum(axis=2)
            y_grad += per_value * (1 if dy else -1) * weight_x
            x_grad += per_value * (1 if dx else -1) * weight_y
        offset_grad = np.stack([(y_grad * moves_y).reshape(n, dg, taps, g.ho, g.wo),
                                (x_grad * moves_x).reshape(n, dg, taps, g.ho, g.wo)], axis=3)
        grads = [data_grad.reshape(data.shape), offset_grad.reshape(offset.shape)]
        if mask64 is not None:
            grads.append(mask_grad.reshape(mask.shape))
        grads.append(weight_grad)
        if bias is not None:
            grads.append(out_grad.sum(axis=(0, 2, 3)))
        for target, value in zip(outputs, grads):
            write(xp, target, xp.asarray(value.astype(target.dtype)))

    return kernel


def _define(modulated: bool) -> None:
    name = "ModulatedDeformableConvolution" if modulated else "DeformableConvolution"
    params_schema = _MODULATED_SCHEMA if modulated else _SCHEMA
    names = _input_names(modulated)
    backward = f"_backward_{name}"

    def gradient(F, p, inputs, outputs, out_grads):
        public = {k: v for k, v in p.items() if not k.startswith("_")}
        return list(F(backward, out_grads[0], *inputs, **public))

    define(OpDef(
        name=f"_contrib_{name}", infer_shape=_shape(modulated), kernel=_forward(modulated), params=params_schema,
        num_inputs=lambda p: len(names(p)), input_names=names, gradient=gradient,
        doc=f"2-D {'modulated ' if modulated else ''}deformable convolution (NCHW): a convolution sampling its "
            f"input at offset positions, bilinearly{' and scaled by a mask' if modulated else ''}.",
    ))
    define(OpDef(
        name=backward, infer_shape=lambda p, s: [tuple(x) for x in s[1:]], kernel=_backward(modulated),
        params=params_schema, num_inputs=lambda p: len(names(p)) + 1,
        input_names=lambda p: ("out_grad", *names(p)), num_outputs=lambda p: len(names(p)), output_names=names,
        infer_dtype=lambda p, d: list(d[1:]), doc=f"Backward of {name}: gradients of every input.",
    ))


_define(False)
_define(True)
